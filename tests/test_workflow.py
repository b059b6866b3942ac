"""The DAG run for real by Snakemake on the quick preset (issue 2 section 6, issue 3)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from conftest import REPO, run_snakemake
from hasfl.io import sha256_file


def _overlay(tmp_path, **extra) -> str:
    cfg = {"results_dir": str(tmp_path / "results"), "data_dir": str(tmp_path / "data"), **extra}
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_quick_data_stage_end_to_end(tmp_path):
    overlay = _overlay(tmp_path)
    res = run_snakemake("--cores", "2", "data", "--configfile", str(REPO / "presets/quick.yaml"), overlay,
                        "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path))
    assert res.returncode == 0, res.stderr[-4000:]
    root = tmp_path / "results" / "quick" / "data"
    for ds in ("digits", "shakespeare"):
        for seed in (42, 43, 44):
            d = root / ds / f"seed{seed}"
            manifest = json.loads((d / "manifest.json").read_text())
            for name in ("partition.parquet", "clients.parquet"):
                assert manifest["files"][name]["sha256"] == sha256_file(d / name)
            clients = pd.read_parquet(d / "clients.parquet")
            partition = pd.read_parquet(d / "partition.parquet")
            assert len(clients) == 20
            assert clients["n_train"].sum() == (partition["split"] == "train").sum()
            assert sorted(clients["pmax"]) == sorted([0.25] * 5 + [0.5] * 10 + [0.75] * 3 + [1.0] * 2)
            assert clients["tv"].between(0, 1).all()
            assert manifest["summary"]["clients"] == 20
        if ds == "shakespeare":
            assert clients.loc[0, "play"] == "hamlet" and clients.loc[0, "role"] == "HAM"
    digits = [pd.read_parquet(root / "digits" / f"seed{s}" / "partition.parquet") for s in (42, 43)]
    assert not digits[0].equals(digits[1])  # seeds redraw the partition
    # a second run has nothing to do
    again = run_snakemake("-n", "data", "--configfile", str(REPO / "presets/quick.yaml"), overlay,
                          "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path))
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_quick_preset_all(tmp_path):
    """The whole quick preset through Snakemake (minutes)."""
    overlay = _overlay(tmp_path)
    res = run_snakemake("--cores", "2", "all", "--configfile", str(REPO / "presets/quick.yaml"), overlay,
                        "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), timeout=3600)
    assert res.returncode == 0, res.stderr[-4000:]
    runs = tmp_path / "results" / "quick" / "runs"
    assert len(list(runs.glob("*/*/seed*/run.json"))) == 54
