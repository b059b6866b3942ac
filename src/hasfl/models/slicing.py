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

Which units a sub-model holds along a dimension is its :class:`Window`: the leading ones
(``PREFIX``, Algorithm 2) or, for FedRolex (Alam et al., 2022), a window that rolls by one unit
a round (:func:`rolling`). A window that does not wrap is still one basic slice; one that wraps is
two (tail, then head), and a rule holding such a *span* maps its sub-tensor block by block
(:func:`blocks`): :func:`gather`, :func:`scatter_add_`, :func:`fill_` and :func:`assign_` take
either kind of rule and do, for a rule of basic slices, exactly what :func:`region` does. FedEcover
(issue 37) gives each client its own sorted set of units per dimension (``sampled``): its span is the
set's runs of consecutive units (:func:`runs`); a rule with more than two pieces along a dimension is mapped
through index tensors instead of its many blocks, by the same functions.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["PREFIX", "SliceRule", "Span", "Window", "add_scalar_", "assign_", "blocks", "coverage_mask", "extract", "fill_", "gather",
           "is_basic", "nested", "region", "region_shape", "rolling", "rolling_window", "runs", "scatter_add_", "width",
           "window_indices"]


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
    return _rolled(size, width(p, size), t)


def _rolled(size: int, kept: int, t: int) -> tuple[slice, ...]:
    """The ``kept`` units of :func:`rolling_window` in round ``t`` (one slice, or tail and head)."""
    start = (size - int(t) % size) % size
    end = start + kept
    if end <= size:
        return (slice(start, end),)
    return slice(start, size), slice(0, end - size)


#: What a rule keeps along one dimension: a basic slice, or the pieces of a wrapped window in order
Span = slice | tuple[slice, ...]


def runs(units: tuple[int, ...]) -> Span:
    """The span of a sorted set of distinct unit indices: its runs of consecutive units in order (one slice when the
    set is one run)."""
    pieces: list[slice] = []
    for u in units:
        if pieces and pieces[-1].stop == u:
            pieces[-1] = slice(pieces[-1].start, u + 1)
        else:
            pieces.append(slice(u, u + 1))
    if not pieces:
        raise ValueError("runs: a span keeps at least one unit")
    return pieces[0] if len(pieces) == 1 else tuple(pieces)


@dataclass(frozen=True)
class Window:
    """Which units of each sliced dimension a sub-model of round ``shift`` holds.

    ``prefix`` (Algorithm 2): the leading ``kept`` units, whatever the round (nested masks).
    ``rolling`` (FedRolex, :func:`rolling_window`): the ``kept`` units starting at
    ``(size - shift mod size) mod size``, wrapping around; ``shift`` is the round t. A window that
    keeps every unit of a dimension is that dimension in its own order for both kinds (FedRolex's
    index for it is a rotation, the same units: docs/decisions.md "FedRolex's rolling windows").
    ``sampled`` (FedEcover, :mod:`hasfl.models.cyclic`): one client's own units, ``units[d]`` the
    sorted unit indices of sliced dimension ``d`` (the family's order, :meth:`ModelFamily.dims`); ``shift``
    is the client's draw number in the run. A ``sampled`` window without units is a round's common window
    (the probe's): the leading units.
    """

    kind: str = "prefix"
    shift: int = 0
    units: tuple[tuple[int, ...], ...] = ()

    KINDS = ("prefix", "rolling", "sampled")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise ValueError(f"Window: kind must be one of {', '.join(self.KINDS)}, got {self.kind!r}")
        if self.kind == "prefix" and self.shift != 0:
            raise ValueError(f"Window: a prefix window has no shift, got {self.shift}")
        if self.units and self.kind != "sampled":
            raise ValueError(f"Window: only a sampled window holds units, not a {self.kind} one")

    @property
    def nested(self) -> bool:
        """Whether sub-models of this window are nested prefixes (Algorithm 2)."""
        return self.kind == "prefix"

    def span(self, size: int, kept: int, dim: int = 0) -> Span:
        """The units kept of a dimension of ``size`` units when ``kept`` of them are kept (``dim``: the dimension's
        place among the family's sliced dimensions, read by a sampled window only)."""
        if self.kind == "prefix" or kept >= size:
            return slice(0, kept)
        if self.kind == "sampled":
            if not self.units:
                return slice(0, kept)
            units = self.units[dim]
            if len(units) != kept or units[-1] >= size:
                raise ValueError(f"Window: sampled dimension {dim} holds {len(units)} units below {units[-1] + 1}, "
                                 f"asked for {kept} of {size}")
            return runs(units)
        pieces = _rolled(size, kept, self.shift)
        return pieces[0] if len(pieces) == 1 else pieces


