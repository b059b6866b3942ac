"""The paper's published numbers (published.yaml) and our results set against them.

* :func:`load_published` -- published.yaml as one long frame: (table, dataset, method,
  metric, mean, std, n, derived, decimals). Table 5 is printed per seed; its mean and
  sample std (ddof = 1) over the three seeds are derived here (``derived = True``).
* :func:`comparability` -- whether a preset ran (dataset, method) at the paper's
  configuration: the config slice the run depends on is compared key by key with
  config.yaml's, and every differing dotted key is named in the reason.
* :func:`ours_long` -- our tables in the same long form.
* :func:`comparison` -- ``comparison.parquet``: for every published (table, dataset,
  method, metric) of a dataset the preset ran, ours vs published and whether ours lies
  within published mean +- k std (k = ``comparison_k_std``, default 2). Table 1 is
  deterministic and is checked against the printed rounding instead. Rows of a
  dataset not run at the paper's configuration are listed as "not comparable", with
  the reason, and never compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from hasfl.analysis.artifacts import natural_partition

__all__ = [
    "PUBLISHED_PATH",
    "comparability",
    "comparability_map",
    "comparison",
    "config_slice",
    "load_published",
    "ours_long",
]

PUBLISHED_PATH = Path(__file__).with_name("published.yaml")

TABLE1_METRICS = ("params_m", "macs_m", "upload_mb")
SUMMARY_METRICS = ("best_acc_pct", "final_acc_pct", "delta_pct", "avg_p")
TABLE5_METRICS = ("r_h_tv", "r_h_pmax", "pr_h_tv_pmax", "pr_p_tv_pmax")

PUBLISHED_COLUMNS = ["table", "dataset", "method", "metric", "mean", "std", "n", "derived", "decimals"]


def _p_label(p: float) -> str:
    return f"p={float(p):.2f}"


def load_published(path: str | Path = PUBLISHED_PATH) -> pd.DataFrame:
    """Published values as a long frame sorted by (table, dataset, method, metric)."""
    doc = yaml.safe_load(Path(path).read_text())
    rows: list[dict[str, Any]] = []
    t1 = doc["table1"]
    for r in t1["rows"]:
        for m in TABLE1_METRICS:
            rows.append({"table": 1, "dataset": r["dataset"], "method": _p_label(r["p"]), "metric": m,
                         "mean": float(r[m]), "std": math.nan, "n": 1, "derived": False,
                         "decimals": int(t1["decimals"][m])})
    for r in doc["summary"]:
        for m in SUMMARY_METRICS:
            if m not in r:
                continue
            v = r[m]
            mean, std = (float(v[0]), float(v[1])) if isinstance(v, list) else (float(v), math.nan)
            rows.append({"table": int(r["table"]), "dataset": r["dataset"], "method": r["method"], "metric": m,
                         "mean": mean, "std": std, "n": 3, "derived": False, "decimals": -1})
    per_seed = pd.DataFrame.from_records(doc.get("per_seed", []))
    if len(per_seed):
        for (table, dataset, method), g in per_seed.groupby(["table", "dataset", "method"], sort=True):
            for m in TABLE5_METRICS:
                v = g[m].to_numpy(dtype=np.float64)
                rows.append({"table": int(table), "dataset": dataset, "method": method, "metric": m,
                             "mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size >= 2 else math.nan,
                             "n": int(v.size), "derived": True, "decimals": -1})
    df = pd.DataFrame.from_records(rows, columns=PUBLISHED_COLUMNS)
    df = df.astype({"table": "int64", "n": "int64", "derived": "bool", "decimals": "int64"})
    return df.sort_values(["table", "dataset", "method", "metric"]).reset_index(drop=True)


def config_slice(config: Mapping[str, Any], dataset: str, method: str) -> dict[str, Any]:
    """Every config value a (dataset, method) result depends on, bar paths and devices.

    Seeds, the federation, the capacity tiers, the Dirichlet partition (image datasets
    only), the HAS-FL hyperparameters (hasfl, hasfl_nocov and random_budget depend on
    them; the estimate behind Table 5 is computed for every method), the method's own
    ``method_params`` and the dataset's ``dataset_params`` (data, model, optimizer).
    """
    out: dict[str, Any] = {
        "seeds": list(config["seeds"]),
        "federation": dict(config["federation"]),
        "capacity": dict(config["capacity"]),
        "hasfl": dict(config["hasfl"]),
        f"method_params.{method}": dict(config.get("method_params", {}).get(method, {})),
        f"dataset_params.{dataset}": dict(config.get("dataset_params", {}).get(dataset, {})),
    }
    if not natural_partition(dataset):
        out["partition"] = dict(config["partition"])
    if method == "random_budget":  # its budget is the hasfl run's measured avg p
        out["method_params.hasfl"] = dict(config.get("method_params", {}).get("hasfl", {}))
    return out


def _diff(a: Any, b: Any, prefix: str, out: list[str]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b), key=str):
            key = f"{prefix}.{k}" if prefix else str(k)
            if k not in a:
                out.append(f"{key} unset (paper {b[k]!r})")
            elif k not in b:
                out.append(f"{key}={a[k]!r} (not in the paper config)")
            else:
                _diff(a[k], b[k], key, out)
    elif a != b:
        out.append(f"{prefix}={a!r} (paper {b!r})")


def comparability(config: Mapping[str, Any], paper_config: Mapping[str, Any], dataset: str,
                  method: str) -> tuple[bool, str]:
    """``(comparable, reason)``: does (dataset, method) run at the paper's configuration?"""
    diffs: list[str] = []
    _diff(config_slice(config, dataset, method), config_slice(paper_config, dataset, method), "", diffs)
    if not diffs:
        return True, "paper configuration"
    shown = "; ".join(diffs[:8]) + (f"; and {len(diffs) - 8} more" if len(diffs) > 8 else "")
    return False, f"not the paper's configuration: {shown}"


