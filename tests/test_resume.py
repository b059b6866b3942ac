"""Preemption: a training job SIGKILLed mid-run resumes from its checkpoint and ends
with the same bytes as an uninterrupted run (issue 7, point 1)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO

ROUNDS, EVERY = 12, 3



def _cmd(preset: Path, out: Path, method: str) -> list[str]:
    return [sys.executable, "-m", "hasfl.cli", "train", "--config", str(REPO / "presets/quick.yaml"),
            "--base", str(REPO / "config.yaml"), "--dataset", "digits", "--method", method, "--seed", "42",
            "--out", str(out), "--threads", "1"]


def _digests(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())
            if f.name != "timings.json"}


def _merged_preset(tmp_path: Path) -> Path:
    """quick.yaml + the resume overlay as one file (the CLI takes one preset)."""
    merged = yaml.safe_load((REPO / "presets/quick.yaml").read_text())
    merged.update({"checkpoint_every": EVERY, "datasets": ["digits"]})
    merged["federation"] = {**merged.get("federation", {}), "rounds": ROUNDS}
    p = tmp_path / "merged.yaml"
    p.write_text(yaml.safe_dump(merged))
    return p


def _run_killed(cmd: list[str], out: Path, when, env: dict[str, str]) -> None:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    try:
        while not when(out):
            assert proc.poll() is None, "job finished before the kill point"
            assert time.time() < deadline, "kill point never reached"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize("method", ["scaffold", "hasfl"])
def test_sigkill_mid_run_resumes_to_identical_bytes(tmp_path, method):
    preset = _merged_preset(tmp_path)
    env = dict(os.environ, PYTHONHASHSEED="0")
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    cmd = _cmd(preset, ref, method)
    cmd[cmd.index("--config") + 1] = str(preset)
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    assert not (ref / "checkpoint.pt").exists()  # removed after success

    cmd_k = _cmd(preset, killed, method)
    cmd_k[cmd_k.index("--config") + 1] = str(preset)
    _run_killed(cmd_k, killed, lambda d: (d / "checkpoint.pt").exists(), env)
    assert not (killed / "run.json").exists()  # nothing looks complete
    subprocess.run(cmd_k, env=env, check=True, capture_output=True)
    assert _digests(killed) == _digests(ref)


def test_sigkill_during_checkpoint_write(tmp_path):
    preset = _merged_preset(tmp_path)
    env = dict(os.environ, PYTHONHASHSEED="0")
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    cmd = _cmd(preset, ref, "hasfl")
    cmd[cmd.index("--config") + 1] = str(preset)
    subprocess.run(cmd, env=env, check=True, capture_output=True)

    cmd_k = _cmd(preset, killed, "hasfl")
    cmd_k[cmd_k.index("--config") + 1] = str(preset)
    slow = dict(env, HASFL_CHECKPOINT_WRITE_DELAY="2")
    # kill while the second checkpoint's temporary file exists (the first one is complete)
    def in_second_write(d: Path) -> bool:
        return bool(list(d.glob(".checkpoint.pt.*.tmp"))) and (d / "checkpoint.pt").exists()

    _run_killed(cmd_k, killed, in_second_write, slow)
    assert (killed / "checkpoint.pt").exists()
    subprocess.run(cmd_k, env=env, check=True, capture_output=True)
    assert _digests(killed) == _digests(ref)
    assert not list(killed.glob(".checkpoint.pt.*.tmp"))  # the interrupted write's temp file is cleaned up
