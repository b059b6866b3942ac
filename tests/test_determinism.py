"""Same config + seed -> identical bytes on CPU (issue 7, point 3): the whole DAG of the shared world's preset
(conftest ``tiny_world``: digits x hasfl, random_budget (which reads hasfl's run), fedprox x seeds 42, 43) run again
in a fresh copy of its workflow gives byte-identical Parquet files everywhere: data stages, runs, run evaluations
and analysis tables, in the folder and in its run store (timings live apart). Every method of the registry is run
twice job by job in tests/test_loop.py::test_every_method_is_deterministic."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.dag


def _parquet_digests(results: Path) -> dict[str, str]:
    """sha256 of every Parquet file under ``results`` (through the folder's links into its store), by path."""
    return {str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(results.rglob("*.parquet"))}


def test_the_worlds_dag_run_again_is_byte_identical(snakemake, tiny_world, tmp_path):
    for item in tiny_world.iterdir():
        if item.name != "results":  # the workflow copy and its presets, none of the world's outputs
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp_path / item.name)
    res = snakemake("--cores", "2", "all", "--configfile", "presets/quick.yaml", "tiny.yaml", cwd=tmp_path,
                    timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    first, second = _parquet_digests(tiny_world / "results"), _parquet_digests(tmp_path / "results")
    folder = [p for p in second if p.startswith("tiny/")]
    assert sum("/data/" in p for p in folder) >= 2 * 2 and sum("/runs/" in p for p in folder) >= 3 * 2 * 2, folder
    assert any("/evals/" in p for p in folder) and any(p.startswith("tiny/tables/") for p in folder), folder
    assert any(p.startswith(".store/runs/") for p in second)  # the store's entries compared too
    assert first == second
