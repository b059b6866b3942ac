"""Packing training jobs onto the local GPUs (hasfl.dag.gpu, hasfl.bench.packing), checked without a GPU.

The calibration runs for real on the CPU (one-thread jobs sharing its cores); the slots are real ``flock``s
held by real processes; MPS is driven through a stand-in ``nvidia-cuda-mps-control`` on PATH (an external
tool; the stand-in speaks its protocol: ``-d`` starts a daemon with a control socket in
``CUDA_MPS_PIPE_DIRECTORY``, ``quit`` on stdin stops it); the Snakefile's wiring is seen in a dry run on a
machine whose ``nvidia-smi`` (a stand-in too) lists two GPUs that torch confirms (the answer of torch on such a
machine, written where the pre-flight's probe caches it).
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hasfl import device
from hasfl.dag import gpu
from hasfl.bench.packing import choose
from hasfl.config import load_config
from hasfl.dag.preflight import FALLBACK, estimate, render

REPO = Path(__file__).resolve().parents[1]

TWO = ("GPU 0: NVIDIA H200 (UUID: GPU-a)", "GPU 1: NVIDIA H200 (UUID: GPU-b)")


@pytest.fixture()
def gpu_config():
    cfg = load_config()
    cfg["device"] = "cuda"
    return cfg


def test_choose_takes_the_smallest_k_near_the_best() -> None:
    rows = [{"jobs": 1, "steps_per_s_total": 100, "speedup_vs_one_job": 1.0},
            {"jobs": 4, "steps_per_s_total": 390, "speedup_vs_one_job": 3.9},
            {"jobs": 8, "steps_per_s_total": 400, "speedup_vs_one_job": 4.0},
            {"jobs": 16, "steps_per_s_total": 300, "speedup_vs_one_job": 3.0}]
    assert choose(rows)["k"] == 4 and choose(rows, tolerance=0.0)["k"] == 8
    assert choose(rows[:1])["k"] == 1


def test_calibration_measures_concurrent_jobs_for_real(cpu_packing_calibration) -> None:
    """Two levels on the CPU: each K's aggregate rate is measured (steps actually taken), K is one of them."""
    out = cpu_packing_calibration
    rows = out["plain"]["rows"]
    assert [r["jobs"] for r in rows] == [1, 2] and all(r["steps_per_s_total"] > 0 for r in rows)
    assert out["plain"]["k"] in (1, 2) and out["mps"] is None
    assert rows[1]["steps_per_s_per_job"] == pytest.approx(rows[1]["steps_per_s_total"] / 2, rel=0.01)


def test_plan_k_from_config_or_cached_calibration(gpu_config, tmp_path, monkeypatch, cpu_packing_calibration) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-cuda-mps-control
    assert gpu.plan(gpu_config, [], tmp_path, tmp_path) is None  # no GPU: nothing to pack
    cfg = copy.deepcopy(gpu_config)
    cfg["execution"]["gpu"]["jobs_per_gpu"] = 3
    fixed = gpu.plan(cfg, TWO, tmp_path, tmp_path)
    assert (fixed.slots, fixed.jobs_per_gpu, fixed.mps, fixed.speedup) == (6, 3, False, None)
    assert "not found" in fixed.mps_reason and fixed.source == "config execution.gpu.jobs_per_gpu"
    # auto: not calibrated yet (a dry run does not measure) -> 1 job per GPU, said so
    dry = gpu.plan(gpu_config, TWO, tmp_path, tmp_path, calibrate=False)
    assert dry.jobs_per_gpu == 1 and "not calibrated yet" in dry.source
    # a calibration in the cache (measured on this CPU, stored as the plan stores one)
    cal = cpu_packing_calibration
    path = gpu.calibration_path(tmp_path, TWO, "fp32", True, False)
    path.write_text(json.dumps(cal))
    auto = gpu.plan(gpu_config, TWO, tmp_path, tmp_path, calibrate=False)
    assert auto.jobs_per_gpu == cal["plain"]["k"] and auto.speedup == cal["plain"]["speedup"]
    assert str(path) in auto.source and auto.slots == 2 * auto.jobs_per_gpu
    # another precision is another calibration
    tf32 = copy.deepcopy(gpu_config)
    tf32["precision"] = "tf32"
    assert "not calibrated yet" in gpu.plan(tf32, TWO, tmp_path, tmp_path, calibrate=False).source