#: Algorithm 2's window: the leading units
PREFIX = Window()


def nested(t: int) -> Window:
    """The window schedule of every nested-width method: the leading units in every round."""
    return PREFIX


def rolling(t: int) -> Window:
    """FedRolex's window schedule: round ``t``'s window rolls by ``t`` (:func:`rolling_window`)."""
    return Window("rolling", int(t))


def window_indices(window: tuple[slice, ...]) -> Tensor:
    """The unit indices of a window (:func:`rolling_window`) in order, as an int64 tensor."""
    return torch.cat([torch.arange(s.start, s.stop, dtype=torch.int64) for s in window])


@dataclass(frozen=True)
class SliceRule:
    """Where a sub-model tensor lives inside its full-size counterpart.

    The sub-tensor is ``full.view(view)[index]`` (or ``full[index]`` when
    ``view`` is None), reshaped to the sub-model's tensor shape.  When ``index``
    holds only :class:`slice` objects (every nested rule, and a rolling window that
    does not wrap) the result is a strided view (:func:`region`). An entry may also be a
    tuple of slices, the pieces of a wrapped window in order: the sub-tensor is then the
    blocks of the pieces' product laid side by side (:func:`blocks`).
    ``view`` exists for stacked parameters such as LSTM gate blocks: viewing a
    ``(4H, ...)`` weight as ``(4, H, ...)`` turns "leading ``h`` rows of every
    gate" into one basic slice.
    """

    view: tuple[int, ...] | None
    index: tuple[Span, ...]


def is_basic(rule: SliceRule) -> bool:
    """Whether the rule is one basic slice per dimension (its region is a view)."""
    return all(isinstance(s, slice) for s in rule.index)


def _base(full: Tensor, rule: SliceRule) -> Tensor:
    return full if rule.view is None else full.view(rule.view)


def region(full: Tensor, rule: SliceRule) -> Tensor:
    """A writable view of ``full`` covering exactly the rule's coordinates (a rule of basic slices)."""
    if not is_basic(rule):
        raise ValueError("region: a wrapped window's coordinates are no single view; use gather / scatter_add_ / "
                         "fill_ / assign_")
    return _base(full, rule)[rule.index]


def _dim_pieces(span: Span, size: int) -> list[tuple[slice, slice]]:
    """(slice of the full dimension, slice of the sub-tensor's) for each piece of ``span``."""
    pieces = span if isinstance(span, tuple) else (span,)
    out, offset = [], 0
    for s in pieces:
        start, stop, step = s.indices(size)
        if step != 1:
            raise ValueError(f"slice rule: pieces must be contiguous, got step {step}")
        n = max(0, stop - start)
        out.append((slice(start, stop), slice(offset, offset + n)))
        offset += n
    return out


def region_shape(full: Tensor, rule: SliceRule) -> torch.Size:
    """Shape of the rule's coordinates inside ``full`` (viewed as ``rule.view``)."""
    base = _base(full, rule)
    dims = [sum(s.stop - s.start for s, _ in _dim_pieces(span, base.shape[d])) for d, span in enumerate(rule.index)]
    return torch.Size([*dims, *base.shape[len(rule.index):]])


def blocks(full: Tensor, rule: SliceRule) -> list[tuple[Tensor, tuple[slice, ...]]]:
    """(view of ``full``, index into a tensor of :func:`region_shape`) for each block of the rule: one for a rule
    of basic slices, the product of the pieces otherwise."""
    base = _base(full, rule)
    per_dim = [_dim_pieces(span, base.shape[d]) for d, span in enumerate(rule.index)]
    return [(base[tuple(f for f, _ in combo)], tuple(s for _, s in combo)) for combo in itertools.product(*per_dim)]


