"""Same config + seed -> identical bytes on CPU (issue 7, point 3): a tiny preset of the
whole DAG run twice gives byte-identical Parquet files everywhere (timings live apart)."""

from __future__ import annotations

import hashlib

import yaml

from conftest import REPO, run_snakemake


def _run(tmp_path, name: str, data_dir) -> dict[str, str]:
    overlay = tmp_path / f"{name}.yaml"
    overlay.write_text(yaml.safe_dump({
        "name": "tiny", "results_dir": str(tmp_path / name), "data_dir": str(data_dir),
        "datasets": ["digits"], "methods": ["hasfl", "random_budget", "fjord", "scaffold", "fedavg"],
        "seeds": [42, 43], "federation": {"rounds": 3},
    }))
    res = run_snakemake("--cores", "2", "all", "--configfile", str(REPO / "presets/quick.yaml"), str(overlay),
                        "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    root = tmp_path / name
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.parquet"))}


def test_tiny_preset_twice_is_byte_identical(tmp_path):
    first = _run(tmp_path, "a", tmp_path / "data")
    second = _run(tmp_path, "b", tmp_path / "data")
    assert len(first) >= 2 * 2 + 5 * 2 * 2  # data + runs, at least
    assert first == second
