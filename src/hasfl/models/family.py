"""Common interface of a nested-width model family (paper Algorithm 2).

A family knows how to build the global model (``p = 1``), a physically
width-``p`` sub-model, and the :class:`~hasfl.models.slicing.SliceRule` of every
state-dict key that maps the sub-model into the global one, for a
:class:`~hasfl.models.slicing.Window` (the leading units by default; FedRolex's rolling
window). The module and its costs depend on ``p`` only, never on the window. Rules (of the
nested window, and of the last other window), sub-model shapes and costs are cached per ``p``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor, nn

from hasfl.models.cost import Cost
from hasfl.models.slicing import PREFIX, SliceRule, Window, extract

__all__ = ["ModelFamily"]


class ModelFamily(ABC):
    """Builds width-p models and the slice rules between them and the global model."""

    #: constructor keyword arguments accepted through ``build_family``
    ARCH_KWARGS: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._rules: dict[float, dict[str, SliceRule]] = {}
        self._window_rules: tuple[Window, dict[float, dict[str, SliceRule]]] | None = None  # the last rolling window's
        self._shapes: dict[float, dict[str, torch.Size]] = {}
        self._costs: dict[float, Cost] = {}

    # --- to implement per architecture -------------------------------------
    @abstractmethod
    def build(self, p: float = 1.0) -> nn.Module:
        """A freshly initialised, physically width-``p`` module (p=1: global model)."""

    @abstractmethod
    def widths(self, p: float) -> dict[str, Any]:
        """Kept sizes of every sliced dimension at width ``p``."""

    @abstractmethod
    def _make_rules(self, p: float, window: Window) -> dict[str, SliceRule]: ...

    def dims(self, p: float) -> list[tuple[int, int]]:
        """(units, units kept at width ``p``) of each sliced dimension, in the order of the ``dim`` argument
        :meth:`_make_rules` passes to :meth:`Window.span` (a sampled window's units, FedEcover)."""
        raise NotImplementedError(f"{type(self).__name__} names no sliced dimensions")

    @abstractmethod
    def _macs(self, p: float, module: nn.Module) -> int: ...

    # --- shared, cached -------------------------------------------------------
    def slice_rules(self, p: float, window: Window = PREFIX) -> dict[str, SliceRule]:
        """Rule for every state-dict key (parameters and buffers) of ``build(1.0)`` when the width-``p`` sub-model
        holds the units of ``window`` (cached per ``p``: for the nested window always, for another the last one asked
        for, which every client of a round shares)."""
        p = _check_p(p)
        if not window.nested:  # a rolling window is the same for every client of a round: its rules are kept (a
            # sampled window is each client's own: its rules are cut for it)
            if self._window_rules is None or self._window_rules[0] != window:
                self._window_rules = (window, {})
            if p not in self._window_rules[1]:
                self._window_rules[1][p] = self._make_rules(p, window)
            return self._window_rules[1][p]
        if p not in self._rules:
            self._rules[p] = self._make_rules(p, window)
        return self._rules[p]

    def sub_shapes(self, p: float) -> dict[str, torch.Size]:
        """State-dict tensor shapes of ``build(p)``."""
        p = _check_p(p)
        if p not in self._shapes:
            self._shapes[p] = {k: v.shape for k, v in self.build(p).state_dict().items()}
        return self._shapes[p]

    def extract(self, full_state: dict[str, Tensor], p: float, window: Window = PREFIX) -> dict[str, Tensor]:
        """Width-``p`` state dict copied out of a global state dict (Algorithm 2; ``window``'s units)."""
        return extract(full_state, self.slice_rules(p, window), self.sub_shapes(p))

    def cost(self, p: float) -> Cost:
        """Parameters, per-sample MACs and float32 upload size at width ``p`` (Table 1)."""
        p = _check_p(p)
        if p not in self._costs:
            module = self.build(p)
            params = sum(t.numel() for t in module.parameters())
            self._costs[p] = Cost.of(params, self._macs(p, module))
        return self._costs[p]


def _check_p(p: float) -> float:
    p = float(p)
    if not 0.0 < p <= 1.0:
        raise ValueError(f"width fraction p must lie in (0, 1], got {p}")
    return p