def comparability_map(config: Mapping[str, Any], paper_config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"dataset/method": {"comparable": bool, "reason": str}}`` for the preset's datasets x methods.

    Keys are strings so the map can be a Snakemake param (params changes rerun the job).
    """
    out = {}
    for dataset in config["datasets"]:
        for method in config["methods"]:
            ok, reason = comparability(config, paper_config, dataset, method)
            out[f"{dataset}/{method}"] = {"comparable": ok, "reason": reason}
    return out


def ours_long(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Our values in the published long form: (table, dataset, method, metric, mean, std, n, status).

    ``tables`` maps a table name to its frame: ``table1_cost``, the method tables
    (``table3_allocation`` ...) and ``table5_confound``; missing names are skipped.
    """
    rows: list[dict[str, Any]] = []
    t1 = tables.get("table1_cost")
    if t1 is not None:
        for r in t1[t1["source"] == "paper"].itertuples(index=False):
            for m in TABLE1_METRICS:
                rows.append({"table": 1, "dataset": r.dataset, "method": _p_label(r.p), "metric": m,
                             "mean": float(getattr(r, m)), "std": math.nan, "n": 1, "status": "completed"})
    for name, df in tables.items():
        if name in ("table1_cost", "table5_confound"):
            continue
        for r in df.to_dict("records"):
            for m in SUMMARY_METRICS:
                rows.append({"table": int(r["table"]), "dataset": r["dataset"], "method": r["method"], "metric": m,
                             "mean": r[f"{m}_mean"], "std": r[f"{m}_std"], "n": int(r["n_completed"]),
                             "status": r["status"]})
    t5 = tables.get("table5_confound")
    if t5 is not None:
        for (dataset, method), g in t5.groupby(["dataset", "method"], sort=True):
            done = g[g["status"] == "completed"]
            status = "completed" if len(done) else str(g["status"].iloc[0])
            for m in TABLE5_METRICS:
                v = done[m].to_numpy(dtype=np.float64)
                v = v[np.isfinite(v)]
                rows.append({"table": 5, "dataset": dataset, "method": method, "metric": m,
                             "mean": float(v.mean()) if v.size else math.nan,
                             "std": float(v.std(ddof=1)) if v.size >= 2 else math.nan, "n": int(v.size),
                             "status": status})
    return pd.DataFrame.from_records(rows, columns=["table", "dataset", "method", "metric", "mean", "std", "n", "status"])


