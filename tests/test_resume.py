"""Preemption: a training job SIGKILLed mid-run resumes from its checkpoint and ends with the
same bytes as an uninterrupted run (issue 7, point 1); the checkpoint itself (hasfl.fl.checkpoint).

The kill during a checkpoint write needs a wide window between writing the temporary file and
renaming it; the test opens it itself: the job runs in a Python that wraps
``hasfl.fl.checkpoint.atomic_path`` to sleep after the write (SLOW_CHECKPOINT_WRITES), so
production code carries no fault-injection hook.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from hasfl.fl.checkpoint import Checkpointer
from hasfl.fl.records import RunRecord

ROUNDS, EVERY = 12, 3

#: the ``hasfl`` CLI, arguments from the command line
CLI = "import sys; from hasfl.cli import main; sys.exit(main(sys.argv[1:]))"

#: the same, every checkpoint write held open for WRITE_DELAY_S seconds after its temporary file
#: is written and before it is renamed into place
WRITE_DELAY_S = 2.0
SLOW_CHECKPOINT_WRITES = f"""
import contextlib, sys, time
import hasfl.fl.checkpoint as checkpoint

_atomic_path = checkpoint.atomic_path


@contextlib.contextmanager
def slow_atomic_path(path):
    with _atomic_path(path) as tmp:
        yield tmp  # Checkpointer.save writes the temporary file here
        time.sleep({WRITE_DELAY_S})  # written, not yet renamed: the window the kill must hit


checkpoint.atomic_path = slow_atomic_path
from hasfl.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture()
def preset(tiny_preset, tmp_path) -> Path:
    """quick.yaml + the resume overlay as one file (the CLI takes one preset)."""
    return tiny_preset(tmp_path, "merged", standalone=True, results_dir=None, data_dir=None, rounds=ROUNDS,
                       execution={"checkpoint_every": EVERY})


def _cmd(preset: Path, out: Path, method: str, code: str = CLI) -> list[str]:
    return [sys.executable, "-c", code, "train", "--config", str(preset), "--dataset", "digits", "--method", method,
            "--seed", "42", "--out", str(out), "--threads", "1"]


def _digests(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())
            if f.name != "timings.json"}


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONHASHSEED="0")


def _run_killed(cmd: list[str], out: Path, when) -> None:
    # its own process group, killed whole: a kill of the parent alone would let a process it started finish the
    # write (the killed folder then holds no temporary file: a flaky failure seen once in three CI runs)
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    try:
        while not when(out):
            assert proc.poll() is None, "job finished before the kill point"
            assert time.time() < deadline, "kill point never reached"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


# uniform_rolling: wrapped windows; fedecover: sampled units (its pools are checkpointed); fedlps: its bandits, its
# accuracy records and its noise generator (the server state)
@pytest.mark.processes
@pytest.mark.parametrize("method", ["scaffold", "hasfl", "uniform_rolling", "fedecover", "fedlps"])
def test_sigkill_mid_run_resumes_to_identical_bytes(preset, tmp_path, method):
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    subprocess.run(_cmd(preset, ref, method), env=_env(), check=True, capture_output=True)
    assert not (ref / "checkpoint.pt").exists()  # removed after success

    cmd_k = _cmd(preset, killed, method)
    _run_killed(cmd_k, killed, lambda d: (d / "checkpoint.pt").exists())
    assert not (killed / "run.json").exists()  # nothing looks complete
    subprocess.run(cmd_k, env=_env(), check=True, capture_output=True)
    assert _digests(killed) == _digests(ref)


@pytest.mark.processes
def test_sigkill_during_checkpoint_write(preset, tmp_path):
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    subprocess.run(_cmd(preset, ref, "hasfl"), env=_env(), check=True, capture_output=True)

    # kill while the second checkpoint's temporary file exists (the first one is complete)
    def in_second_write(d: Path) -> bool:
        return bool(list(d.glob(".checkpoint.pt.*.tmp"))) and (d / "checkpoint.pt").exists()

    _run_killed(_cmd(preset, killed, "hasfl", SLOW_CHECKPOINT_WRITES), killed, in_second_write)
    assert (killed / "checkpoint.pt").exists()
    assert list(killed.glob(".checkpoint.pt.*.tmp"))  # killed inside the write
    subprocess.run(_cmd(preset, killed, "hasfl"), env=_env(), check=True, capture_output=True)
    assert _digests(killed) == _digests(ref)
    assert not list(killed.glob(".checkpoint.pt.*.tmp"))  # the interrupted write's temp file is cleaned up


