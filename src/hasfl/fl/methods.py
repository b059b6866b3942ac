"""The methods of the paper (Section 4.1): each is an allocation policy, a local optimiser
(the client) and a server step.

The names, and which shared config each method reads, are in the registry
(:data:`hasfl.registry.METHODS`); each entry names its builder here. Adding a method: a
builder function (in this module or any other) and one registry entry; a policy class in
:mod:`hasfl.fl.policies` if it allocates widths differently, a client hook in
:mod:`hasfl.fl.client` if it trains differently, a server class in :mod:`hasfl.fl.server`
if the server keeps state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hasfl.fl.client import FedProx, FjordDistill, LocalSGD, OptimConfig, ScaffoldClient
from hasfl.fl.policies import (
    AllocationPolicy,
    FjordPolicy,
    FullModelPolicy,
    HasflPolicy,
    RandomBudgetPolicy,
    StaticPolicy,
    UniformPolicy,
)
from hasfl.fl.server import ScaffoldServer, ServerStep
from hasfl.models.family import ModelFamily
from hasfl.registry import METHODS, resolve

__all__ = ["Method", "MethodContext", "build_method"]


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


@dataclass
class Method:
    """The three parts of a method the round loop calls."""

    policy: AllocationPolicy
    client: LocalSGD
    server: ServerStep = field(default_factory=ServerStep)


def build_method(name: str, ctx: MethodContext) -> Method:
    """Policy, client and server of method ``name`` (its builder from the registry)."""
    if name not in METHODS:
        raise ValueError(f"unknown method '{name}'; expected one of {', '.join(METHODS)}")
    return resolve(METHODS[name].build)(ctx)


def _sgd(ctx: MethodContext) -> LocalSGD:
    return LocalSGD(ctx.optim, ctx.inputs)


def _hasfl(ctx: MethodContext, coverage: bool, estimator: str = "update") -> Method:
    h = ctx.run_cfg["hasfl"]
    return Method(HasflPolicy(ctx.pmax, h["p_min"], h["gamma"], h["epsilon"], coverage, estimator), _sgd(ctx))


# --- the builders named by hasfl.registry.METHODS -------------------------------------
def hasfl(ctx: MethodContext) -> Method:
    """HAS-FL: Eq. 6 with the coverage guarantee (Algorithm 1)."""
    return _hasfl(ctx, coverage=True)


def hasfl_nocov(ctx: MethodContext) -> Method:
    """The Table 4 ablation: Eq. 6 verbatim, no coverage guarantee."""
    return _hasfl(ctx, coverage=False)


def hasfl_probe(ctx: MethodContext) -> Method:
    """Algorithm 1 with Eq. 6 fed by E2 (probe updates of one width), coverage guarantee on."""
    return _hasfl(ctx, coverage=True, estimator="probe")


def hasfl_reported(ctx: MethodContext) -> Method:
    """Algorithm 1 with Eq. 6 fed by E3 (TV of reported label histograms), coverage guarantee on."""
    return _hasfl(ctx, coverage=True, estimator="reported")


def heterofl(ctx: MethodContext) -> Method:
    """HeteroFL: every client at its pmax for the whole run."""
    return Method(StaticPolicy(ctx.pmax), _sgd(ctx))


def fjord(ctx: MethodContext) -> Method:
    """FjORD: tiers drawn per round, the pmax width trained and distilled into the drawn one."""
    return Method(FjordPolicy(ctx.pmax, ctx.run_cfg["capacity"]["tiers"]),
                  FjordDistill(ctx.optim, ctx.inputs, ctx.family))


def uniform(ctx: MethodContext) -> Method:
    """Uniform: p_i = min(p, pmax_i) (p = 0.5 in the paper)."""
    return Method(UniformPolicy(ctx.pmax, ctx.params["p"]), _sgd(ctx))


def random_budget(ctx: MethodContext) -> Method:
    """Random-budget control (Section 4.4): random widths at the hasfl run's average budget."""
    if ctx.hasfl_avg_p is None:
        raise ValueError("random_budget needs the average p of the hasfl run of the same dataset and seed")
    policy = RandomBudgetPolicy(ctx.pmax, ctx.schedule, ctx.hasfl_avg_p, ctx.rng)
    tolerance = float(ctx.params["tolerance"])
    if abs(policy.achieved - ctx.hasfl_avg_p) > tolerance and not ctx.hasfl_diverged:
        raise ValueError(
            f"random_budget cannot reach the hasfl run's average p {ctx.hasfl_avg_p:.4f} with this schedule "
            f"(closest: {policy.achieved:.4f}); method_params.random_budget.tolerance is {tolerance}")
    return Method(policy, _sgd(ctx))


def fedavg(ctx: MethodContext) -> Method:
    """FedAvg: every client trains the full model."""
    return Method(FullModelPolicy(ctx.pmax), _sgd(ctx))


def scaffold(ctx: MethodContext) -> Method:
    """SCAFFOLD: full model, control variates owned by the server."""
    server = ScaffoldServer(len(ctx.pmax), float(ctx.params.get("global_lr", 1.0)),
                            str(ctx.params.get("weighting", "participants")))
    return Method(FullModelPolicy(ctx.pmax), ScaffoldClient(ctx.optim, ctx.inputs, server, ctx.params), server)


def fedprox(ctx: MethodContext) -> Method:
    """FedProx: full model, proximal term mu (method param ``mu``)."""
    return Method(FullModelPolicy(ctx.pmax), FedProx(ctx.optim, ctx.inputs, ctx.params))
