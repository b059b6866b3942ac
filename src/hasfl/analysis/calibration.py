"""Calibration of the final-accuracy rule by simulation at the evaluation noise the runs show.

A rule that withholds or qualifies a verdict must fire rarely where nothing is wrong (DEVELOPERS.md). The rule of
:func:`hasfl.analysis.findings.endpoints.gap_trend` and :func:`~hasfl.analysis.findings.kernel.t_unit` is simulated here
on curves built from the noise measured on the runs themselves:

* each run's evaluations in the trend window (``k`` of them, :func:`hasfl.analysis.runs.tail_window`) are its level
  plus a seed effect (sd ``seed_sd``: the seed-to-seed spread of final accuracy) plus independent evaluation noise
  (sd ``noise_sd``: the residual sd around each run's tail line, ``tail_noise_pct``), plus a slope where the curve
  still rises;
* a comparison is ``n`` seeds of two methods whose true gap at the horizon is ``gap`` points.

Per comparison it decides, exactly as the findings do: the fixed-horizon verdict (one-sided t at ``alpha`` on the
per-seed differences of the last evaluations: "supported" when the lower bound clears margin 0), the trend caveat (the
two-sided ``1 - alpha`` t interval of the per-seed gap slopes excludes 0), and, for the record, the removed "still
rising" gate (any run whose last evaluation is its best and 0.5 points above the one before). The test suite checks
these vectorised decisions against the kernel's own functions on simulated units (``tests/test_calibration.py``).
:func:`dataset_calibration` measures the noise on a finished preset's tables and reports, per dataset, the
false-fire rate of the caveat on plateaued comparisons, the rate the removed gate would have had, and the power on a
20-point gap with 5 seeds; findings.json carries it (``trend_calibration``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats as sps

__all__ = ["REMOVED_GATE_GAIN_PCT", "Simulated", "control_gate_rates", "dataset_calibration", "decisions",
           "hksj_coverage", "simulate", "unit_calibration"]

#: The removed gate's threshold (``analysis.rising_min_gain_pct`` until the fixed-horizon rule replaced it).
REMOVED_GATE_GAIN_PCT = 0.5
#: The power target of the done-when: a 20-point gap with 5 seeds.
POWER_GAP_PCT, POWER_SEEDS = 20.0, 5
#: Simulated comparisons per setting (the rates' Monte Carlo se is at most 0.5 / sqrt(reps) = 0.0035).
REPS = 20000


@dataclass(frozen=True)
class Simulated:
    """Rates over ``reps`` simulated comparisons of ``n_seeds`` seeds."""

    n_seeds: int
    evals: int
    noise_sd: float
    seed_sd: float
    gap: float
    slope: float
    reps: int
    supported: float
    caveat: float
    removed_gate: float


def _ols_slopes(y: np.ndarray) -> np.ndarray:
    """Least-squares slopes per evaluation step over the last axis of ``y``."""
    x = np.arange(y.shape[-1], dtype=np.float64)
    xc = x - x.mean()
    return ((y - y.mean(axis=-1, keepdims=True)) * xc).sum(axis=-1) / (xc ** 2).sum()


def decisions(curves: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rule's decisions on ``curves`` (comparisons x seeds x 2 methods x evaluations, equally spaced; method 0
    minus method 1): ``(supported, caveat, removed_gate)`` per comparison, as :func:`simulate` describes."""
    n_seeds = curves.shape[1]
    final = curves[..., -1]
    diff = final[..., 0] - final[..., 1]
    df = n_seeds - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        t_stat = diff.mean(axis=1) / (diff.std(axis=1, ddof=1) / math.sqrt(n_seeds))
        ds = _ols_slopes(curves[:, :, 0, :]) - _ols_slopes(curves[:, :, 1, :])
        t_slope = ds.mean(axis=1) / (ds.std(axis=1, ddof=1) / math.sqrt(n_seeds))
    supported = t_stat > sps.t.ppf(1.0 - alpha, df)
    caveat = np.abs(t_slope) > sps.t.ppf(1.0 - alpha / 2.0, df)
    best_last = curves[..., -1] >= curves.max(axis=-1)
    gain = curves[..., -1] - curves[..., -2]
    removed = (best_last & (gain > REMOVED_GATE_GAIN_PCT)).any(axis=(1, 2))
    return supported, caveat, removed


