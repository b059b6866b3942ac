"""The final-accuracy endpoint of a finding's unit: runs that failed to train at this budget, and the trend of the
gap between two methods at the end of the rung's horizon (the rule of docs/decisions.md "Verdicts that can decide",
pre-registered in docs/preregistration.md).

A final-accuracy comparison (F3, F3-shakespeare's accuracy parts, F4, F8, F9b-F9g) is decided by its test at the
rung's fixed horizon, as the paper compares; :func:`gap_trend` reports beside it whether the gap is still moving
(the per-seed slope of the gap over the evaluations in the last quarter of the rounds), never changing the verdict.
A unit with a run that failed to train (:func:`failed_gate`: at the majority-class floor, or for F9 a training loss
never below the uniform-guess loss) is withheld and names the runs; the decay claims use the same rule
(:func:`decay_gate`). The rule is calibrated by simulation at the runs' own noise in
:mod:`hasfl.analysis.calibration`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.findings.kernel import CONTRADICTED, FAILED_TO_TRAIN, Settings, fmt, gate_unit, num, seed_values
from hasfl.analysis.floors import is_missing
from hasfl.analysis.stats import paired_ci

__all__ = ["FAILED_LEAD", "FAILED_TAIL", "NO_TREND_SUBMODEL", "Reason", "decay_gate", "failed_gate", "failed_runs",
           "final_gate", "gap_trend", "join_reasons", "pair_slopes", "paired_final_gate", "paired_slopes"]


def decay_gate(dataset: str, seeds: Sequence[int], floored: Sequence[tuple[pd.DataFrame, str]]) -> str | None:
    """Why a decay unit (F2a, F2b, F2c, F9a) on ``dataset`` over ``seeds`` cannot be read, else None: a seed of a
    method in ``floored`` failed to train at this budget (:func:`failed_gate`: it never learned, so it cannot
    collapse). A seed that peaks at its last evaluation is no reason: its decay, 0, is a measurement,
    and "last evaluation is the best" happens on a plateau by noise alone (about 1 / L of the time for L
    evaluations on it; docs/preregistration.md)."""
    return failed_gate(dataset, seeds, floored)


#: What a unit gated by a run that failed to train says about itself (the pages' words).
FAILED_LEAD = "failed to train at this budget"
FAILED_TAIL = ("at this rung's rounds, widths and data, the comparison says nothing about the claim: it is evidence "
               "about the regime")


def failed_runs(dataset: str, seeds: Sequence[int], frames: Sequence[tuple[pd.DataFrame, str]],
                loss_fraction: float | None = None, floor_column: str = "at_floor") -> list[dict[str, Any]]:
    """The runs of ``frames`` on ``dataset`` over ``seeds`` that failed to train: at the majority-class floor (the
    accuracy floor, ``floor_column``: the best accuracy never above the class frequencies) or, with
    ``loss_fraction``, whose lowest round-mean training loss stays at or above ``loss_fraction`` x ln K (K = 100 /
    ``chance_pct``: the uniform-guess loss). Unknown (NA flag, no loss) is not a failure."""
    wanted = {int(s) for s in seeds}
    out: list[dict[str, Any]] = []
    for df, method in frames:
        if df is None or df.empty:
            continue
        sel = df[(df["dataset"] == dataset) & (df["method"] == method) & df["seed"].isin(wanted)]
        for r in sel.sort_values("seed").to_dict("records"):
            why = []
            flag = r.get(floor_column)  # numpy / pandas booleans too; unknown (NA) is not a floor
            if not is_missing(flag) and bool(flag):
                why.append("at the majority-class floor")
            loss, chance = num(r.get("min_train_loss")), num(r.get("chance_pct"))
            if loss_fraction is not None and math.isfinite(loss) and math.isfinite(chance) and chance > 0:
                ln_k = math.log(100.0 / chance)
                if not loss < loss_fraction * ln_k:
                    why.append(f"lowest training loss {loss:.3g} not below {loss_fraction:g} ln K = "
                               f"{loss_fraction * ln_k:.3g}")
            if why:
                out.append({"method": method, "seed": int(r["seed"]), "why": "; ".join(why)})
    return out


class Reason(str):
    """A gate's reason that also carries the runs that failed to train (``runs``: dicts of method, seed, why), so
    that the unit records them (``failed_runs``) and the pages can list them."""

    runs: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, text: str, runs: Sequence[Mapping[str, Any]]) -> Reason:
        out = cls(text)
        out.runs = tuple(dict(r) for r in runs)
        return out


def join_reasons(*why: str | None) -> str | None:
    """The reasons given, joined by "; " (None when none), keeping the failed runs they carry (:class:`Reason`)."""
    given = [w for w in why if w]
    if not given:
        return None
    return Reason.of("; ".join(given), [r for w in given for r in getattr(w, "runs", ())])


def failed_gate(dataset: str, seeds: Sequence[int], frames: Sequence[tuple[pd.DataFrame, str]],
                loss_fraction: float | None = None, floor_column: str = "at_floor") -> Reason | None:
    """The reason a unit is withheld because one of its runs failed to train (:func:`failed_runs`), else None."""
    runs = failed_runs(dataset, seeds, frames, loss_fraction, floor_column)
    if not runs:
        return None
    return Reason.of(f"{FAILED_LEAD}: " + "; ".join(f"{r['method']} seed {r['seed']} ({r['why']})" for r in runs)
                     + f" ({FAILED_TAIL})", [{"dataset": dataset, **r} for r in runs])


#: ``decided_by`` of a unit whose claimed-better arm failed to train while the baseline learned (:func:`gate_arms`).
BETTER_ARM_FAILED = "claimed-better arm failed to train"


def gate_arms(unit: dict[str, Any], budget: str | None, failed: str | None, st: Settings,
              better: str | None = None) -> dict[str, Any]:
    """A comparison's unit after its gates, read asymmetrically as the claim's logic is: two runs at different
    budgets (``budget``) withhold it; runs that failed to train (``failed``, a :class:`Reason`) withhold it when a
    baseline's run is among them (a baseline that never learned says nothing about the claim), but when only runs
    of the claimed-better method ``better`` failed while the baseline learned, the claim fails *at this budget*:
    the unit is contradicted, scoped so in its reason (``decided_by`` :data:`BETTER_ARM_FAILED`; not a test, so Holm
    leaves it out and more seeds are not priced). A withheld unit reports beside it the test on the seeds that
    learned (:func:`hasfl.analysis.findings.kernel.learned_seeds`)."""
    runs = list(getattr(failed, "runs", ()))
    if budget or not runs or better is None or any(r["method"] != better for r in runs):
        return gate_unit(unit, join_reasons(budget, failed), st)
    seeds = ", ".join(str(r["seed"]) for r in runs)
    unit.update(verdict=CONTRADICTED, decided_by=BETTER_ARM_FAILED, gate_kind=FAILED_TO_TRAIN,
                failed_runs=[dict(r) for r in runs],
                reason=(f"at this budget the claim fails: {better}, the method claimed better, failed to train (seeds "
                        f"{seeds}: " + "; ".join(r["why"] for r in runs) + ") while the baseline learned; a claim "
                        "about this rung's rounds, widths and data, not about convergence (the test alone: "
                        f"{unit['verdict']} -- {unit['reason']})"))
    return unit


def final_gate(dataset: str, seeds: Sequence[int], frames: Sequence[tuple[pd.DataFrame, str]],
               loss_fraction: float | None = None) -> str | None:
    """Why a final-accuracy comparison on ``dataset`` over ``seeds`` is withheld, else None: a run of a method in
    ``frames`` failed to train at this budget (:func:`failed_gate`). Runs still rising are no reason:
    the comparison is decided at the rung's fixed horizon, as the paper compares, and the trend of the gap is
    reported beside it (:func:`gap_trend`)."""
    return failed_gate(dataset, seeds, frames, loss_fraction)


def paired_final_gate(rows: pd.DataFrame, sides: Sequence[tuple[str, str]]) -> str | None:
    """:func:`final_gate` for a per-seed table of pairs (the matched-budget tables): ``sides`` are
    ``(column prefix, method)``, e.g. ``("hasfl", "hasfl")`` reads each row's ``hasfl_at_floor``."""
    frames = []
    for prefix, method in sides:
        col = f"{prefix}_at_floor"
        if col in rows.columns:
            frames.append((rows.assign(method=method, at_floor=rows[col]), method))
    datasets = sorted(set(rows["dataset"])) if len(rows) else []
    return join_reasons(*(failed_gate(d, [int(s) for s in rows["seed"]], frames) for d in datasets))


