"""Paper Tables 3, 4, 6, 7 (Sections 4.2-4.6): best / final accuracy, peak-to-final delta, the allocated
avg p and the costs as paid (width trained and uploaded, upload MB, training MMACs per
participant-round), mean and sample std (ddof = 1) over seeds, per dataset x method; each row also
says how many seeds never rose above the test set's majority-class rate (:mod:`hasfl.analysis.floors`).
One module for the four tables: each is a registry entry (:data:`hasfl.analysis.artifacts.METHOD_TABLES`)
with its methods and datasets."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.artifacts import METHOD_TABLES, Artifact, artifact_methods, table_datasets, table_methods
from hasfl.analysis.floors import FLAG_COLUMNS, FLOOR_COLUMNS, floor_counts, floor_phrase
from hasfl.analysis.inputs import COST_METRICS, flagged_metrics, metrics_with_costs
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import pm, pm_sig, rel, results_root, source_list, write_text
from hasfl.analysis.runs import group_run_files
from hasfl.analysis.stats import mean_std
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

PathLike = str | Path


#: Per-seed metrics averaged by :func:`method_table` (``avg_p`` is the allocated width).
METRICS = ("best_acc_pct", "final_acc_pct", "delta_pct", "avg_p", *COST_METRICS)


def seed_rows(metrics: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str]) -> pd.DataFrame:
    """The per-seed rows of ``metrics`` (from :func:`hasfl.analysis.runs.load_run_metrics`) for a table."""
    if metrics.empty:
        return metrics.copy()
    sel = metrics[metrics["dataset"].isin(list(datasets)) & metrics["method"].isin(list(methods))]
    order = {m: i for i, m in enumerate(methods)}
    dorder = {d: i for i, d in enumerate(datasets)}
    sel = sel.assign(_d=sel["dataset"].map(dorder), _m=sel["method"].map(order))
    return sel.sort_values(["_d", "_m", "seed"]).drop(columns=["_d", "_m"]).reset_index(drop=True)


def _status(statuses: Sequence[str], n_expected: int) -> str:
    if not statuses:
        return "missing"
    n_div = sum(s != "completed" for s in statuses)
    if n_div == 0:
        return "completed" if len(statuses) == n_expected else f"completed ({len(statuses)} of {n_expected} seeds)"
    if n_div == len(statuses):
        return "diverged"
    return f"diverged ({n_div} of {len(statuses)} seeds)"


def method_table(spec: Artifact, metrics: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str],
                 seeds: Sequence[int]) -> pd.DataFrame:
    """Paper Table ``spec.paper``: one row per (dataset, method of the spec).

    Means and sample std (ddof = 1) are over the *completed* seeds; diverged seeds
    are counted in ``n_diverged`` and named in ``diverged_seeds``. A method of the
    spec the preset does not run gets ``status = "not run"`` and NaN statistics.
    When ``metrics`` carries the floor flags (:func:`hasfl.analysis.floors.add_floor_flags`),
    each row gives its dataset's majority-class and chance rates and how many completed
    seeds never rose above the majority-class rate (``n_at_floor``, seeds in
    ``at_floor_seeds``), stayed at chance (``n_at_chance``) or ended at the floor
    (``n_final_at_floor``); NA when unknown.
    """
    rows = []
    for dataset in table_datasets(spec, datasets):
        dsel = metrics[metrics["dataset"] == dataset] if len(metrics) else metrics
        floor_vals = {c: (float(dsel[c].dropna().iloc[0]) if c in dsel.columns and dsel[c].notna().any() else math.nan)
                      for c in FLOOR_COLUMNS}
        for method in spec.methods:
            row: dict[str, Any] = {"table": spec.paper, "dataset": dataset, "method": method}
            if method not in table_methods(spec, methods):
                row.update(status="not run", n_seeds=0, n_completed=0, n_diverged=0, diverged_seeds="")
                for m in METRICS:
                    row[f"{m}_mean"], row[f"{m}_std"] = math.nan, math.nan
                row.update(floor_vals, n_at_floor=pd.NA, n_at_chance=pd.NA, n_final_at_floor=pd.NA,
                           at_floor_seeds="")
                rows.append(row)
                continue
            sel = dsel[dsel["method"] == method] if len(dsel) else dsel
            sel = sel[sel["seed"].isin(list(seeds))] if len(sel) else sel
            done = sel[sel["status"] == "completed"] if len(sel) else sel
            diverged = sorted(int(s) for s in sel.loc[sel["status"] != "completed", "seed"]) if len(sel) else []
            row.update(status=_status(list(sel["status"]) if len(sel) else [], len(seeds)), n_seeds=int(len(sel)),
                       n_completed=int(len(done)), n_diverged=len(diverged),
                       diverged_seeds=",".join(map(str, diverged)))
            for m in METRICS:
                mean, std, _ = mean_std(done[m].to_numpy() if len(done) else [])
                row[f"{m}_mean"], row[f"{m}_std"] = mean, std
            row.update(floor_vals, **floor_counts(done if len(done) else done.assign(**{c: [] for c in FLAG_COLUMNS})))
            rows.append(row)
    cols = ["table", "dataset", "method", "status", "n_seeds", "n_completed", "n_diverged", "diverged_seeds",
            *[f"{m}_{s}" for m in METRICS for s in ("mean", "std")], *FLOOR_COLUMNS, "n_at_floor", "n_at_chance",
            "n_final_at_floor", "at_floor_seeds"]
    df = pd.DataFrame.from_records(rows, columns=cols)
    df = df.astype({"table": "int64", "n_seeds": "int64", "n_completed": "int64", "n_diverged": "int64",
                    **{c: "float64" for c in FLOOR_COLUMNS}, "n_at_floor": "Int64", "n_at_chance": "Int64",
                    "n_final_at_floor": "Int64", "at_floor_seeds": "str"})
    return df


def job(table: str, run_files: Sequence[PathLike], datasets: Sequence[str], methods: Sequence[str],
                     seeds: Sequence[int], out_parquet: PathLike, out_seeds: PathLike, out_md: PathLike,
                     manifests: Sequence[PathLike] = ()) -> pd.DataFrame:
    """Tables 3, 4, 6, 7: aggregate (``out_parquet``) and per-seed rows (``out_seeds``).

    ``manifests`` (data-stage manifest.json of the table's datasets) give the accuracy
    floors; without them the floor flags are NA (unknown).
    """
    spec = METHOD_TABLES[table]
    spec = dataclasses.replace(spec, methods=artifact_methods(spec))  # + the registry's shown_in
    metrics = flagged_metrics(metrics_with_costs(group_run_files(run_files)), manifests)
    df = method_table(spec, metrics, datasets, methods, seeds)
    per_seed = seed_rows(metrics, table_datasets(spec, datasets), spec.methods)
    write_parquet(df, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    md = table_markdown(table, df, source_list([*run_files, *manifests], root),
                               extra={f"Per seed (`{rel(out_seeds, root)}`)": per_seed})
    write_text(out_md, md)
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: the runs of the table's methods and datasets, their data-stage manifests."""
    job(params["artifact"], list(inputs["runs"]), params["datasets"], params["methods"], params["seeds"],
        outputs["parquet"], outputs["seeds"], outputs["md"], list(inputs.get("manifests", [])))


def _floor_cell(row: Mapping[str, Any]) -> str:
    if "n_at_floor" not in row:
        return ""
    phrase = floor_phrase(row.get("n_at_floor"), row.get("n_final_at_floor"), int(row.get("n_completed", 0)))
    return f"**{phrase}**" if phrase.startswith("at floor") else phrase


def _method_display(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({
        "Dataset": df["dataset"].map(lambda d: dataset_label(d)),
        "Method": df["method"].map(lambda m: method_label(m)),
        "Status": df["status"],
        "Seeds": df["n_completed"],
        "Best acc (%)": [pm(a, b) for a, b in zip(df["best_acc_pct_mean"], df["best_acc_pct_std"], strict=True)],
        "Final acc (%)": [pm(a, b) for a, b in zip(df["final_acc_pct_mean"], df["final_acc_pct_std"], strict=True)],
        "Peak->final delta": [pm(a, b) for a, b in zip(df["delta_pct_mean"], df["delta_pct_std"], strict=True)],
    })
    if "n_at_floor" in df.columns:
        out["Floor"] = [_floor_cell(r) for r in df.to_dict("records")]
    out["Avg p (allocated)"] = [pm(a, b, 2) for a, b in zip(df["avg_p_mean"], df["avg_p_std"], strict=True)]
    if "avg_p_trained_mean" in df.columns:  # costs as paid
        out["Avg p (trained)"] = [pm(a, b, 2) for a, b in zip(df["avg_p_trained_mean"], df["avg_p_trained_std"],
                                                              strict=True)]
        out["Upload MB / client-round"] = [pm_sig(a, b) for a, b in zip(df["upload_mb_mean"], df["upload_mb_std"],
                                                                        strict=True)]
        out["Train MMACs / sample"] = [pm_sig(a, b) for a, b in zip(df["train_mmacs_mean"], df["train_mmacs_std"],
                                                                    strict=True)]
    return out


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """A method table as a reader sees it."""
    return [("", _method_display(df))]


def preamble(df: pd.DataFrame) -> str:
    """Text shown between the table's note and its rows: the floors of its datasets."""
    if "majority_pct" in df.columns and len(df):
        levels = []
        for dataset, g in df.groupby("dataset", sort=False):
            maj, ch, tol = (float(g[c].iloc[0]) for c in ("majority_pct", "chance_pct", "floor_tol_pct"))
            if math.isfinite(maj):
                levels.append(f"{dataset_label(dataset)} majority class {maj:.2f}%, chance {ch:.2f}%, "
                              f"tolerance {tol:.2g} points")
        if not levels:
            return ("Floor: unknown (the data-stage manifests predate the majority-class rate; rerun the data "
                    "stage).")
        return ("Floor: `at floor: k of n seeds` = in k of the n completed seeds the best accuracy of any round stayed "
                "within the tolerance of the test set's majority-class rate (the run never predicted better than the "
                "most common class); `ends at floor` = only the final accuracy did. Levels: " + "; ".join(levels)
                + ".")
    return ""
