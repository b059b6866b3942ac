"""EMNIST byclass (paper Section 4.1 / Table 2): fetch, IDX validation and decoding through torchvision.

Read through ``torchvision.datasets.EMNIST`` from the on-disk layout torchvision expects:
``<data_dir>/EMNIST/raw/emnist-byclass-{train,test}-{images-idx3,labels-idx1}-ubyte``
(uncompressed IDX). torchvision has no md5 for these, so each file's IDX header and size
are validated here instead (:func:`hasfl.data.idx.idx_problem`).

Missing or corrupt files raise one :class:`~hasfl.data.base.DatasetUnavailable` whose
message says exactly which files to place where. :func:`fetch_emnist` makes the files
present (downloading when possible) without loading them, so a workflow rule can surface
that error before any training job.

torchvision is imported lazily. :func:`emnist` is the loader named by
:data:`hasfl.registry.DATASETS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.data.idx import grey_images, idx_problem
from hasfl.data.imagecommon import image_bundle, one_line, read_splits
from hasfl.registry import DATASETS

__all__ = ["EMNIST_FILES", "fetch_emnist", "load_emnist"]

# The names live in the registry (torch-free, read when the Snakefile is parsed).
EMNIST_FILES: tuple[str, ...] = DATASETS["emnist"].raw
"""EMNIST byclass raw (uncompressed IDX) files relative to ``data_dir`` (POSIX separators)."""
_EMNIST_RAW = EMNIST_FILES[0].rsplit("/", 1)[0]
_EMNIST_NAMES: tuple[str, ...] = tuple(f.split("/")[-1] for f in EMNIST_FILES)
_EMNIST_SPLIT = "byclass"

_EMNIST_ARCHIVE_URL = "https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"
_EMNIST_SIDE = 28
_EMNIST_CLASSES = 62


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
        p_img, n_img = idx_problem(raw / img, 3, (_EMNIST_SIDE, _EMNIST_SIDE))
        p_lab, n_lab = idx_problem(raw / lab, 1, ())
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
                _emnist_missing_message(data_dir, missing, f"download via torchvision failed: {one_line(exc)}")
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

    train, test = read_splits(
        "EMNIST", data_dir / _EMNIST_RAW, "torchvision.datasets.EMNIST",
        lambda tr: EMNIST(root=str(data_dir), split=_EMNIST_SPLIT, train=tr, download=False))
    # stored transposed -> upright, with a channel axis
    train_x, train_y = grey_images(train, "EMNIST", "train", _EMNIST_SIDE, transposed=True)
    del train.data
    test_x, test_y = grey_images(test, "EMNIST", "test", _EMNIST_SIDE, transposed=True)
    classes = [str(c) for c in train.classes]
    if len(classes) != _EMNIST_CLASSES:
        raise DatasetUnavailable(f"EMNIST byclass should have {_EMNIST_CLASSES} classes, torchvision lists {len(classes)}")
    return image_bundle(
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


def emnist(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``emnist`` (byclass; no config parameters)."""
    return load_emnist(Path(data_dir), download=download)
