"""FedProx (Li et al., 2020; paper Section 4.5, Table 6): full model with a proximal term."""

from __future__ import annotations

from hasfl.fl.client import FedProx
from hasfl.fl.methods import Method, MethodContext
from hasfl.fl.policies import FullModelPolicy

__all__ = ["fedprox"]


def fedprox(ctx: MethodContext) -> Method:
    """FedProx: full model, proximal term mu (method param ``mu``)."""
    return Method(FullModelPolicy(ctx.pmax), FedProx(ctx.optim, ctx.inputs, ctx.params))
