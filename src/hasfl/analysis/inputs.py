"""What the analysis jobs read from the data stage and the runs, shared by the tables and figures:
dataset summaries and accuracy floors from the data-stage manifests, the preset's model specs, each
run's metrics with the costs as paid (Section 3.4, Table 1), its status, and finished tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis import floors as floors_mod
from hasfl.analysis.per_run.files import manifest_summaries, preset_models
from hasfl.analysis.runs import load_run_metrics, read_json

__all__ = ["COST_METRICS", "dataset_floors", "flagged_metrics", "manifest_summaries", "metrics_with_costs",
           "preset_models", "read_tables", "run_costs", "run_status"]

PathLike = str | Path


#: Cost metrics of a run as it was paid (engine contract): the width trained and
#: uploaded, the upload MB and the training MACs per sample (millions) per participant-round.
COST_METRICS = ("avg_p_trained", "upload_mb", "train_mmacs")


def run_costs(rounds: pd.DataFrame, summary: Mapping[str, Any], source: str = "run") -> dict[str, float]:
    """What a run paid (Section 3.4 and Table 1): ``avg_p_trained``, ``upload_mb``, ``train_mmacs``.

    ``avg_p_trained`` is run.json's mean over rounds of the width participants trained and
    uploaded (equal to the allocated ``avg_p`` except for FjORD, whose clients train at
    pmax). ``upload_mb`` and ``train_mmacs`` are the means over the rows of rounds.parquet
    of the per-round means over participants (upload size from the cost model; forward
    MACs per sample as Table 1 counts them, FjORD's distillation pass included); rows
    exist for the evaluated rounds, i.e. every round when ``eval_every`` is 1.

    Raises:
        ValueError: naming ``source`` and the missing key / column when the run predates
            the engine contract (avg_p_trained, upload_mb, train_mmacs).
    """
    if summary.get("avg_p_trained") is None:
        raise ValueError(f"{source}/run.json lacks 'avg_p_trained' (the average width actually trained and "
                         "uploaded); the run predates it -- rerun its training job")
    missing = [c for c in ("upload_mb", "train_mmacs") if c not in rounds.columns]
    if missing:
        raise ValueError(f"{source}/rounds.parquet lacks the column(s) {', '.join(repr(c) for c in missing)}; the run "
                         "predates the costs-as-paid columns -- rerun its training job")
    out = {"avg_p_trained": float(summary["avg_p_trained"])}
    for c in ("upload_mb", "train_mmacs"):
        v = pd.to_numeric(rounds[c], errors="coerce").to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        out[c] = float(v.mean()) if v.size else math.nan
    return out


def dataset_floors(manifests: Sequence[PathLike]) -> dict[str, dict[str, float]]:
    """``{dataset: {majority_pct, chance_pct, floor_tol_pct}}`` from data-stage manifests
    (:mod:`hasfl.analysis.floors`); a dataset whose manifests predate the floors is left out."""
    out = {}
    for dataset, summaries in manifest_summaries(manifests).items():
        f = floors_mod.summary_floors(summaries)
        if f is not None:
            out[dataset] = f
    return out


def flagged_metrics(metrics: pd.DataFrame, manifests: Sequence[PathLike]) -> pd.DataFrame:
    """``metrics`` with the floor flags of the datasets whose manifests are given."""
    return floors_mod.add_floor_flags(metrics, dataset_floors(manifests)) if manifests else metrics


def metrics_with_costs(files: Mapping[tuple[str, str, int], Mapping[str, Path]]) -> pd.DataFrame:
    """Per-run metrics (:func:`load_run_metrics`) plus the costs as paid (:func:`tables.run_costs`).

    Raises:
        ValueError: naming the run file and the key / column a run that predates the costs as paid lacks.
    """
    metrics = load_run_metrics(files)
    rows = []
    for (dataset, method, seed), f in files.items():
        source = f["run.json"].parent.as_posix()
        costs = run_costs(pd.read_parquet(f["rounds.parquet"]), read_json(f["run.json"]), source)
        rows.append({"dataset": dataset, "method": method, "seed": int(seed), **costs})
    cost_df = pd.DataFrame.from_records(rows, columns=["dataset", "method", "seed", *COST_METRICS])
    if metrics.empty:
        return metrics.assign(**{c: pd.Series(dtype="float64") for c in COST_METRICS})
    return metrics.merge(cost_df.astype({"seed": "int64"}), on=["dataset", "method", "seed"], how="left")


def run_status(files: Mapping[tuple[str, str, int], Mapping[str, Path]]) -> dict[tuple[str, str, int], str]:
    """Each run's status from its run.json ("completed" when it does not say)."""
    return {k: str(read_json(f["run.json"]).get("status", "completed")) for k, f in files.items() if "run.json" in f}


def read_tables(paths: Mapping[str, PathLike]) -> dict[str, pd.DataFrame]:
    """The Parquet tables ``paths`` (name -> file), read."""
    return {name: pd.read_parquet(p) for name, p in paths.items()}
