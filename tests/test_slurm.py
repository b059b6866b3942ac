"""The DAG through SLURM (issue 5): profiles/slurm on a single-node loopback cluster.

A session fixture brings the cluster up with scripts/slurm-local.sh (root; installs the
Debian packages when missing) and always tears down what it started. The tiny preset's
`runs` target then goes through `--workflow-profile profiles/slurm` plus the overrides of
profiles/slurm-local-test; every training job must have been a SLURM job, and every
Parquet file must equal, byte for byte, a local run of the same preset.

Where it runs: as root, or in CI (``CI=true``). Anywhere else it is skipped, with the reason
in the summary (`-ra`). Where it runs, a cluster that cannot be brought up FAILS the test with
the reason. HASFL_SKIP_SLURM=1 skips it anywhere (e.g. a machine with a real SLURM installation).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from hasfl.registry import RUN_FILES


def _skip_reason() -> str | None:
    """Why the SLURM test does not run here (None: it runs, and a cluster that will not come up fails it)."""
    if os.environ.get("HASFL_SKIP_SLURM") == "1":
        return "HASFL_SKIP_SLURM=1: SLURM tests skipped"
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        return ("the local SLURM cluster (scripts/slurm-local.sh) needs root: not root and not in CI (CI=true); "
                "run as root or set CI=true to run it")
    return None


pytestmark = [pytest.mark.slurm, pytest.mark.dag,
              pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))]

UP_TIMEOUT_S = 900  # apt-get update + install (each bounded to 300 s in the script) + start
RUN_LIMIT_S = 300  # the SLURM run takes about 1.5-2 min on 2 cores
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")


@pytest.fixture(scope="session")
def slurm_cluster(repo):
    """A running single-node cluster; torn down at the end unless it was already up."""

    def _script(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
        script = repo / "scripts" / "slurm-local.sh"
        return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=timeout)

    was_up = _script("status", timeout=60).returncode == 0
    try:
        up = _script("up", timeout=UP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        _script("down")
        pytest.fail(f"scripts/slurm-local.sh up did not finish in {UP_TIMEOUT_S}s: {exc.stderr}", pytrace=False)
    if up.returncode != 0:
        _script("down")
        pytest.fail(
            "could not start the local SLURM cluster (scripts/slurm-local.sh up; "
            "set HASFL_SKIP_SLURM=1 to skip the SLURM tests):\n" + up.stdout + up.stderr,
            pytrace=False,
        )
    try:
        yield
    finally:
        if not was_up:
            down = _script("down", timeout=300)
            assert down.returncode == 0, down.stdout + down.stderr


def _snakemake(snakemake, overlay: Path, workdir: Path, *extra: str) -> list[str]:
    """The snakemake command line of the tiny preset's `runs`, stopped with SIGINT (never SIGTERM) at RUN_LIMIT_S."""
    args = snakemake.dag_args(overlay, workdir=workdir, target="runs")
    return ["timeout", "-s", "INT", "-k", "30", str(RUN_LIMIT_S), *snakemake.command, *args[2:], *extra]


