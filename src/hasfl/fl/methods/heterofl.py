"""HeteroFL (Diao et al., 2021; paper Section 4.1): every client at its capacity pmax for the whole run."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import StaticPolicy

__all__ = ["heterofl"]


def heterofl(ctx: MethodContext) -> Method:
    """HeteroFL: every client at its pmax for the whole run."""
    return Method(StaticPolicy(ctx.pmax), local_sgd(ctx))
