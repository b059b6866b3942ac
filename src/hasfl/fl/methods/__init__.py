"""The methods of the paper (Section 4.1): each is an allocation policy, a local optimiser
(the client), a server step and a window schedule (which units of each layer a sub-model holds
in round t: the leading ones, Algorithm 2, for every nested method; FedRolex's rolling window; or, with
a sampler, each participant's own units: FedEcover's cyclic sampling).

The names, and which shared config each method reads, are in the registry
(:data:`hasfl.registry.METHODS`); each entry names its builder, a function
``MethodContext -> Method`` in its own module of this package. Adding a method: one module here
(its builder, and its policy / client / server classes if it allocates, trains or aggregates
differently from the shared ones in :mod:`hasfl.fl.policies`, :mod:`hasfl.fl.client`,
:mod:`hasfl.fl.server`) and one registry entry. A run's training-code identity covers the engine
and its own method's module only (:func:`hasfl.integrity.training_code_digest`), so adding or
editing a method retrains no other method's runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hasfl.fl.client import LocalSGD, OptimConfig
from hasfl.fl.policies import AllocationPolicy
from hasfl.fl.server import ServerStep
from hasfl.models.family import ModelFamily
from hasfl.models.slicing import Window, nested
from hasfl.registry import METHODS, resolve

__all__ = ["Method", "MethodContext", "WindowSampler", "build_method", "local_sgd"]


@dataclass(frozen=True)
class MethodContext:
    """Everything a method builder may use."""

    pmax: np.ndarray
    run_cfg: Mapping[str, Any]
    schedule: Sequence[np.ndarray]
    rng: np.random.Generator
    family: ModelFamily
    optim: OptimConfig
    inputs: Any
    hasfl_avg_p: float | None = None
    hasfl_diverged: bool = False  # a diverged hasfl run's budget is matched as closely as possible

    @property
    def params(self) -> dict[str, Any]:
        """The method's own block ``method_params.<method>``."""
        return dict(self.run_cfg["method_params"])


class WindowSampler(Protocol):
    """Draws each participant's own window (a method whose clients of one round hold different units)."""

    def windows(self, t: int, participants: Sequence[int], trained: Sequence[float]) -> list[Window]:
        """The windows of round ``t``'s ``participants`` (in order) at their trained widths."""
        ...

    def state(self) -> dict[str, Any]:
        """What the later draws depend on (checkpointed)."""
        ...

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state`."""
        ...


@dataclass
class Method:
    """The parts of a method the round loop calls. ``window(t)`` says which units of each layer a
    width-p sub-model holds in round t (:class:`hasfl.models.slicing.Window`); slicing, aggregation,
    the estimator's coordinates, the probe and the BN statistics all follow from it. A method with a
    ``sampler`` gives each participant its own window (:meth:`windows`); ``window(t)`` is then the
    round's common one (the probe's)."""

    policy: AllocationPolicy
    client: LocalSGD
    server: ServerStep = field(default_factory=ServerStep)
    window: Callable[[int], Window] = nested
    sampler: WindowSampler | None = None

    def nested_in(self, rounds: int) -> bool:
        """Whether every sub-model of a run of ``rounds`` rounds is a nested prefix (Algorithm 2)."""
        return self.sampler is None and all(self.window(t).nested for t in range(rounds))

    def windows(self, t: int, participants: Sequence[int], trained: Sequence[float]) -> list[Window]:
        """Each participant's window in round ``t`` (trained widths ``trained``): the round's window for all of
        them, unless the method samples per participant."""
        if self.sampler is None:
            return [self.window(t)] * len(participants)
        return self.sampler.windows(t, participants, trained)

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint entries of the method's window schedule: none without a sampler."""
        return {} if self.sampler is None else {"window_sampler": self.sampler.state()}

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Resume the window schedule from a checkpoint of :meth:`checkpoint`'s entries."""
        if self.sampler is not None:
            self.sampler.load_state(saved["window_sampler"])


def build_method(name: str, ctx: MethodContext) -> Method:
    """Policy, client and server of method ``name`` (its builder from the registry)."""
    if name not in METHODS:
        raise ValueError(f"unknown method '{name}'; expected one of {', '.join(METHODS)}")
    return resolve(METHODS[name].build)(ctx)


def local_sgd(ctx: MethodContext) -> LocalSGD:
    """The plain local optimiser (Algorithm 1, ClientUpdate) most methods use."""
    return LocalSGD(ctx.optim, ctx.inputs)
