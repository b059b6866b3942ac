"""FedRolex (Alam et al., NeurIPS 2022; official code ``AIoT-MLSys-Lab/FedRolex``): HeteroFL's static
widths with rolling sub-models -- in round t a width-p client holds the ceil(p C) consecutive units
of each layer starting at an offset that moves by one unit a round (:func:`hasfl.models.slicing.rolling`),
so every unit is trained within C rounds at any width (docs/decisions.md "FedRolex's rolling windows")."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import StaticPolicy
from hasfl.models.slicing import rolling

__all__ = ["fedrolex"]


def fedrolex(ctx: MethodContext) -> Method:
    """FedRolex: every client at its pmax for the whole run, its window rolling every round."""
    return Method(StaticPolicy(ctx.pmax), local_sgd(ctx), window=rolling)
