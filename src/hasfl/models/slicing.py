"""Nested width slicing by plain tensor indexing (paper Algorithm 2, Eq. 2).

Algorithm 2 describes a sub-model of width ``p`` as a binary mask over the
global parameters: the leading ``ceil(p * C_l)`` channels of every layer and
their input connections from the retained channels of the previous layer.
Eq. 2 trains the masked model ``m * w``.  We never materialise that mask on
the hot path: the sub-model is a physically smaller module whose tensors are
*basic slices* of the global tensors, described per state-dict key by a
:class:`SliceRule`.  Because leading channels are always kept, every slice is a
prefix along each sliced dimension, so the masks are nested (``p <= p'``
implies ``m_p`` is a subset of ``m_p'``), as Algorithm 2 states.

Three operations cover the whole protocol:

* :func:`extract` -- server to client: copy the sub-tensors out of the global
  state (one contiguous copy per key, no index tensors).
* :func:`region` -- client to server: a writable *view* into a full-size tensor
  (e.g. an aggregation accumulator) shaped like the rule's slice, so
  ``region(acc, rule).add_(w * sub.view_as(region(acc, rule)))`` scatters a
  client tensor back in place.
* :func:`coverage_mask` -- the boolean mask ``m`` of Algorithm 2, for tests,
  coverage accounting and the divergence estimator of Eq. 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["SliceRule", "width", "rolling_window", "window_indices", "region", "extract", "coverage_mask"]


def width(p: float, size: int) -> int:
    """Number of retained units, ``ceil(p * size)`` (Algorithm 2, line 2).

    A tolerance of 1e-9 absorbs float error (``0.75 * 64`` -> 48, never 49);
    at least one unit is always kept.
    """
    return max(1, math.ceil(p * size - 1e-9))


def rolling_window(size: int, p: float, t: int) -> tuple[slice, ...]:
    """FedRolex's rolling window (Alam et al., 2022) of a width-``p`` sub-model in round ``t`` along a
    dimension of ``size`` units: the ``width(p, size)`` consecutive units starting at
    ``(size - t mod size) mod size``, wrapping around -- one slice, or two (the tail, then the head)
    when the window wraps.

    The official code (``AIoT-MLSys-Lab/FedRolex``, ``resnet_server.py``, ``split_model``, default
    ``--algo roll``) takes ``torch.roll(torch.arange(size), t % size)[:ceil(size * p)]``: rolling by
    ``t`` moves the window back by one unit a round, so every unit is trained within ``size`` rounds
    at any width. The units are in that order (the tail first), as the official index tensor.
    """
    if size < 1:
        raise ValueError(f"rolling_window: size must be >= 1, got {size}")
    w = width(p, size)
    start = (size - int(t) % size) % size
    end = start + w
    if end <= size:
        return (slice(start, end),)
    return slice(start, size), slice(0, end - size)


def window_indices(window: tuple[slice, ...]) -> Tensor:
    """The unit indices of a window (:func:`rolling_window`) in order, as an int64 tensor."""
    return torch.cat([torch.arange(s.start, s.stop, dtype=torch.int64) for s in window])


@dataclass(frozen=True)
class SliceRule:
    """Where a sub-model tensor lives inside its full-size counterpart.

    The sub-tensor is ``full.view(view)[index]`` (or ``full[index]`` when
    ``view`` is None), reshaped to the sub-model's tensor shape.  ``index``
    holds only :class:`slice` objects, so the result is always a strided view.
    ``view`` exists for stacked parameters such as LSTM gate blocks: viewing a
    ``(4H, ...)`` weight as ``(4, H, ...)`` turns "leading ``h`` rows of every
    gate" into one basic slice.
    """

    view: tuple[int, ...] | None
    index: tuple[slice, ...]


def region(full: Tensor, rule: SliceRule) -> Tensor:
    """A writable view of ``full`` covering exactly the rule's coordinates."""
    base = full if rule.view is None else full.view(rule.view)
    return base[rule.index]


def extract(
    full_state: dict[str, Tensor],
    rules: dict[str, SliceRule],
    sub_shapes: dict[str, torch.Size],
) -> dict[str, Tensor]:
    """Sub-model state dict: one contiguous copy of each rule's region.

    Keys are those of ``rules``; each tensor is reshaped to ``sub_shapes[key]``.
    The result shares no memory with ``full_state``.
    """
    out: dict[str, Tensor] = {}
    for key, rule in rules.items():
        sub = region(full_state[key], rule).clone(memory_format=torch.contiguous_format)
        out[key] = sub.view(sub_shapes[key])
    return out


def coverage_mask(full_state: dict[str, Tensor], rules: dict[str, SliceRule]) -> dict[str, Tensor]:
    """Boolean mask ``m`` of Algorithm 2: True where the sub-model has a coordinate."""
    masks: dict[str, Tensor] = {}
    for key, rule in rules.items():
        mask = torch.zeros(full_state[key].shape, dtype=torch.bool, device=full_state[key].device)
        region(mask, rule).fill_(True)
        masks[key] = mask
    return masks