def pair_slopes(rows: pd.DataFrame, a: str, b: str) -> np.ndarray:
    """Per row of a matched-budget per-seed table, the gap's slope ``<a>_tail_slope_pct - <b>_tail_slope_pct``
    (NaN in a table written before the trend was recorded)."""
    ca, cb = f"{a}_tail_slope_pct", f"{b}_tail_slope_pct"
    if ca not in rows.columns or cb not in rows.columns:
        return np.full(len(rows), np.nan)
    return rows[ca].to_numpy(dtype=np.float64) - rows[cb].to_numpy(dtype=np.float64)


def paired_slopes(a: pd.DataFrame, ma: str, b: pd.DataFrame, mb: str, dataset: str,
                  seeds: Sequence[int]) -> np.ndarray:
    """Per seed of ``seeds``, the slope of the gap (``tail_slope_pct`` of ``ma`` minus that of ``mb``); NaN where
    a table lacks the column (a table written before the trend was recorded)."""
    pa, _ = seed_values(a, dataset, ma, "tail_slope_pct") if "tail_slope_pct" in a.columns else ({}, [])
    pb, _ = seed_values(b, dataset, mb, "tail_slope_pct") if "tail_slope_pct" in b.columns else ({}, [])
    return np.array([pa.get(int(s), math.nan) - pb.get(int(s), math.nan) for s in seeds], dtype=np.float64)