def test_preflight_prices_the_packed_gpus(gpu_config) -> None:
    plan = gpu.Packing(TWO, 8, True, "", 4.0, "calibration x")
    one = estimate(gpu_config, 16, FALLBACK)
    est = estimate(gpu_config, 16, FALLBACK, packing=plan)
    # the evaluate jobs share the GPU slots with the training jobs (rule evaluate): both in the device time
    assert one["eval_job_hours"] > 0
    assert est["device_hours"] == pytest.approx((one["train_job_hours"] + one["eval_job_hours"]) / 4.0)
    assert est["analysis_wall_hours"] < one["eval_job_hours"] / 4.0  # over the two GPUs' packed slots
    assert est["wall_hours"] < one["train_job_hours"] / 4.0  # two GPUs share the device-hours
    text = render(gpu_config, est, FALLBACK, {"cpu": "x", "cores": 16, "gpus": list(TWO)}, 4, "cuda", plan)
    assert "8 jobs per GPU x 2 GPU(s) = 16 training jobs at once, CUDA MPS on, 4.00x" in text
    assert "give --cores 16" in text  # 4 cores cannot fill 16 slots
    assert "device time: about" in text and "for the training and evaluate jobs packed so" in text


SLOT_HOLDER = textwrap.dedent("""
    import os, sys, time
    from hasfl.dag.gpu import job_slot
    with job_slot(poll_s=0.05) as s:
        print(s["slot"], s["gpu"], os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
        time.sleep(float(sys.argv[1]))
""")


def _holder(env: dict, hold_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SLOT_HOLDER, str(hold_s)], stdout=subprocess.PIPE, text=True,
                            env=env)


def test_job_slots_spread_over_gpus_and_free_on_kill(tmp_path) -> None:
    plan = gpu.Packing(TWO, 2, False, "x", None, "config", slot_dir=str(tmp_path / "slots"))
    env = {**os.environ, gpu.ENV_SLOTS: plan.env(), "CUDA_VISIBLE_DEVICES": "4,6"}
    holders = [_holder(env, 30) for _ in range(4)]
    got = sorted(tuple(h.stdout.readline().split()) for h in holders)
    # four slots, two per GPU; slot s on GPU s mod 2, pinned to the visible device it maps to
    assert got == [("0", "0", "4"), ("1", "1", "6"), ("2", "0", "4"), ("3", "1", "6")]
    fifth = _holder(env, 0)
    time.sleep(0.5)
    assert fifth.poll() is None  # every slot taken: it waits
    victim = holders[0]
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    line = fifth.stdout.readline().split()
    assert fifth.wait(timeout=30) == 0 and line[0] in {"0", "1", "2", "3"}  # the killed job's slot
    for h in holders[1:]:
        h.kill()
        h.wait()


def test_no_plan_means_no_slot(monkeypatch) -> None:
    monkeypatch.delenv(gpu.ENV_SLOTS, raising=False)
    with gpu.job_slot() as slot:
        assert slot == {}


FAKE_MPS = textwrap.dedent("""\
    #!/usr/bin/env bash
    # stand-in for nvidia-cuda-mps-control: -d starts, 'quit' stops, 'get_server_list' answers while running
    pipe="$CUDA_MPS_PIPE_DIRECTORY"
    echo "$*" >> "$pipe/../calls"
    if [ "${1:-}" = "-d" ]; then
      [ -n "${FAIL:-}" ] && { echo "$FAIL" >&2; exit 1; }
      touch "$pipe/control"; exit 0
    fi
    read -r cmd
    echo "$cmd" >> "$pipe/../calls"
    [ -e "$pipe/control" ] || exit 1
    [ "$cmd" = quit ] && rm -f "$pipe/control"
    exit 0
""")


