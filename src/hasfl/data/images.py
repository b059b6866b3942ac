"""Image datasets of paper Section 4.1 / Table 2 (CIFAR-10, EMNIST), Fashion-MNIST (medium preset) and sklearn's digits.

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
* Fashion-MNIST: ``<data_dir>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte``
  (uncompressed IDX), pinned by the sha256 of the decompressed files; fetched by torchvision's
  download, or from the Debian package ``dataset-fashion-mnist`` (installed, or ``apt-get
  download`` + ``dpkg -x``), see :func:`fetch_fashion_mnist`.

Missing or corrupt files raise one :class:`~hasfl.data.base.DatasetUnavailable` whose
message says exactly which files to place where. ``fetch_cifar10``/``fetch_emnist``/``fetch_fashion_mnist``
make the files present (downloading when possible) without loading them, so a
workflow rule can surface that error before any training job.

torchvision is imported lazily. :func:`cifar10`, :func:`emnist`, :func:`fashion_mnist` and :func:`digits` are
the loaders named by :data:`hasfl.registry.DATASETS`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.registry import DATASETS

__all__ = [
    "CIFAR10_FILES",
    "EMNIST_FILES",
    "FASHION_MNIST_FILES",
    "FASHION_MNIST_SHA256",
    "fetch_cifar10",
    "fetch_emnist",
    "fetch_fashion_mnist",
    "load_cifar10",
    "load_digits",
    "load_emnist",
    "load_fashion_mnist",
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


def _read_splits(name: str, folder: Path, source: str, make: Callable[[bool], Any], hint: str = "") -> tuple[Any, Any]:
    """The train and test split of a torchvision dataset (``make(train)``); unreadable files become one
    DatasetUnavailable naming ``folder`` and ``source`` (plus ``hint``)."""
    try:
        return make(True), make(False)
    except Exception as exc:
        raise DatasetUnavailable(
            f"{name} files under {folder} could not be read by {source}: {_one_line(exc)}{hint}") from exc


def _grey_images(ds: Any, name: str, split: str, side: int, transposed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 1, side, side) uint8 images and int64 labels of an IDX-backed torchvision split (``transposed``:
    stored with rows and columns swapped, as EMNIST)."""
    data = torch.as_tensor(ds.data)
    if data.dtype != torch.uint8 or data.ndim != 3 or tuple(data.shape[1:]) != (side, side):
        raise DatasetUnavailable(f"{name} {split} data has dtype {data.dtype} shape {tuple(data.shape)}, "
                                 f"expected uint8 (N, {side}, {side})")
    if transposed:
        data = data.transpose(1, 2)
    return data.unsqueeze(1).contiguous(), torch.as_tensor(ds.targets).to(torch.int64)


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
    train, test = _read_splits(
        "CIFAR-10", data_dir / _CIFAR_FOLDER, "torchvision.datasets.CIFAR10",
        lambda tr: cls(root=str(data_dir), train=tr, download=False),
        f". Replace them from the official cifar-10-python.tar.gz ({_CIFAR_ARCHIVE_URL}).")

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

    train, test = _read_splits(
        "EMNIST", data_dir / _EMNIST_RAW, "torchvision.datasets.EMNIST",
        lambda tr: EMNIST(root=str(data_dir), split=_EMNIST_SPLIT, train=tr, download=False))
    # stored transposed -> upright, with a channel axis
    train_x, train_y = _grey_images(train, "EMNIST", "train", _EMNIST_SIDE, transposed=True)
    del train.data
    test_x, test_y = _grey_images(test, "EMNIST", "test", _EMNIST_SIDE, transposed=True)
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


# --------------------------------------------------------------------------- Fashion-MNIST
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
            "Delete them and run the fetch again (rule fetch_fashion_mnist, or hasfl.data.images.fetch_fashion_mnist).",
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
        raise _RouteFailed(f"could not read {src}: {_one_line(exc)}") from exc
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
        return 127, _one_line(exc)
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
        p_img, n_img = _idx_problem(raw / img, 3, (_FMNIST_SIDE, _FMNIST_SIDE))
        p_lab, n_lab = _idx_problem(raw / lab, 1, ())
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

    train, test = _read_splits(
        "Fashion-MNIST", data_dir / _FMNIST_RAW, "torchvision.datasets.FashionMNIST",
        lambda tr: FashionMNIST(root=str(data_dir), train=tr, download=False))
    train_x, train_y = _grey_images(train, "Fashion-MNIST", "train", _FMNIST_SIDE)
    test_x, test_y = _grey_images(test, "Fashion-MNIST", "test", _FMNIST_SIDE)
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
    return _image_bundle("fashion_mnist", train_x, train_y, test_x, test_y, num_classes=len(classes), meta=meta)


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


def fashion_mnist(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``fashion_mnist`` (sha256-pinned files; ``train_per_class``, ``subsample_seed``)."""
    return load_fashion_mnist(Path(data_dir), download=download, train_per_class=params.get("train_per_class"),
                              subsample_seed=params.get("subsample_seed", 0))


def digits(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``digits`` (scikit-learn's bundled copy; ``test_fraction``, ``split_seed``)."""
    return load_digits(test_fraction=params["test_fraction"], split_seed=params["split_seed"])
