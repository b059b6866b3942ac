"""Same config + seed -> identical bytes on CPU (issue 7, point 3): a tiny preset of the
whole DAG run twice gives byte-identical Parquet files everywhere (timings live apart)."""

from __future__ import annotations

import hashlib

import pytest

pytestmark = pytest.mark.dag

METHODS = ["hasfl", "random_budget", "fjord", "scaffold", "fedavg"]


def _run(snakemake, tiny_preset, tmp_path, name: str) -> dict[str, str]:
    overlay = tiny_preset(tmp_path, name, results_dir=name, data_dir="data", methods=METHODS, seeds=[42, 43])
    res = snakemake.dag(overlay, workdir=tmp_path, timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    root = tmp_path / name
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.parquet"))}


def test_tiny_preset_twice_is_byte_identical(snakemake, tiny_preset, tmp_path):
    first = _run(snakemake, tiny_preset, tmp_path, "a")
    second = _run(snakemake, tiny_preset, tmp_path, "b")
    assert len(first) >= 2 * 2 + 5 * 2 * 2  # data + runs, at least
    assert first == second
