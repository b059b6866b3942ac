"""The nine methods of the paper (Section 4.1): each is an allocation policy plus a
local optimiser.

Adding a method means adding one entry to :data:`METHODS` in this file (plus, if it
needs one, a policy class in :mod:`hasfl.fl.policies` or a local-training hook in
:mod:`hasfl.fl.client`). The config schema, ``hasfl train --method``, the Snakemake
wildcards and the per-job config slice (:func:`hasfl.config.run_config`) all read the
method names and flags from here. This module imports no torch, so that validating a
config (the Snakefile, ``hasfl config``) stays fast; the local optimisers are imported
when a method is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from hasfl.fl.policies import (
    AllocationPolicy,
    FjordPolicy,
    FullModelPolicy,
    HasflPolicy,
    RandomBudgetPolicy,
    StaticPolicy,
    UniformPolicy,
)

if TYPE_CHECKING:
    from hasfl.fl.client import LocalSGD, OptimConfig
    from hasfl.models.family import ModelFamily


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
        return dict(self.run_cfg["method_params"])


Method = tuple[AllocationPolicy, "LocalSGD"]


@dataclass(frozen=True)
class MethodSpec:
    """One method: its builder and which shared config it reads.

    ``allocation_rule``: the method allocates by Eq. 6 and so reads ``hasfl.p_min`` and
    ``hasfl.gamma``; other methods' jobs do not depend on (and are not rerun for) them.
    """

    build: Callable[[MethodContext], Method]
    allocation_rule: bool = False


def _client() -> ModuleType:
    """The local optimisers (imports torch): loaded when a method is built, not with this module."""
    from hasfl.fl import client

    return client


def _sgd(ctx: MethodContext) -> LocalSGD:
    return _client().LocalSGD(ctx.optim, ctx.inputs)


def _hasfl(ctx: MethodContext, coverage: bool) -> Method:
    h = ctx.run_cfg["hasfl"]
    return HasflPolicy(ctx.pmax, h["p_min"], h["gamma"], h["epsilon"], coverage), _sgd(ctx)


def _random_budget(ctx: MethodContext) -> Method:
    if ctx.hasfl_avg_p is None:
        raise ValueError("random_budget needs the average p of the hasfl run of the same dataset and seed")
    policy = RandomBudgetPolicy(ctx.pmax, ctx.schedule, ctx.hasfl_avg_p, ctx.rng)
    tolerance = float(ctx.params["tolerance"])
    if abs(policy.achieved - ctx.hasfl_avg_p) > tolerance and not ctx.hasfl_diverged:
        raise ValueError(
            f"random_budget cannot reach the hasfl run's average p {ctx.hasfl_avg_p:.4f} with this schedule "
            f"(closest: {policy.achieved:.4f}); method_params.random_budget.tolerance is {tolerance}")
    return policy, _sgd(ctx)


METHODS: dict[str, MethodSpec] = {
    "hasfl": MethodSpec(lambda ctx: _hasfl(ctx, coverage=True), allocation_rule=True),
    "hasfl_nocov": MethodSpec(lambda ctx: _hasfl(ctx, coverage=False), allocation_rule=True),
    "heterofl": MethodSpec(lambda ctx: (StaticPolicy(ctx.pmax), _sgd(ctx))),
    "fjord": MethodSpec(lambda ctx: (FjordPolicy(ctx.pmax, ctx.run_cfg["capacity"]["tiers"]),
                                     _client().FjordDistill(ctx.optim, ctx.inputs, ctx.family))),
    "uniform": MethodSpec(lambda ctx: (UniformPolicy(ctx.pmax, ctx.params["p"]), _sgd(ctx))),
    "random_budget": MethodSpec(_random_budget),
    "fedavg": MethodSpec(lambda ctx: (FullModelPolicy(ctx.pmax), _sgd(ctx))),
    "scaffold": MethodSpec(lambda ctx: (FullModelPolicy(ctx.pmax),
                                        _client().Scaffold(ctx.optim, ctx.inputs, ctx.params))),
    "fedprox": MethodSpec(lambda ctx: (FullModelPolicy(ctx.pmax),
                                       _client().FedProx(ctx.optim, ctx.inputs, ctx.params))),
}


def build_method(name: str, ctx: MethodContext) -> Method:
    """Policy and local optimiser of method ``name``."""
    if name not in METHODS:
        raise ValueError(f"unknown method '{name}'; expected one of {', '.join(METHODS)}")
    return METHODS[name].build(ctx)
