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

__all__ = ["REMOVED_GATE_GAIN_PCT", "Simulated", "dataset_calibration", "decisions", "simulate"]

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


def dataset_calibration(tables: Mapping[str, pd.DataFrame], datasets: Sequence[str], alpha: float,
                        power_gap: float = POWER_GAP_PCT, power_seeds: int = POWER_SEEDS) -> dict[str, Any]:
    """Per dataset of ``datasets``: the noise measured on the per-seed method tables in ``tables`` (median over the
    completed runs of ``tail_noise_pct`` and ``tail_evals``; median over methods of the seed-to-seed sd of final
    accuracy) and the simulated rates at it: ``plateau`` (gap 0, the preset's seeds: the caveat's false-fire rate
    and the removed gate's), ``power`` (a ``power_gap``-point gap with ``power_seeds`` seeds). A dataset without
    the columns (tables written before the trend was recorded) or with fewer than 3 evaluations is left out."""
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
        power = simulate(power_seeds, k, noise, seed_sd if math.isfinite(seed_sd) else 0.0, power_gap, 0.0, alpha)
        out[d] = {"runs": int(len(rows)), "noise_sd_pct": noise, "seed_sd_pct": seed_sd, "evals": k,
                  "n_seeds": n_seeds,
                  "plateau": {k2: v for k2, v in asdict(plateau).items() if k2 in ("supported", "caveat",
                                                                                      "removed_gate", "reps")},
                  "power": {"gap_pct": power_gap, "n_seeds": power_seeds, "supported": power.supported,
                            "reps": power.reps}}
    return out
