"""Shared fixtures: the repository root, the merged presets, a venv-aware Snakemake call."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hasfl.config import load_config

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture()
def paper_config() -> dict:
    return load_config()


@pytest.fixture()
def quick_config() -> dict:
    return load_config(REPO / "presets" / "quick.yaml")


def run_snakemake(*args: str, cwd: Path = REPO, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """Run snakemake with the test's interpreter; returns the completed process (no check)."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def job_counts(output: str) -> dict[str, int]:
    """Rule -> number of jobs from Snakemake's "Job stats" table ({} when nothing to do)."""
    if "Job stats:" not in output:
        return {}
    block = output.split("Job stats:", 1)[1].split("\ntotal", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", block, re.M)}
