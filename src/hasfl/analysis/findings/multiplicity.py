"""p-values of a unit's two one-sided tests and Holm's correction within a finding
(:mod:`hasfl.analysis.findings.kernel` re-exports them; docs/decisions.md "Verdict rules that count what they test")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.stats as sps

from hasfl.analysis.findings.verdicts import CONTRADICTED, INCONCLUSIVE, fmt, num

__all__ = ["holm", "holm_step_down", "t_p", "z_p"]


def t_p(mean: float, sd: float, n: int, margin: float, above: bool) -> tuple[float, float]:
    """(p of "mean beyond margin" on the ``above`` side, p of the other side), one-sided t with n - 1 df."""
    if n < 2 or not sd > 0:
        return math.nan, math.nan
    t = (mean - margin) / (sd / math.sqrt(n))
    up, down = float(sps.t.sf(t, n - 1)), float(sps.t.cdf(t, n - 1))
    return (up, down) if above else (down, up)


def _sf(stat: float, df: float = math.inf) -> float:
    """Upper tail of the normal, or of t with ``df`` degrees of freedom when finite."""
    return float(sps.norm.sf(stat)) if not math.isfinite(df) else float(sps.t.sf(stat, df))


def z_p(z: float, se: float, edge: float, above: bool, df: float = math.inf) -> tuple[float, float]:
    """(p of "z beyond atanh(edge)" on the ``above`` side, p of the other side), one-sided z (t with ``df``
    degrees of freedom when finite: the random-effects pool)."""
    if not (math.isfinite(z) and math.isfinite(se) and se > 0):
        return math.nan, math.nan
    stat = (z - math.atanh(edge)) / se
    up, down = _sf(stat, df), _sf(-stat, df)
    return (up, down) if above else (down, up)


def holm_step_down(ps: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down test of the ascending p-values ``ps``: which it rejects at ``alpha`` and the adjusted p.

    The same arithmetic as statsmodels' ``multipletests(ps, alpha, method="holm")`` (0.15,
    ``statsmodels/stats/multitest.py``: reject while ``p_i <= alpha / (k - i)``, adjusted ``max_{j<=i} (k - j) p_j``
    capped at 1), equal to it bit for bit (``tests/test_stats_pins.py``). Not called through statsmodels because
    its Holm branch runs ``gc.collect()`` on every call: measured 0.06 s in a fresh process and 0.45 s in the test
    process (a full-heap collection), 180 s of the short test check."""
    k = ps.size
    passes = ps <= alpha / np.arange(k, 0, -1)
    reject = np.logical_and.accumulate(passes) if k else passes
    adjusted = np.minimum(np.maximum.accumulate(ps * np.arange(k, 0, -1)), 1.0)
    return reject, adjusted


def holm(units: Sequence[dict[str, Any]], alpha: float, what: str = "units") -> None:
    """Holm's step-down correction (:func:`holm_step_down`, statsmodels' ``multipletests(method="holm")``) of the
    *contradictions* among a finding's units (or a conjunction's parts, ``what = "parts"``).

    A finding (an estimand of it, a conjunction) is supported only when every unit is: an intersection-union test,
    which needs no correction, so a unit's "supported" stands at ``alpha``. It is contradicted when any unit is: a
    union of tests, so among the units in scope, ungated and with p-values, the unit of the i-th smallest
    ``p_contradicted`` keeps a "contradicted" only if Holm rejects it (that p <= alpha / (k - i) and every smaller p
    rejected); one Holm does not reject becomes inconclusive, and its reason names the step that stopped the
    procedure (which may be an earlier unit's). Records ``holm_alpha`` (the unit's step level) and ``p_holm``
    (Holm's adjusted p of its contradiction)."""
    tested = [u for u in units if u.get("in_scope", True) and not u.get("gate") and not u.get("decided_by")
              and math.isfinite(num(u.get("p_supported"))) and math.isfinite(num(u.get("p_contradicted")))]
    k = len(tested)
    if k < 2:
        return
    ranked = sorted(tested, key=lambda u: num(u["p_contradicted"]))
    ps = np.array([num(u["p_contradicted"]) for u in ranked], dtype=np.float64)
    reject, adjusted = holm_step_down(ps, alpha)
    stop = int(np.argmin(reject)) if not reject.all() else k  # the first step Holm does not reject
    for i, (u, rej, adj) in enumerate(zip(ranked, reject, adjusted, strict=True)):
        level = alpha / (k - i)
        u["holm_alpha"], u["p_holm"] = level, float(adj)
        if not rej and u["verdict"] == CONTRADICTED:
            own = "" if i == stop else f"; this unit's p = {fmt(ps[i])} at step {i + 1} (level {fmt(level)})"
            u.update(holm=False, verdict=INCONCLUSIVE,
                     reason=(f"its contradiction is not significant after Holm's step-down over {k} {what}: the "
                             f"procedure stopped at step {stop + 1} of {k} (p = {fmt(ps[stop])} > "
                             f"{fmt(alpha / (k - stop))}){own}, adjusted p = {fmt(float(adj))} (the test alone: "
                             f"{u['verdict']} -- {u['reason']})"))
