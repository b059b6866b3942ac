"""Sub-model accuracy: the sub-models the last round's participants held, cut from the final global model and
evaluated under each method's declared batch-norm rule (F9's sub-model unit; docs/decisions.md, the section on F9's
sub-model unit). The per-run rows and their definitions: :mod:`hasfl.analysis.per_run.submodel_accuracy` (the evaluate
job's); gathered here, with the means over seeds per dataset and method (:func:`summary_frame`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.evaluations import evaluate_runs, gather_rows, job_params
from hasfl.analysis.per_run.submodel_accuracy import (COLUMNS, NAME, NO_BN, MaskedShare, PartitionBlock,
                                                      evaluate_run, last_round_submodels, masked_model, run_row,
                                                      submodel_accuracy, submodel_model)
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import pm, results_root, source_list, write_text
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet
from hasfl.registry import METHODS

PathLike = str | Path

__all__ = ["COLUMNS", "NAME", "NO_BN", "MaskedShare", "PartitionBlock", "compute", "display", "evaluate_run", "job",
           "last_round_submodels", "masked_model", "run_row", "submodel_accuracy", "submodel_model", "summary_frame"]


def _finish(rows: Sequence[Mapping[str, Any]], out_parquet: PathLike, out_md: PathLike,
            sources: Sequence[PathLike]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(list(rows), columns=COLUMNS).astype({"seed": "int64"})
    write_parquet(df, out_parquet)
    write_text(out_md, table_markdown(NAME, df, source_list(list(sources), results_root(out_parquet))))
    return df


def job(run_files: Sequence[PathLike], manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]],
        data_dir: PathLike, dataset_params: Mapping[str, Mapping[str, Any]], out_parquet: PathLike,
        out_md: PathLike, data_tables: Sequence[PathLike] = ()) -> pd.DataFrame:
    """The table of every run among ``run_files`` (participation.parquet, final.pt and run.json of each;
    :func:`evaluate_run` in this process); the ``static`` rule reads the data stage's partition.parquet and
    clients.parquet (``data_tables``)."""
    params = job_params(models, data_dir, dataset_params)
    return _finish(evaluate_runs(evaluate_run, run_files, manifests, params, data_tables), out_parquet, out_md,
                   [*run_files, *manifests, *data_tables])


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: every run's evaluation (rule ``evaluate``: :func:`evaluate_run`)."""
    _finish(gather_rows(inputs["evals"], NAME), outputs["parquet"], outputs["md"], list(inputs["evals"]))


def _method_order(method: str) -> tuple[int, str]:
    names = list(METHODS)
    return (names.index(method), method) if method in names else (len(names), method)


def summary_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and method (completed runs): windows, batch-norm rule (and what was used), seeds, mean +- sd
    over seeds of the sub-model accuracy and the mean trained width."""
    runs = df[(df["status"] == "completed") & df["submodel_acc_pct"].notna()]
    out = []
    for (dataset, method), g in sorted(runs.groupby(["dataset", "method"], sort=False),
                                       key=lambda kv: (kv[0][0], _method_order(kv[0][1]))):
        acc = g["submodel_acc_pct"].astype(float)
        out.append({"dataset": dataset_label(dataset), "method": method_label(method),
                    "window": "/".join(sorted(set(g["windows"]))), "bn rule": "/".join(sorted(set(g["bn_rule"]))),
                    "bn used": "/".join(sorted(set(g["bn_used"]))), "seeds": int(g["seed"].nunique()),
                    "sub-model accuracy (%)": pm(float(acc.mean()), float(acc.std(ddof=1)) if len(acc) > 1
                                                 else math.nan),
                    "mean p_trained": float(g["mean_p_trained"].mean())})
    return pd.DataFrame(out, columns=["dataset", "method", "window", "bn rule", "bn used", "seeds",
                                      "sub-model accuracy (%)", "mean p_trained"])


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """One row per dataset and method, then the runs whose rule could not apply and the runs left out."""
    if "submodel_acc_pct" not in df.columns:
        return [("", df)]
    parts: list[tuple[str, Any]] = [("", summary_frame(df))]
    notes = df[df["bn_note"].astype(str) != ""]
    if not notes.empty:
        names = "; ".join(f"{dataset_label(r.dataset)} / {method_label(r.method)} seed {int(r.seed)}: {r.bn_note}"
                          for r in notes.itertuples())
        parts.append(("", f"Evaluated with test-batch statistics instead of the declared rule: {names}."))
    out = df[df["status"] != "completed"]
    if not out.empty:
        names = "; ".join(f"{dataset_label(r.dataset)} / {method_label(r.method)} seed {int(r.seed)}: {r.status}"
                          for r in out.itertuples())
        parts.append(("", f"{len(out)} of {len(df)} runs left out of the means: {names}."))
    return parts
