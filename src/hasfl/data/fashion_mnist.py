"""Fashion-MNIST (medium preset, not in the paper): sha256-pinned fetch, IDX validation and decoding.

Read through ``torchvision.datasets.FashionMNIST`` from
``<data_dir>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte`` (uncompressed
IDX), pinned by the sha256 of the decompressed files; fetched by torchvision's download, or
from the Debian package ``dataset-fashion-mnist`` (installed, or ``apt-get download`` +
``dpkg -x``), see :func:`fetch_fashion_mnist`. Each file's IDX header and size are validated
too (:func:`hasfl.data.idx.idx_problem`).

Missing or corrupt files raise one :class:`~hasfl.data.base.DatasetUnavailable` whose
message says exactly which files to place where. :func:`fetch_fashion_mnist` makes the files
present without loading them, so a workflow rule can surface that error before any training job.

torchvision is imported lazily. :func:`fashion_mnist` is the loader named by
:data:`hasfl.registry.DATASETS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.data.idx import grey_images, idx_problem
from hasfl.data.imagecommon import image_bundle, one_line, read_splits
from hasfl.registry import DATASETS

__all__ = ["FASHION_MNIST_FILES", "FASHION_MNIST_SHA256", "fetch_fashion_mnist", "load_fashion_mnist"]

# The names live in the registry (torch-free, read when the Snakefile is parsed).
FASHION_MNIST_FILES: tuple[str, ...] = DATASETS["fashion_mnist"].raw
"""Fashion-MNIST raw (uncompressed IDX) files relative to ``data_dir`` (POSIX separators)."""
_FMNIST_RAW = FASHION_MNIST_FILES[0].rsplit("/", 1)[0]
_FMNIST_NAMES: tuple[str, ...] = tuple(f.split("/")[-1] for f in FASHION_MNIST_FILES)

#: sha256 of the four DECOMPRESSED files (as torchvision reads them). The Debian package's
#: ``.gz`` files are re-compressed (their md5s differ from torchvision's table), so the pin is on
#: the decompressed bytes, which every source must reproduce (/work/shared/notes/datasets.md, 4).
FASHION_MNIST_SHA256: dict[str, str] = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
#: The Debian package (bookworm/main, version 0.0~git20200523.55506a9-1, Expat licence) holding
#: ``usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``.
FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
FASHION_MNIST_PACKAGE_DIR = Path("/usr/share/datasets/fashion-mnist")
_FMNIST_PACKAGE_SUBDIR = "usr/share/datasets/fashion-mnist"
_FMNIST_MIRROR = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_FMNIST_SIDE = 28
_FMNIST_CLASSES = 10
_FMNIST_NET_TIMEOUT_S = 20.0  # socket timeout of torchvision's download (it sets none: a dropped route would hang)
_APT_TIMEOUT_S = 600.0


class _RouteFailed(Exception):
    """One source of Fashion-MNIST did not deliver the files (the message says why)."""


def _fmnist_route_lines(raw: Path) -> list[str]:
    """How to place the files by hand: both routes, and the target paths."""
    pkg = FASHION_MNIST_PACKAGE
    return [
        f"Place these four UNCOMPRESSED IDX files in {raw}/ (sha256 of the decompressed bytes):",
        *(f"  {raw / n}  (sha256 {FASHION_MNIST_SHA256[n]})" for n in _FMNIST_NAMES),
        "by either route:",
        f"  (a) torchvision: on a machine with network, torchvision.datasets.FashionMNIST(root, download=True) "
        f"writes them to root/{_FMNIST_RAW}/ (or download the four .gz files from {_FMNIST_MIRROR} and gunzip them "
        f"into {raw}/);",
        f"  (b) Debian package {pkg}: `apt-get download {pkg}` (no root needed; run `apt-get update` first if apt "
        f"does not know it) and `dpkg -x {pkg}_*.deb pkg/`, or `apt-get install {pkg}` (files in "
        f"{FASHION_MNIST_PACKAGE_DIR}/); then gunzip {_FMNIST_PACKAGE_SUBDIR}/<name>.gz into {raw}/<name>.",
    ]


def _fmnist_missing_message(data_dir: Path, missing: list[str], reasons: list[str]) -> str:
    raw = data_dir / _FMNIST_RAW
    lines = [
        f"Fashion-MNIST is not available under {data_dir}: {len(missing)} of {len(_FMNIST_NAMES)} files missing "
        f"({', '.join(missing)}).",
        *reasons,
        *_fmnist_route_lines(raw),
    ]
    gz = [n for n in missing if (raw / f"{n}.gz").is_file()]
    if gz:
        lines.append(f"Found compressed copies that must be gunzipped: {', '.join(n + '.gz' for n in gz)}.")
    return "\n".join(lines)


def _fmnist_mismatches(raw: Path, names: list[str], sha256: Mapping[str, str]) -> list[str]:
    """``path: expected .., got ..`` for each present file of ``names`` whose sha256 is not the pinned one."""
    from hasfl.io import sha256_file

    out = []
    for n in names:
        got = sha256_file(raw / n)
        if got != sha256[n]:
            out.append(f"{raw / n}: sha256 {got}, expected {sha256[n]}")
    return out


def _raise_fmnist_mismatch(raw: Path, mismatches: list[str]) -> None:
    raise DatasetUnavailable(
        "\n".join([
            f"Fashion-MNIST files under {raw} fail their sha256 check (refused; they are not overwritten):",
            *(f"  {m}" for m in mismatches),
            "Delete them and run the fetch again (rule fetch_fashion_mnist, or hasfl.data.fashion_mnist.fetch_fashion_mnist).",
        ])
    )


def _stage_one(src_dir: Path, name: str, raw: Path, expected: str) -> Path:
    """Copy ``src_dir/name`` (or gunzip ``src_dir/name.gz``) to a temporary file in ``raw``,
    hashing the decompressed bytes; return it if the sha256 is ``expected``, else remove it and fail."""
    import gzip
    import hashlib
    import os
    import tempfile
    import zlib

    plain, packed = src_dir / name, src_dir / f"{name}.gz"
    if plain.is_file():
        src, opener = plain, open
    elif packed.is_file():
        src, opener = packed, gzip.open
    else:
        raise _RouteFailed(f"{src_dir} holds neither {name} nor {name}.gz")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=raw)
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, opener(src, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
                out.write(block)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        tmp.unlink(missing_ok=True)
        raise _RouteFailed(f"could not read {src}: {one_line(exc)}") from exc
    if h.hexdigest() != expected:
        tmp.unlink(missing_ok=True)
        raise _RouteFailed(f"sha256 mismatch, refused: {name} decompressed from {src} has sha256 {h.hexdigest()}, "
                           f"expected {expected}")
    os.chmod(tmp, 0o644)
    return tmp


def _stage_all(src_dir: Path, names: list[str], raw: Path, sha256: Mapping[str, str]) -> dict[str, Path]:
    """Stage every file of ``names`` from ``src_dir`` (all verified) or none (temporary files removed)."""
    staged: dict[str, Path] = {}
    try:
        for n in names:
            staged[n] = _stage_one(src_dir, n, raw, sha256[n])
    except BaseException:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise
    return staged


def _run_tool(cmd: list[str], cwd: Path | None = None) -> tuple[int, str]:
    """(exit code, last lines of stdout+stderr) of an external command; never raises for its failure."""
    import os
    import subprocess

    env = {**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=_APT_TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {_APT_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return 127, one_line(exc)
    text = "\n".join((proc.stdout + "\n" + proc.stderr).strip().splitlines()[-8:])
    return proc.returncode, text


def _from_torchvision(tmp: Path) -> Path:
    """Route 1: torchvision's download (md5-checked .gz, gunzipped) into ``tmp``; its raw folder."""
    import socket

    from torchvision.datasets import FashionMNIST

    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(_FMNIST_NET_TIMEOUT_S)
    try:
        FashionMNIST(root=str(tmp), train=False, download=True)  # downloads and gunzips all four files
    except Exception as exc:  # offline (URLError), HTTP error, md5 mismatch, timeout ...
        text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"  # torchvision's message spans lines
        raise _RouteFailed(text if len(text) <= 400 else text[:397] + "...") from exc
    finally:
        socket.setdefaulttimeout(old)
    return tmp / _FMNIST_RAW


