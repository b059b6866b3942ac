"""Table 8: the capacity-separable estimators against the truth and capacity (this project's
extension of Section 4.4; the paper's Section 5 asks which data statistics can be recovered
"by estimating within capacity groups, by using probe batches of a fixed width, or by having
clients report statistics directly").

Every run logs four per-client estimates (:data:`hasfl.analysis.specs.ESTIMATORS`: E0 the
paper's update divergence, E1 its within-tier z-score, E2 fixed-width probe divergence, E3
reported label histograms). For each run of :data:`~hasfl.analysis.specs.TABLE8_METHODS`
and each estimate E, :func:`run_rows` calls the capacity-grouped check of
:mod:`hasfl.analysis.diagnose` (the same code as ``hasfl diagnose``) with capacity = pmax, the
tiers as groups and the data stage's TV as the truth: r(E, TV), r(E, pmax) with its interval,
partial r(E, TV | pmax), adjusted R^2 of E on the tier / on TV / on both, the within-tier r
pooled over tiers, a permutation test within tiers and the verdict (confounded / data signal
/ inconclusive). :func:`pool` pools the correlations of one (dataset, method, estimate) over
the seeds in Fisher's z (:func:`hasfl.analysis.stats.fisher_pool`).

:func:`matched_budget_pairs` is the matched-budget comparison (Section 4.4's random-budget
control) of the methods that allocate by E2 / E3: :func:`hasfl.analysis.tables.matched_budget`
per pair, with the columns named for the allocating method (``alloc_*``) and its control
(``control_*``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.diagnose import DiagnoseError, diagnose
from hasfl.analysis.specs import ESTIMATOR_PAIRS, ESTIMATORS, TABLE8_METHODS
from hasfl.analysis.stats import fisher_pool

__all__ = ["POOLED_COLUMNS", "SEED_COLUMNS", "figure_points", "matched_budget_pairs", "pool", "run_rows",
           "table8"]

#: Per-run statistics (one row per run x estimate).
_STATS = ["r_e_tv", "r_e_pmax", "r_e_pmax_low", "r_e_pmax_high", "pr_e_tv_pmax", "adj_r2_tier", "f_p_tier",
          "adj_r2_tv", "adj_r2_both", "adj_r2_gap", "within_r", "within_r_low", "within_r_high", "within_weight",
          "within_groups", "permutation_p", "permutations"]
SEED_COLUMNS = ["dataset", "method", "seed", "estimator", "estimator_name", "column", "status", "n_clients",
                "n_tiers", "at_floor", "final_at_floor", *_STATS, "verdict", "reason"]
POOLED_COLUMNS = ["dataset", "method", "estimator", "estimator_name", "status", "n_runs", "n_clients", "n_at_floor",
                  "ci_level",
                  "r_e_tv", "r_e_tv_low", "r_e_tv_high",
                  "r_e_pmax", "r_e_pmax_low", "r_e_pmax_high",
                  "pr_e_tv_pmax", "pr_e_tv_pmax_low", "pr_e_tv_pmax_high", "pr_e_tv_pmax_q_p",
                  "within_r", "within_r_low", "within_r_high",
                  "adj_r2_tier_mean", "adj_r2_tier_std", "adj_r2_tv_mean", "adj_r2_tv_std", "adj_r2_gap_mean",
                  "n_data_signal", "n_confounded", "n_inconclusive", "verdicts"]


def _check_columns(clients: pd.DataFrame, source: str) -> None:
    missing = [e.column for e in ESTIMATORS if e.column not in clients.columns]
    if missing:
        raise ValueError(f"table8: {source} lacks the column(s) {', '.join(missing)} (the final values of the "
                         "estimators E0-E3); the run predates them -- rerun its training job")


def run_rows(data_clients: pd.DataFrame, run_clients: pd.DataFrame, *, alpha: float, permutations: int, seed: int,
             source: str = "clients.parquet") -> list[dict[str, Any]]:
    """One row per estimate E0-E3 of one run: :func:`hasfl.analysis.diagnose.diagnose` of E
    (capacity pmax, groups = the tiers, truth TV). Statistics are NaN, with the reason, where the
    check is undefined (e.g. a diverged run whose estimates are not finite).

    Raises:
        ValueError: naming ``source`` when the run's clients.parquet lacks an estimator column, or
            when the two tables disagree on the clients or their pmax.
    """
    _check_columns(run_clients, source)
    d = data_clients.sort_values("client_id").reset_index(drop=True)
    r = run_clients.sort_values("client_id").reset_index(drop=True)
    if list(d["client_id"]) != list(r["client_id"]):
        raise ValueError(f"table8: the clients of {source} differ from the data stage's clients")
    if not np.allclose(d["pmax"].to_numpy(float), r["pmax"].to_numpy(float)):
        raise ValueError(f"table8: the pmax of {source} differ from the data stage's pmax")
    frame = pd.DataFrame({"pmax": d["pmax"].to_numpy(float), "tv": d["tv"].to_numpy(float),
                          **{e.id: r[e.column].to_numpy(float) for e in ESTIMATORS}})
    rows = []
    for e in ESTIMATORS:
        row: dict[str, Any] = {"estimator": e.id, "estimator_name": e.name, "column": e.column,
                               "n_clients": int(len(frame)), "n_tiers": int(frame["pmax"].nunique())}
        try:
            g = diagnose(frame, e.id, "pmax", "tv", alpha=alpha, permutations=permutations, seed=seed)
        except DiagnoseError as exc:
            row.update(dict.fromkeys(_STATS, math.nan), verdict="inconclusive", reason=f"undefined: {exc}")
            rows.append(row)
            continue
        row.update(r_e_tv=g.r_truth, r_e_pmax=g.r_capacity, r_e_pmax_low=g.r_capacity_ci[0],
                   r_e_pmax_high=g.r_capacity_ci[1], pr_e_tv_pmax=g.partial_r_truth, adj_r2_tier=g.adj_r2_capacity,
                   f_p_tier=g.f_p_capacity, adj_r2_tv=g.adj_r2_truth, adj_r2_both=g.adj_r2_both,
                   adj_r2_gap=g.adj_r2_capacity - g.adj_r2_truth, within_r=g.within_r, within_r_low=g.within_r_ci[0],
                   within_r_high=g.within_r_ci[1], within_groups=g.within_groups, permutation_p=g.permutation_p,
                   permutations=g.permutations, verdict=g.verdict, reason=g.reason)
        # the weight of the within-tier r when it is pooled again over seeds: sum over tiers of (n_g - 3)
        tiers = [int((frame["pmax"] == t).sum()) for t in np.unique(frame["pmax"])]
        row["within_weight"] = float(sum(n - 3 for n in tiers if n >= 4)) if g.within_groups else math.nan
        rows.append(row)
    return rows


def _seed_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(rows, columns=SEED_COLUMNS)
    for c in _STATS:
        df[c] = df[c].astype("float64")
    for c in ("seed", "n_clients", "n_tiers"):
        df[c] = df[c].fillna(0).astype("int64")
    for c in ("at_floor", "final_at_floor"):
        df[c] = df[c].astype("boolean")
    return df


def table8(data_clients: Mapping[tuple[str, int], pd.DataFrame],
           run_clients: Mapping[tuple[str, str, int], pd.DataFrame],
           run_info: Mapping[tuple[str, str, int], Mapping[str, Any]], datasets: Sequence[str],
           methods: Sequence[str], seeds: Sequence[int], *, alpha: float, permutations: int, seed: int,
           sources: Mapping[tuple[str, str, int], str] | None = None) -> pd.DataFrame:
    """The per-run rows of Table 8: every dataset x method of :data:`TABLE8_METHODS` x seed x estimate.

    ``run_info[key]`` gives the run's ``status`` and its floor flags ``at_floor`` /
    ``final_at_floor`` (NA when unknown). A method the preset does not run gets one row per
    estimate with ``status = "not run"``.
    """
    rows = []
    for method in TABLE8_METHODS:
        for dataset in datasets:
            for s in seeds:
                key = (dataset, method, int(s))
                base = {"dataset": dataset, "method": method, "seed": int(s)}
                if method not in methods or key not in run_clients:
                    rows += [{**base, "estimator": e.id, "estimator_name": e.name, "column": e.column,
                              "status": "not run", "verdict": "", "reason": "not run in this preset"}
                             for e in ESTIMATORS]
                    continue
                info = run_info.get(key, {})
                extra = {"status": str(info.get("status", "completed")), "at_floor": info.get("at_floor", pd.NA),
                         "final_at_floor": info.get("final_at_floor", pd.NA)}
                for r in run_rows(data_clients[(dataset, int(s))], run_clients[key], alpha=alpha,
                                  permutations=permutations, seed=seed,
                                  source=(sources or {}).get(key, "clients.parquet")):
                    rows.append({**base, **extra, **r})
    return _seed_frame(rows)


def _pooled(values: pd.Series, ns: pd.Series, controls: int, level: float) -> tuple[float, float, float, float]:
    p = fisher_pool(values.to_numpy(float), ns.to_numpy(float), controls)
    low, high = p.interval(level)
    return p.r, low, high, p.q_p


def _mean_std(v: pd.Series) -> tuple[float, float]:
    x = v.to_numpy(float)
    x = x[np.isfinite(x)]
    return (float(x.mean()) if x.size else math.nan, float(x.std(ddof=1)) if x.size >= 2 else math.nan)


def pool(seeds_df: pd.DataFrame, level: float) -> pd.DataFrame:
    """Table 8's pooled rows: per dataset x method x estimate, the correlations of the completed
    runs pooled over seeds in Fisher's z (weights n - 3; n - 4 for the partial correlation; for the
    within-tier r the sum over tiers of n_tier - 3, so pooling over seeds equals pooling every
    tier of every seed at once), their ``level`` intervals, the mean (sample std) over seeds of
    the adjusted R^2, the count of each diagnose verdict and of the runs at the accuracy floor.
    """
    rows = []
    order = {m: i for i, m in enumerate(TABLE8_METHODS)}
    for (dataset, method, est), g in seeds_df.groupby(["dataset", "method", "estimator"], sort=False):
        name = str(g["estimator_name"].iloc[0])
        row: dict[str, Any] = {"dataset": dataset, "method": method, "estimator": est, "estimator_name": name,
                               "ci_level": level}
        done = g[g["status"] == "completed"]
        if (g["status"] == "not run").all():
            row.update(status="not run", n_runs=0, n_clients=0)
            rows.append(row)
            continue
        diverged = int((g["status"] != "completed").sum())
        row["status"] = "completed" if not diverged else f"{diverged} run(s) not completed, left out"
        row["n_runs"] = int(len(done))
        row["n_clients"] = int(done["n_clients"].sum())
        flags = done["at_floor"]
        row["n_at_floor"] = pd.NA if flags.isna().any() else int(flags.astype(bool).sum())
        ns = done["n_clients"].astype(float)
        row["r_e_tv"], row["r_e_tv_low"], row["r_e_tv_high"], _ = _pooled(done["r_e_tv"], ns, 0, level)
        row["r_e_pmax"], row["r_e_pmax_low"], row["r_e_pmax_high"], _ = _pooled(done["r_e_pmax"], ns, 0, level)
        (row["pr_e_tv_pmax"], row["pr_e_tv_pmax_low"], row["pr_e_tv_pmax_high"],
         row["pr_e_tv_pmax_q_p"]) = _pooled(done["pr_e_tv_pmax"], ns, 1, level)
        row["within_r"], row["within_r_low"], row["within_r_high"], _ = _pooled(
            done["within_r"], done["within_weight"] + 3.0, 0, level)
        row["adj_r2_tier_mean"], row["adj_r2_tier_std"] = _mean_std(done["adj_r2_tier"])
        row["adj_r2_tv_mean"], row["adj_r2_tv_std"] = _mean_std(done["adj_r2_tv"])
        row["adj_r2_gap_mean"], _ = _mean_std(done["adj_r2_gap"])
        counts = {v: int((done["verdict"] == v).sum()) for v in ("data signal", "confounded", "inconclusive")}
        row.update(n_data_signal=counts["data signal"], n_confounded=counts["confounded"],
                   n_inconclusive=counts["inconclusive"],
                   verdicts=", ".join(f"{k} {v}" for k, v in counts.items() if v) or "--")
        rows.append(row)
    df = pd.DataFrame.from_records(rows, columns=POOLED_COLUMNS)
    if len(df):
        df = df.assign(_m=df["method"].map(order)).sort_values(["dataset", "_m", "estimator"], kind="stable")
        df = df.drop(columns="_m").reset_index(drop=True)
    for c in POOLED_COLUMNS[8:-4]:
        df[c] = df[c].astype("float64")
    for c in ("n_runs", "n_clients", "n_data_signal", "n_confounded", "n_inconclusive"):
        df[c] = df[c].fillna(0).astype("int64")
    df["n_at_floor"] = df["n_at_floor"].astype("Int64")
    return df


def figure_points(data_clients: Mapping[tuple[str, int], pd.DataFrame],
                  run_clients: Mapping[tuple[str, int], pd.DataFrame]) -> pd.DataFrame:
    """One row per client of every run in ``run_clients`` (keyed (dataset, seed)): dataset, seed,
    client_id, pmax, tv and every estimator column the run has (Figure 9; a missing column stays
    missing so the figure can say so)."""
    frames = []
    for (dataset, s), r in sorted(run_clients.items()):
        d = data_clients[(dataset, s)][["client_id", "pmax", "tv"]]
        cols = ["client_id", *[e.column for e in ESTIMATORS if e.column in r.columns]]
        frames.append(d.merge(r[cols], on="client_id", how="inner").assign(dataset=dataset, seed=int(s)))
    if not frames:
        return pd.DataFrame(columns=["dataset", "seed", "client_id", "pmax", "tv"])
    return pd.concat(frames, ignore_index=True)


def matched_budget_pairs(metrics: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str],
                         seeds: Sequence[int], level: float,
                         tolerances: Mapping[str, float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`hasfl.analysis.tables.matched_budget` for every pair of :data:`ESTIMATOR_PAIRS`.

    Returns ``(summary, per_seed)`` with a ``pair`` column and the method columns renamed
    ``alloc_*`` (the allocating method, e.g. hasfl_probe) and ``control_*`` (its random-budget
    control); ``tolerances`` maps a control method to its ``method_params.<control>.tolerance``.
    A pair the preset does not run gets ``status = "not run"`` rows in ``summary``.
    """
    from hasfl.analysis.tables.matched_budget import matched_budget

    summaries, per_seeds = [], []
    for pair, alloc, control, est in ESTIMATOR_PAIRS:
        sub = metrics[metrics["method"].isin([alloc, control])].replace({"method": {alloc: "hasfl",
                                                                                     control: "random_budget"}})
        ran = [m for m, orig in (("hasfl", alloc), ("random_budget", control)) if orig in methods]
        summary, per_seed = matched_budget(sub, datasets, ran, seeds, level, (tolerances or {}).get(control))
        for df in (summary, per_seed):
            df.columns = [c.replace("random_budget_", "control_").replace("hasfl_", "alloc_") for c in df.columns]
            df.insert(0, "pair", pair)
            df.insert(1, "alloc_method", alloc)
            df.insert(2, "control_method", control)
            df.insert(3, "estimator", est)
        summaries.append(summary)
        per_seeds.append(per_seed)
    summary = pd.concat(summaries, ignore_index=True)
    per_seed = pd.concat([p for p in per_seeds if len(p)] or per_seeds[:1], ignore_index=True)
    return summary, per_seed
