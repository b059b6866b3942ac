"""FedEcover (ICDE 2025; official code ``junesnow86/FedEcover``): Uniform's budget, p_i = min(p, pmax_i)
(p = 0.5, as uniform_rolling), with every participant's units drawn by cyclic sampling without replacement
(:mod:`hasfl.models.cyclic`; issue 37, docs/decisions.md "FedEcover's cyclic sampling"). Participants draw in the
order of S(t); the probe (E2, a diagnostic here) holds the round's common window, the leading units."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import UniformPolicy
from hasfl.models.cyclic import CyclicSampler
from hasfl.models.slicing import Window

__all__ = ["fedecover", "sampled_round"]


def sampled_round(t: int) -> Window:
    """The round's common window (the probe's, :class:`Window`): a sampled window without units, the leading ones."""
    return Window("sampled", int(t))


def fedecover(ctx: MethodContext) -> Method:
    """Uniform's widths p_i = min(p, pmax_i), each participant's units drawn cyclically without replacement."""
    return Method(UniformPolicy(ctx.pmax, ctx.params["p"]), local_sgd(ctx), window=sampled_round,
                  sampler=CyclicSampler(ctx.family, int(ctx.run_cfg["seed"])))