def test_tiny_preset_through_slurm_matches_local_run(slurm_cluster, snakemake, tiny_preset, repo, tmp_path):
    data = tmp_path / "data"
    local_dir, slurm_dir = tmp_path / "local", tmp_path / "slurm"
    env = snakemake.env()
    overlays = {d: tiny_preset(d, "overlay", results_dir="results", data_dir=data) for d in (local_dir, slurm_dir)}
    methods = tiny_preset.defaults["methods"]
    # The local reference run goes alongside the SLURM run, which mostly waits for polls.
    local = subprocess.Popen(
        _snakemake(snakemake, overlays[local_dir], local_dir, "--cores", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        slurm = subprocess.run(
            _snakemake(
                snakemake, overlays[slurm_dir], slurm_dir,
                "--workflow-profile", str(repo / "profiles" / "slurm"),
                "--profile", str(repo / "profiles" / "slurm-local-test"),
            ),
            capture_output=True, text=True, env=env, timeout=RUN_LIMIT_S + 60,
        )  # fmt: skip
    finally:
        local_out, _ = local.communicate(timeout=RUN_LIMIT_S + 60)
    log = slurm.stdout + slurm.stderr
    assert slurm.returncode == 0, f"SLURM run failed (rc {slurm.returncode}; 124 = timeout):\n{log[-6000:]}"
    assert local.returncode == 0, local_out[-4000:]
    assert "workflow specific profile" in log and str(repo / "profiles" / "slurm") in log

    # Every training job was a SLURM job: 3 submissions of rule train, none run locally.
    submitted = {int(jobid): Path(logfile) for jobid, logfile in SUBMITTED.findall(log)}
    train_ids = sorted(j for j, f in submitted.items() if f.parts[-3] == "rule_train")
    assert len(train_ids) == len(methods), log[-6000:]
    assert "localrule train" not in log and "localrule data_stage" not in log
    for jobid in train_ids:
        assert submitted[jobid].is_file(), f"no SLURM log {submitted[jobid]}"
    queue = subprocess.run(
        ["squeue", "--states=all", "-h", "-o", "%i|%k|%T|%P", "-j", ",".join(map(str, submitted))],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert queue.returncode == 0, queue.stderr
    jobs = {int(i): (comment, state, part) for i, comment, state, part in
            (line.split("|") for line in queue.stdout.split())}  # fmt: skip
    assert set(jobs) == set(submitted), (jobs, submitted)
    for jobid, (comment, state, partition) in jobs.items():
        assert state == "COMPLETED" and partition == "debug", (jobid, comment, state, partition)
    wildcards = [submitted[j].parts[-2] for j in train_ids]  # <dataset>_<method>_<seed>
    assert [jobs[j][0] for j in train_ids] == [f"rule_train_wildcards_{w}" for w in wildcards]
    assert sorted(w.removeprefix("digits_").removesuffix("_42") for w in wildcards) == sorted(methods)

    # Byte-identical Parquet files: data stage and runs.
    local_root = local_dir / "results" / "tiny"
    slurm_root = slurm_dir / "results" / "tiny"
    expected = sorted(p.relative_to(local_root) for p in local_root.rglob("*.parquet"))
    run_tables = sum(f.endswith(".parquet") for f in RUN_FILES)  # rounds, clients, participation
    assert len(expected) == 2 + run_tables * len(methods), expected
    assert sorted(p.relative_to(slurm_root) for p in slurm_root.rglob("*.parquet")) == expected
    differ = [str(rel) for rel in expected if (local_root / rel).read_bytes() != (slurm_root / rel).read_bytes()]
    assert not differ, f"Parquet files differ between the SLURM and the local run: {differ}"


def test_a_cuda_build_from_a_node_without_a_gpu_submits_train_jobs_that_request_one(slurm_cluster, snakemake,
                                                                                   tiny_preset, repo, tmp_path):
    """``device: cuda`` from a login node without a GPU (this machine): the plan is accepted (the jobs run on the
    cluster's nodes, not here) and each train job is submitted asking SLURM for a GPU (the loopback node declares
    one gres gpu, scripts/slurm-local.sh ``SLURM_GPUS``). The node has no GPU torch can use, so the job fails there,
    in its own log, naming the device key; the build stops with it."""
    work = tmp_path / "cuda"
    overlay = tiny_preset(work, "overlay", results_dir="results", data_dir=tmp_path / "data")
    target = str(work / "results" / "tiny" / "runs" / "digits" / "hasfl" / "seed42" / "run.json")
    args = snakemake.dag_args(overlay, workdir=work, target=target)
    cmd = ["timeout", "-s", "INT", "-k", "30", str(RUN_LIMIT_S), *snakemake.command, *args[2:],
           "--workflow-profile", str(repo / "profiles" / "slurm"),
           "--profile", str(repo / "profiles" / "slurm-local-test"), "--config", "device=cuda"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=snakemake.env(), timeout=RUN_LIMIT_S + 60)
    log = res.stdout + res.stderr
    assert "a run would not start" not in log, log[-4000:]
    submitted = {int(jobid): Path(logfile) for jobid, logfile in SUBMITTED.findall(log)}
    train = [j for j, f in submitted.items() if f.parts[-3] == "rule_train"]
    assert len(train) == 1 and res.returncode != 0, (res.returncode, log[-4000:])
    shown = subprocess.run(["scontrol", "show", "job", "-o", str(train[0])], capture_output=True, text=True,
                           timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"gres[/:]gpu[:=]1", shown.stdout), shown.stdout
    assert "JobState=FAILED" in shown.stdout, shown.stdout
    job_log = submitted[train[0]].read_text()
    assert "config key 'device' is 'cuda' but no CUDA device is available" in job_log, job_log[-3000:]
