"""The nine methods of the paper (Section 4.1): each is an allocation policy plus a
local optimiser. Adding a method means adding one builder to :data:`METHODS`
(and, if it needs one, a policy class or a local-training hook).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hasfl.fl.client import FedProx, FjordDistill, LocalSGD, OptimConfig, Scaffold
from hasfl.fl.policies import (
    AllocationPolicy,
    FjordPolicy,
    FullModelPolicy,
    HasflPolicy,
    RandomBudgetPolicy,
    StaticPolicy,
    UniformPolicy,
)
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


Method = tuple[AllocationPolicy, LocalSGD]


def _hasfl(ctx: MethodContext, coverage: bool) -> Method:
    h = ctx.run_cfg["hasfl"]
    return HasflPolicy(ctx.pmax, h["p_min"], h["gamma"], h["epsilon"], coverage), LocalSGD(ctx.optim, ctx.inputs)


def _random_budget(ctx: MethodContext) -> Method:
    if ctx.hasfl_avg_p is None:
        raise ValueError("random_budget needs the average p of the hasfl run of the same dataset and seed")
    policy = RandomBudgetPolicy(ctx.pmax, ctx.schedule, ctx.hasfl_avg_p, ctx.rng)
    tolerance = float(ctx.params["tolerance"])
    if abs(policy.achieved - ctx.hasfl_avg_p) > tolerance and not ctx.hasfl_diverged:
        raise ValueError(
            f"random_budget cannot reach the hasfl run's average p {ctx.hasfl_avg_p:.4f} with this schedule "
            f"(closest: {policy.achieved:.4f}); method_params.random_budget.tolerance is {tolerance}")
    return policy, LocalSGD(ctx.optim, ctx.inputs)


METHODS: dict[str, Callable[[MethodContext], Method]] = {
    "hasfl": lambda ctx: _hasfl(ctx, coverage=True),
    "hasfl_nocov": lambda ctx: _hasfl(ctx, coverage=False),
    "heterofl": lambda ctx: (StaticPolicy(ctx.pmax), LocalSGD(ctx.optim, ctx.inputs)),
    "fjord": lambda ctx: (FjordPolicy(ctx.pmax, ctx.run_cfg["capacity"]["tiers"]),
                          FjordDistill(ctx.optim, ctx.inputs, ctx.family)),
    "uniform": lambda ctx: (UniformPolicy(ctx.pmax, ctx.params["p"]), LocalSGD(ctx.optim, ctx.inputs)),
    "random_budget": _random_budget,
    "fedavg": lambda ctx: (FullModelPolicy(ctx.pmax), LocalSGD(ctx.optim, ctx.inputs)),
    "scaffold": lambda ctx: (FullModelPolicy(ctx.pmax), Scaffold(ctx.optim, ctx.inputs, ctx.params)),
    "fedprox": lambda ctx: (FullModelPolicy(ctx.pmax), FedProx(ctx.optim, ctx.inputs, ctx.params)),
}


def build_method(name: str, ctx: MethodContext) -> Method:
    """Policy and local optimiser of method ``name``."""
    if name not in METHODS:
        raise ValueError(f"unknown method '{name}'; expected one of {', '.join(METHODS)}")
    return METHODS[name](ctx)
