"""Whole-DAG interruption (issue 7, point 2): SIGINT or SIGKILL the snakemake process
group mid-run; `snakemake all --rerun-incomplete` (after `--unlock` for a SIGKILL) completes
with the same bytes as an uninterrupted run, and nothing partial ever looks complete."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.dag


@pytest.fixture(scope="module")
def overlay(tiny_preset):
    """The interrupted preset: 4 runs of 10 rounds checkpointing every 2, in ``folder/name``."""

    def write(folder: Path, name: str) -> Path:
        return tiny_preset(folder, name, results_dir=name, data_dir="data", rounds=10, execution={"checkpoint_every": 2},
                           methods=["hasfl", "random_budget", "fedavg", "scaffold"])

    return write


def _parquet_digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def reference(snakemake, overlay, tmp_path_factory) -> dict[str, str]:
    """Parquet digests of an uninterrupted run."""
    tmp = tmp_path_factory.mktemp("ref")
    res = snakemake.dag(overlay(tmp, "ref"), workdir=tmp, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    return _parquet_digests(tmp / "ref")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_dag_completes_with_identical_bytes(snakemake, overlay, tmp_path, reference, sig):
    args = snakemake.dag_args(overlay(tmp_path, "cut"), workdir=tmp_path)
    runs = tmp_path / "cut" / "tiny" / "runs"
    store = tmp_path / "cut" / ".store" / "runs"  # a job trains into <key>.partial (hasfl.dag.store)
    proc = subprocess.Popen([*snakemake.command, *args], cwd=tmp_path, start_new_session=True,
                            env=snakemake.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    def running() -> bool:  # a train job between two checkpoints: interrupt it, not only the scheduler
        return any(not (c.parent / "run.json").exists() for c in store.glob("*.partial/checkpoint.pt"))

    while len(list(runs.glob("*/*/seed*/run.json"))) < 1 or not running():
        assert proc.poll() is None, "the DAG finished before the interruption point"
        assert time.time() < deadline
        time.sleep(0.01)
    os.killpg(proc.pid, sig)
    proc.wait(timeout=120)
    done = list(runs.glob("*/*/seed*/run.json"))
    assert 1 <= len(done) < 4, done
    for run_json in done:  # whatever looks complete is complete
        assert (run_json.parent / "rounds.parquet").exists() and (run_json.parent / "final.pt").exists()
    if sig == signal.SIGKILL:
        assert snakemake("--unlock", *args[3:]).returncode == 0
    res = snakemake(*args, "--rerun-incomplete", timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _parquet_digests(tmp_path / "cut") == reference


def _processes_in(folder: Path) -> list[int]:
    """Pids of processes whose working directory is ``folder``: Snakemake, its job scripts, the warm
    worker and the job processes forked from it (they take the job's working directory)."""
    pids = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            if Path(os.readlink(cwd)) == folder:
                pids.append(int(cwd.parent.name))
        except OSError:
            continue
    return pids


def test_one_sigint_to_snakemake_stops_every_job_within_seconds(snakemake, overlay, tmp_path):
    """Ctrl-C that reaches only the Snakemake process (not the terminal's group): every job, also the
    ones forked by the warm worker, ends within seconds, with one line of explanation and no traceback."""
    args = snakemake.dag_args(overlay(tmp_path, "sig"), workdir=tmp_path)
    store = tmp_path / "sig" / ".store" / "runs"  # a job trains into <key>.partial (hasfl.dag.store)
    log = tmp_path / "snakemake.out"
    with log.open("w") as out:
        proc = subprocess.Popen([*snakemake.command, *args], cwd=tmp_path, start_new_session=True,
                                env=snakemake.env(), stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 600
        while not list(store.glob("*.partial/checkpoint.pt")):  # a train job is in its rounds
            assert proc.poll() is None, "the DAG finished before the interruption point"
            assert time.time() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)  # the Snakemake process only
        tic = time.time()
        proc.wait(timeout=60)
    stopped = time.time() - tic
    text = log.read_text()
    assert stopped < 15, f"Snakemake took {stopped:.1f} s to stop"
    assert "hasfl: interrupted: stopping the running jobs" in text
    assert "Traceback" not in text
    time.sleep(1.0)
    alive = [p for p in _processes_in(tmp_path) if p != os.getpid()]
    assert not alive, f"processes still running: {alive}"
    stopped_jobs = list((tmp_path / "sig" / "tiny" / "logs" / "train").rglob("*.log"))
    assert any("terminated (SIGTERM) after round" in p.read_text() for p in stopped_jobs)
