"""scikit-learn's bundled 8x8 digits (the quick preset; not in the paper), fully offline.

The 1,797 images of ``sklearn.datasets.load_digits`` are read from the ``digits.csv.gz``
inside the scikit-learn installation (without importing scikit-learn), scaled from 0..16 to
uint8 and split by a seeded stratified split, so the same uint8 pipeline as CIFAR-10 / EMNIST
(:mod:`hasfl.data.imagecommon`) applies. :func:`digits` is the loader named by
:data:`hasfl.registry.DATASETS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.data.imagecommon import image_bundle

__all__ = ["load_digits"]


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
    return image_bundle(
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


def digits(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``digits`` (scikit-learn's bundled copy; ``test_fraction``, ``split_seed``)."""
    return load_digits(test_fraction=params["test_fraction"], split_seed=params["split_seed"])
