"""Pooled correlations as a finding's unit (F1a, F1c, F1d, F6, F7): the runs' correlations pooled over the seeds in
Fisher's z with random effects (:func:`hasfl.analysis.stats.fisher_pool_hksj`, Hartung-Knapp's interval on t with
seeds - 1 df; the fixed effect beside it), and the directional, "not positive" and equivalence tests on the pool."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.findings.kernel import (
    INCONCLUSIVE,
    SUPPORTED,
    CONTRADICTED,
    Settings,
    _sf,
    directional,
    equivalence,
    fmt,
    num,
    z_p,
)
from hasfl.analysis.stats import fisher_pool, fisher_pool_hksj, z_equivalence_margin, z_mde

__all__ = ["corr_coupled_unit", "corr_directional_unit", "corr_equivalence_unit", "corr_not_positive_unit",
           "corr_unit"]


def corr_unit(name: str, rows: pd.DataFrame, column: str, n_controls: int, st: Settings,
              size: str = "n_clients") -> dict[str, Any]:
    """The pooled correlation of ``column`` over the runs ``rows`` (without a verdict; ``_se`` / ``_df``: the
    pooled se and its t reference's degrees of freedom, infinite for the normal).

    Random effects over the seeds (:func:`hasfl.analysis.stats.fisher_pool_hksj`: Paule-Mandel's tau^2,
    Hartung-Knapp's interval with t on runs - 1 df), so the seed-to-seed variance is in the interval; the fixed
    effect is kept beside it (``fixed_effect``). ``size``: the column of each run's number of observations the
    Fisher weights count (F1d: the clients free to move)."""
    rs = rows[column].to_numpy(dtype=np.float64) if len(rows) else np.array([])
    ns = pd.to_numeric(rows[size], errors="coerce").to_numpy(dtype=np.float64) if len(rows) else np.array([])
    fixed = fisher_pool(rs, ns, n_controls)
    pool = fisher_pool_hksj(rs, ns, n_controls)
    if math.isfinite(pool.df):
        pooling = (f"random effects over {pool.n_runs} seeds (tau^2 = {fmt(pool.tau2)}, {pool.se_rule}, t on "
                   f"{pool.df:g} df); fixed effect {fmt(fixed.r)} {_bracket(fixed.interval(st.one_sided_level))}")
    else:
        pooling = "one run: its clients' interval (no seed-to-seed variance)"
    low, high = pool.interval(st.one_sided_level)
    two_low, two_high = pool.interval(st.two_sided_level)
    f_low, f_high = fixed.interval(st.one_sided_level)
    return {"unit": name, "n": pool.n_runs, "n_clients": pool.n_obs, "estimate": pool.r, "z": pool.z, "se_z": pool.se,
            "low": low, "high": high, "interval_level": st.one_sided_level, "two_sided_low": two_low,
            "two_sided_high": two_high, "two_sided_level": st.two_sided_level, "heterogeneity_q": pool.q,
            "heterogeneity_p": pool.q_p, "tau2": pool.tau2, "pooling": pooling, "se_rule": pool.se_rule,
            "fixed_effect": {"estimate": fixed.r, "low": f_low, "high": f_high, "se_z": fixed.se},
            "values": {str(int(s)): num(v) for s, v in zip(rows["seed"], rs, strict=True)} if len(rows) else {},
            "_se": pool.se, "_df": pool.df}


def _bracket(interval: tuple[float, float]) -> str:
    return f"[{fmt(interval[0])}, {fmt(interval[1])}]"


def corr_directional_unit(name: str, rows: pd.DataFrame, column: str, n_controls: int, margin: float,
                          above: bool, st: Settings) -> dict[str, Any]:
    """One-sided z test of the pooled correlation beyond ``margin`` (F1a, F6)."""
    unit = corr_unit(name, rows, column, n_controls, st)
    se, df = unit.pop("_se"), unit.pop("_df")
    shift = z_mde(se, st.alpha, st.power, df=df)
    edge = math.atanh(margin)
    unit["margin"], unit["decision"] = margin, "directional"
    unit["p_supported"], unit["p_contradicted"] = z_p(unit["z"], se, margin, above, df)
    unit["mde"] = math.tanh(edge + shift) if above else math.tanh(edge - shift)
    if unit["n"] == 0:
        unit.update(verdict=INCONCLUSIVE, reason="no run with a defined correlation")
        return unit
    v, why = directional(unit["low"], unit["high"], margin, above)
    side = ">=" if above else "<="
    unit.update(verdict=v, reason=f"{why} (pooled over {unit['n']} run(s), {unit['n_clients']} clients; "
                                  f"{st.power:.0%} power needs a true r {side} {fmt(unit['mde'])})")
    return unit


def corr_not_positive_unit(name: str, rows: pd.DataFrame, column: str, margin: float, st: Settings) -> dict[str, Any]:
    """F1c: supported when the upper bound < margin; contradicted when the lower bound > 0."""
    unit = corr_unit(name, rows, column, 1, st)
    se, df = unit.pop("_se"), unit.pop("_df")
    unit["margin"] = margin
    unit["p_supported"] = z_p(unit["z"], se, margin, False, df)[0]
    unit["p_contradicted"] = z_p(unit["z"], se, 0.0, True, df)[0]
    unit["mde"] = math.tanh(math.atanh(margin) - z_mde(se, st.alpha, st.power, df=df))
    if unit["n"] == 0:
        unit.update(verdict=INCONCLUSIVE, reason="no run with a defined partial correlation")
        return unit
    low, high = unit["low"], unit["high"]
    if low > 0.0:
        v, why = CONTRADICTED, f"lower bound {fmt(low)} > 0: a consistent positive data signal remains"
    elif high < margin:
        v, why = SUPPORTED, f"upper bound {fmt(high)} < margin {fmt(margin)}"
    else:
        v, why = INCONCLUSIVE, f"interval [{fmt(low)}, {fmt(high)}] contains the margin {fmt(margin)} and 0"
    unit.update(verdict=v, reason=f"{why} (pooled over {unit['n']} run(s), {unit['n_clients']} clients; "
                                  f"{st.power:.0%} power needs a true r <= {fmt(unit['mde'])})")
    return unit


def corr_equivalence_unit(name: str, rows: pd.DataFrame, column: str, margin: float, st: Settings,
                          size: str = "n_clients") -> dict[str, Any]:
    """F1d: TOST of the pooled partial correlation at +-margin; contradicted when the two-sided interval excludes 0.
    Pooled with random effects over the seeds (:func:`corr_unit`); ``size`` as :func:`corr_unit`."""
    unit = corr_unit(name, rows, column, 1, st, size=size)
    se, df = unit.pop("_se"), unit.pop("_df")
    unit["margin"], unit["decision"] = margin, "tost"
    unit["p_supported"] = max(z_p(unit["z"], se, -margin, True, df)[0], z_p(unit["z"], se, margin, False, df)[0])
    unit["p_contradicted"] = (2.0 * float(_sf(abs(unit["z"]) / se, df))
                              if math.isfinite(se) and se > 0 and math.isfinite(unit["z"]) else math.nan)
    unit["mde"] = math.tanh(z_mde(se, st.alpha, st.power, two_sided=True, df=df)) if math.isfinite(se) else math.nan
    unit["min_equivalence_margin"] = math.tanh(z_equivalence_margin(se, st.alpha, st.power, df)) \
        if math.isfinite(se) else math.nan
    if unit["n"] == 0:
        unit.update(verdict=INCONCLUSIVE, reason="no run with a defined partial correlation and a positive Fisher "
                                                 f"weight ({size} - 4 > 0)")
        return unit
    v, why = equivalence(unit["low"], unit["high"], unit["two_sided_low"], unit["two_sided_high"], margin)
    counted = "clients free to move" if size == "n_free" else "clients"
    unit.update(verdict=v, reason=(f"{why} ({unit['pooling']}; pooled over {unit['n']} run(s), {unit['n_clients']} "
                                   f"{counted}; minimum "
                                   f"detectable |r| at {st.power:.0%} power: {fmt(unit['mde'])}; smallest margin a "
                                   f"TOST reaches at that power if r = 0: {fmt(unit['min_equivalence_margin'])})"))
    return unit


def corr_coupled_unit(name: str, rows: pd.DataFrame, column: str, margin: float, st: Settings) -> dict[str, Any]:
    """F10a, the dual of :func:`corr_equivalence_unit`: the claim is a coupling (the pooled correlation is not 0).
    Supported when the two-sided interval excludes 0 (a coupling of either sign, however small, is one); contradicted
    when it does not and the TOST interval (1 - 2 alpha) lies inside +-``margin`` (shown uncoupled to within the
    margin); inconclusive otherwise. Pooled with random effects over the seeds (:func:`corr_unit`)."""
    unit = corr_unit(name, rows, column, 0, st)
    se, df = unit.pop("_se"), unit.pop("_df")
    unit["margin"], unit["decision"] = margin, "coupling"
    unit["p_supported"] = (2.0 * float(_sf(abs(unit["z"]) / se, df))
                           if math.isfinite(se) and se > 0 and math.isfinite(unit["z"]) else math.nan)
    unit["p_contradicted"] = max(z_p(unit["z"], se, -margin, True, df)[0], z_p(unit["z"], se, margin, False, df)[0])
    unit["mde"] = math.tanh(z_mde(se, st.alpha, st.power, two_sided=True, df=df)) if math.isfinite(se) else math.nan
    if unit["n"] == 0:
        unit.update(verdict=INCONCLUSIVE, reason="no run with a defined correlation")
        return unit
    low, high, two_low, two_high = unit["low"], unit["high"], unit["two_sided_low"], unit["two_sided_high"]
    if not all(math.isfinite(v) for v in (low, high, two_low, two_high)):
        v, why = INCONCLUSIVE, "interval undefined"
    elif two_low > 0.0 or two_high < 0.0:
        v, why = SUPPORTED, f"the two-sided interval [{fmt(two_low)}, {fmt(two_high)}] excludes 0: coupled"
    elif -margin < low and high < margin:
        v, why = CONTRADICTED, (f"the two-sided interval covers 0 and the TOST interval [{fmt(low)}, {fmt(high)}] "
                                f"lies inside +-{fmt(margin)}: shown uncoupled to within the margin")
    else:
        v, why = INCONCLUSIVE, (f"the two-sided interval [{fmt(two_low)}, {fmt(two_high)}] covers 0 and the TOST "
                                f"interval [{fmt(low)}, {fmt(high)}] is not inside +-{fmt(margin)}")
    unit.update(verdict=v, reason=(f"{why} ({unit['pooling']}; pooled over {unit['n']} run(s), {unit['n_clients']} "
                                   f"clients; minimum detectable |r| at {st.power:.0%} power: {fmt(unit['mde'])})"))
    return unit
