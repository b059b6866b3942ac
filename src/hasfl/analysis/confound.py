"""Paper Table 5 (Section 4.4) and its positive control (Section 4.7).

For every hasfl run (dataset x seed), over the N clients, with the final smoothed
estimates H~ (``h_tilde_final``), the final allocation p (``p_final``), the capacity
pmax and the data stage's ground-truth TV distance:

* the paper's linear statistics r(H~, TV), r(H~, pmax), r(H~, TV | pmax) and
  r(p, TV | pmax) (partial correlations: correlation of OLS residuals on pmax);
* a decomposition that does not assume the capacity effect is linear: the OLS R^2
  (and adjusted R^2) of log H~ on the capacity tier as a categorical factor, on TV,
  and on both.

The same rows for the fedavg runs, where every client trains the full model, are the
positive control: with equal widths, can the estimator see the data?
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.stats import partial_corr, pearson, permutation_corr_p, variance_decomposition

__all__ = ["CONFOUND_METHODS", "EQUAL_WIDTHS", "SUB_MODEL", "confound_row", "population", "prior_weight",
           "table5_confound"]

#: Methods Table 5 covers: hasfl (the paper's table) and fedavg (the equal-width control).
CONFOUND_METHODS = ("hasfl", "fedavg")

#: Section 4.7's two populations of a run (Table 10, F10a / F10b, Figure 10).
SUB_MODEL, EQUAL_WIDTHS = "sub-model", "equal widths"


def population(run_clients: pd.DataFrame) -> str:
    """Section 4.7's population of a run from its clients table: equal widths when every client's final width
    ``p_final`` is the full model's (1; FedAvg, SCAFFOLD, FedProx), sub-model otherwise. Read from the run, not the
    registry's cost rule: FIARSE trains the whole model under a magnitude mask of its allocated share, so its cost is
    the full model's while its sub-models (the masks) follow capacity, the "magnitude-based sub-model composition"
    Section 4.7 names."""
    return EQUAL_WIDTHS if bool((run_clients["p_final"].to_numpy(float) >= 1.0 - 1e-9).all()) else SUB_MODEL


_DECOMP = ("r2_tier", "r2_tv", "r2_joint", "adj_r2_tier", "adj_r2_tv", "adj_r2_joint", "r2_tv_given_tier",
           "r2_tier_given_tv")
COLUMNS = ["dataset", "seed", "method", "status", "n_clients", "n_tiers", "r_h_tv", "r_h_pmax", "pr_h_tv_pmax",
           "pr_p_tv_pmax", *_DECOMP, "n_free", "r_p_tv_free", "p_perm_free"]
#: The free clients' values (lists, in client order) that F1d's stratified permutation test pools over the seeds;
#: kept out of :data:`COLUMNS`, whose statistics are numbers.
FREE_VALUES = ["p_free", "tv_free"]


def confound_row(data_clients: pd.DataFrame, run_clients: pd.DataFrame) -> dict[str, Any]:
    """Table 5 statistics of one run from the data stage's and the run's clients tables.

    Raises:
        ValueError: when the two tables disagree on the clients or their pmax.
    """
    d = data_clients.sort_values("client_id").reset_index(drop=True)
    r = run_clients.sort_values("client_id").reset_index(drop=True)
    if list(d["client_id"]) != list(r["client_id"]):
        raise ValueError("table5: the run's clients differ from the data stage's clients")
    if not np.allclose(d["pmax"].to_numpy(float), r["pmax"].to_numpy(float)):
        raise ValueError("table5: the run's pmax differ from the data stage's pmax")
    h = r["h_tilde_final"].to_numpy(dtype=np.float64)
    p = r["p_final"].to_numpy(dtype=np.float64)
    tv = d["tv"].to_numpy(dtype=np.float64)
    pmax = d["pmax"].to_numpy(dtype=np.float64)
    free = np.abs(p - pmax) > 1e-9
    p_perm_free = permutation_corr_p(p[free], tv[free])[0] if int(free.sum()) >= 3 else float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        log_h = np.where(h > 0, np.log(np.where(h > 0, h, 1.0)), np.nan)
    return {
        "n_clients": int(len(d)),
        "n_tiers": int(len(np.unique(pmax))),
        "r_h_tv": pearson(h, tv),
        "r_h_pmax": pearson(h, pmax),
        "pr_h_tv_pmax": partial_corr(h, tv, pmax),
        "pr_p_tv_pmax": partial_corr(p, tv, pmax),
        **variance_decomposition(log_h, pmax, tv),
        # clients whose final width is not their cap: the only ones r(p, TV | pmax) can come from (F1d)
        "n_free": int(free.sum()),
        # the free clients' own test: r(p, TV) among them, two-sided permutation p (exact up to 9)
        "r_p_tv_free": pearson(p[free], tv[free]) if int(free.sum()) >= 3 else float("nan"),
        "p_perm_free": p_perm_free,
        "p_free": [float(v) for v in p[free]],
        "tv_free": [float(v) for v in tv[free]],
    }


def prior_weight(beta: float, rounds: int, warmup: int, t_adapt: int, clients: int, clients_per_round: int) -> float:
    """The mean weight the prior H~ = 1 keeps in a client's final estimate (Eq. 5's smoothing).

    Eq. 5 moves a participant's H~ to ``beta H~ + (1 - beta) H_hat`` at each adaptation round it takes
    part in (0-based rounds t >= ``warmup`` with t % ``t_adapt`` = 0: A of them); a client sampled in m
    of them keeps ``beta^m`` of its initial value 1, and with m ~ Binomial(A, q), q = clients_per_round /
    clients, the mean is ``(1 - q + q beta)^A`` (the T_norm rescaling multiplies prior and data alike).
    A weight near 1 dilutes every correlation of H~ toward that of a constant.
    """
    a = sum(1 for t in range(int(warmup), int(rounds)) if t % int(t_adapt) == 0)
    q = float(clients_per_round) / float(clients)
    return (1.0 - q + q * float(beta)) ** a


def table5_confound(data_clients: Mapping[tuple[str, int], pd.DataFrame],
                    run_clients: Mapping[tuple[str, str, int], pd.DataFrame],
                    run_status: Mapping[tuple[str, str, int], str],
                    datasets: Sequence[str], methods: Sequence[str], seeds: Sequence[int],
                    over: Sequence[str] = CONFOUND_METHODS) -> pd.DataFrame:
    """Table 5 (+ the fedavg control): one row per dataset x seed x method of ``over`` (default
    :data:`CONFOUND_METHODS`; Section 4.7's table asks it of every method, whose runs all log E0 = H~).

    ``data_clients[(dataset, seed)]`` is the data stage's clients.parquet,
    ``run_clients[(dataset, method, seed)]`` the run's clients.parquet and
    ``run_status`` its run.json status. Methods the preset does not run get
    ``status = "not run"``; a diverged run keeps its status (its statistics are
    whatever its final estimates allow, usually NaN).
    """
    rows = []
    for method in over:
        for dataset in datasets:
            for seed in seeds:
                row: dict[str, Any] = {"dataset": dataset, "seed": int(seed), "method": method}
                key = (dataset, method, int(seed))
                if method not in methods or key not in run_clients:
                    row["status"] = "not run"
                    rows.append(row)
                    continue
                row["status"] = run_status.get(key, "completed")
                row.update(confound_row(data_clients[(dataset, int(seed))], run_clients[key]))
                rows.append(row)
    df = pd.DataFrame.from_records(rows, columns=COLUMNS + FREE_VALUES)
    for c in COLUMNS[6:]:
        df[c] = df[c].astype("float64")
    df["n_clients"] = df["n_clients"].fillna(0).astype("int64")
    df["n_tiers"] = df["n_tiers"].fillna(0).astype("int64")
    df["n_free"] = df["n_free"].astype("Int64")
    return df


def summarize(table5: pd.DataFrame) -> pd.DataFrame:
    """Mean and sample std over seeds of every statistic, per method x dataset (for the report)."""
    stats = COLUMNS[6:]
    done = table5[table5["status"] == "completed"]
    rows = []
    for (method, dataset), g in done.groupby(["method", "dataset"], sort=True):
        row: dict[str, Any] = {"method": method, "dataset": dataset, "n_runs": int(len(g))}
        for c in stats:
            v = g[c].to_numpy(dtype=np.float64)
            v = v[np.isfinite(v)]
            row[f"{c}_mean"] = float(v.mean()) if v.size else math.nan
            row[f"{c}_std"] = float(v.std(ddof=1)) if v.size >= 2 else math.nan
        rows.append(row)
    return pd.DataFrame.from_records(rows)