def _from_apt(tmp: Path, log: Any) -> Path:
    """Route 3: ``apt-get download`` the package into ``tmp`` and ``dpkg -x`` it; the folder of its .gz files."""
    import os
    import shutil

    pkg = FASHION_MNIST_PACKAGE
    apt, dpkg = shutil.which("apt-get"), shutil.which("dpkg")
    if apt is None or dpkg is None:
        raise _RouteFailed(f"{'apt-get' if apt is None else 'dpkg'} not found on PATH")
    deb_dir = tmp / "deb"
    deb_dir.mkdir()

    def download() -> tuple[int, str, list[Path]]:
        rc, out = _run_tool([apt, "download", pkg], cwd=deb_dir)
        return rc, out, sorted(deb_dir.glob(f"{pkg}_*.deb"))

    rc, out, debs = download()
    if not debs and ("Unable to locate package" in out or "no installation candidate" in out):
        if os.geteuid() != 0:
            raise _RouteFailed(f"apt does not know {pkg} (package lists missing or stale); `apt-get update` needs "
                               f"root and was not run: run `sudo apt-get update` and retry. apt said: {out}")
        log.info("apt does not know %s; running `apt-get update` (as root)", pkg)
        urc, uout = _run_tool([apt, "update"], cwd=deb_dir)
        if urc != 0:
            raise _RouteFailed(f"`apt-get update` failed (exit {urc}): {uout}")
        rc, out, debs = download()
    if not debs:
        raise _RouteFailed(f"`apt-get download {pkg}` failed (exit {rc}): {out}")
    log.info("downloaded %s (%d bytes)", debs[0].name, debs[0].stat().st_size)
    unpacked = tmp / "pkg"
    rc, out = _run_tool([dpkg, "-x", str(debs[0]), str(unpacked)])
    if rc != 0:
        raise _RouteFailed(f"`dpkg -x {debs[0].name}` failed (exit {rc}): {out}")
    src = unpacked / _FMNIST_PACKAGE_SUBDIR
    if not src.is_dir():
        raise _RouteFailed(f"{debs[0].name} holds no {_FMNIST_PACKAGE_SUBDIR}/")
    return src