def gap_trend(unit: dict[str, Any], slopes: np.ndarray, st: Settings, margin: float | None = None,
              what: str = "full-model accuracy", tost: bool = False) -> dict[str, Any]:
    """The caveat beside a final-accuracy unit decided at the fixed horizon: the gap's slope per
    seed (``slopes``, points per round, from :func:`paired_slopes`), its mean and two-sided ``1 - alpha`` t interval
    over the seeds (``gap_trend``); "still moving" when the interval excludes 0, then the reason says so, with the
    rounds at which the mean slope would carry the gap from its estimate to the margin (``margin``; for a TOST the
    nearer of +-margin in the direction of movement), and the verdict is never changed. On a plateau the interval
    excludes 0 in alpha of the comparisons (calibrated by :mod:`hasfl.analysis.calibration`)."""
    from hasfl.analysis.specs import TREND_FRACTION, TREND_MIN_EVALS

    keep = slopes[np.isfinite(slopes)]
    window = (f"the evaluations in the last {TREND_FRACTION:.0%} of the rounds (at least {TREND_MIN_EVALS})")
    if keep.size < 2:
        unit["gap_trend"] = {"n": int(keep.size), "window": window, "read": what, "moving": None}
        return unit
    ci = paired_ci(keep, np.zeros_like(keep), st.two_sided_level)
    moving = bool(math.isfinite(ci.ci_low) and (ci.ci_low > 0.0 or ci.ci_high < 0.0))
    trend: dict[str, Any] = {"n": int(ci.n), "slope_pct_per_round": ci.mean_diff, "low": ci.ci_low,
                             "high": ci.ci_high, "level": st.two_sided_level, "window": window, "read": what,
                             "moving": moving, "rounds_to_margin": None}
    est, slope = num(unit.get("estimate")), ci.mean_diff
    if margin is not None and math.isfinite(est) and math.isfinite(slope) and slope != 0.0:
        target = margin if not tost else (abs(margin) if slope > 0 else -abs(margin))
        rounds = (target - est) / slope
        trend["rounds_to_margin"] = float(rounds) if rounds > 0 else None
    unit["gap_trend"] = trend
    rounds = num((st.horizon or {}).get("rounds"))
    if not moving:
        span = ""
        if math.isfinite(rounds) and rounds > 0 and math.isfinite(ci.ci_low):
            r = TREND_FRACTION * rounds
            span = (f"; over the window's about {r:.0f} rounds a move of {fmt(ci.ci_low * r)} to {fmt(ci.ci_high * r)} "
                    "points is not excluded")
        unit["reason"] += (f"; gap trend {slope:+.3g} [{fmt(ci.ci_low)}, {fmt(ci.ci_high)}] points per round over "
                           f"{window} ({st.two_sided_level:.0%} interval over {ci.n} seeds): no movement detected"
                           f"{span}")
    if moving:
        to = trend["rounds_to_margin"]
        where = (f"at that rate it reaches the margin {fmt(target)} after {to:.0f} more rounds" if to is not None
                 else "it moves away from the margin")
        unit["reason"] += (f"; caveat: the gap is still moving, {slope:+.3g} [{fmt(ci.ci_low)}, {fmt(ci.ci_high)}] "
                           f"points per round over {window} ({st.two_sided_level:.0%} interval over "
                           f"{ci.n} seeds; {where}): the verdict is at this horizon, the ranking at convergence may "
                           "differ")
    return unit


NO_TREND_SUBMODEL = ("sub-model accuracy is read at the final state only (tables/submodel_accuracy.parquet evaluates "
                     "each run's last-round sub-models; no sub-model accuracy curve is logged), so no trend is read for "
                     "it; the full-model unit beside it carries the full model's")
