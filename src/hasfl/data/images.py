"""Image datasets of paper Section 4.1 / Table 2 (CIFAR-10, EMNIST) plus sklearn's digits.

All loaders return a :class:`~hasfl.data.base.DatasetBundle` with images stored as
uint8 ``(N, C, H, W)`` tensors, int64 labels, and per-channel ``mean``/``std``
computed on the train split in [0, 1] units (population std, exact integer sums),
so :meth:`DatasetBundle.inputs` standardises batches on the fly.

CIFAR-10 and EMNIST are read through torchvision's own dataset classes from the
on-disk layouts torchvision expects:

* CIFAR-10: ``<data_dir>/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``
  (the pickled "python version"); md5s are checked against ``torchvision.datasets.CIFAR10``'s
  table unless ``verify_md5=False`` (for fabricated test files).
* EMNIST byclass: ``<data_dir>/EMNIST/raw/emnist-byclass-{train,test}-{images-idx3,labels-idx1}-ubyte``
  (uncompressed IDX). torchvision has no md5 for these, so each file's IDX header and
  size are validated here instead.

Missing or corrupt files raise one :class:`~hasfl.data.base.DatasetUnavailable` whose
message says exactly which files to place where. ``fetch_cifar10``/``fetch_emnist``
make the files present (downloading when possible) without loading them, so a
workflow rule can surface that error before any training job.

torchvision is imported lazily. :func:`cifar10`, :func:`emnist` and :func:`digits` are
the loaders named by :data:`hasfl.registry.DATASETS`.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.registry import DATASETS

__all__ = [
    "CIFAR10_FILES",
    "EMNIST_FILES",
    "fetch_cifar10",
    "fetch_emnist",
    "load_cifar10",
    "load_digits",
    "load_emnist",
]

# --------------------------------------------------------------------------- file tables
# The names live in the registry (torch-free, read when the Snakefile is parsed).
CIFAR10_FILES: tuple[str, ...] = DATASETS["cifar10"].raw
"""CIFAR-10 files relative to ``data_dir`` (POSIX separators)."""
EMNIST_FILES: tuple[str, ...] = DATASETS["emnist"].raw
"""EMNIST byclass raw (uncompressed IDX) files relative to ``data_dir`` (POSIX separators)."""
_CIFAR_FOLDER = CIFAR10_FILES[0].split("/")[0]
_CIFAR_NAMES: tuple[str, ...] = tuple(f.split("/")[-1] for f in CIFAR10_FILES)
_EMNIST_RAW = EMNIST_FILES[0].rsplit("/", 1)[0]
_EMNIST_NAMES: tuple[str, ...] = tuple(f.split("/")[-1] for f in EMNIST_FILES)
_EMNIST_SPLIT = "byclass"

_CIFAR_ARCHIVE_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
_EMNIST_ARCHIVE_URL = "https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"
_EMNIST_SIDE = 28
_EMNIST_CLASSES = 62


# --------------------------------------------------------------------------- helpers
def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception, at most 300 characters."""
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def _channel_stats(x: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and population std of uint8 images ``x`` (N, C, H, W) in [0, 1] units.

    Uses exact integer sums (chunked, int64) and one correctly rounded division per
    statistic, so the result is independent of chunking and platform. A channel with
    zero variance gets std 1.0 (so normalisation never divides by zero).
    """
    if x.dtype != torch.uint8 or x.ndim != 4 or x.shape[0] == 0:
        raise ValueError(f"expected non-empty uint8 (N, C, H, W) images, got {x.dtype} {tuple(x.shape)}")
    n, c, h, w = x.shape
    per_sample = c * h * w
    chunk = max(1, (1 << 22) // per_sample)
    s1 = torch.zeros(c, dtype=torch.int64)
    s2 = torch.zeros(c, dtype=torch.int64)
    for start in range(0, n, chunk):
        b = x[start : start + chunk].to(torch.int64)
        s1 += b.sum(dim=(0, 2, 3))
        s2 += (b * b).sum(dim=(0, 2, 3))
    count = n * h * w
    means: list[float] = []
    stds: list[float] = []
    for ch in range(c):
        t1, t2 = int(s1[ch]), int(s2[ch])
        means.append(t1 / (count * 255))
        var = (count * t2 - t1 * t1) / (count * count * 255 * 255)
        std = math.sqrt(var) if var > 0 else 0.0
        stds.append(std if std > 0 else 1.0)
    return tuple(means), tuple(stds)


def _image_bundle(
    name: str,
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    num_classes: int,
    meta: dict[str, Any],
) -> DatasetBundle:
    """Check dtypes/shapes/label ranges and build the bundle (stats from the train split)."""
    for split, x, y in (("train", train_x, train_y), ("test", test_x, test_y)):
        if x.dtype != torch.uint8 or x.ndim != 4:
            raise DatasetUnavailable(f"{name}: {split} images must be uint8 (N, C, H, W), got {x.dtype} {tuple(x.shape)}")
        if y.dtype != torch.int64 or y.ndim != 1 or y.shape[0] != x.shape[0]:
            raise DatasetUnavailable(
                f"{name}: {split} labels must be int64 (N,) matching {x.shape[0]} images, got {y.dtype} {tuple(y.shape)}"
            )
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
            raise DatasetUnavailable(
                f"{name}: {split} labels outside 0..{num_classes - 1} (min {int(y.min())}, max {int(y.max())})"
            )
    if train_x.shape[1:] != test_x.shape[1:]:
        raise DatasetUnavailable(f"{name}: train/test image shapes differ: {tuple(train_x.shape[1:])} vs {tuple(test_x.shape[1:])}")
    mean, std = _channel_stats(train_x)
    meta = {**meta, "normalisation": "per-channel mean/std of the train split in [0,1] units (population std)"}
    return DatasetBundle(
        name=name,
        task="image",
        train_x=train_x,
        train_y=train_y,
        test_x=test_x,
        test_y=test_y,
        num_classes=num_classes,
        input_shape=tuple(int(s) for s in train_x.shape[1:]),
        mean=mean,
        std=std,
        meta=meta,
    )


# --------------------------------------------------------------------------- CIFAR-10
def _cifar_classes() -> tuple[type, type]:
    """The stock ``CIFAR10`` class and a subclass with the same files and code but no md5 checks."""
    from torchvision.datasets import CIFAR10

    class _CIFAR10NoMD5(CIFAR10):
        """CIFAR10 with md5 checks disabled (``check_integrity(path, None)`` only tests existence).

        Used for fabricated test files; the on-disk format and loading code are the stock ones.
        """

        train_list = [[n, None] for n, _ in CIFAR10.train_list]
        test_list = [[n, None] for n, _ in CIFAR10.test_list]
        meta = {**CIFAR10.meta, "md5": None}

    return CIFAR10, _CIFAR10NoMD5


def _cifar_md5_table() -> dict[str, str]:
    """File name -> expected md5 from ``torchvision.datasets.CIFAR10``."""
    from torchvision.datasets import CIFAR10

    table = {n: m for n, m in CIFAR10.train_list + CIFAR10.test_list}
    table[CIFAR10.meta["filename"]] = CIFAR10.meta["md5"]
    return table


def _cifar_missing_message(data_dir: Path, missing: list[str], reason: str) -> str:
    folder = data_dir / _CIFAR_FOLDER
    lines = [
        f"CIFAR-10 is not available under {data_dir}: {len(missing)} of {len(_CIFAR_NAMES)} files missing "
        f"({', '.join(missing)}).",
        f"Place these files (the pickled 'python version' of CIFAR-10) in {folder}/:",
        *(f"  {folder / n}" for n in _CIFAR_NAMES),
        f"e.g. download cifar-10-python.tar.gz from {_CIFAR_ARCHIVE_URL} and extract it into {data_dir} "
        f"(tar -xzf cifar-10-python.tar.gz -C {data_dir}); it contains the folder {_CIFAR_FOLDER}/.",
        f"Reason: {reason}",
    ]
    return "\n".join(lines)


def _cifar_problems(data_dir: Path, verify_md5: bool) -> tuple[list[str], list[str]]:
    """(missing, corrupt) CIFAR-10 file names; corrupt = present but md5 mismatch."""
    from torchvision.datasets.utils import check_integrity

    folder = data_dir / _CIFAR_FOLDER
    missing = [n for n in _CIFAR_NAMES if not (folder / n).is_file()]
    corrupt: list[str] = []
    if verify_md5 and not missing:
        md5 = _cifar_md5_table()
        corrupt = [n for n in _CIFAR_NAMES if not check_integrity(str(folder / n), md5[n])]
    return missing, corrupt


def _raise_cifar_corrupt(data_dir: Path, corrupt: list[str]) -> None:
    md5 = _cifar_md5_table()
    folder = data_dir / _CIFAR_FOLDER
    lines = [
        f"CIFAR-10 under {data_dir} is corrupt: md5 mismatch for {len(corrupt)} file(s) "
        f"(checked against torchvision.datasets.CIFAR10's md5 table):",
        *(f"  {folder / n} (expected md5 {md5[n]})" for n in corrupt),
        f"Replace them from the official cifar-10-python.tar.gz ({_CIFAR_ARCHIVE_URL}), or delete them and rerun "
        f"with download=True. (Fabricated test files: pass verify_md5=False.)",
    ]
    raise DatasetUnavailable("\n".join(lines))


def _ensure_cifar10(data_dir: Path, download: bool, verify_md5: bool) -> None:
    """Make sure all CIFAR-10 files are present (and md5-correct if ``verify_md5``), else raise."""
    missing, corrupt = _cifar_problems(data_dir, verify_md5)
    if corrupt:
        _raise_cifar_corrupt(data_dir, corrupt)
    if not missing:
        return
    if not download:
        raise DatasetUnavailable(_cifar_missing_message(data_dir, missing, "files missing and download=False"))
    stock, _ = _cifar_classes()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        stock(root=str(data_dir), train=False, download=True)
    except Exception as exc:  # offline, HTTP error, bad archive, disk full ...
        raise DatasetUnavailable(
            _cifar_missing_message(data_dir, missing, f"download via torchvision failed: {_one_line(exc)}")
        ) from exc
    missing, corrupt = _cifar_problems(data_dir, verify_md5)
    if corrupt:
        _raise_cifar_corrupt(data_dir, corrupt)
    if missing:
        raise DatasetUnavailable(
            _cifar_missing_message(data_dir, missing, "torchvision's download finished but files are still missing")
        )


def fetch_cifar10(data_dir: Path | str, *, download: bool = True, verify_md5: bool = True) -> list[Path]:
    """Make the CIFAR-10 files present under ``data_dir`` and return their paths.

    Downloads through ``torchvision.datasets.CIFAR10`` when files are missing and
    ``download`` is true. Raises :class:`DatasetUnavailable` (listing the files to
    place where, plus the download error's reason) if they cannot be made present,
    or naming the corrupt files when present files fail the md5 check.

    Returns:
        Absolute paths ``data_dir / f`` for ``f`` in :data:`CIFAR10_FILES`.
    """
    data_dir = Path(data_dir).absolute()
    _ensure_cifar10(data_dir, download, verify_md5)
    return [data_dir / f for f in CIFAR10_FILES]


def load_cifar10(data_dir: Path | str, *, download: bool = True, verify_md5: bool = True) -> DatasetBundle:
    """CIFAR-10 (50,000 train / 10,000 test, 3x32x32, 10 classes) via ``torchvision.datasets.CIFAR10``.

    Args:
        data_dir: torchvision root; files live in ``data_dir/cifar-10-batches-py/``.
        download: if files are missing, try torchvision's download first.
        verify_md5: check every file against torchvision's md5 table (the stock class does
            this always). ``False`` uses a subclass with the md5s disabled -- same on-disk
            format and loading code -- for fabricated test files.

    Returns:
        Bundle ``"cifar10"``: uint8 (N, 3, 32, 32) images (CHW, converted from torchvision's
        HWC arrays), int64 labels, train-split per-channel mean/std; ``meta`` has ``source``,
        ``classes`` (from ``batches.meta``), ``md5_verified``.

    Raises:
        DatasetUnavailable: files missing (and not downloadable), md5 mismatch, or unreadable.
    """
    data_dir = Path(data_dir).absolute()
    _ensure_cifar10(data_dir, download, verify_md5)
    stock, no_md5 = _cifar_classes()
    cls = stock if verify_md5 else no_md5
    try:
        train = cls(root=str(data_dir), train=True, download=False)
        test = cls(root=str(data_dir), train=False, download=False)
    except Exception as exc:
        raise DatasetUnavailable(
            f"CIFAR-10 files under {data_dir / _CIFAR_FOLDER} could not be read by torchvision.datasets.CIFAR10: "
            f"{_one_line(exc)}. Replace them from the official cifar-10-python.tar.gz ({_CIFAR_ARCHIVE_URL})."
        ) from exc

    def convert(ds: Any, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        data = np.asarray(ds.data)
        if data.dtype != np.uint8 or data.ndim != 4 or data.shape[1:] != (32, 32, 3):
            raise DatasetUnavailable(f"CIFAR-10 {split} data has dtype {data.dtype} shape {data.shape}, "
                                     f"expected uint8 (N, 32, 32, 3)")
        x = torch.from_numpy(np.ascontiguousarray(data.transpose(0, 3, 1, 2)))  # HWC -> CHW
        y = torch.as_tensor(np.asarray(ds.targets, dtype=np.int64))
        return x, y

    train_x, train_y = convert(train, "train")
    test_x, test_y = convert(test, "test")
    classes = [str(c) for c in train.classes]
    return _image_bundle(
        "cifar10",
        train_x,
        train_y,
        test_x,
        test_y,
        num_classes=len(classes),
        meta={
            "source": "torchvision.datasets.CIFAR10",
            "classes": classes,
            "root": str(data_dir),
            "files": list(CIFAR10_FILES),
            "md5_verified": verify_md5,
        },
    )


# --------------------------------------------------------------------------- EMNIST
def _emnist_missing_message(data_dir: Path, missing: list[str], reason: str) -> str:
    raw = data_dir / _EMNIST_RAW
    lines = [
        f"EMNIST (byclass) is not available under {data_dir}: {len(missing)} of {len(_EMNIST_NAMES)} files missing "
        f"({', '.join(missing)}).",
        f"Place these four UNCOMPRESSED IDX files in {raw}/:",
        *(f"  {raw / n}" for n in _EMNIST_NAMES),
        f"e.g. download gzip.zip from {_EMNIST_ARCHIVE_URL}, take gzip/{{name}}.gz for the four names above and "
        f"gunzip them into {raw}/ (torchvision reads only uncompressed files there).",
    ]
    gz = [n for n in missing if (raw / f"{n}.gz").is_file()]
    if gz:
        lines.append(f"Found compressed copies that must be gunzipped: {', '.join(n + '.gz' for n in gz)}.")
    lines.append(f"Reason: {reason}")
    return "\n".join(lines)


def _idx_problem(path: Path, ndim: int, item_shape: tuple[int, ...]) -> tuple[str | None, int]:
    """Validate an uint8 IDX file's header against its size; (problem or None, item count)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(4 + 4 * ndim)
    except OSError as exc:
        return f"unreadable ({_one_line(exc)})", 0
    if len(head) < 4 or head[:3] != b"\x00\x00\x08" or head[3] != ndim:
        return f"bad IDX magic {head[:4].hex(' ') or '(empty)'} (expected 00 00 08 {ndim:02x})", 0
    if len(head) < 4 + 4 * ndim:
        return f"truncated IDX header ({size} bytes)", 0
    dims = struct.unpack(f">{ndim}I", head[4:])
    if tuple(dims[1:]) != item_shape:
        return f"item shape {tuple(dims[1:])}, expected {item_shape}", 0
    expected = 4 + 4 * ndim + math.prod(dims)
    if size != expected:
        kind = "truncated" if size < expected else "has trailing bytes"
        return f"{kind}: {size} bytes, header {list(dims)} implies {expected}", 0
    return None, int(dims[0])


def _emnist_legacy(data_dir: Path) -> bool:
    """Whether torchvision would use ``EMNIST/processed/{training,test}_byclass.pt`` instead of raw/."""
    proc = data_dir / "EMNIST" / "processed"
    return (proc / f"training_{_EMNIST_SPLIT}.pt").is_file() and (proc / f"test_{_EMNIST_SPLIT}.pt").is_file()


def _emnist_corrupt(data_dir: Path) -> list[str]:
    """``name: problem`` for each raw EMNIST file whose IDX header/size/count is inconsistent."""
    raw = data_dir / _EMNIST_RAW
    problems: list[str] = []
    for part in ("train", "test"):
        img = f"emnist-{_EMNIST_SPLIT}-{part}-images-idx3-ubyte"
        lab = f"emnist-{_EMNIST_SPLIT}-{part}-labels-idx1-ubyte"
        p_img, n_img = _idx_problem(raw / img, 3, (_EMNIST_SIDE, _EMNIST_SIDE))
        p_lab, n_lab = _idx_problem(raw / lab, 1, ())
        if p_img:
            problems.append(f"{raw / img}: {p_img}")
        if p_lab:
            problems.append(f"{raw / lab}: {p_lab}")
        if not p_img and not p_lab and n_img != n_lab:
            problems.append(f"{raw / img} / {raw / lab}: {n_img} images but {n_lab} labels")
    return problems


def _raise_emnist_corrupt(data_dir: Path, problems: list[str]) -> None:
    raise DatasetUnavailable(
        "\n".join(
            [
                f"EMNIST (byclass) files under {data_dir / _EMNIST_RAW} are corrupt:",
                *(f"  {p}" for p in problems),
                f"Replace them by gunzipping the matching .gz files of the official gzip.zip ({_EMNIST_ARCHIVE_URL}), "
                f"or delete them and rerun with download=True.",
            ]
        )
    )


def _ensure_emnist(data_dir: Path, download: bool) -> None:
    """Make sure the four raw EMNIST byclass files are present and well-formed, else raise."""
    if _emnist_legacy(data_dir):
        return
    raw = data_dir / _EMNIST_RAW
    missing = [n for n in _EMNIST_NAMES if not (raw / n).is_file()]
    if missing:
        if not download:
            raise DatasetUnavailable(_emnist_missing_message(data_dir, missing, "files missing and download=False"))
        from torchvision.datasets import EMNIST

        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            # Downloads gzip.zip (all splits) and gunzips every file into EMNIST/raw/.
            EMNIST(root=str(data_dir), split=_EMNIST_SPLIT, train=False, download=True)
        except Exception as exc:
            raise DatasetUnavailable(
                _emnist_missing_message(data_dir, missing, f"download via torchvision failed: {_one_line(exc)}")
            ) from exc
        missing = [n for n in _EMNIST_NAMES if not (raw / n).is_file()]
        if missing:
            raise DatasetUnavailable(
                _emnist_missing_message(data_dir, missing, "torchvision's download finished but files are still missing")
            )
    problems = _emnist_corrupt(data_dir)
    if problems:
        _raise_emnist_corrupt(data_dir, problems)


def fetch_emnist(data_dir: Path | str, *, download: bool = True) -> list[Path]:
    """Make the raw EMNIST byclass files present under ``data_dir`` and return their paths.

    Downloads through ``torchvision.datasets.EMNIST`` when files are missing and
    ``download`` is true; validates each file's IDX header against its size. Raises
    :class:`DatasetUnavailable` listing the four uncompressed files to place in
    ``data_dir/EMNIST/raw/`` (plus the download error's reason), or naming a corrupt file.

    Returns:
        Absolute paths ``data_dir / f`` for ``f`` in :data:`EMNIST_FILES`.
    """
    data_dir = Path(data_dir).absolute()
    _ensure_emnist(data_dir, download)
    return [data_dir / f for f in EMNIST_FILES]


def load_emnist(data_dir: Path | str, *, download: bool = True) -> DatasetBundle:
    """EMNIST byclass (697,932 train / 116,323 test, 1x28x28, 62 classes) via ``torchvision.datasets.EMNIST``.

    EMNIST's IDX files store every character transposed (H and W swapped); the images
    are transposed back here so characters are upright, as in MNIST.

    Args:
        data_dir: torchvision root; files live in ``data_dir/EMNIST/raw/`` (uncompressed).
        download: if files are missing, try torchvision's download first.

    Returns:
        Bundle ``"emnist"``: uint8 (N, 1, 28, 28) upright images, int64 labels 0..61,
        train-split mean/std; ``meta`` has ``source``, ``split``, ``classes`` (``0-9A-Za-z``).

    Raises:
        DatasetUnavailable: files missing (and not downloadable), malformed, or unreadable.
    """
    data_dir = Path(data_dir).absolute()
    _ensure_emnist(data_dir, download)
    from torchvision.datasets import EMNIST

    try:
        train = EMNIST(root=str(data_dir), split=_EMNIST_SPLIT, train=True, download=False)
        test = EMNIST(root=str(data_dir), split=_EMNIST_SPLIT, train=False, download=False)
    except Exception as exc:
        raise DatasetUnavailable(
            f"EMNIST files under {data_dir / _EMNIST_RAW} could not be read by torchvision.datasets.EMNIST: "
            f"{_one_line(exc)}"
        ) from exc

    def convert(ds: Any, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        data = torch.as_tensor(ds.data)
        if data.dtype != torch.uint8 or data.ndim != 3 or tuple(data.shape[1:]) != (_EMNIST_SIDE, _EMNIST_SIDE):
            raise DatasetUnavailable(f"EMNIST {split} data has dtype {data.dtype} shape {tuple(data.shape)}, "
                                     f"expected uint8 (N, 28, 28)")
        x = data.transpose(1, 2).unsqueeze(1).contiguous()  # stored transposed -> upright, add channel
        y = torch.as_tensor(ds.targets).to(torch.int64)
        return x, y

    train_x, train_y = convert(train, "train")
    del train.data
    test_x, test_y = convert(test, "test")
    classes = [str(c) for c in train.classes]
    if len(classes) != _EMNIST_CLASSES:
        raise DatasetUnavailable(f"EMNIST byclass should have {_EMNIST_CLASSES} classes, torchvision lists {len(classes)}")
    return _image_bundle(
        "emnist",
        train_x,
        train_y,
        test_x,
        test_y,
        num_classes=len(classes),
        meta={
            "source": "torchvision.datasets.EMNIST",
            "split": _EMNIST_SPLIT,
            "classes": classes,
            "root": str(data_dir),
            "files": list(EMNIST_FILES),
            "orientation": "transposed H/W relative to the IDX files so characters are upright",
            "legacy_processed": _emnist_legacy(data_dir),
        },
    )


# --------------------------------------------------------------------------- digits
def _read_sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """The (1797, 8, 8) pixel values and labels from the ``digits.csv.gz`` inside scikit-learn.

    The file is located without importing scikit-learn (whose import costs seconds in
    every training job); it is the exact file ``sklearn.datasets.load_digits`` reads.
    """
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetUnavailable("digits: scikit-learn is not installed (its package ships digits.csv.gz)")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    if not path.is_file():
        raise DatasetUnavailable(f"digits: '{path}' not found in the scikit-learn installation")
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def stratified_split(y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split: per class, ``round(test_fraction * n_k)`` samples go to test.

    Returns sorted (train, test) index arrays.
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0]))
    test: list[np.ndarray] = []
    for k in np.unique(y):
        idx = np.flatnonzero(y == k)
        test.append(rng.permutation(idx)[: int(round(test_fraction * len(idx)))])
    test_idx = np.sort(np.concatenate(test))
    train_idx = np.setdiff1d(np.arange(len(y)), test_idx)
    return train_idx, test_idx