def fetch_fashion_mnist(
    data_dir: Path | str,
    *,
    torchvision: bool = True,
    package_dir: Path | str | None = FASHION_MNIST_PACKAGE_DIR,
    apt: bool = True,
    sha256: Mapping[str, str] | None = None,
) -> list[Path]:
    """Make the four raw Fashion-MNIST files present and verified under ``data_dir``; return their paths.

    Sources, in order, for the files that are missing (each file's decompressed sha256 must equal
    :data:`FASHION_MNIST_SHA256`; a source that fails or delivers other bytes is skipped, with its
    reason kept for the error):

    0. files already in ``data_dir/FashionMNIST/raw/``: used if their sha256 match; a present file
       that does not match is refused (named, with expected and actual sha256) and never overwritten;
    1. ``torchvision.datasets.FashionMNIST(download=True)`` into a temporary folder (``torchvision=True``;
       a socket timeout makes a dead network fail fast);
    2. the installed Debian package's folder ``package_dir`` (``.gz`` or plain files; None skips it);
    3. ``apt-get download dataset-fashion-mnist`` and ``dpkg -x`` in a temporary folder (``apt=True``),
       with ``apt-get update`` only when apt does not know the package and we run as root.

    Each file is gunzipped/copied to a temporary name beside its target, hashed, and renamed into
    place only when all missing files of that source have verified. A failed fetch leaves nothing
    behind: no temporary file, no folder it created.

    Args:
        sha256: expected sha256 per file name (default :data:`FASHION_MNIST_SHA256`; tests pass their
            fabricated files' values).

    Raises:
        DatasetUnavailable: a present file fails its check, or no source delivered the files (one
            message naming every route tried with its reason, both ways to place the files by hand and
            the target paths).
    """
    import logging
    import os
    import tempfile

    log = logging.getLogger("hasfl.data")
    expected = dict(FASHION_MNIST_SHA256 if sha256 is None else sha256)
    data_dir = Path(data_dir).absolute()
    raw = data_dir / _FMNIST_RAW
    paths = [data_dir / f for f in FASHION_MNIST_FILES]
    present = [n for n in _FMNIST_NAMES if (raw / n).is_file()]
    bad = _fmnist_mismatches(raw, present, expected)
    if bad:
        _raise_fmnist_mismatch(raw, bad)
    missing = [n for n in _FMNIST_NAMES if n not in present]
    if not missing:
        log.info("Fashion-MNIST: all four files present under %s, sha256 verified", raw)
        return paths

    created = [d for d in (raw, *raw.parents) if not d.exists()]
    reasons: list[str] = []
    try:
        raw.mkdir(parents=True, exist_ok=True)
        routes: list[tuple[str, Any]] = []
        if torchvision:
            routes.append((f"1. torchvision download ({_FMNIST_MIRROR})", lambda tmp: _from_torchvision(tmp)))
        if package_dir is not None:
            pkg_dir = Path(package_dir)

            def installed(tmp: Path) -> Path:
                if not pkg_dir.is_dir():
                    raise _RouteFailed(f"not installed (no folder {pkg_dir})")
                return pkg_dir

            routes.append((f"2. installed Debian package {FASHION_MNIST_PACKAGE} ({pkg_dir}/)", installed))
        if apt:
            routes.append((f"3. `apt-get download {FASHION_MNIST_PACKAGE}` + `dpkg -x`", lambda tmp: _from_apt(tmp, log)))
        for label, route in routes:
            with tempfile.TemporaryDirectory(prefix="hasfl-fashion-mnist.") as tmp:
                try:
                    src = route(Path(tmp))
                    staged = _stage_all(src, missing, raw, expected)
                except _RouteFailed as exc:
                    log.info("Fashion-MNIST %s: failed: %s", label, exc)
                    reasons.append(f"{label}: {exc}")
                    continue
            for n, tmp_file in staged.items():
                os.replace(tmp_file, raw / n)
            log.info("Fashion-MNIST: %s placed %s under %s (sha256 verified)", label, ", ".join(missing), raw)
            return paths
        if not routes:
            reasons.append("no source enabled (torchvision=False, package_dir=None, apt=False)")
        raise DatasetUnavailable(_fmnist_missing_message(data_dir, missing, ["Tried:", *(f"  {r}" for r in reasons)]))
    except BaseException:
        for d in created:  # deepest first; only folders this call created, and only if empty
            try:
                d.rmdir()
            except OSError:
                pass
        raise


