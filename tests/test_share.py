"""Variants share finished runs (issue 28): a preset of another name whose runs have the same identity as a finished
folder beside it links them in (rules share_run / share_data_stage) and trains only what differs; the baseline is
untouched, a second build plans nothing, `hasfl verify` and `hasfl compare` read the variant, and share_runs: false
trains everything."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.dag

METHODS = ["hasfl", "fedavg", "fedprox"]
CLI = "import sys; from hasfl.cli import main; sys.exit(main(sys.argv[1:]))"


def _digests(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(f.relative_to(folder)): (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_mtime_ns)
            for f in sorted(folder.rglob("*")) if f.is_file() and "logs" not in f.parts and ".hasfl" not in f.parts}


@pytest.fixture(scope="module")
def work(snakemake, tiny_preset, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("share")
    base = tiny_preset(work, "base", methods=METHODS, rounds=2)
    res = snakemake.dag(base, workdir=work)
    assert res.returncode == 0, res.stderr[-4000:]
    tiny_preset(work, "variant", methods=METHODS, rounds=2, name="tiny-mu05", method_params={"fedprox": {"mu": 0.5}})
    return work


def test_a_variant_trains_only_what_differs_and_links_the_rest(snakemake, work):
    base_files = _digests(work / "results" / "tiny")
    plan = snakemake.dag(work / "variant.yaml", workdir=work, extra=("-n",))
    assert plan.returncode == 0, plan.stderr[-3000:]
    counts = snakemake.job_counts(plan.stdout + plan.stderr)
    assert counts.get("train") == 1 and counts.get("share_run") == 2 and counts.get("share_data_stage") == 1, counts
    assert "data_stage" not in counts
    assert "hasfl share: 2 runs and 1 data stages" in plan.stderr
    assert not (work / "results" / "tiny-mu05").exists()  # a dry run writes nothing
    res = snakemake.dag(work / "variant.yaml", workdir=work)
    assert res.returncode == 0, res.stderr[-4000:]
    variant = work / "results" / "tiny-mu05"
    run = variant / "runs" / "digits" / "hasfl" / "seed42"
    assert (run / "final.pt").is_symlink() and not (run / "manifest.json").is_symlink()
    assert (run / "final.pt").resolve() == (work / "results/tiny/runs/digits/hasfl/seed42/final.pt").resolve()
    assert not (variant / "runs/digits/fedprox/seed42/final.pt").is_symlink()  # trained
    assert _digests(work / "results" / "tiny") == base_files  # the baseline: same bytes, same times
    again = snakemake.dag(work / "variant.yaml", workdir=work, extra=("-n",))
    assert snakemake.job_counts(again.stdout + again.stderr) == {}, again.stdout[-2000:]
    base_again = snakemake.dag(work / "base.yaml", workdir=work, extra=("-n",))
    assert snakemake.job_counts(base_again.stdout + base_again.stderr) == {}
    verify = subprocess.run([sys.executable, "-c", CLI, "verify", str(variant)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    cmp = subprocess.run([sys.executable, "-c", CLI, "compare", str(work / "results" / "tiny"), str(variant),
                          "--json"], capture_output=True, text=True)
    assert cmp.returncode == 0, cmp.stderr
    runs = {r["method"]: r for r in json.loads(cmp.stdout)["runs"]}
    assert runs["hasfl"]["status"] == runs["fedavg"]["status"] == "identical"
    assert runs["fedprox"]["status"] == "different identity" and runs["fedprox"]["config_keys"] == ["method_params.mu"]


def test_share_runs_false_trains_everything(snakemake, work, tiny_preset):
    tiny_preset(work, "noshare", methods=METHODS, rounds=2, name="tiny-own", share_runs=False)
    plan = snakemake.dag(work / "noshare.yaml", workdir=work, extra=("-n",))
    counts = snakemake.job_counts(plan.stdout + plan.stderr)
    assert counts.get("train") == 3 and "share_run" not in counts and counts.get("data_stage") == 1, counts


def test_a_source_that_no_longer_matches_is_never_shared(tmp_path):
    from hasfl.identity import share_folder
    from hasfl.integrity import IntegrityError
    from hasfl.io import write_json

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.parquet").write_bytes(b"abc")
    write_json(src / "manifest.json", {"files": {"a.parquet": {"sha256": hashlib.sha256(b"abc").hexdigest()}}})
    assert share_folder(src, tmp_path / "dst") == ["a.parquet", "manifest.json"]
    assert (tmp_path / "dst" / "a.parquet").read_bytes() == b"abc"
    (src / "a.parquet").write_bytes(b"abd")
    with pytest.raises(IntegrityError, match="no longer matches"):
        share_folder(src, tmp_path / "dst2")
    assert not (tmp_path / "dst2").exists()
