"""Data before training: every missing raw dataset is reported together before any data-stage,
training or analysis job starts, the run ends promptly with a non-zero exit code, and a failed
fetch leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.dag
def test_offline_preset_reports_every_missing_dataset_and_starts_nothing(tmp_path) -> None:
    data = tmp_path / "data"
    overlay = tmp_path / "offline.yaml"
    overlay.write_text(yaml.safe_dump({
        "name": "offline", "results_dir": str(tmp_path / "results"), "data_dir": str(data),
        "datasets": ["cifar10", "emnist", "digits"], "methods": ["fedavg"], "seeds": [42],
        "federation": {"rounds": 2}, "hasfl": {"warmup": 0}, "execution": {"max_cpu_wall_hours": 0}}))
    # no network for the downloads, whatever the machine has: a proxy that refuses connections
    env = dict(os.environ, HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9",
               http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    tic = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "all", "--configfile", str(overlay)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - tic
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert elapsed < 120, f"took {elapsed:.0f} s"
    # both image datasets are named, whichever fetch ran first
    assert "is not available under" in out and "cifar" in out.lower() and "emnist" in out.lower()
    assert "The preset's other datasets missing raw files too" in out
    for rule in ("data_stage", "train", "verify_runs", "analysis_"):
        assert f"rule {rule}" not in out, rule  # nothing but fetches was started
    assert "Traceback" not in out
    leftovers = [p for p in data.rglob("*")] if data.exists() else []
    assert leftovers == [], leftovers  # a failed fetch leaves nothing behind
