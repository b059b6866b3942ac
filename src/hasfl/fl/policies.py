"""Width-allocation policies: one small class per method (paper Sections 3.3, 4.1).

A policy decides the width of each participant in each round -- nothing else. The
engine calls :meth:`AllocationPolicy.widths` every round (the allocation p_i(t)),
:meth:`AllocationPolicy.trained_widths` for the width of the module each participant
then trains and uploads (the allocation itself, except for FjORD), and
:meth:`AllocationPolicy.adapt` at the adaptation rounds of Algorithm 1 (line 20) with
the current smoothed estimates H_tilde (only HAS-FL acts on them).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence

import numpy as np


class AllocationPolicy(ABC):
    """Allocation interface; ``p`` holds the current allocation of all N clients.

    ``estimator`` names the estimate :meth:`adapt` receives (one of
    :data:`hasfl.fl.estimator.ESTIMATORS`; Algorithm 1: ``update``, Eqs. 4-5).
    """

    estimator = "update"

    def __init__(self, pmax: np.ndarray) -> None:
        self.pmax = np.asarray(pmax, dtype=np.float64)
        self.p = self.initial()

    def initial(self) -> np.ndarray:
        """p(0); Algorithm 1 line 3: pmax."""
        return self.pmax.copy()

    def widths(self, t: int, participants: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Widths of this round's participants (default: the current allocation)."""
        return self.p[participants].copy()

    def trained_widths(self, participants: np.ndarray, widths: np.ndarray) -> np.ndarray:
        """Width of the module each participant trains and uploads (default: its allocation)."""
        return widths

    def adapt(self, h_tilde: np.ndarray) -> None:  # noqa: B027 - optional hook
        """React to new estimates at an adaptation round (default: ignore them)."""


class StaticPolicy(AllocationPolicy):
    """HeteroFL: p_i = pmax_i for the whole run."""


class FullModelPolicy(AllocationPolicy):
    """FedAvg / SCAFFOLD / FedProx: every client trains the full model (pmax ignored)."""

    def initial(self) -> np.ndarray:
        return np.ones_like(self.pmax)


class UniformPolicy(AllocationPolicy):
    """Uniform: p_i = min(p_u, pmax_i) with p_u = 0.5 in the paper."""

    def __init__(self, pmax: np.ndarray, p_uniform: float) -> None:
        self.p_uniform = float(p_uniform)
        super().__init__(pmax)

    def initial(self) -> np.ndarray:
        return np.minimum(self.p_uniform, self.pmax)


def coverage_guarantee(p: np.ndarray, pmax: np.ndarray) -> np.ndarray:
    """Algorithm 1 line 29: clients with the federation's largest pmax get their full pmax."""
    out = p.copy()
    top = pmax == pmax.max()
    out[top] = pmax[top]
    return out


class HasflPolicy(AllocationPolicy):
    """HAS-FL, Definition 2 (Eq. 6) plus the coverage guarantee (optional: the Table 4 ablation).

    p_i = min(pmax_i, p_min + gamma * H_tilde_i / (H_bar + eps)), H_bar = mean over all N.
    ``estimator`` feeds Eq. 6 with another estimate than Eqs. 4-5 (``probe``: E2, ``reported``: E3).
    """

    def __init__(self, pmax: np.ndarray, p_min: float, gamma: float, epsilon: float, coverage: bool,
                 estimator: str = "update") -> None:
        self.p_min, self.gamma, self.epsilon, self.coverage = float(p_min), float(gamma), float(epsilon), coverage
        self.estimator = estimator
        super().__init__(pmax)

    def allocation(self, h_tilde: np.ndarray) -> np.ndarray:
        """Eq. 6 (and line 29 when coverage is on) for estimates ``h_tilde`` of all clients."""
        h_bar = float(np.mean(h_tilde))
        p = np.minimum(self.pmax, self.p_min + self.gamma * np.asarray(h_tilde) / (h_bar + self.epsilon))
        return coverage_guarantee(p, self.pmax) if self.coverage else p

    def adapt(self, h_tilde: np.ndarray) -> None:
        self.p = self.allocation(h_tilde)


class FjordPolicy(AllocationPolicy):
    """FjORD: each round each participant draws p uniformly from the tiers <= its pmax, and
    trains (and uploads) its pmax-width module, distilling it into the width-p one
    (:class:`hasfl.fl.client.FjordDistill`). The reported allocation is the drawn p."""

    def __init__(self, pmax: np.ndarray, tiers: Sequence[float]) -> None:
        self.tiers = np.asarray(sorted(tiers), dtype=np.float64)
        super().__init__(pmax)

    def widths(self, t: int, participants: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.empty(len(participants))
        for j, i in enumerate(participants):
            allowed = self.tiers[self.tiers <= self.pmax[i] + 1e-12]
            out[j] = allowed[rng.integers(len(allowed))]
        self.p[participants] = out
        return out

    def trained_widths(self, participants: np.ndarray, widths: np.ndarray) -> np.ndarray:
        return self.pmax[participants]


class RandomBudgetPolicy(AllocationPolicy):
    """Random-budget control (Section 4.4): random time-varying widths at HAS-FL's budget.

    For every round and participant a draw u ~ U(0, 1) is made up front; the width is
    ``clip(s * u, p_floor, pmax_i)``, with the coverage guarantee for the clients of
    the largest pmax. The scale s is found by bisection so that the run's average
    allocated p (mean over rounds of the participants' mean p) equals ``target``.
    """

    P_FLOOR = 0.05

    def __init__(self, pmax: np.ndarray, schedule: Sequence[np.ndarray], target: float,
                 rng: np.random.Generator) -> None:
        super().__init__(pmax)
        self.schedule = [np.asarray(s) for s in schedule]
        self.draws = [rng.random(len(s)) for s in self.schedule]
        self.scale = self._solve(float(target))
        self.achieved = self._average(self.scale)

    def _round_widths(self, t: int, scale: float) -> np.ndarray:
        part = self.schedule[t]
        p = np.clip(scale * self.draws[t], self.P_FLOOR, self.pmax[part])
        top = self.pmax[part] == self.pmax.max()
        p[top] = self.pmax[part][top]
        return p

    def _average(self, scale: float) -> float:
        return float(np.mean([self._round_widths(t, scale).mean() for t in range(len(self.schedule))]))

    def _solve(self, target: float) -> float:
        lo, hi = 0.0, 2.0 / max(1e-9, self.P_FLOOR)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if self._average(mid) < target:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    def widths(self, t: int, participants: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if not np.array_equal(participants, self.schedule[t]):
            raise RuntimeError(f"round {t}: participants differ from the schedule the budget was solved for")
        out = self._round_widths(t, self.scale)
        self.p[participants] = out
        return out
