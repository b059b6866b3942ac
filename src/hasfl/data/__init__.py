"""Datasets (paper Section 4.1, Table 2) as in-memory tensors.

The registry (:data:`hasfl.registry.DATASETS`) names each dataset's loader and raw files;
a loader module is imported only when its dataset is loaded (torchvision and scikit-learn
only then). The workflow reads file names from the registry, never from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.registry import DATASETS, resolve

__all__ = ["DatasetBundle", "DatasetUnavailable", "load_dataset"]


def load_dataset(dataset: str, data_dir: str | Path, params: Mapping[str, Any], *, download: bool = False) -> DatasetBundle:
    """Load ``dataset`` with its config block ``dataset_params.<dataset>`` into memory."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset '{dataset}'; expected one of {', '.join(DATASETS)}")
    return resolve(DATASETS[dataset].load)(Path(data_dir), params, download)
