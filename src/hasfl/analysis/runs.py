"""Reading the files of the data and training stages (the file contract), nothing else.

Layout (``<results>`` = ``<results_dir>/<name>``):

* ``<results>/data/<dataset>/seed<seed>/{partition,clients}.parquet, manifest.json``
* ``<results>/runs/<dataset>/<method>/seed<seed>/{rounds,clients}.parquet, init.pt, final.pt, run.json``

A run's per-seed summary (:func:`run_metrics`) is what Tables 3, 4, 6 and 7 average:
best and final test accuracy (in percentage points), the peak-to-final delta
(final - best, <= 0) and the run's average allocated width ``avg_p`` (from run.json,
which averages over *every* round, not only the evaluated ones). A diverged run
keeps its status; its final accuracy is NaN and it is left out of the means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.per_run.files import (RunKey, group_data_files, group_run_files, parse_data_path, parse_run_path,
                                          read_json)

__all__ = [
    "RunKey",
    "group_data_files",
    "group_run_files",
    "parse_data_path",
    "parse_run_path",
    "read_json",
    "run_metrics",
    "load_run_metrics",
]

def run_metrics(rounds: pd.DataFrame, summary: Mapping[str, Any]) -> dict[str, Any]:
    """Best / final accuracy (points), peak-to-final delta, avg p, lowest training loss and status of one run.

    ``rounds`` is rounds.parquet, ``summary`` run.json. Best accuracy is the maximum
    over the evaluated rounds with a finite accuracy; final accuracy is the last
    evaluated round's (NaN for a diverged run, whose last evaluation is NaN).
    ``min_train_loss`` is the lowest finite ``train_loss`` of rounds.parquet (the round's mean over its
    participants of their local steps' mean loss; every round when ``eval_every`` is 1), NaN when the run
    has none (F9's "never learned" gate compares it with ln K). ``last_gain_pct`` is the last evaluation's
    accuracy minus the one before it (points; NaN with fewer than two finite evaluations or no final): the
    ``tail_slope_pct`` is the least-squares slope of the accuracy (points per round) over the evaluations in the
    last :data:`~hasfl.analysis.specs.TREND_FRACTION` of the rounds (at least
    :data:`~hasfl.analysis.specs.TREND_MIN_EVALS`; NaN with fewer finite evaluations or no final): the findings'
    trend of the gap between two methods (:func:`hasfl.analysis.findings.endpoints.gap_trend`); ``tail_noise_pct``
    the residual sd around that line (the evaluation noise the trend rule is calibrated at,
    :mod:`hasfl.analysis.calibration`) and ``tail_evals`` how many evaluations it read.
    """
    status = str(summary.get("status", "completed"))
    ordered = rounds.sort_values("round")
    acc = pd.to_numeric(ordered["test_acc"], errors="coerce").to_numpy(dtype=np.float64) * 100.0
    finite = acc[np.isfinite(acc)]
    best = float(finite.max()) if finite.size else math.nan
    final = float(acc[-1]) if acc.size and status == "completed" else math.nan
    avg_p = summary.get("avg_p")
    loss = (pd.to_numeric(rounds["train_loss"], errors="coerce").to_numpy(dtype=np.float64)
            if "train_loss" in rounds.columns else np.array([], dtype=np.float64))
    loss = loss[np.isfinite(loss)]
    return {
        "status": status,
        "best_acc_pct": best,
        "final_acc_pct": final,
        "delta_pct": final - best if math.isfinite(final) and math.isfinite(best) else math.nan,
        "avg_p": float(avg_p) if avg_p is not None else math.nan,
        "rounds_completed": int(summary.get("rounds_completed", len(rounds))),
        "min_train_loss": float(loss.min()) if loss.size else math.nan,
        "last_gain_pct": float(finite[-1] - finite[-2]) if finite.size >= 2 and math.isfinite(final) else math.nan,
        **_tail(ordered["round"].to_numpy(dtype=np.float64), acc, math.isfinite(final)),
    }


def _tail(rounds: np.ndarray, acc_pct: np.ndarray, completed: bool) -> dict[str, Any]:
    """``tail_slope_pct``, ``tail_noise_pct`` and ``tail_evals`` of :func:`tail_fit` (NaN / 0 for a run without a
    final accuracy)."""
    slope, sd, n = tail_fit(rounds, acc_pct) if completed else (math.nan, math.nan, 0)
    return {"tail_slope_pct": slope, "tail_noise_pct": sd, "tail_evals": n}


def tail_window(rounds: np.ndarray, acc_pct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The finite evaluations (rounds, accuracy) whose round is in the last
    :data:`~hasfl.analysis.specs.TREND_FRACTION` of the last evaluated round, at least the last
    :data:`~hasfl.analysis.specs.TREND_MIN_EVALS` (empty arrays with fewer finite evaluations)."""
    from hasfl.analysis.specs import TREND_FRACTION, TREND_MIN_EVALS

    ok = np.isfinite(acc_pct) & np.isfinite(rounds)
    x, y = rounds[ok], acc_pct[ok]
    if x.size < TREND_MIN_EVALS:
        return x[:0], y[:0]
    window = x >= x[-1] * (1.0 - TREND_FRACTION)
    if int(window.sum()) < TREND_MIN_EVALS:
        window = np.zeros(x.size, dtype=bool)
        window[-TREND_MIN_EVALS:] = True
    return x[window], y[window]


def tail_fit(rounds: np.ndarray, acc_pct: np.ndarray) -> tuple[float, float, int]:
    """``(slope, residual sd, evaluations)`` of the least-squares line of ``acc_pct`` on ``rounds`` over
    :func:`tail_window`: the slope in points per round, the residual sd (points, ``n - 2`` degrees of freedom: the
    evaluation noise around the trend; NaN with fewer than 3) and the number of evaluations; NaNs and 0 without a
    window."""
    xs, ys = tail_window(rounds, acc_pct)
    if xs.size < 2:
        return math.nan, math.nan, int(xs.size)
    xc = xs - xs.mean()
    slope = float((xc * (ys - ys.mean())).sum() / (xc ** 2).sum())
    resid = ys - ys.mean() - slope * xc
    sd = float(math.sqrt((resid ** 2).sum() / (xs.size - 2))) if xs.size > 2 else math.nan
    return slope, sd, int(xs.size)


def tail_slope(rounds: np.ndarray, acc_pct: np.ndarray) -> float:
    """The slope (points per round) of :func:`tail_fit`."""
    return tail_fit(rounds, acc_pct)[0]


def load_run_metrics(files: Mapping[RunKey, Mapping[str, Path]]) -> pd.DataFrame:
    """One row per run with :func:`run_metrics`, sorted by (dataset, method, seed)."""
    rows = []
    for (dataset, method, seed), f in sorted(files.items()):
        rounds = pd.read_parquet(f["rounds.parquet"])
        rows.append({"dataset": dataset, "method": method, "seed": seed, **run_metrics(rounds, read_json(f["run.json"]))})
    cols = ["dataset", "method", "seed", "status", "best_acc_pct", "final_acc_pct", "delta_pct", "avg_p", "rounds_completed",
            "min_train_loss", "last_gain_pct", "tail_slope_pct", "tail_noise_pct", "tail_evals"]
    df = pd.DataFrame.from_records(rows, columns=cols)
    return df.astype({"seed": "int64", "rounds_completed": "int64", "tail_evals": "int64"}) if len(df) else df
