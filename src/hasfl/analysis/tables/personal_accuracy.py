"""FedLPS's own evaluation: every client's model on its own test split, the unweighted mean over clients (Xue et al.
2025, ``FedLPS.py:240-275``), beside the final global model on the same splits. The per-client rows and their
definitions: :mod:`hasfl.analysis.per_run.personal_accuracy` (the evaluate job's); gathered here, with the means per
run (:func:`run_means`) and over seeds per dataset and method (:func:`summary_frame`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.evaluations import evaluate_runs, gather_rows, job_params
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import pm, results_root, source_list, write_text
from hasfl.analysis.per_run.personal_accuracy import COLUMNS, NAME, evaluate_run
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

PathLike = str | Path

__all__ = ["COLUMNS", "NAME", "RUN_COLUMNS", "compute", "display", "job", "run_means", "summary_frame"]

#: one row per run (:func:`run_means`)
RUN_COLUMNS = ["dataset", "method", "seed", "status", "clients", "local_models", "acc_pct", "global_acc_pct"]


def _finish(rows: Sequence[Mapping[str, Any]], out_parquet: PathLike, out_md: PathLike,
            sources: Sequence[PathLike]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(list(rows), columns=COLUMNS).astype({"seed": "int64", "client_id": "int64",
                                                                        "n_test": "int64"})
    write_parquet(df, out_parquet)
    write_text(out_md, table_markdown(NAME, df, source_list(list(sources), results_root(out_parquet))))
    return df


def job(run_files: Sequence[PathLike], manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]],
        data_dir: PathLike, dataset_params: Mapping[str, Mapping[str, Any]], out_parquet: PathLike,
        out_md: PathLike, data_tables: Sequence[PathLike] = ()) -> pd.DataFrame:
    """The table of every run among ``run_files`` (local_models.pt, final.pt and run.json of each; :func:`evaluate_run`
    in this process), each client's split from the data stage's partition.parquet and clients.parquet
    (``data_tables``)."""
    params = job_params(models, data_dir, dataset_params)
    return _finish(evaluate_runs(evaluate_run, run_files, manifests, params, data_tables), out_parquet, out_md,
                   [*run_files, *manifests, *data_tables])


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: every run's evaluation (rule ``evaluate``: :func:`evaluate_run`)."""
    _finish(gather_rows(inputs["evals"], NAME), outputs["parquet"], outputs["md"], list(inputs["evals"]))


def run_means(df: pd.DataFrame) -> pd.DataFrame:
    """Per run: how many clients kept a local model and the unweighted means over its clients (the official report)
    of ``acc_pct`` (each client's own model) and ``global_acc_pct`` (the global model on the same splits)."""
    out = []
    for (dataset, method, seed), g in df.groupby(["dataset", "method", "seed"], sort=True):
        out.append({"dataset": dataset, "method": method, "seed": int(seed), "status": str(g["status"].iloc[0]),
                    "clients": int(len(g)), "local_models": int((g["model"] == "local").sum()),
                    "acc_pct": float(g["acc_pct"].mean()), "global_acc_pct": float(g["global_acc_pct"].mean())})
    return pd.DataFrame(out, columns=RUN_COLUMNS)


def _pm(values: pd.Series) -> str:
    v = values.astype(float)
    return pm(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else math.nan)


def summary_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and method (completed runs): seeds, clients with a local model per run, and mean +- sd over seeds
    of the run means of each client's own model, of the global model on the same splits and of their difference."""
    runs = run_means(df)
    runs = runs[runs["status"] == "completed"]
    out = []
    for (dataset, method), g in runs.groupby(["dataset", "method"], sort=True):
        out.append({"dataset": dataset_label(dataset), "method": method_label(method), "seeds": int(len(g)),
                    "clients with a local model": f"{g['local_models'].mean():.1f} of {int(g['clients'].iloc[0])}",
                    "own model, own split (%)": _pm(g["acc_pct"]),
                    "global model, same splits (%)": _pm(g["global_acc_pct"]),
                    "own - global (points)": _pm(g["acc_pct"] - g["global_acc_pct"])})
    return pd.DataFrame(out, columns=["dataset", "method", "seeds", "clients with a local model",
                                      "own model, own split (%)", "global model, same splits (%)",
                                      "own - global (points)"])


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """One row per dataset and method, then the runs left out of the means."""
    if "acc_pct" not in df.columns:
        return [("", df)]
    parts: list[tuple[str, Any]] = [("", summary_frame(df))]
    runs = run_means(df)
    out = runs[runs["status"] != "completed"]
    if not out.empty:
        names = "; ".join(f"{dataset_label(r.dataset)} / {method_label(r.method)} seed {int(r.seed)}: {r.status}"
                          for r in out.itertuples())
        parts.append(("", f"{len(out)} of {len(runs)} runs left out of the means: {names}."))
    return parts
