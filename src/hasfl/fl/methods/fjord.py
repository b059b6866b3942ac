"""FjORD (Horvath et al., 2021; paper Section 4.1): ordered dropout with a tier drawn per round and
self-distillation from the client's pmax width into the drawn one."""

from __future__ import annotations

from hasfl.fl.client import FjordDistill
from hasfl.fl.methods import Method, MethodContext
from hasfl.fl.policies import FjordPolicy

__all__ = ["fjord"]


def fjord(ctx: MethodContext) -> Method:
    """FjORD: tiers drawn per round, the pmax width trained and distilled into the drawn one."""
    return Method(FjordPolicy(ctx.pmax, ctx.run_cfg["capacity"]["tiers"]),
                  FjordDistill(ctx.optim, ctx.inputs, ctx.family))