# --------------------------------------------------------------------------- in process
class Stop(Exception):
    """Ends a run from its progress callback, as a kill would (the checkpoint of before stays)."""


def test_checkpoint_payload_and_resume_in_process(engine_cfg, federate, tmp_path, one_thread):
    """A run stopped after a checkpoint leaves the documented payload; run again it resumes from
    it and returns what the uninterrupted run returns (tables, final state, SCAFFOLD's variates)."""
    cfg = engine_cfg(rounds=3)
    ckpt = tmp_path / "checkpoint.pt"
    full = federate(cfg, "scaffold")

    def stop_in_round_2(rnd, row):
        if rnd == 2:
            raise Stop

    identity = {"digest": "scaffold-run"}
    with pytest.raises(Stop):
        federate(cfg, "scaffold", checkpointer=Checkpointer(ckpt, 1, identity), progress=stop_in_round_2)
    saved = torch.load(ckpt, weights_only=False)
    assert set(saved) == {"identity", "record", "global_state", "policy_p", "estimates", "server", "bn_stats",
                          "policy_rng", "seconds"}
    assert set(saved["estimates"]) == {"update", "probe"}
    assert isinstance(saved["record"], RunRecord) and saved["record"].next_round == 1
    assert set(saved["server"]) == {"c", "c_i"} and len(saved["server"]["c_i"]) == cfg["federation"]["clients_per_round"]
    assert set(saved["global_state"]) == set(full.final_state)

    resumed = federate(cfg, "scaffold", checkpointer=Checkpointer(ckpt, 1, identity))
    assert resumed.rounds.equals(full.rounds) and resumed.clients.equals(full.clients)
    for k, v in full.final_state.items():
        assert torch.equal(resumed.final_state[k], v), k
    assert resumed.summary == full.summary


def test_checkpointer_resumes_only_its_own_complete_checkpoint(tmp_path, caplog):
    path = tmp_path / "checkpoint.pt"
    record = RunRecord(2, t0=10)
    record.next_round = 4
    run_a = {"digest": "a", "config": {"seed": 1}}
    mine = Checkpointer(path, 2, run_a)
    assert [r for r in range(1, 9) if mine.due(r, 8)] == [2, 4, 6]  # never after the last round
    assert not Checkpointer(None, 2, run_a).due(2, 8) and not Checkpointer(path, 0, run_a).due(2, 8)
    assert mine.load() is None  # nothing saved yet
    mine.save({"record": record, "x": torch.ones(2)})
    assert mine.load()["record"].next_round == 4 and torch.equal(mine.load()["x"], torch.ones(2))
    with caplog.at_level("WARNING", logger="hasfl.train"):
        assert Checkpointer(path, 2, {"digest": "b", "config": {"seed": 2}}).load() is None  # another run's
        assert "of another run (differs in: config (seed))" in caplog.text
        assert Checkpointer(path, 0, run_a).load() is None  # checkpointing off
        stale = tmp_path / ".checkpoint.pt.abc.tmp"  # a write cut short by a kill
        stale.write_bytes(b"half")
        path.write_bytes(b"garbage")
        assert mine.load() is None and "ignoring unreadable checkpoint" in caplog.text
        assert not stale.exists()


def test_run_identity_covers_what_the_bytes_depend_on() -> None:
    """The identity changes with each of its parts (tests/test_integrity.py checks the uses)."""
    from hasfl.integrity import run_identity

    base = {"config": {"method": "hasfl", "seed": 1}, "inputs": {"partition.parquet": "p"}, "data_digest": "d",
            "code": "c", "budget": None, "device_class": "cpu"}

    def ident(**over):
        kw = {**base, **over}
        return run_identity(kw.pop("config"), kw.pop("inputs"), **kw)["digest"]

    assert ident() == ident()
    for change in ({"config": {"method": "hasfl", "seed": 2}}, {"inputs": {"partition.parquet": "q"}},
                   {"data_digest": "e"}, {"code": "x"}, {"budget": {"avg_p": 0.5}}, {"device_class": "cuda:H200"}):
        assert ident(**change) != ident(), change