def _indexed(full: Tensor, rule: SliceRule) -> tuple[Tensor, tuple[Tensor, ...]] | None:
    """(``full`` viewed as the rule's base, broadcast index tensors of its sliced dimensions) for a rule with more than
    two pieces along some dimension (a sampled window's units, FedEcover), whose blocks would be many; None for every
    other rule (basic slices, and a rolling window's at most two pieces, which keep their blocks)."""
    if all(not isinstance(s, tuple) or len(s) <= 2 for s in rule.index):
        return None
    base = _base(full, rule)
    k = len(rule.index)
    idx = []
    for d, span in enumerate(rule.index):
        units = [u for f, _ in _dim_pieces(span, base.shape[d]) for u in range(f.start, f.stop)]
        idx.append(torch.tensor(units, dtype=torch.int64, device=full.device).view([-1] + [1] * (k - 1 - d)))
    return base, tuple(idx)


def gather(full: Tensor, rule: SliceRule) -> Tensor:
    """The rule's coordinates of ``full`` in :func:`region_shape`: the view itself for a rule of basic slices, a new
    tensor otherwise."""
    if is_basic(rule):
        return region(full, rule)
    indexed = _indexed(full, rule)
    if indexed is not None:
        return indexed[0][indexed[1]]
    out = torch.empty(region_shape(full, rule), dtype=full.dtype, device=full.device)
    for src, at in blocks(full, rule):
        out[at] = src
    return out


@torch.no_grad()
def scatter_add_(full: Tensor, rule: SliceRule, sub: Tensor, alpha: float = 1.0) -> None:
    """``full[rule] += alpha * sub`` in place (``sub`` of the rule's element count, any shape)."""
    if is_basic(rule):
        acc = region(full, rule)
        acc.add_(sub.view(acc.shape), alpha=alpha)
        return
    indexed = _indexed(full, rule)
    if indexed is not None:
        base, ix = indexed
        acc = base[ix]
        acc.add_(sub.view(acc.shape), alpha=alpha)
        base[ix] = acc
        return
    sub = sub.view(region_shape(full, rule))
    for dst, at in blocks(full, rule):
        dst.add_(sub[at], alpha=alpha)


@torch.no_grad()
def fill_(full: Tensor, rule: SliceRule, value: float | bool) -> None:
    """Set the rule's coordinates of ``full`` to ``value`` in place."""
    indexed = _indexed(full, rule)
    if indexed is not None:
        indexed[0][indexed[1]] = value
        return
    for dst, _ in blocks(full, rule):
        dst.fill_(value)


@torch.no_grad()
def add_scalar_(full: Tensor, rule: SliceRule, value: float) -> None:
    """``full[rule] += value`` in place."""
    indexed = _indexed(full, rule)
    if indexed is not None:
        base, ix = indexed
        base[ix] = base[ix].add_(value)
        return
    for dst, _ in blocks(full, rule):
        dst.add_(value)


@torch.no_grad()
def assign_(sub: Tensor, full: Tensor, rule: SliceRule) -> None:
    """Copy the rule's coordinates of ``full`` into ``sub`` (any shape of the rule's element count), in place."""
    if is_basic(rule):
        src = region(full, rule)
        sub.view(src.shape).copy_(src)
        return
    target = sub.view(region_shape(full, rule))
    indexed = _indexed(full, rule)
    if indexed is not None:
        target.copy_(indexed[0][indexed[1]])
        return
    for src, at in blocks(full, rule):
        target[at].copy_(src)


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
        sub = gather(full_state[key], rule).clone(memory_format=torch.contiguous_format)
        out[key] = sub.view(sub_shapes[key])
    return out


def coverage_mask(full_state: dict[str, Tensor], rules: dict[str, SliceRule]) -> dict[str, Tensor]:
    """Boolean mask ``m`` of Algorithm 2: True where the sub-model has a coordinate."""
    masks: dict[str, Tensor] = {}
    for key, rule in rules.items():
        mask = torch.zeros(full_state[key].shape, dtype=torch.bool, device=full_state[key].device)
        fill_(mask, rule, True)
        masks[key] = mask
    return masks
