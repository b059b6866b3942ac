"""Paper Tables 1-4, 6, 7 and the matched-budget comparison as data frames.

* :func:`table1_cost` -- Table 1 (Section 3.4): params, MACs/sample and upload MB per
  width p for the paper's three models and the preset's own.
* :func:`table2_datasets` -- Table 2 (Section 4.1): the data stage's dataset summaries.
* :func:`method_table` -- Tables 3, 4, 6, 7: best / final accuracy, peak-to-final
  delta, the allocated avg p and the costs as paid (:func:`run_costs`: width trained
  and uploaded, upload MB and training MMACs per participant-round), mean and sample
  std (ddof = 1) over seeds, per dataset x method.
  Each row also says how many seeds never rose above the test set's majority-class rate
  (:mod:`hasfl.analysis.floors`).
* :func:`matched_budget` -- Section 4.4: hasfl vs random_budget paired by seed: the paired
  test on final accuracy; the average widths, equal by construction, against the
  matching tolerance (no test).

Every function is pure (frames in, frames out) and returns rows in a fixed order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.floors import FLAG_COLUMNS, FLOOR_COLUMNS, floor_counts
from hasfl.analysis.specs import DATASET_LABELS, MethodTableSpec, table_datasets, table_methods
from hasfl.analysis.stats import mean_std, paired_ci

__all__ = [
    "COST_METRICS",
    "METRICS",
    "run_costs",
    "PAPER_MODELS",
    "matched_budget",
    "method_table",
    "seed_rows",
    "table1_cost",
    "table2_datasets",
]

#: Cost metrics of a run as it was paid (engine contract): the width trained and
#: uploaded, the upload MB and the training MACs per sample (millions) per participant-round.
COST_METRICS = ("avg_p_trained", "upload_mb", "train_mmacs")

#: Per-seed metrics averaged by :func:`method_table` (``avg_p`` is the allocated width).
METRICS = ("best_acc_pct", "final_acc_pct", "delta_pct", "avg_p", *COST_METRICS)

#: Table 1 model names of :func:`hasfl.models.cost.table1` and their datasets.
PAPER_MODELS = {"CIFAR-10 CNN": "cifar10", "EMNIST CNN": "emnist", "Shakespeare LSTM": "shakespeare"}

P_VALUES = (0.25, 0.5, 0.75, 1.0)


def _cost_row(source: str, model: str, dataset: str, p: float, params: int, macs: int, upload_mb: float) -> dict[str, Any]:
    return {"source": source, "model": model, "dataset": dataset, "p": float(p), "params": int(params),
            "macs": int(macs), "upload_mb": float(upload_mb), "params_m": params / 1e6, "macs_m": macs / 1e6}


def table1_cost(preset_models: Mapping[str, Mapping[str, Any]], p_values: Sequence[float] = P_VALUES) -> pd.DataFrame:
    """Table 1 rows: the paper's three models (``source="paper"``) then the preset's (``"preset"``).

    ``preset_models`` maps a dataset to ``{"model": <config model block with arch>,
    "in_shape": [...], "num_classes": int}`` (shape and classes from the data stage
    manifest). Costs come from :meth:`hasfl.models.ModelFamily.cost`.
    """
    from hasfl.models import family_from_config, table1  # torch: imported only when a table is built

    rows = [_cost_row("paper", r["model"], PAPER_MODELS[r["model"]], r["p"], r["params"], r["macs"], r["upload_mb"])
            for r in table1(tuple(p_values))]
    for dataset in sorted(preset_models):
        spec = preset_models[dataset]
        family = family_from_config(spec["model"], spec["in_shape"], spec["num_classes"])
        name = f"{DATASET_LABELS.get(dataset, dataset)} {spec['model']['arch'].upper()} (preset)"
        for p in p_values:
            c = family.cost(p)
            rows.append(_cost_row("preset", name, dataset, p, c.params, c.macs, c.upload_mb))
    return pd.DataFrame.from_records(rows)


def table2_datasets(summaries: Mapping[str, Sequence[Mapping[str, Any]]]) -> pd.DataFrame:
    """Table 2 from the manifests' ``summary`` blocks, one row per dataset, with the accuracy
    floors (majority-class and chance rates of the test set, in percent; NaN when a manifest
    predates them).

    ``summaries`` maps a dataset to the summaries of all its seeds; they must agree
    (the summary does not depend on the seed), otherwise a ValueError names the field.
    """
    rows = []
    for dataset in sorted(summaries):
        items = list(summaries[dataset])
        if not items:
            raise ValueError(f"table2: no manifest for dataset '{dataset}'")
        first = items[0]
        for other in items[1:]:
            for key in ("task", "classes", "train_size", "test_size", "input_shape", "clients", "majority_rate",
                        "chance_rate"):
                if other.get(key) != first.get(key):
                    raise ValueError(f"table2: manifests of '{dataset}' disagree on '{key}': {first.get(key)!r} vs "
                                     f"{other.get(key)!r}")
        rows.append({
            "dataset": dataset,
            "task": str(first["task"]),
            "classes": int(first["classes"]),
            "train_size": int(first["train_size"]),
            "test_size": int(first["test_size"]),
            "input_shape": " x ".join(str(int(s)) for s in first["input_shape"]),
            "clients": int(first["clients"]),
            "majority_pct": 100.0 * float(first["majority_rate"]) if first.get("majority_rate") is not None else math.nan,
            "chance_pct": 100.0 * float(first["chance_rate"]) if first.get("chance_rate") is not None else math.nan,
        })
    return pd.DataFrame.from_records(rows, columns=["dataset", "task", "classes", "train_size", "test_size",
                                                    "input_shape", "clients", "majority_pct", "chance_pct"])


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


def method_table(spec: MethodTableSpec, metrics: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str],
                 seeds: Sequence[int]) -> pd.DataFrame:
    """Paper Table ``spec.paper_table``: one row per (dataset, method of the spec).

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
            row: dict[str, Any] = {"table": spec.paper_table, "dataset": dataset, "method": method}
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


def matched_budget(metrics: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str], seeds: Sequence[int],
                   level: float = 0.95, tolerance: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """hasfl vs random_budget per dataset, paired by seed (Section 4.4).

    Returns ``(summary, per_seed)``. ``per_seed`` has one row per dataset x seed with
    both methods' final accuracy and avg p and their differences (hasfl - random_budget),
    and whether each run is at the accuracy floor (NA when unknown); seeds where either
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
                 "hasfl_at_floor", "random_budget_at_floor"]
    per_seed = pd.DataFrame.from_records(per_seed_rows, columns=seed_cols).astype(
        {"seed": "int64", "paired": "bool", "hasfl_at_floor": "boolean", "random_budget_at_floor": "boolean"})
    return summary, per_seed


#: What the matched-budget table does with each metric.
_MB_CHECK = {"final_acc_pct": "paired t", "avg_p": "matched by construction"}
