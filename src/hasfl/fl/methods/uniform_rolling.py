"""Uniform with rolling windows (this project, issue 27): Uniform's budget, p_i = min(p, pmax_i) (p = 0.5),
with FedRolex's rolling sub-models instead of Algorithm 2's prefixes, so the units beyond the cap are
trained too. The experiment the coverage thesis of Sections 4.2-4.3 asks for: if coverage decides,
this method should not show Uniform's decay at the same widths and cost (finding F9)."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import UniformPolicy
from hasfl.models.slicing import rolling

__all__ = ["uniform_rolling"]


def uniform_rolling(ctx: MethodContext) -> Method:
    """Uniform's widths p_i = min(p, pmax_i), each sub-model's window rolling every round."""
    return Method(UniformPolicy(ctx.pmax, ctx.params["p"]), local_sgd(ctx), window=rolling)
