"""FedAvg (McMahan et al., 2017; paper Section 4.5, Table 6): every client trains the full model."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import FullModelPolicy

__all__ = ["fedavg"]


def fedavg(ctx: MethodContext) -> Method:
    """FedAvg: every client trains the full model."""
    return Method(FullModelPolicy(ctx.pmax), local_sgd(ctx))
