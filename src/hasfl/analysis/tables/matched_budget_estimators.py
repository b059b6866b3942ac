"""The matched budget of the estimator methods (F8): allocation by E2 (hasfl_probe) and E3
(hasfl_reported) vs its matched random-budget control, paired by seed (accuracy: t interval and paired
test; average width: matched by construction, not tested)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import estimators
from hasfl.analysis.floors import is_missing
from hasfl.analysis.inputs import flagged_metrics
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import num, pm, rel, results_root, source_list, write_text
from hasfl.analysis.runs import group_run_files, load_run_metrics
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

PathLike = str | Path
NAME = "matched_budget_estimators"


def job(run_files: Sequence[PathLike], datasets: Sequence[str], methods: Sequence[str],
                                  seeds: Sequence[int], level: float, out_parquet: PathLike, out_seeds: PathLike,
                                  out_md: PathLike, manifests: Sequence[PathLike] = (),
                                  tolerances: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Allocation by E2 / E3 (hasfl_probe, hasfl_reported) vs its random-budget control, paired by seed
    (``tolerances``: control method -> method_params.<control>.tolerance); F8 tests the accuracy."""
    runs = group_run_files(run_files)
    metrics = flagged_metrics(load_run_metrics(runs), manifests) if runs else load_run_metrics(runs)
    summary, per_seed = estimators.matched_budget_pairs(metrics, datasets, methods, seeds, level, tolerances)
    write_parquet(summary, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    write_text(out_md, table_markdown(NAME, summary,
                                              source_list([*run_files, *manifests], root),
                                              extra={f"Per seed (`{rel(out_seeds, root)}`)": per_seed}))
    return summary


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: the runs of every allocating method and its control, the data-stage manifests."""
    job(list(inputs["runs"]), params["datasets"], params["methods"], params["seeds"], params["ci_level"],
        outputs["parquet"], outputs["seeds"], outputs["md"], list(inputs.get("manifests", [])),
        dict(params["tolerances"]))


def _mb_estimators_display(df: pd.DataFrame) -> pd.DataFrame:
    acc = df[df["metric"] == "final_acc_pct"]
    recs = acc.to_dict("records")

    def floors(r: Mapping[str, Any]) -> str:
        bits = []
        for side in ("alloc", "control"):
            k = r.get(f"{side}_n_at_floor")
            if not is_missing(k) and int(k):
                bits.append(f"{method_label(r[f'{side}_method'])} {int(k)} of "
                            f"{int(r['n_pairs'])}")
        return ("**at floor: " + ", ".join(bits) + "**") if bits else ""

    return pd.DataFrame({
        "Dataset": [dataset_label(r["dataset"]) for r in recs],
        "Allocating by": [f"{r['estimator']} ({method_label(r['alloc_method'])})" for r in recs],
        "Control": [method_label(r["control_method"]) for r in recs],
        "Status": [r["status"] for r in recs], "Pairs": [int(r["n_pairs"]) for r in recs],
        "Allocating (%)": [pm(r.get("alloc_mean"), math.nan, 2) for r in recs],
        "Control (%)": [pm(r.get("control_mean"), math.nan, 2) for r in recs],
        "Mean diff (points)": [pm(r.get("mean_diff"), math.nan, 2) for r in recs],
        "CI": [("--" if is_missing(r.get("ci_low")) or not math.isfinite(float(r["ci_low"]))
                else f"[{float(r['ci_low']):.2f}, {float(r['ci_high']):.2f}] ({float(r['ci_level']):.0%})")
               for r in recs],
        "p (paired t)": [num(r.get("p_value")) for r in recs],
        "Floor": [floors(r) for r in recs],
    })


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """The paired test on accuracy per pair, then the matched widths."""
    if "pair" not in df.columns:
        return [("", df)]
    wid = df[df["metric"] == "avg_p"]
    recs = wid.to_dict("records")
    w = pd.DataFrame({
        "Dataset": [dataset_label(r["dataset"]) for r in recs],
        "Allocating": [method_label(r["alloc_method"]) for r in recs],
        "Status": [r["status"] for r in recs], "Pairs": [int(r["n_pairs"]) for r in recs],
        "Allocating avg p": [pm(r.get("alloc_mean"), math.nan, 4) for r in recs],
        "Control avg p": [pm(r.get("control_mean"), math.nan, 4) for r in recs],
        "Largest abs diff": [num(r.get("max_abs_diff"), 2) for r in recs],
        "Tolerance": [num(r.get("tolerance")) for r in recs],
        "Within tolerance": [r.get("within_tolerance") for r in recs],
    })
    return [("Final accuracy: paired t-test (allocating method - its control; F8)", _mb_estimators_display(df)),
            ("Average allocated width: matched by construction (no test)", w)]
