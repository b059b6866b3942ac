"""SCAFFOLD (Karimireddy et al., 2020; paper Section 4.5, Table 6): full model with control variates."""

from __future__ import annotations

from hasfl.fl.client import ScaffoldClient
from hasfl.fl.methods import Method, MethodContext
from hasfl.fl.policies import FullModelPolicy
from hasfl.fl.server import ScaffoldServer

__all__ = ["scaffold"]


def scaffold(ctx: MethodContext) -> Method:
    """SCAFFOLD: full model, control variates owned by the server."""
    server = ScaffoldServer(len(ctx.pmax), float(ctx.params.get("global_lr", 1.0)),
                            str(ctx.params.get("weighting", "participants")))
    return Method(FullModelPolicy(ctx.pmax), ScaffoldClient(ctx.optim, ctx.inputs, server, ctx.params), server)