def simulate(n_seeds: int, evals: int, noise_sd: float, seed_sd: float = 0.0, gap: float = 0.0, slope: float = 0.0,
             alpha: float = 0.05, reps: int = REPS, seed: int = 0) -> Simulated:
    """Rates of the rule's decisions on ``reps`` comparisons (see the module docstring): method a's curve is ``gap``
    points above b's at the horizon and rises by ``slope`` points per evaluation more than b's (0: both plateaued)."""
    if n_seeds < 2 or evals < 3:
        raise ValueError(f"simulate: needs >= 2 seeds and >= 3 evaluations, got {n_seeds} and {evals}")
    rng = np.random.default_rng(seed)
    steps = np.arange(evals, dtype=np.float64) - (evals - 1)  # 0 at the horizon
    level = rng.normal(0.0, seed_sd, size=(reps, n_seeds, 2))
    curves = level[..., None] + rng.normal(0.0, noise_sd, size=(reps, n_seeds, 2, evals))
    curves[:, :, 0, :] += gap + slope * steps
    supported, caveat, removed = decisions(curves, alpha)
    return Simulated(n_seeds, evals, noise_sd, seed_sd, gap, slope, reps, float(supported.mean()),
                     float(caveat.mean()), float(removed.mean()))


def _median(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x is not None and math.isfinite(float(x))], dtype=np.float64)
    return float(np.median(v)) if v.size else math.nan


def dataset_calibration(tables: Mapping[str, pd.DataFrame], datasets: Sequence[str], alpha: float) -> dict[str, Any]:
    """Per dataset of ``datasets``: the noise measured on the per-seed method tables in ``tables`` (median over the
    completed runs of ``tail_noise_pct`` and ``tail_evals``; median over methods of the seed-to-seed sd of final
    accuracy) and the simulated rates at it: ``plateau`` (gap 0, the preset's seeds: the caveat's false-fire rate
    and the removed gate's). Power is a property of each unit's own spread and seeds (:func:`unit_calibration`), not
    of a dataset's median. A dataset without the columns (tables written before the trend was recorded) or with fewer
    than 3 evaluations is left out."""
    frames = [t for t in tables.values() if isinstance(t, pd.DataFrame) and "tail_noise_pct" in t.columns
              and "method" in t.columns]
    out: dict[str, Any] = {}
    for d in datasets:
        rows = pd.concat([f[(f["dataset"] == d) & (f.get("status", "completed") == "completed")] for f in frames],
                         ignore_index=True) if frames else pd.DataFrame()
        if not len(rows):
            continue
        rows = rows.drop_duplicates(subset=["method", "seed"])
        noise, evals = _median(rows["tail_noise_pct"]), _median(rows["tail_evals"])
        sds = [float(g["final_acc_pct"].std(ddof=1)) for _m, g in rows.groupby("method") if len(g) >= 2]
        seed_sd = _median(sds) if sds else 0.0
        n_seeds = int(rows.groupby("method")["seed"].nunique().max())
        if not (math.isfinite(noise) and math.isfinite(evals) and evals >= 3 and n_seeds >= 2):
            continue
        k = int(round(evals))
        plateau = simulate(n_seeds, k, noise, seed_sd if math.isfinite(seed_sd) else 0.0, 0.0, 0.0, alpha)
        out[d] = {"runs": int(len(rows)), "noise_sd_pct": noise, "seed_sd_pct": seed_sd, "evals": k,
                  "n_seeds": n_seeds,
                  "plateau": {k2: v for k2, v in asdict(plateau).items() if k2 in ("supported", "caveat",
                                                                                      "removed_gate", "reps")}}
    return out


def _pooled_bounds(z: np.ndarray, w: float, level: float, plain: bool) -> tuple[np.ndarray, np.ndarray]:
    """One-sided bounds (the two-sided ``level`` interval's ends) of the random-effects pool of equal-weight Fisher z's
    (rows of ``z``, each run's sampling variance ``1 / w``): Paule-Mandel's tau^2 at equal weights is ``max(0, s^2 -
    1 / w)`` (``s^2`` the runs' sample variance), the pooled z their mean, Hartung-Knapp's se ``s / sqrt(k)`` (plain)
    or, floored at the random-effects se, ``sqrt(max(s^2, 1 / w) / k)``; t on k - 1 df
    (:func:`hasfl.analysis.stats.fisher_pool_hksj`, which ``tests/test_calibration.py`` checks this against)."""
    k = z.shape[1]
    mean, var = z.mean(axis=1), z.var(axis=1, ddof=1)
    se = np.sqrt(var / k) if plain else np.sqrt(np.maximum(var, 1.0 / w) / k)
    half = float(sps.t.ppf(0.5 + level / 2.0, k - 1)) * se
    return mean - half, mean + half


