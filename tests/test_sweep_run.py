"""``hasfl sweep KEY=V1,V2 --configfile ...``: one command over a key's values. On a copy of the finished tiny world
(digits x hasfl, random_budget, fedprox x 2 seeds): each point's FedProx runs are trained once, the runs the swept key
does not touch are linked from the store the world already holds, and the same command again redoes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hasfl import sweep_run
from hasfl.config import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_the_points_are_validated_and_named_before_any_job() -> None:
    points = sweep_run.plan("method_params.fedprox.mu=0.01,0.1,1.0", ["presets/quick.yaml"], REPO)
    assert [p.name for p in points] == ["quick-mu0.01", "quick-mu0.1", "quick-mu1.0"]
    assert [p.config["method_params"]["fedprox"]["mu"] for p in points] == [0.01, 0.1, 1.0]
    assert points[0].overlay == REPO / "sweeps" / "quick-mu" / "quick-mu0.01.yaml"
    with pytest.raises(ConfigError, match=r"the point method_params.fedprox.mu=-1"):
        sweep_run.plan("method_params.fedprox.mu=0.1,-1", ["presets/quick.yaml"], REPO)
    with pytest.raises(ConfigError, match="expected KEY=V1,V2"):
        sweep_run.plan("method_params.fedprox.mu=0.1", ["presets/quick.yaml"], REPO)


def _entry(folder: Path) -> Path:
    return (folder / "manifest.json").resolve().parent


@pytest.mark.dag
@pytest.mark.snakemake
def test_a_sweep_trains_only_what_each_point_changes_and_resumes_redoing_nothing(tiny_world) -> None:
    cmd = [sys.executable, "-m", "hasfl.cli", "sweep", "method_params.fedprox.mu=0.2,0.5", "--configfile",
           "presets/quick.yaml", "tiny.yaml", "--directory", str(tiny_world)]
    res = subprocess.run(cmd, cwd=tiny_world, capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    results = tiny_world / "results"
    base = results / "tiny" / "runs" / "digits"
    entries = {}
    for point in ("tiny-mu0.2", "tiny-mu0.5"):
        runs = results / point / "runs" / "digits"
        for seed in ("seed42", "seed43"):
            # the runs mu does not touch are the world's own store entries, linked; FedProx's are new ones
            assert _entry(runs / "hasfl" / seed) == _entry(base / "hasfl" / seed)
            assert _entry(runs / "random_budget" / seed) == _entry(base / "random_budget" / seed)
            assert _entry(runs / "fedprox" / seed) != _entry(base / "fedprox" / seed)
            entries[point, seed] = _entry(runs / "fedprox" / seed)
    assert len(set(entries.values())) == 4
    assert "# Sweep over `method_params.mu`" in res.stdout
    store = sorted(p.name for p in (results / ".store" / "runs").iterdir())
    again = subprocess.run(cmd, cwd=tiny_world, capture_output=True, text=True, timeout=1500)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert sorted(p.name for p in (results / ".store" / "runs").iterdir()) == store  # no run made again
    assert (again.stdout + again.stderr).count("Nothing to be done") == 2
