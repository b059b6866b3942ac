"""Coordinate-wise aggregation (paper Algorithm 1, lines 17-19).

Each coordinate j of the aggregated update is the sample-weighted mean of the
participants' updates over exactly the participants whose sub-model contains j:

    [Delta_bar]_j = sum_i n_i [m_i]_j [Delta_i]_j / sum_i n_i [m_i]_j   if covered, else 0.

Updates arrive as physically small sub-model tensors and are scattered into
full-size accumulators through :func:`hasfl.models.slicing.scatter_add_` (one
view per rule, or one per block of a wrapped rolling window), so no mask is ever
materialised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import Tensor

from hasfl.models.slicing import SliceRule, add_scalar_, scatter_add_


class CoordinateAggregator:
    """Accumulates sub-model updates into full-size sums and per-coordinate weights."""

    def __init__(self, global_state: Mapping[str, Tensor], keys: Iterable[str]) -> None:
        self.keys = list(keys)
        self._sum = {k: torch.zeros_like(global_state[k], dtype=torch.float32) for k in self.keys}
        self._weight = {k: torch.zeros_like(global_state[k], dtype=torch.float32) for k in self.keys}

    def add(self, delta: Mapping[str, Tensor], rules: Mapping[str, SliceRule], n_samples: float,
            skip: Iterable[str] = ()) -> None:
        """Add one participant's update ``delta`` (sub-model shapes) with weight :meth:`weight` of ``n_samples`` at
        the coordinates it holds (:meth:`held`); the keys in ``skip`` (its batch-norm statistics of widths below
        full, :mod:`hasfl.fl.bn_stats`) are left out."""
        left_out = set(skip)
        alpha = self.weight(float(n_samples))
        for k in self.keys:
            if k in left_out:
                continue
            held = self.held(k, delta[k])
            if held is None:
                scatter_add_(self._sum[k], rules[k], delta[k], alpha=alpha)
                add_scalar_(self._weight[k], rules[k], alpha)
            else:
                scatter_add_(self._sum[k], rules[k], delta[k] * held, alpha=alpha)
                scatter_add_(self._weight[k], rules[k], held, alpha=alpha)

    def weight(self, n_samples: float) -> float:
        """A participant's weight in the mean: its ``n_samples`` as the server weighs it (Algorithm 1 line 18: n_i)."""
        return n_samples

    def held(self, key: str, delta: Tensor) -> Tensor | None:
        """Which coordinates of the participant's slice of ``key`` its update counts at (0 / 1, ``delta``'s shape; a
        method whose sub-model is not its slice says so), or None: every one (the slice is its m_i)."""
        return None

    def mean(self) -> dict[str, Tensor]:
        """The aggregated update Delta_bar (full shapes); uncovered coordinates are 0."""
        out = {}
        for k in self.keys:
            w = self._weight[k]
            out[k] = torch.where(w > 0, self._sum[k] / w.clamp_min(1e-30), torch.zeros_like(w))
        return out
