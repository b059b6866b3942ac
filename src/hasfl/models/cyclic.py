"""FedEcover's cyclic sampling of units without replacement (ICDE 2025; official code ``junesnow86/FedEcover``,
``modules/servers/fedecover.py`` ``random_choose_indices``; issue 37, docs/decisions.md "FedEcover's cyclic
sampling"): which units of each sliced dimension each participant's sub-model holds.

Each sliced dimension (a conv layer's channels, the hidden units: :meth:`hasfl.models.family.ModelFamily.dims`)
keeps a pool of the units not yet drawn in its current cycle, across rounds. A participant of width p takes
``kept`` units of the pool at random; when fewer are left it takes them all, a new cycle starts with every unit,
and the rest are drawn from the new cycle's units it does not already hold (which leave the new pool; the ones
it took from the old cycle stay in it). So every unit is drawn exactly once per cycle. A participant's units are
sorted; a layer's inputs are the previous layer's kept outputs, the classifier's outputs are kept whole (the
families' slice rules). Every width draws, the full one too.

Randomness: cycle ``c`` of dimension ``d`` is one permutation from its own generator (seed, stream
:data:`STREAM_WINDOWS`, d, c); a participant takes the next units of the pool in that order, a uniform random
set of the pool as the official ``np.random.choice`` draws, without touching any other random stream. The
windows are thus a function of the seed and the trained widths of every earlier draw, in order: :func:`replay`
rebuilds them from a run's participation ledger (``window_shift`` is the draw number; Table 4c), and the pools
are checkpointed (:meth:`CyclicSampler.state`). Here, not in the engine, because the analysis replays them
(it never imports :mod:`hasfl.fl`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from hasfl.models.family import ModelFamily
from hasfl.models.slicing import Window

__all__ = ["STREAM_WINDOWS", "CyclicSampler", "cycle_order", "replay"]

#: The numpy stream of a run seed the draws come from (beside hasfl.fl.sampling's 3-7)
STREAM_WINDOWS = 8


def cycle_order(seed: int, dim: int, cycle: int, size: int) -> list[int]:
    """The order in which cycle ``cycle`` of sliced dimension ``dim`` (``size`` units) hands out its units."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), STREAM_WINDOWS, int(dim), int(cycle)]))
    return [int(u) for u in rng.permutation(int(size))]


class CyclicSampler:
    """FedEcover's per-dimension pools of undrawn units (see the module doc); ``draws`` counts the windows drawn."""

    def __init__(self, family: ModelFamily, seed: int) -> None:
        self.family, self.seed = family, int(seed)
        self.sizes = [size for size, _ in family.dims(1.0)]
        self.cycles = [-1] * len(self.sizes)  # the cycle in progress per dimension (-1: none yet)
        self.pools: list[list[int]] = [[] for _ in self.sizes]  # its undrawn units, in the order they are handed out
        self.draws = 0

    def take(self, dim: int, kept: int) -> tuple[int, ...]:
        """``kept`` distinct units of dimension ``dim`` from its pool (sorted), refilling the pool when it runs out."""
        pool, size = self.pools[dim], self.sizes[dim]
        if not 1 <= kept <= size:
            raise ValueError(f"fedecover: dimension {dim} keeps {kept} of {size} units")
        if kept <= len(pool):
            taken, self.pools[dim] = pool[:kept], pool[kept:]
        else:  # the rest of this cycle, then units of a fresh one that it does not already hold
            self.cycles[dim] += 1
            order = cycle_order(self.seed, dim, self.cycles[dim], size)
            held = set(pool)
            extra = [u for u in order if u not in held][:kept - len(pool)]
            drawn = set(extra)
            taken, self.pools[dim] = pool + extra, [u for u in order if u not in drawn]
        return tuple(sorted(taken))

    def draw(self, p: float) -> Window:
        """The window of the next participant, of trained width ``p``."""
        dims = self.family.dims(p)
        units = tuple(self.take(d, kept) for d, (_, kept) in enumerate(dims))
        window = Window("sampled", self.draws, units)
        self.draws += 1
        return window

    def windows(self, t: int, participants: Sequence[int], trained: Sequence[float]) -> list[Window]:
        """Round ``t``'s participants' windows, drawn in the order of S(t)."""
        return [self.draw(float(q)) for q in trained]

    def state(self) -> dict[str, Any]:
        return {"draws": self.draws, "cycles": list(self.cycles), "pools": [list(p) for p in self.pools]}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.draws = int(state["draws"])
        self.cycles = [int(c) for c in state["cycles"]]
        self.pools = [[int(u) for u in p] for p in state["pools"]]


def replay(family: ModelFamily, seed: int, widths: Iterable[float]) -> list[Window]:
    """The windows of a run's draws whose trained widths are ``widths`` in draw order (the ledger's sampled rows
    sorted by ``window_shift``)."""
    sampler = CyclicSampler(family, seed)
    return [sampler.draw(float(p)) for p in widths]