def _fmnist_corrupt(data_dir: Path) -> list[str]:
    """``path: problem`` for each raw Fashion-MNIST file whose IDX header/size/count is inconsistent."""
    raw = data_dir / _FMNIST_RAW
    problems: list[str] = []
    for part in ("train", "t10k"):
        img, lab = f"{part}-images-idx3-ubyte", f"{part}-labels-idx1-ubyte"
        p_img, n_img = idx_problem(raw / img, 3, (_FMNIST_SIDE, _FMNIST_SIDE))
        p_lab, n_lab = idx_problem(raw / lab, 1, ())
        problems += [f"{raw / n}: {p}" for n, p in ((img, p_img), (lab, p_lab)) if p]
        if not p_img and not p_lab and n_img != n_lab:
            problems.append(f"{raw / img} / {raw / lab}: {n_img} images but {n_lab} labels")
    return problems


def _ensure_fashion_mnist(data_dir: Path, download: bool, verify_sha256: bool) -> None:
    """Make sure the four raw files are present and well-formed (and sha256-pinned if asked), else raise."""
    raw = data_dir / _FMNIST_RAW
    legacy = data_dir / "FashionMNIST" / "processed"
    if (legacy / "training.pt").is_file() and (legacy / "test.pt").is_file():
        raise DatasetUnavailable(
            f"{legacy}/training.pt and test.pt exist: torchvision.datasets.FashionMNIST would read them instead of the "
            f"verified raw files in {raw}/. Remove them (or the folder {legacy})."
        )
    missing = [n for n in _FMNIST_NAMES if not (raw / n).is_file()]
    if missing:
        if not download:
            raise DatasetUnavailable(_fmnist_missing_message(
                data_dir, missing, ["Reason: files missing and download=False (the DAG's fetch_fashion_mnist job "
                                    "fetches them)."]))
        fetch_fashion_mnist(data_dir)
    problems = _fmnist_corrupt(data_dir)
    if problems:
        raise DatasetUnavailable("\n".join([f"Fashion-MNIST files under {raw} are corrupt:", *(f"  {p}" for p in problems),
                                            *_fmnist_route_lines(raw)]))
    if verify_sha256:
        bad = _fmnist_mismatches(raw, list(_FMNIST_NAMES), FASHION_MNIST_SHA256)
        if bad:
            _raise_fmnist_mismatch(raw, bad)


