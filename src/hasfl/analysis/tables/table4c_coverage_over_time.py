"""Table 4c (this project's extension): coverage over time -- which part of the global model the participants
still train, per run (its rows and their definitions: :mod:`hasfl.analysis.per_run.coverage_over_time`, the evaluate
job's), gathered here with the means over seeds per dataset and method (:func:`summary_frame`) and the report's lines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.evaluations import evaluate_runs, gather_rows
from hasfl.analysis.per_run.coverage_over_time import (ALL_BLOCKS, COLUMNS, LEDGER_COLUMNS, block_of,
                                                       coverage_counts, coverage_union, evaluate_run, min_coverage,
                                                       read_ledger, row_windows, run_rows, unit_counts)
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet
from hasfl.registry import METHODS

NAME = "table4c_coverage_over_time"
PathLike = str | Path

__all__ = ["ALL_BLOCKS", "COLUMNS", "LEDGER_COLUMNS", "NAME", "block_of", "compute", "coverage_counts",
           "coverage_union", "display", "job", "min_coverage", "preamble", "read_ledger",
           "row_windows", "run_rows", "summary_frame", "unit_counts"]


def _finish(rows: Sequence[Mapping[str, Any]], out_parquet: PathLike, out_md: PathLike,
            sources: Sequence[PathLike]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(list(rows), columns=COLUMNS)
    counts = ("seed", "coordinates", "trained_last_k", "trained_after_t0", "k", "rounds_used", "last_round", "t0",
              "gamma_min", "gamma_min_last_k")
    # a FIARSE row leaves the unions empty (masked_row): those count columns become nullable, the others stay int64
    df = df.astype({**{c: "Int64" if df[c].isna().any() else "int64" for c in counts},
                    "frac_last_k": "float64", "frac_after_t0": "float64", "unit_gamma_min": "float64",
                    "uncovered_frac_mean": "float64", "unit_count_min": "float64", "unit_count_max": "float64",
                    "unit_count_cv": "float64"})
    write_parquet(df, out_parquet)
    write_text(out_md, table_markdown(NAME, df, source_list(list(sources), results_root(out_parquet))))
    return df


def job(run_files: Sequence[PathLike], manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]],
        last_rounds: int, out_parquet: PathLike, out_md: PathLike) -> pd.DataFrame:
    """Table 4c of every run among ``run_files`` (:func:`evaluate_run`, in this process), with the model of
    ``models`` / the data-stage ``manifests``.

    A run that diverged or never passed t0 (:func:`hasfl.analysis.coverage.left_out_reason`) keeps its rows with
    the reason as ``status`` and is left out of the Markdown's means.

    Raises:
        ValueError: ``last_rounds`` is no integer >= 1, or a run lacks a file or holds a bad one (naming it).
    """
    from hasfl.analysis.specs import TABLE_SETTINGS

    problem = TABLE_SETTINGS["table4c_last_rounds"].check(last_rounds)
    if problem is not None:
        raise ValueError(f"table4c: analysis.table4c_last_rounds {problem}")
    params = {"models": dict(models), "last_rounds": last_rounds}
    return _finish(evaluate_runs(evaluate_run, run_files, manifests, params), out_parquet, out_md,
                   [*run_files, *manifests])


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: every run's evaluation (rule ``evaluate``: :func:`evaluate_run`)."""
    _finish(gather_rows(inputs["evals"], NAME), outputs["parquet"], outputs["md"], list(inputs["evals"]))


def _method_order(method: str) -> tuple[int, str]:
    names = list(METHODS)
    return (names.index(method), method) if method in names else (len(names), method)


def summary_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and method (completed runs): the window kind, the seeds, the mean over seeds of the overall
    fraction trained in the last k rounds and after t0, the mean over seeds of the smallest block fraction in
    the last k rounds, the block with the smallest mean fraction in the last k rounds ("--" when every
    block was trained whole), and the means over seeds of the minimum coverage index (coordinate and unit level),
    of the per-round fraction of coordinates no participant holds and of the unit counts' largest coefficient of
    variation (the ``all`` rows' ``gamma_min``, ``unit_gamma_min``, ``uncovered_frac_mean`` and ``unit_count_cv``)."""
    runs = df[df["status"] == "completed"]
    out = []
    for (dataset, method), g in sorted(runs.groupby(["dataset", "method"], sort=False),
                                       key=lambda kv: (kv[0][0], _method_order(kv[0][1]))):
        whole = g[g["block"] == ALL_BLOCKS]
        parts = g[g["block"] != ALL_BLOCKS]
        per_block = parts.groupby("block", sort=False)["frac_last_k"].mean()
        out.append({"dataset": dataset_label(dataset), "method": method_label(method),
                    "window": "/".join(sorted(set(whole["window"]))), "seeds": int(whole["seed"].nunique()),
                    "last k rounds": float(whole["frac_last_k"].mean()),
                    "after t0": float(whole["frac_after_t0"].mean()),
                    "min over blocks (last k)": float(parts.groupby("seed")["frac_last_k"].min().mean()),
                    "least trained block (last k)": (str(per_block.idxmin()) if len(per_block)
                                                     and float(per_block.min()) < 1.0 else "--"),
                    "min coverage index": float(whole["gamma_min"].mean()) if "gamma_min" in whole else math.nan,
                    "unit-level min coverage index": (float(whole["unit_gamma_min"].mean())
                                                      if "unit_gamma_min" in whole else math.nan),
                    "uncovered per round": (float(whole["uncovered_frac_mean"].mean())
                                            if "uncovered_frac_mean" in whole else math.nan),
                    "unit count CV": float(whole["unit_count_cv"].mean()) if "unit_count_cv" in whole else math.nan})
    return pd.DataFrame(out, columns=["dataset", "method", "window", "seeds", "last k rounds", "after t0",
                                      "min over blocks (last k)", "least trained block (last k)",
                                      "min coverage index", "unit-level min coverage index", "uncovered per round",
                                      "unit count CV"])


def preamble(df: pd.DataFrame) -> str:
    """The k of the table (config ``analysis.table4c_last_rounds``)."""
    if df.empty or "k" not in df.columns:
        return ""
    ks = sorted(set(int(k) for k in df["k"]))
    return f"k = {', '.join(map(str, ks))} (config `analysis.table4c_last_rounds`)."


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """One row per dataset and method (:func:`summary_frame`), a line naming the runs with fewer than k rounds
    (their every round is counted) and one naming the runs left out of the means (if any)."""
    if "frac_last_k" not in df.columns:
        return [("", df)]
    parts: list[tuple[str, Any]] = [("", summary_frame(df))]
    whole = df[df["block"] == ALL_BLOCKS]
    short = whole[whole["rounds_used"] < whole["k"]]
    if not short.empty:
        names = "; ".join(f"{dataset_label(r.dataset)} / {method_label(r.method)} seed {int(r.seed)}: "
                          f"{int(r.last_round)}" for r in short.itertuples())
        parts.append(("", f"{len(short)} of {len(whole)} runs have fewer rounds than k = {int(short['k'].iloc[0])}; "
                          f"their 'last k rounds' counts all their rounds ({names})."))
    out = whole[whole["status"] != "completed"]
    if not out.empty:
        names = "; ".join(f"{dataset_label(r.dataset)} / {method_label(r.method)} seed {int(r.seed)}: {r.status}"
                          for r in out.itertuples())
        parts.append(("", f"{len(out)} of {len(whole)} runs left out of the means (every row is in the Parquet "
                          f"file): {names}."))
    return parts
