"""Paper Table 5 (Section 4.4) and the fedavg positive control: correlations of the final estimates H~
with TV and capacity, and the R^2 decomposition (:mod:`hasfl.analysis.confound`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import confound
from hasfl.analysis.inputs import run_status
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.runs import group_data_files, group_run_files
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

PathLike = str | Path


def job(data_clients: Sequence[PathLike], run_files: Sequence[PathLike], datasets: Sequence[str],
        methods: Sequence[str], seeds: Sequence[int], out_parquet: PathLike, out_md: PathLike,
        attenuation: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Table 5 and the fedavg positive control from the data and run clients tables; ``attenuation``: the
    config values of Eq. 5's smoothing schedule (:func:`hasfl.analysis.confound.prior_weight`), whose
    result every row carries as ``prior_weight``."""
    data = {k: pd.read_parquet(f["clients.parquet"]) for k, f in group_data_files(data_clients).items()}
    runs = group_run_files(run_files)
    clients = {k: pd.read_parquet(f["clients.parquet"]) for k, f in runs.items()}
    df = confound.table5_confound(data, clients, run_status(runs), datasets, methods, seeds)
    df["prior_weight"] = confound.prior_weight(**attenuation) if attenuation else math.nan
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    summary = confound.summarize(df)
    write_text(out_md, table_markdown("table5_confound", df, source_list([*data_clients, *run_files], root),
                                              extra={"Mean and sample std over seeds": summary}))
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: the data stage's clients tables and the hasfl / fedavg runs' clients tables."""
    job(list(inputs["data_clients"]), list(inputs["runs"]), params["datasets"], params["methods"], params["seeds"],
        outputs["parquet"], outputs["md"], params.get("attenuation"))


def preamble(df: pd.DataFrame) -> str:
    """How much of its prior value 1 a client's final H~ still holds at this preset (the attenuation of Eq. 5)."""
    w = df["prior_weight"].dropna() if "prior_weight" in df.columns else pd.Series(dtype=float)
    if not len(w):
        return ""
    return (f"Attenuation: a client's final H~ still holds on average {float(w.iloc[0]):.0%} of its prior value 1 "
            "(Eq. 5 smooths only at the adaptation rounds the client takes part in: (1 - q + q beta)^A, A adaptation "
            "rounds, q the share of clients sampled per round), so every correlation of H~ here is diluted toward "
            "that of a constant; the paper's 200 rounds leave about 14%.")


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """Table 5's reader-facing columns, two decimals."""
    cols = ["dataset", "seed", "method", "status", "r_h_tv", "r_h_pmax", "pr_h_tv_pmax", "pr_p_tv_pmax",
            "adj_r2_tier", "adj_r2_tv", "adj_r2_joint", "r2_tier", "r2_tv", "r2_joint"]
    out = df[cols].copy()
    for c in cols[4:]:
        out[c] = out[c].map(lambda v: "--" if not math.isfinite(v) else f"{v:.2f}")
    out = out.rename(columns={"r_h_tv": "r(H~,TV)", "r_h_pmax": "r(H~,pmax)", "pr_h_tv_pmax": "r(H~,TV|pmax)",
                               "pr_p_tv_pmax": "r(p,TV|pmax)", "adj_r2_tier": "adjR2 tier",
                               "adj_r2_tv": "adjR2 TV", "adj_r2_joint": "adjR2 both", "r2_tier": "R2 tier",
                               "r2_tv": "R2 TV", "r2_joint": "R2 both"})
    return [("", out)]
