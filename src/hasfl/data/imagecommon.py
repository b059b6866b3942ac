"""What the image loaders share (paper Section 4.1 / Table 2): bundle building and normalisation.

Every image loader (:mod:`hasfl.data.cifar10`, :mod:`hasfl.data.emnist`,
:mod:`hasfl.data.fashion_mnist`, :mod:`hasfl.data.digits`) returns a
:class:`~hasfl.data.base.DatasetBundle` built by :func:`image_bundle`: images stored as
uint8 ``(N, C, H, W)`` tensors, int64 labels, and per-channel ``mean``/``std`` computed on
the train split in [0, 1] units (population std, exact integer sums, :func:`channel_stats`),
so :meth:`DatasetBundle.inputs` standardises batches on the fly.

:func:`read_splits` reads a torchvision dataset's train and test split, turning any read
error into one :class:`~hasfl.data.base.DatasetUnavailable`; :func:`one_line` shortens an
exception for such messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable

__all__ = ["channel_stats", "image_bundle", "one_line", "read_splits"]


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception, at most 300 characters."""
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def read_splits(name: str, folder: Path, source: str, make: Callable[[bool], Any], hint: str = "") -> tuple[Any, Any]:
    """The train and test split of a torchvision dataset (``make(train)``); unreadable files become one
    DatasetUnavailable naming ``folder`` and ``source`` (plus ``hint``)."""
    try:
        return make(True), make(False)
    except Exception as exc:
        raise DatasetUnavailable(
            f"{name} files under {folder} could not be read by {source}: {one_line(exc)}{hint}") from exc


def channel_stats(x: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
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


def image_bundle(
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
    mean, std = channel_stats(train_x)
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