def control_gate_rates(r: float, n_clients: int, n_seeds: int, alpha: float = 0.05, tau: float = 0.0,
                       margin: float = 0.0, reps: int = REPS, seed: int = 0) -> dict[str, float]:
    """How often a positive-control gate withholds where the control truly works: ``n_seeds`` fedavg runs of
    ``n_clients`` clients whose true r(H~, TV) is ``r`` (Fisher z of each run: normal around atanh(r) with variance
    ``1 / (n_clients - 3) + tau^2``), pooled as F6 pools them (equal weights, 3 or more seeds: plain Hartung-Knapp).
    ``old_gate``: the share of pools where F6, pooled as it was (Hartung-Knapp floored at the random-effects se), is
    not supported (the removed rule withheld F1c there); ``gate``: the share where F6 is contradicted (upper bound <
    ``margin``: the rule in force withholds only there); ``supported``: F6's power as pooled now."""
    rng = np.random.default_rng(seed)
    w = float(n_clients - 3)
    z = rng.normal(math.atanh(r), math.sqrt(1.0 / w + tau * tau), size=(reps, n_seeds))
    level, edge = 1.0 - 2.0 * alpha, math.atanh(margin)
    low, high = _pooled_bounds(z, w, level, plain=n_seeds >= 3)
    old_low, _ = _pooled_bounds(z, w, level, plain=False)
    return {"old_gate": float((old_low <= edge).mean()), "gate": float((high < edge).mean()),
            "supported": float((low > edge).mean()), "reps": reps}


def hksj_coverage(n_runs: int, n_clients: int, level: float, tau: float = 0.0, reps: int = REPS,
                  seed: int = 0) -> dict[str, float]:
    """The real coverage of the pooled correlation's two-sided ``level`` interval over ``n_runs`` equal-weight runs
    (each ``n_clients``, between-run sd ``tau``): ``plain`` (Hartung-Knapp, the rule at equal weights with 3 or more
    runs) and ``floored`` (never below the random-effects se)."""
    rng = np.random.default_rng(seed)
    w = float(n_clients - 3)
    mu = 0.3
    z = rng.normal(mu, math.sqrt(1.0 / w + tau * tau), size=(reps, n_runs))
    out = {}
    for name, plain in (("plain", True), ("floored", False)):
        low, high = _pooled_bounds(z, w, level, plain)
        out[name] = float(((low <= mu) & (mu <= high)).mean())
    return out


def unit_calibration(findings: Sequence[Mapping[str, Any]], datasets: Mapping[str, Mapping[str, Any]], alpha: float,
                     gap: float = POWER_GAP_PCT, reps: int = REPS) -> list[dict[str, Any]]:
    """Per final-accuracy unit of ``findings`` (a one-sided t unit over paired seeds with a gap-trend read or a
    sub-model unit; a conjunction's parts each), the rule simulated at that unit's *own* spread and seeds: ``n``, ``sd`` (the sd of its per-seed
    gaps), the dataset's evaluation noise and window (``datasets``: :func:`dataset_calibration`), the caveat's rate on a
    plateau (None for a sub-model unit: no curve) and the power on a ``gap``-point gap beyond the margin at its n.
    The seed effect of each method is ``sqrt(max(sd^2 - 2 noise^2, 0) / 2)``, so a simulated gap's spread is the
    unit's own. Units whose spread is undefined (fewer than 2 seeds, no variation) are left out."""
    out = []
    for f in findings:
        for top, u in [(unit, p) for unit in f.get("units") or [] for p in (unit, *unit.get("parts", []))]:
            trend = u.get("gap_trend")
            sd, n = u.get("sd"), int(u.get("n") or 0)
            if (not isinstance(trend, Mapping) or u.get("direction") != "above" or sd is None or n < 2
                    or not u.get("in_scope", True)):
                continue
            sd = float(sd)
            if not (math.isfinite(sd) and sd > 0):
                continue
            d = str(top["unit"]).split("/")[0]
            name = str(u["unit"]) if u is top else f"{top['unit']}: {u['unit']}"
            cal = datasets.get(d) or {}
            sub = trend.get("read") == "none"
            noise = 0.0 if sub else float(cal.get("noise_sd_pct") or 0.0)
            evals = int(cal.get("evals") or 3)
            seed_sd = math.sqrt(max(sd * sd - 2.0 * noise * noise, 0.0) / 2.0)
            # a sub-model unit has no curve, so no caveat to simulate
            caveat = None if sub else simulate(n, max(evals, 3), max(noise, 1e-9), seed_sd, 0.0, 0.0, alpha, reps).caveat
            power = simulate(n, max(evals, 3), max(noise, 1e-9), seed_sd, gap, 0.0, alpha, reps)
            out.append({"finding": f["id"], "unit": name, "estimand": top.get("estimand"), "n": n, "sd_pct": sd,
                        "noise_sd_pct": None if sub else noise, "evals": None if sub else evals,
                        "caveat": caveat, "power_gap_pct": gap,
                        "power": power.supported, "mde": u.get("mde"), "reps": reps})
    return out