COMPARISON_COLUMNS = ["table", "dataset", "method", "metric", "status", "reason", "published_mean", "published_std",
                      "published_n", "published_derived", "ours_mean", "ours_std", "ours_n", "diff", "lower", "upper",
                      "criterion", "within"]


def comparison(published: pd.DataFrame, ours: pd.DataFrame, datasets: Sequence[str],
               comparable: Mapping[tuple[str, str], tuple[bool, str]], k_std: float = 2.0) -> pd.DataFrame:
    """comparison.parquet: one row per published (table, dataset, method, metric) of a preset dataset.

    ``comparable[(dataset, method)]`` is :func:`comparability`'s answer. Table 1 rows
    are always compared (the paper's models do not depend on the preset).
    ``status``: "compared", "not comparable" (with the reason), "not run" (the preset
    does not run the method) or "diverged" (no completed seed). ``within`` is set
    only for compared rows: |ours - published| <= k std, or, for Table 1, ours rounds to
    the printed value; it is null where the paper prints no std.
    """
    ours_idx = {(int(r["table"]), r["dataset"], r["method"], r["metric"]): r for r in ours.to_dict("records")}
    rows = []
    for pub in published.to_dict("records"):
        table, dataset, method, metric = int(pub["table"]), pub["dataset"], pub["method"], pub["metric"]
        if table != 1 and dataset not in datasets:
            continue
        row: dict[str, Any] = {"table": table, "dataset": dataset, "method": method, "metric": metric,
                               "published_mean": pub["mean"], "published_std": pub["std"], "published_n": pub["n"],
                               "published_derived": pub["derived"], "ours_mean": math.nan, "ours_std": math.nan,
                               "ours_n": 0, "diff": math.nan, "lower": math.nan, "upper": math.nan, "criterion": "",
                               "within": None, "reason": ""}
        ok, reason = (True, "deterministic model cost") if table == 1 else comparable.get((dataset, method),
                                                                                         (False, "no config"))
        mine = ours_idx.get((table, dataset, method, metric))
        if not ok:
            row.update(status="not comparable", reason=reason)
        elif mine is None or mine["status"] == "not run":
            row.update(status="not run", reason="the preset does not run this method")
        elif int(mine["n"]) == 0 or not math.isfinite(float(mine["mean"])):
            row.update(status=str(mine["status"]), reason="no completed seed")
        else:
            mean, std = float(mine["mean"]), float(mine["std"])
            row.update(status="compared", reason=reason, ours_mean=mean, ours_std=std, ours_n=int(mine["n"]),
                       diff=mean - pub["mean"])
            if math.isfinite(pub["std"]):
                row.update(lower=pub["mean"] - k_std * pub["std"], upper=pub["mean"] + k_std * pub["std"],
                           criterion=f"published mean +- {k_std:g} std")
                row["within"] = bool(row["lower"] <= mean <= row["upper"])
            elif int(pub["decimals"]) >= 0:
                tol = 0.5 * 10.0 ** (-int(pub["decimals"])) + 1e-9
                row.update(lower=pub["mean"] - tol, upper=pub["mean"] + tol,
                           criterion=f"rounds to the printed value ({int(pub['decimals'])} decimals)")
                row["within"] = bool(abs(mean - pub["mean"]) <= tol)
            else:
                row["criterion"] = "published without std: not judged"
        rows.append(row)
    df = pd.DataFrame.from_records(rows, columns=COMPARISON_COLUMNS)
    df["within"] = df["within"].astype("boolean")
    df = df.astype({"table": "int64", "published_n": "int64", "ours_n": "int64", "published_derived": "bool"})
    return df.sort_values(["table", "dataset", "method", "metric"]).reset_index(drop=True)
