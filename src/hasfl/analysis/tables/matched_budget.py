"""Section 4.4's matched-budget comparison: hasfl vs random_budget paired by seed -- the paired t-test on
final accuracy; the average widths, equal by construction, against the matching tolerance (no test)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.floors import is_missing
from hasfl.analysis.inputs import flagged_metrics
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import num, pm, rel, results_root, source_list, write_text
from hasfl.analysis.runs import group_run_files, load_run_metrics
from hasfl.analysis.stats import paired_ci
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

PathLike = str | Path
#: What is checked for each metric of the matched-budget comparison.
_MB_CHECK = {"final_acc_pct": "paired t", "avg_p": "matched by construction"}


def matched_budget(metrics: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str], seeds: Sequence[int],
                   level: float = 0.95, tolerance: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """hasfl vs random_budget per dataset, paired by seed (Section 4.4).

    Returns ``(summary, per_seed)``. ``per_seed`` has one row per dataset x seed with
    both methods' final accuracy and avg p and their differences (hasfl - random_budget),
    whether each run is at the accuracy floor (NA when unknown), and each run's ``delta_pct`` (final - best)
    ``last_gain_pct`` (its last evaluation's gain) and ``tail_slope_pct`` (its accuracy's slope at the end: the
    findings' trend of the gap, :func:`hasfl.analysis.findings.endpoints.gap_trend`); seeds where either
    run diverged are kept with ``paired = False``. ``summary`` has one row per dataset x
    metric:

    * ``final_acc_pct`` (``check = "paired t"``): number of pairs, mean difference,
      sample sd, the Student-t ``level`` interval and the paired t-test; and how many of
      the paired runs of each method sit at the floor.
    * ``avg_p`` (``check = "matched by construction"``): random_budget draws its widths to
      match the hasfl run's average width within ``tolerance``
      (``method_params.random_budget.tolerance``), so the difference is not an outcome and
      gets no test: ``max_abs_diff`` over the pairs and whether it is ``<= tolerance``.
    """
    per_seed_rows, rows = [], []
    ran = "hasfl" in methods and "random_budget" in methods
    tol = float(tolerance) if tolerance is not None else math.nan
    for dataset in datasets:
        if not ran:
            for metric in ("final_acc_pct", "avg_p"):
                rows.append({"dataset": dataset, "metric": metric, "status": "not run", "n_pairs": 0, "seeds": "",
                             "check": _MB_CHECK[metric]})
            continue
        a = metrics[(metrics["dataset"] == dataset) & (metrics["method"] == "hasfl")].set_index("seed")
        b = metrics[(metrics["dataset"] == dataset) & (metrics["method"] == "random_budget")].set_index("seed")

        def flag(frame: pd.DataFrame, seed: int) -> Any:
            return frame.at[seed, "at_floor"] if "at_floor" in frame.columns else pd.NA

        def value(frame: pd.DataFrame, seed: int, column: str) -> float:
            return float(frame.at[seed, column]) if column in frame.columns else math.nan

        for seed in sorted(set(a.index) & set(b.index) & set(int(s) for s in seeds)):
            ok = a.at[seed, "status"] == "completed" and b.at[seed, "status"] == "completed"
            per_seed_rows.append({
                "dataset": dataset, "seed": int(seed), "paired": bool(ok),
                "hasfl_status": a.at[seed, "status"], "random_budget_status": b.at[seed, "status"],
                "hasfl_final_acc_pct": a.at[seed, "final_acc_pct"], "random_budget_final_acc_pct": b.at[seed, "final_acc_pct"],
                "diff_final_acc_pct": a.at[seed, "final_acc_pct"] - b.at[seed, "final_acc_pct"],
                "hasfl_avg_p": a.at[seed, "avg_p"], "random_budget_avg_p": b.at[seed, "avg_p"],
                "diff_avg_p": a.at[seed, "avg_p"] - b.at[seed, "avg_p"],
                "hasfl_at_floor": flag(a, seed), "random_budget_at_floor": flag(b, seed),
                **{f"{m}_{c}": value(f, seed, c) for m, f in (("hasfl", a), ("random_budget", b))
                   for c in ("delta_pct", "last_gain_pct", "tail_slope_pct")},
            })
        pairs = [r for r in per_seed_rows if r["dataset"] == dataset and r["paired"]]
        for metric in ("final_acc_pct", "avg_p"):
            ci = paired_ci([r[f"hasfl_{metric}"] for r in pairs], [r[f"random_budget_{metric}"] for r in pairs], level)
            status = "completed" if ci.n >= 2 else ("too few pairs" if ci.n else "no completed pairs")
            row = {"dataset": dataset, "metric": metric, "check": _MB_CHECK[metric], "status": status,
                   "n_pairs": ci.n, "seeds": ",".join(str(r["seed"]) for r in pairs),
                   "hasfl_mean": float(np.mean([r[f"hasfl_{metric}"] for r in pairs])) if pairs else math.nan,
                   "random_budget_mean": float(np.mean([r[f"random_budget_{metric}"] for r in pairs])) if pairs else math.nan,
                   "mean_diff": ci.mean_diff, "sd_diff": ci.sd_diff}
            if metric == "final_acc_pct":
                row.update(ci_level=level, ci_low=ci.ci_low, ci_high=ci.ci_high, t_stat=ci.t_stat, p_value=ci.p_value,
                           ci_covers_zero=ci.covers(0.0))
                for m in ("hasfl", "random_budget"):
                    flags = [r[f"{m}_at_floor"] for r in pairs]
                    row[f"{m}_n_at_floor"] = pd.NA if any(f is pd.NA for f in flags) else int(sum(map(bool, flags)))
            else:
                diffs = [abs(r["diff_avg_p"]) for r in pairs]
                row.update(max_abs_diff=max(diffs) if diffs else math.nan, tolerance=tol,
                           within_tolerance=(bool(max(diffs) <= tol + 1e-12) if diffs and math.isfinite(tol)
                                             else pd.NA))
            rows.append(row)
    cols = ["dataset", "metric", "check", "status", "n_pairs", "seeds", "hasfl_mean", "random_budget_mean",
            "mean_diff", "sd_diff", "ci_level", "ci_low", "ci_high", "t_stat", "p_value", "ci_covers_zero",
            "hasfl_n_at_floor", "random_budget_n_at_floor", "max_abs_diff", "tolerance", "within_tolerance"]
    summary = pd.DataFrame.from_records(rows, columns=cols).astype({"n_pairs": "int64"})
    for c in ("ci_covers_zero", "within_tolerance"):
        summary[c] = summary[c].astype("boolean")
    for c in ("hasfl_n_at_floor", "random_budget_n_at_floor"):
        summary[c] = summary[c].astype("Int64")
    for c in ("hasfl_mean", "random_budget_mean", "mean_diff", "sd_diff", "ci_level", "ci_low", "ci_high", "t_stat",
              "p_value", "max_abs_diff", "tolerance"):
        summary[c] = summary[c].astype("float64")
    seed_cols = ["dataset", "seed", "paired", "hasfl_status", "random_budget_status", "hasfl_final_acc_pct",
                 "random_budget_final_acc_pct", "diff_final_acc_pct", "hasfl_avg_p", "random_budget_avg_p", "diff_avg_p",
                 "hasfl_at_floor", "random_budget_at_floor", "hasfl_delta_pct", "hasfl_last_gain_pct",
                 "random_budget_delta_pct", "random_budget_last_gain_pct", "hasfl_tail_slope_pct",
                 "random_budget_tail_slope_pct"]
    per_seed = pd.DataFrame.from_records(per_seed_rows, columns=seed_cols).astype(
        {"seed": "int64", "paired": "bool", "hasfl_at_floor": "boolean", "random_budget_at_floor": "boolean",
         **{c: "float64" for c in seed_cols if c.endswith(("_delta_pct", "_last_gain_pct", "_tail_slope_pct"))}})
    return summary, per_seed


def job(run_files: Sequence[PathLike], datasets: Sequence[str], methods: Sequence[str],
                       seeds: Sequence[int], level: float, out_parquet: PathLike, out_seeds: PathLike,
                       out_md: PathLike, manifests: Sequence[PathLike] = (),
                       tolerance: float | None = None) -> pd.DataFrame:
    """hasfl vs random_budget paired by seed (``tolerance``: method_params.random_budget.tolerance)."""
    metrics = flagged_metrics(load_run_metrics(group_run_files(run_files)), manifests)
    summary, per_seed = matched_budget(metrics, datasets, methods, seeds, level, tolerance)
    write_parquet(summary, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    write_text(out_md, table_markdown("matched_budget", summary, source_list([*run_files, *manifests], root),
                                              extra={f"Per seed (`{rel(out_seeds, root)}`)": per_seed}))
    return summary


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: the hasfl and random_budget runs, the data-stage manifests."""
    job(list(inputs["runs"]), params["datasets"], params["methods"], params["seeds"], params["ci_level"],
        outputs["parquet"], outputs["seeds"], outputs["md"], list(inputs.get("manifests", [])), params["tolerance"])


def _matched_budget_parts(df: pd.DataFrame) -> list[tuple[str, Any]]:
    acc = df[df["metric"] == "final_acc_pct"]
    wid = df[df["metric"] == "avg_p"]

    def floors(r: Mapping[str, Any]) -> str:
        bits = []
        for m in ("hasfl", "random_budget"):
            k = r.get(f"{m}_n_at_floor")
            if not is_missing(k) and int(k):
                bits.append(f"{method_label(m)} {int(k)} of {int(r['n_pairs'])}")
        return ("**at floor: " + ", ".join(bits) + "**") if bits else ""

    a = pd.DataFrame({
        "Dataset": acc["dataset"].map(lambda d: dataset_label(d)), "Status": acc["status"],
        "Pairs": acc["n_pairs"], "HAS-FL (%)": acc["hasfl_mean"].map(lambda v: pm(v, math.nan, 2)),
        "Random-budget (%)": acc["random_budget_mean"].map(lambda v: pm(v, math.nan, 2)),
        "Mean diff (points)": acc["mean_diff"].map(lambda v: pm(v, math.nan, 2)),
        "SD of diffs": acc["sd_diff"].map(lambda v: pm(v, math.nan, 2)),
        "CI": [("--" if not math.isfinite(lo) else f"[{lo:.2f}, {hi:.2f}] ({lvl:.0%})")
               for lo, hi, lvl in zip(acc["ci_low"], acc["ci_high"], acc["ci_level"].fillna(0.95), strict=True)],
        "t": acc["t_stat"].map(lambda v: pm(v, math.nan, 2)), "p (paired t)": acc["p_value"].map(lambda v: num(v)),
        "Floor": [floors(r) for r in acc.to_dict("records")],
    })
    w = pd.DataFrame({
        "Dataset": wid["dataset"].map(lambda d: dataset_label(d)), "Status": wid["status"],
        "Pairs": wid["n_pairs"], "HAS-FL avg p": wid["hasfl_mean"].map(lambda v: pm(v, math.nan, 4)),
        "Random-budget avg p": wid["random_budget_mean"].map(lambda v: pm(v, math.nan, 4)),
        "Largest abs diff": wid["max_abs_diff"].map(lambda v: "--" if not math.isfinite(v) else f"{v:.2g}"),
        "Tolerance": wid["tolerance"].map(lambda v: "--" if not math.isfinite(v) else f"{v:g}"),
        "Within tolerance": wid["within_tolerance"],
    }) if "max_abs_diff" in wid.columns else wid
    return [("Final accuracy: paired t-test (hasfl - random_budget)", a),
            ("Average allocated width: matched by construction (no test)", w)]


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """The paired test on accuracy, then the matched widths."""
    return _matched_budget_parts(df) if "check" in df.columns else [("", df)]