def subsample_per_class(y: torch.Tensor, per_class: int, seed: int) -> torch.Tensor:
    """Sorted indices of a seeded class-balanced subsample: ``min(per_class, n_k)`` samples of each class k."""
    labels = y.numpy()
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 1]))
    keep = [rng.permutation(np.flatnonzero(labels == k))[:per_class] for k in np.unique(labels)]
    return torch.from_numpy(np.sort(np.concatenate(keep)).astype(np.int64))


def load_fashion_mnist(
    data_dir: Path | str,
    *,
    download: bool = False,
    verify_sha256: bool = True,
    train_per_class: int | None = None,
    subsample_seed: int = 0,
) -> DatasetBundle:
    """Fashion-MNIST (Xiao et al. 2017; 60,000 train / 10,000 test, 1x28x28, 10 balanced classes)
    via ``torchvision.datasets.FashionMNIST``.

    Args:
        data_dir: torchvision root; files live in ``data_dir/FashionMNIST/raw/`` (uncompressed IDX).
        download: if files are missing, fetch them (:func:`fetch_fashion_mnist`).
        verify_sha256: check every file against :data:`FASHION_MNIST_SHA256` (``False`` for fabricated
            test files; the IDX headers and sizes are checked always).
        train_per_class: keep a seeded class-balanced subsample of this many train images per class
            (None = all); the test split stays whole. The Dirichlet partition then deals out the subsample,
            so every client holds proportionally fewer images.
        subsample_seed: seed of that subsample (fixed per preset, like ``digits.split_seed``).

    Returns:
        Bundle ``"fashion_mnist"``: uint8 (N, 1, 28, 28) images, int64 labels 0..9, train-split mean/std;
        ``meta`` has ``source``, ``classes``, ``sha256_verified``, ``train_per_class``, ``train_indices``
        (into the 60,000 train images, when subsampled).

    Raises:
        DatasetUnavailable: files missing (and not fetchable), malformed, failing the sha256 check, or unreadable.
    """
    data_dir = Path(data_dir).absolute()
    _ensure_fashion_mnist(data_dir, download, verify_sha256)
    from torchvision.datasets import FashionMNIST

    train, test = read_splits(
        "Fashion-MNIST", data_dir / _FMNIST_RAW, "torchvision.datasets.FashionMNIST",
        lambda tr: FashionMNIST(root=str(data_dir), train=tr, download=False))
    train_x, train_y = grey_images(train, "Fashion-MNIST", "train", _FMNIST_SIDE)
    test_x, test_y = grey_images(test, "Fashion-MNIST", "test", _FMNIST_SIDE)
    classes = [str(c) for c in train.classes]
    if len(classes) != _FMNIST_CLASSES:
        raise DatasetUnavailable(f"Fashion-MNIST should have {_FMNIST_CLASSES} classes, torchvision lists {len(classes)}")
    meta: dict[str, Any] = {
        "source": "torchvision.datasets.FashionMNIST",
        "classes": classes,
        "root": str(data_dir),
        "files": list(FASHION_MNIST_FILES),
        "sha256_verified": verify_sha256,
        "train_per_class": train_per_class,
    }
    if train_per_class is not None:
        if train_per_class < 1:
            raise ValueError(f"train_per_class must be >= 1 or None, got {train_per_class}")
        keep = subsample_per_class(train_y, train_per_class, subsample_seed)
        train_x, train_y = train_x[keep].contiguous(), train_y[keep].contiguous()
        meta.update(subsample_seed=int(subsample_seed), train_indices=keep.tolist())
    return image_bundle("fashion_mnist", train_x, train_y, test_x, test_y, num_classes=len(classes), meta=meta)


def fashion_mnist(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``fashion_mnist`` (sha256-pinned files; ``train_per_class``, ``subsample_seed``)."""
    return load_fashion_mnist(Path(data_dir), download=download, train_per_class=params.get("train_per_class"),
                              subsample_seed=params.get("subsample_seed", 0))