def load_digits(*, test_fraction: float = 0.2, split_seed: int = 0) -> DatasetBundle:
    """sklearn's bundled 8x8 digits (1,797 images, 10 classes) with a seeded stratified split.

    Works fully offline (the data ships inside scikit-learn). Pixel values 0..16 are
    stored as uint8 ``round(v * 255 / 16)`` (computed exactly in integers; the only tie,
    v = 8 -> 127.5, rounds up to 128) so the same uint8 pipeline as CIFAR/EMNIST applies.

    Args:
        test_fraction: fraction of samples in the test split, per class (:func:`stratified_split`).
        split_seed: seed of the split.

    Returns:
        Bundle ``"digits"``: uint8 (N, 1, 8, 8) images, int64 labels; train/test samples
        kept in the original dataset order. ``meta`` has ``source``, ``classes``,
        ``train_indices``/``test_indices`` (into sklearn's array), ``split_seed``, ``test_fraction``.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    images, y = _read_sklearn_digits()
    v = images.astype(np.int64)
    if not np.array_equal(v, images) or v.min() < 0 or v.max() > 16:
        raise DatasetUnavailable("sklearn digits: expected integer pixel values in 0..16")
    pixels = ((v * 255 + 8) // 16).astype(np.uint8)  # round(v*255/16), half up
    train_idx, test_idx = stratified_split(y, test_fraction, split_seed)
    x = torch.from_numpy(np.ascontiguousarray(pixels[:, None, :, :]))
    yt = torch.from_numpy(y)
    tr, te = torch.from_numpy(train_idx), torch.from_numpy(test_idx)
    return _image_bundle(
        "digits",
        x[tr].contiguous(),
        yt[tr].contiguous(),
        x[te].contiguous(),
        yt[te].contiguous(),
        num_classes=10,
        meta={
            "source": "sklearn.datasets.load_digits",
            "classes": [str(n) for n in range(10)],
            "split_seed": int(split_seed),
            "test_fraction": float(test_fraction),
            "train_indices": train_idx.tolist(),
            "test_indices": test_idx.tolist(),
            "pixel_scaling": "uint8 = round(v * 255 / 16) from sklearn's 0..16 values",
        },
    )


# --------------------------------------------------------------------------- registry loaders
def cifar10(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``cifar10`` (no config parameters)."""
    return load_cifar10(Path(data_dir), download=download)


def emnist(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``emnist`` (byclass; no config parameters)."""
    return load_emnist(Path(data_dir), download=download)


def digits(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``digits`` (scikit-learn's bundled copy; ``test_fraction``, ``split_seed``)."""
    return load_digits(test_fraction=params["test_fraction"], split_seed=params["split_seed"])
