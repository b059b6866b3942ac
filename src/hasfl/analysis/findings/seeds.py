"""Seeds needed: for each inconclusive unit, how many seeds would give the test the configured power
at the spread observed, and what the extra seeds cost: an "inconclusive" becomes a plan.

The observed effect and spread are taken as the true ones (a planning number, not a promise):

* a one-sided t test on seed values (F1b, F2a, F2b, F2c, F3-shakespeare's parts, F4): the smallest n
  whose minimum detectable distance :func:`hasfl.analysis.stats.t_mde` at the observed sd reaches the
  observed distance from the margin;
* a TOST with a difference test (F3, F8): the smaller of the n at which the TOST reaches the margin
  (:func:`~hasfl.analysis.stats.t_equivalence_margin` plus the observed |difference|) and the n at which
  the two-sided test detects the observed difference;
* a pooled correlation (F1a, F1c, F1d, F6, F7): runs of the same size, the pooled se shrinking as
  ``1 / sqrt(n w)`` (``w`` the mean Fisher weight per run); the n at which the one-sided bound clears the
  decision boundary (the margin, or 0) farthest from the estimate on its side.

Priced only where more seeds could decide it: an inconclusive unit in the claim's scope, not
gated by its runs (a run that failed to train at this budget, a blind positive
control: more seeds do not lift those; a unit gated only for too few seeds is priced), and at the level
its decision asks of it (:func:`unit_level`): alpha where the unit leans towards support (an
intersection-union test), Holm's alpha / k over its estimand's k in-scope units where it leans towards a
contradiction (alpha / k over a conjunction's k parts for each part). The cost is the pre-flight's job-hours per seed of the finding's
methods on the unit's dataset (:func:`hasfl.dag.preflight.estimate` on the reference machine's rates, so it
is the same on every machine).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import scipy.stats as sps

from hasfl.analysis.findings.kernel import INCONCLUSIVE, SEEDS_GATE, Settings, num
from hasfl.analysis.stats import t_equivalence_margin, t_mde

__all__ = ["MAX_SEEDS", "annotate", "holm_settings", "priced", "seeds_needed", "unit_level"]

#: Beyond this many seeds the answer is "more than MAX_SEEDS" (None).
MAX_SEEDS = 100


def _first_n(ok: Any, start: int) -> int | None:
    for n in range(max(2, start), MAX_SEEDS + 1):
        if ok(n):
            return n
    return None


def _t_needed(unit: Mapping[str, Any], st: Settings) -> int | None:
    sd, est, margin = num(unit.get("sd")), num(unit.get("estimate")), num(unit.get("margin"))
    if not (math.isfinite(sd) and sd > 0 and math.isfinite(est) and math.isfinite(margin)):
        return None
    if "min_equivalence_margin" in unit:  # TOST + difference test
        equiv = (_first_n(lambda n: t_equivalence_margin(n, sd, st.alpha, st.power) + abs(est) <= margin, 2)
                 if abs(est) < margin else None)
        diff = _first_n(lambda n: t_mde(n, sd, st.alpha, st.power, two_sided=True) <= abs(est), 2) if est else None
        found = [n for n in (equiv, diff) if n is not None]
        return min(found) if found else None
    distance = abs(est - margin)
    return _first_n(lambda n: t_mde(n, sd, st.alpha, st.power) <= distance, 2) if distance > 0 else None


def _corr_needed(unit: Mapping[str, Any], st: Settings) -> int | None:
    se, n_runs, est = num(unit.get("se_z")), int(unit.get("n") or 0), num(unit.get("estimate"))
    margin = num(unit.get("margin"))
    if not (math.isfinite(se) and se > 0 and n_runs and math.isfinite(est) and math.isfinite(margin)):
        return None
    w = 1.0 / (se * se * n_runs)  # weight of one run (its sampling variance, and tau^2 under random effects)
    z = math.atanh(max(-1 + 1e-12, min(1 - 1e-12, est)))
    t_ref = "tau2" in unit  # random effects over the seeds: Hartung-Knapp's interval is on t with seeds - 1 df

    def crit(n: int) -> float:
        if t_ref:
            return float(sps.t.ppf(1 - st.alpha, n - 1) + sps.t.ppf(st.power, n - 1))
        return float(sps.norm.ppf(1 - st.alpha) + sps.norm.ppf(st.power))
    boundaries = [margin] if unit.get("decision") == "directional" else [0.0, margin]
    if unit.get("decision") == "tost":
        boundaries = [margin, -margin, 0.0] if abs(est) < margin else [0.0]
    distance = max(abs(z - math.atanh(b)) for b in boundaries)
    if not distance > 0:
        return None
    return _first_n(lambda n: crit(n) / math.sqrt(n * w) <= distance, 2)


def seeds_needed(unit: Mapping[str, Any], st: Settings) -> int | None:
    """Seeds at which ``unit``'s test would have ``st.power`` at the observed effect and spread (None: none
    up to :data:`MAX_SEEDS`, no spread, or a test this does not plan: the sd ratio of F2a-spread, F5)."""
    if unit.get("parts"):
        parts = unit["parts"]
        if any(p.get("gate") and p.get("gate_kind") != SEEDS_GATE for p in parts):
            return None  # a part gated by its runs: more seeds do not lift it
        inner = holm_settings(parts, st)
        needs = [seeds_needed(p, inner) for p in parts if p.get("verdict") == INCONCLUSIVE]
        return None if not needs or None in needs else max(needs)
    if "se_z" in unit:
        return _corr_needed(unit, st)
    if "sd" in unit and "values" in unit:
        return _t_needed(unit, st)
    return None


def priced(unit: Mapping[str, Any]) -> bool:
    """Whether ``unit`` gets a ``seeds_needed``: inconclusive, in the claim's scope, and not gated by its runs
    (a run that failed to train, a blind positive control: more seeds do not lift those);
    a unit gated only for too few seeds is priced."""
    if unit.get("verdict") != INCONCLUSIVE or not unit.get("in_scope", True):
        return False
    return not unit.get("gate") or unit.get("gate_kind") == SEEDS_GATE


def holm_settings(units: Sequence[Mapping[str, Any]], st: Settings) -> Settings:
    """``st`` at the level Holm's correction asks of a unit among ``units`` (those in scope, runs-ungated): the
    first step's alpha / k (k of them, at least 1), the level a unit must reach whatever its rank."""
    k = max(1, sum(1 for u in units if u.get("in_scope", True) and (not u.get("gate")
                                                                     or u.get("gate_kind") == SEEDS_GATE)))
    return Settings(alpha=st.alpha / k, power=st.power, th=st.th)


