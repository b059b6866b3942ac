"""HAS-FL (Algorithm 1, Eq. 6) and this project's variants: without the coverage guarantee
(the Table 4 ablation) and with Eq. 6 fed by a capacity-separable estimate (E2 probe, E3 reported;
docs/decisions.md "Capacity-separable estimators")."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import HasflPolicy

__all__ = ["hasfl", "hasfl_nocov", "hasfl_probe", "hasfl_reported"]


def _hasfl(ctx: MethodContext, coverage: bool, estimator: str = "update") -> Method:
    h = ctx.run_cfg["hasfl"]
    return Method(HasflPolicy(ctx.pmax, h["p_min"], h["gamma"], h["epsilon"], coverage, estimator), local_sgd(ctx))


def hasfl(ctx: MethodContext) -> Method:
    """HAS-FL: Eq. 6 with the coverage guarantee (Algorithm 1)."""
    return _hasfl(ctx, coverage=True)


def hasfl_nocov(ctx: MethodContext) -> Method:
    """The Table 4 ablation: Eq. 6 verbatim, no coverage guarantee."""
    return _hasfl(ctx, coverage=False)


def hasfl_probe(ctx: MethodContext) -> Method:
    """Algorithm 1 with Eq. 6 fed by E2 (probe updates of one width), coverage guarantee on."""
    return _hasfl(ctx, coverage=True, estimator="probe")


def hasfl_reported(ctx: MethodContext) -> Method:
    """Algorithm 1 with Eq. 6 fed by E3 (TV of reported label histograms), coverage guarantee on."""
    return _hasfl(ctx, coverage=True, estimator="reported")
