"""A preset that forces divergence (issue 7, point 5): the runs stop cleanly with status
`diverged`, the analysis marks them instead of crashing, and the whole DAG completes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

pytestmark = pytest.mark.dag


def test_diverging_runs_do_not_break_the_dag(snakemake, tiny_preset, tmp_path):
    overlay = tiny_preset(tmp_path, "diverge", name="diverge",
                          dataset_params={"digits": {"optim": {"lr": 1.0e30, "clip": 1.0e30}}})
    res = snakemake.dag(overlay, workdir=tmp_path)
    assert res.returncode == 0, res.stderr[-4000:]
    root = tmp_path / "results" / "diverge"
    statuses = {p.parent.parent.name: json.loads(p.read_text())["status"] for p in root.glob("runs/*/*/seed42/run.json")}
    assert statuses["fedavg"] == "diverged" and statuses["hasfl"] == "diverged", statuses
    table = pd.read_parquet(root / "tables" / "table6_full_model.parquet")
    assert table["status"].astype(str).str.contains("diverged").any(), table
    assert (root / "findings.json").exists() and (root / "report.md").exists()