def unit_level(unit: Mapping[str, Any], units: Sequence[Mapping[str, Any]], st: Settings) -> Settings:
    """The level ``unit`` is decided at: ``alpha`` where it leans towards support (a supported unit needs no correction:
    the finding's supported-by-all is an intersection-union test), else Holm's first step ``alpha / k`` over the units
    of its estimand (:func:`holm_settings`: its contradiction is corrected among them)."""
    ps, pc = num(unit.get("p_supported")), num(unit.get("p_contradicted"))
    if math.isfinite(ps) and math.isfinite(pc) and ps <= pc:
        return st
    same = [u for u in units if u.get("estimand") == unit.get("estimand")]
    return holm_settings(same, st)


def annotate(findings: Sequence[dict[str, Any]], st: Settings, methods_of: Mapping[str, Sequence[str]],
             seed_hours: Mapping[str, Mapping[str, float]] | None = None) -> None:
    """Give every inconclusive unit that more seeds could decide (:func:`priced`) its ``seeds_needed`` at the
    level Holm's correction asks of it (:func:`holm_settings`; a conjunction's parts at alpha / k over its own
    k parts) and, with ``seed_hours`` (dataset -> method -> job-hours per seed), ``extra_seeds`` and
    ``extra_job_hours`` for the finding's methods."""
    for f in findings:
        units = f.get("units", [])
        for u in units:
            if not priced(u):
                continue
            level = unit_level(u, units, st)
            n = seeds_needed(u, level)
            u["seeds_alpha"] = level.alpha
            u["seeds_needed"] = n
            if n is None or not seed_hours:
                continue
            u["extra_seeds"] = max(0, n - int(u.get("n") or 0))
            dataset = str(u.get("unit", "")).split("/")[0]
            hours = seed_hours.get(dataset, {})
            methods = [m for m in methods_of.get(f["id"], ()) if m in hours]
            if methods:
                u["extra_job_hours"] = u["extra_seeds"] * sum(float(hours[m]) for m in methods)
