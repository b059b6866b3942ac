"""Uniform allocation (paper Section 4.1): one width p for every client, capped at its capacity."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import UniformPolicy

__all__ = ["uniform"]


def uniform(ctx: MethodContext) -> Method:
    """Uniform: p_i = min(p, pmax_i) (p = 0.5 in the paper)."""
    return Method(UniformPolicy(ctx.pmax, ctx.params["p"]), local_sgd(ctx))
