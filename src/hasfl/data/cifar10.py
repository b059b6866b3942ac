"""CIFAR-10 (paper Section 4.1 / Table 2): fetch, md5 check and decoding through torchvision.

Read through ``torchvision.datasets.CIFAR10`` from the on-disk layout torchvision expects:
``<data_dir>/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}`` (the pickled
"python version"); md5s are checked against ``torchvision.datasets.CIFAR10``'s table unless
``verify_md5=False`` (for fabricated test files).

Missing or corrupt files raise one :class:`~hasfl.data.base.DatasetUnavailable` whose
message says exactly which files to place where. :func:`fetch_cifar10` makes the files
present (downloading when possible) without loading them, so a workflow rule can surface
that error before any training job.

torchvision is imported lazily. :func:`cifar10` is the loader named by
:data:`hasfl.registry.DATASETS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.data.imagecommon import image_bundle, one_line, read_splits
from hasfl.registry import DATASETS

__all__ = ["CIFAR10_FILES", "fetch_cifar10", "load_cifar10"]

# The names live in the registry (torch-free, read when the Snakefile is parsed).
CIFAR10_FILES: tuple[str, ...] = DATASETS["cifar10"].raw
"""CIFAR-10 files relative to ``data_dir`` (POSIX separators)."""
_CIFAR_FOLDER = CIFAR10_FILES[0].split("/")[0]
_CIFAR_NAMES: tuple[str, ...] = tuple(f.split("/")[-1] for f in CIFAR10_FILES)

_CIFAR_ARCHIVE_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


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
            _cifar_missing_message(data_dir, missing, f"download via torchvision failed: {one_line(exc)}")
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
    train, test = read_splits(
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
    return image_bundle(
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


def cifar10(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``cifar10`` (no config parameters)."""
    return load_cifar10(Path(data_dir), download=download)
