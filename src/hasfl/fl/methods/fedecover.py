"""FedEcover (ICDE 2025; official code ``junesnow86/FedEcover``): Uniform's budget, p_i = min(p, pmax_i)
(p = 0.5, as uniform_rolling), with every participant's units drawn by cyclic sampling without replacement
(:mod:`hasfl.models.cyclic`; issue 37, docs/decisions.md "FedEcover's cyclic sampling"). Participants draw in the
order of S(t); the probe (E2, a diagnostic here) holds the round's common window, the leading units.

``method_params.fedecover.weighting`` (issue 48): ``samples`` (the default, the shared protocol's n_i, Algorithm 1
line 18, as every extraction F9 compares) or ``participants``, the official server's per-coordinate mean over the
clients holding a coordinate with equal weights (``modules/servers/base.py:161-162``, ``main.py:516-523`` at
b23b572). With ``p: 1.0`` and ``participants`` each client trains at its own capacity, full-capacity clients the
whole model: FedEcover as its authors compare it (``modules/servers/fedecover.py:146``;
``presets/medium-coverage-fedecover-official.yaml``)."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import UniformPolicy
from hasfl.fl.server import ServerStep
from hasfl.models.cyclic import CyclicSampler
from hasfl.models.slicing import Window

__all__ = ["WEIGHTINGS", "CountWeighted", "fedecover", "sampled_round"]

#: The server means ``method_params.fedecover.weighting`` names.
WEIGHTINGS = ("samples", "participants")


class CountWeighted(ServerStep):
    """The official FedEcover server's mean: every participant holding a coordinate weighs 1 there."""

    def client_weight(self, n_samples: int) -> float:
        return 1.0


def sampled_round(t: int) -> Window:
    """The round's common window (the probe's, :class:`Window`): a sampled window without units, the leading ones."""
    return Window("sampled", int(t))


def fedecover(ctx: MethodContext) -> Method:
    """Uniform's widths p_i = min(p, pmax_i), each participant's units drawn cyclically without replacement, the
    updates averaged per coordinate by ``weighting``."""
    weighting = str(ctx.params.get("weighting", "samples"))
    if weighting not in WEIGHTINGS:
        raise ValueError(f"method_params.fedecover.weighting is {weighting!r}; expected one of {', '.join(WEIGHTINGS)}")
    return Method(UniformPolicy(ctx.pmax, ctx.params["p"]), local_sgd(ctx), window=sampled_round,
                  sampler=CyclicSampler(ctx.family, int(ctx.run_cfg["seed"])),
                  server=CountWeighted() if weighting == "participants" else ServerStep())
