"""The IDX ubyte format of the MNIST family (EMNIST, Fashion-MNIST), as torchvision reads it.

torchvision's ``EMNIST`` and ``FashionMNIST`` read uncompressed IDX files from
``<root>/<Class>/raw/``: a 4-byte magic ``00 00 08 <ndim>`` (unsigned bytes, ``ndim``
dimensions), ``ndim`` big-endian uint32 sizes, then the items. torchvision has no md5 for
the uncompressed files, so :func:`idx_problem` validates each file's header against its
size instead; :func:`grey_images` turns a split torchvision has read into uint8
``(N, 1, side, side)`` images and int64 labels.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import torch

from hasfl.data.base import DatasetUnavailable
from hasfl.data.imagecommon import one_line

__all__ = ["grey_images", "idx_problem"]


def idx_problem(path: Path, ndim: int, item_shape: tuple[int, ...]) -> tuple[str | None, int]:
    """Validate an uint8 IDX file's header against its size; (problem or None, item count)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(4 + 4 * ndim)
    except OSError as exc:
        return f"unreadable ({one_line(exc)})", 0
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


def grey_images(ds: Any, name: str, split: str, side: int, transposed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 1, side, side) uint8 images and int64 labels of an IDX-backed torchvision split (``transposed``:
    stored with rows and columns swapped, as EMNIST)."""
    data = torch.as_tensor(ds.data)
    if data.dtype != torch.uint8 or data.ndim != 3 or tuple(data.shape[1:]) != (side, side):
        raise DatasetUnavailable(f"{name} {split} data has dtype {data.dtype} shape {tuple(data.shape)}, "
                                 f"expected uint8 (N, {side}, {side})")
    if transposed:
        data = data.transpose(1, 2)
    return data.unsqueeze(1).contiguous(), torch.as_tensor(ds.targets).to(torch.int64)
