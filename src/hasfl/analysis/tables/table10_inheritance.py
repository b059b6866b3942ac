"""Section 4.7 ("Who Inherits the Confound?"): the update-divergence estimate E0 of every method's runs against
capacity and the data.

Every run logs E0, the paper's update divergence (Eqs. 4-5; ``h_tilde_final`` in its clients.parquet), whatever
method trained it, so Table 5's statistics (:func:`hasfl.analysis.confound.confound_row`) are asked of every method
a folder ran: per run, over the clients, r(E0, pmax), r(E0, TV) and the partial r(E0, TV | pmax). ``population``
says which of Section 4.7's two populations a method is in: ``sub-model`` (its clients' widths follow their
capacity) or ``equal widths`` (every client's final width is the full model's, the paper's "holding model size
fixed": :func:`hasfl.analysis.confound.population`). No run is trained or evaluated for it: the table reads the runs' clients tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import confound
from hasfl.analysis.confound import EQUAL_WIDTHS, SUB_MODEL, population
from hasfl.analysis.inputs import run_status
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.runs import group_data_files, group_run_files
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

__all__ = ["COLUMNS", "EQUAL_WIDTHS", "STATS", "SUB_MODEL", "compute", "display", "job", "population"]

PathLike = str | Path
#: Table 5's per-run statistics this table keeps (E0 is Table 5's H~).
STATS = ("n_clients", "n_tiers", "r_h_tv", "r_h_pmax", "pr_h_tv_pmax")
COLUMNS = ["dataset", "method", "population", "seed", "status", *STATS]


def job(data_clients: Sequence[PathLike], run_files: Sequence[PathLike], datasets: Sequence[str],
        methods: Sequence[str], seeds: Sequence[int], out_parquet: PathLike, out_md: PathLike) -> pd.DataFrame:
    """The table from the data stages' and the runs' clients tables: one row per run of ``methods`` that ran."""
    data = {k: pd.read_parquet(f["clients.parquet"]) for k, f in group_data_files(data_clients).items()}
    runs = group_run_files(run_files)
    clients = {k: pd.read_parquet(f["clients.parquet"]) for k, f in runs.items()}
    ran = [m for m in methods if any(k[1] == m for k in clients)]
    df = confound.table5_confound(data, clients, run_status(runs), datasets, ran, seeds, over=ran)
    df = df[df["status"] != "not run"]
    df = df.assign(population=[population(clients[(d, m, int(sd))]) for d, m, sd in
                               zip(df["dataset"], df["method"], df["seed"], strict=True)])
    df = df.reindex(columns=COLUMNS).reset_index(drop=True)
    df["seed"] = df["seed"].astype("int64")
    write_parquet(df, out_parquet)
    write_text(out_md, table_markdown("table10_inheritance", df,
                                      source_list([*data_clients, *run_files], results_root(out_parquet))))
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: the data stage's clients tables and every run's clients table."""
    job(list(inputs["data_clients"]), list(inputs.get("runs", [])), params["datasets"], params["methods"],
        params["seeds"], outputs["parquet"], outputs["md"])


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """Per run: the method's population and E0's three correlations, two decimals."""
    cols = ["dataset", "method", "population", "seed", "status", "r_h_pmax", "pr_h_tv_pmax", "r_h_tv"]
    out = df[cols].copy()
    for c in cols[5:]:
        out[c] = out[c].map(lambda v: "--" if not math.isfinite(v) else f"{v:.2f}")
    return [("", out.rename(columns={"r_h_pmax": "r(E0,pmax)", "pr_h_tv_pmax": "r(E0,TV|pmax)",
                                     "r_h_tv": "r(E0,TV)"}))]