@pytest.fixture()
def fake_mps(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / gpu.MPS_CONTROL
    tool.write_text(FAKE_MPS)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path / "mps"


def test_mps_started_and_stopped_only_by_its_starter(fake_mps, monkeypatch) -> None:
    daemon = gpu.MPS(fake_mps)
    assert daemon.start() is None and daemon.started and daemon.running()
    other = gpu.MPS(fake_mps)  # a second DAG run on the same folder finds it running: uses it, never stops it
    assert other.start() is None and not other.started
    other.stop()
    assert daemon.running()
    daemon.stop()
    assert not daemon.running()
    calls = (fake_mps / "calls").read_text().split()
    assert calls.count("-d") == 1 and "quit" in calls


def test_mps_not_permitted_is_a_reason_and_the_plan_says_so(fake_mps, gpu_config, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FAIL", "An instance of this daemon is already running as another user")
    why = gpu.MPS(fake_mps).start()
    assert "exited 1" in why and "another user" in why
    cfg = copy.deepcopy(gpu_config)
    cfg["execution"]["gpu"]["mps"] = False
    assert gpu.plan(cfg, TWO, tmp_path, tmp_path, calibrate=False).mps_reason == "config execution.gpu.mps is false"


FAKE_SMI = textwrap.dedent("""\
    #!/usr/bin/env bash
    echo "GPU 0: NVIDIA H200 (UUID: GPU-a)"
    echo "GPU 1: NVIDIA H200 (UUID: GPU-b)"
""")


def test_dry_run_on_two_gpus_prints_the_packing(plan, tiny_preset, tmp_path, monkeypatch) -> None:
    """A dry run with 6 cores where nvidia-smi lists two GPUs torch confirms: the pre-flight prints the packing.
    The Snakefile's session in process (conftest ``plan``), the listing from a stand-in nvidia-smi on PATH."""
    from hasfl.dag import preflight

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(preflight, "CACHE", tmp_path / "cache" / "hasfl")  # fixed at import: an empty one here
    preset = tiny_preset(tmp_path, device="cuda", execution={"gpu": {"jobs_per_gpu": 3, "mps": "auto"}})
    # what torch on that machine answers the pre-flight's probe, in the probe's cache format (hasfl.device):
    # the GPUs are confirmed without running torch on a GPU this machine lacks
    probe = device.probe_path(tmp_path / "cache" / "hasfl", TWO)
    probe.parent.mkdir(parents=True)
    probe.write_text(json.dumps({"cuda": True, "count": 2, "names": ["NVIDIA H200", "NVIDIA H200"],
                                 "torch": "2", "cuda_build": "13.0", "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}))
    out = plan(tmp_path, REPO / "presets" / "quick.yaml", preset, argv=("-n", "--cores", "6", "all"), cores=6)
    assert out.code is None, out.stderr[-3000:]
    assert "GPU packing: 3 jobs per GPU x 2 GPU(s) = 6 training jobs at once" in out.stderr
    assert "device time: about" in out.stderr


def test_packing_keys_change_no_identity(gpu_config) -> None:
    """How jobs share the GPUs changes no byte: neither a run's slice nor the analysis identity moves."""
    from hasfl.config import run_config
    from hasfl.dag.identity import analysis_identity

    other = copy.deepcopy(gpu_config)
    other["execution"]["gpu"].update(jobs_per_gpu=5, mps=False)
    assert run_config(other, "cifar10", "hasfl", 42) == run_config(gpu_config, "cifar10", "hasfl", 42)
    assert analysis_identity(other, "code") == analysis_identity(gpu_config, "code")


def test_uncalibrated_packing_is_priced_as_one_job_at_a_time(gpu_config) -> None:
    plan = gpu.Packing(TWO[:1], 4, False, "x", None, "config gpu.jobs_per_gpu")
    one = estimate(gpu_config, 4, FALLBACK)
    est = estimate(gpu_config, 4, FALLBACK, packing=plan)
    assert est["device_hours"] == pytest.approx(one["train_job_hours"] + one["eval_job_hours"])
    text = render(gpu_config, est, FALLBACK, {"cpu": "x", "cores": 4, "gpus": list(TWO[:1])}, 4, "cuda", plan)
    assert "not calibrated: priced as one job at a time" in text and "give --cores" not in text


def test_every_rule_that_takes_a_gpu_slot_runs_its_job_in_one() -> None:
    """A rule whose jobs hold a ``gpu_slot`` resource (train, evaluate) runs its job inside ``job_slot`` (pinned to the
    slot's GPU, MPS's pipe set): without it a packed machine would run every such job on its first GPU."""
    import re

    rules = REPO / "workflow" / "rules"
    slotted = {}
    for smk in rules.glob("*.smk"):
        for block in re.split(r"\n(?=rule |use rule )", smk.read_text()):
            script = re.search(r'script:\s*\n\s*"\.\./scripts/([\w]+\.py)"', block)
            if "gpu_slot=lambda" in block and script:
                slotted[block.split(":", 1)[0]] = script[1]
    assert set(slotted.values()) == {"train.py", "evaluate.py"}, slotted
    for script in slotted.values():
        text = (REPO / "workflow" / "scripts" / script).read_text()
        assert "with job_slot(" in text and "call(" in text.split("with job_slot(", 1)[1], script
