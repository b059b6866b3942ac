"""A result is wrong only loudly (docs/reference/failure-modes.md): every fault that used to give a
wrong result with exit code 0, or to delete finished work, now ends in a clear error or a
correct result, and no finished file is lost.

Fault numbers follow the list in docs/reference/failure-modes.md.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from hasfl.analysis.manifest import verify_analysis, write_analysis_manifest
from hasfl.config import ConfigError, data_config, deep_merge, load_config, run_config, validate_config
from hasfl.data import load_dataset
from hasfl.data.stage import run_data_stage
from hasfl.fl.checkpoint import Checkpointer
from hasfl.fl.engine import run_federation
from hasfl.dag.jobs import train_job
from hasfl.fl.train import read_data_stage
from hasfl.dag.jobs import verify_runs_job
from hasfl.integrity import IntegrityError, ResultsLock, read_manifest, verify_results, write_run_manifest

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 4


@pytest.fixture(scope="module")
def config() -> dict:
    """The quick preset on digits, 4 rounds (warm-up 1), one thread."""
    cfg = load_config(REPO / "presets" / "quick.yaml")
    cfg["federation"]["rounds"] = ROUNDS
    cfg["hasfl"]["warmup"] = 1
    cfg["threads_per_job"] = 1
    return cfg


@pytest.fixture(scope="module")
def stages(config, tmp_path_factory) -> dict[str, Path]:
    """Two data stages of digits seed 42: the preset's partition and one with another alpha."""
    root = tmp_path_factory.mktemp("stages")
    bundle = load_dataset("digits", config["data_dir"], config["dataset_params"]["digits"])
    other = copy.deepcopy(config)
    other["partition"]["alpha"] = 5.0
    out = {}
    for name, cfg in (("a", config), ("b", other)):
        run_data_stage(bundle, data_config(cfg, "digits"), 42, root / name)
        out[name] = root / name
    return out


def _train(config: dict, stage: Path, out: Path, method: str = "hasfl", **kw) -> dict:
    return train_job(run_config(config, "digits", method, 42), data_config(config, "digits"), out,
                     data_dir=stage, **kw)


def _files(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.name not in ("timings.json",)}


@pytest.fixture(scope="module")
def reference(config, stages, tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """Uninterrupted runs on stage a and on stage b."""
    out = {}
    for name in ("a", "b"):
        folder = tmp_path_factory.mktemp(f"ref_{name}")
        _train(config, stages[name], folder)
        out[name] = _files(folder)
    return out


def _leave_checkpoint(config: dict, stage: Path, out: Path, identity: dict) -> Path:
    """The run with checkpoints every 3 rounds under ``identity``: it leaves checkpoint.pt of round 3
    (the loop never deletes it; the job does, after writing its files)."""
    bundle = load_dataset("digits", config["data_dir"], config["dataset_params"]["digits"])
    partition, clients, _ = read_data_stage(stage)
    ckpt = Checkpointer(out / "checkpoint.pt", 3, identity)
    run_federation(bundle, partition, clients, run_config(config, "digits", "hasfl", 42), checkpointer=ckpt)
    assert (out / "checkpoint.pt").exists()
    return out / "checkpoint.pt"


def _identity_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())["identity"]


# --- 1. a checkpoint is never resumed after its inputs changed -----------------------------
def test_1_checkpoint_of_another_partition_is_ignored(config, stages, reference, tmp_path, caplog) -> None:
    """A checkpoint written on partition a, then the data stage changes (alpha): the job on
    partition b ignores it with a warning naming the data-stage files, and its bytes are a fresh
    run's on b -- not a mix."""
    ref_a = tmp_path / "ref_a_identity"
    _train(config, stages["a"], ref_a)
    out = tmp_path / "run"
    out.mkdir()
    _leave_checkpoint(config, stages["a"], out, _identity_of(ref_a))
    with caplog.at_level(logging.WARNING, logger="hasfl.train"):
        _train(config, stages["b"], out, checkpoint_every=3)
    assert "ignoring checkpoint" in caplog.text and "data-stage files" in caplog.text
    assert _files(out) == reference["b"]
    assert _files(out) != reference["a"]


def test_1_checkpoint_of_other_training_code_is_ignored(config, stages, reference, tmp_path, caplog,
                                                        monkeypatch) -> None:
    ref_a = tmp_path / "ref"
    _train(config, stages["a"], ref_a)
    out = tmp_path / "run"
    out.mkdir()
    _leave_checkpoint(config, stages["a"], out, _identity_of(ref_a))
    import hasfl.dag.outputs as outputs_mod

    monkeypatch.setattr(outputs_mod, "training_code_digest", lambda method, dataset: "0" * 64)
    with caplog.at_level(logging.WARNING, logger="hasfl.train"):
        _train(config, stages["a"], out, checkpoint_every=3)
    assert "ignoring checkpoint" in caplog.text and "training code" in caplog.text


def test_1_checkpoint_of_the_same_run_resumes(config, stages, reference, tmp_path, caplog) -> None:
    """The control: the same identity resumes (and gives the uninterrupted bytes)."""
    ref_a = tmp_path / "ref"
    _train(config, stages["a"], ref_a)
    out = tmp_path / "run"
    out.mkdir()
    _leave_checkpoint(config, stages["a"], out, _identity_of(ref_a))
    with caplog.at_level(logging.INFO, logger="hasfl.train"):
        _train(config, stages["a"], out, checkpoint_every=3)
    assert "resuming from" in caplog.text
    assert _files(out) == reference["a"]


# --- 2. hasfl train --out onto a finished run of another configuration ----------------------
def test_2_train_refuses_a_folder_with_another_finished_run(config, stages, tmp_path) -> None:
    out = tmp_path / "run"
    _train(config, stages["a"], out)
    before = _files(out)
    longer = copy.deepcopy(config)
    longer["federation"]["rounds"] = ROUNDS + 2
    with pytest.raises(IntegrityError, match=r"another identity .*config \(federation\).*--overwrite"):
        _train(longer, stages["a"], out)
    assert _files(out) == before  # nothing touched
    _train(longer, stages["a"], out, overwrite=True)
    assert json.loads((out / "run.json").read_text())["rounds_completed"] == ROUNDS + 2


def test_2_cli_refuses_with_one_line_and_exit_2(config, stages, tmp_path) -> None:
    preset = tmp_path / "p.yaml"
    overlay = yaml.safe_load((REPO / "presets/quick.yaml").read_text())
    overlay["federation"] = {"rounds": 2}
    overlay["hasfl"] = {"warmup": 0}
    preset.write_text(yaml.safe_dump(overlay))
    out = tmp_path / "run"
    base = [sys.executable, "-m", "hasfl.cli", "train", "--config", str(preset), "--dataset", "digits", "--method",
            "fedavg", "--seed", "42", "--data", str(stages["a"]), "--out", str(out)]
    assert subprocess.run(base, capture_output=True, text=True).returncode == 0
    overlay["federation"] = {"rounds": 3}
    preset.write_text(yaml.safe_dump(overlay))
    res = subprocess.run(base, capture_output=True, text=True)
    assert res.returncode == 2 and "another identity" in res.stderr and "--overwrite" in res.stderr
    assert "Traceback" not in res.stderr


def test_2_analysis_gate_refuses_a_run_of_another_configuration(config, stages, tmp_path) -> None:
    """verify_runs (the DAG's gate before the analysis): a run folder holding a 6-round run where the
    preset expects 4 rounds stops the analysis, naming the folder and the key."""
    folder = tmp_path / "results" / "runs" / "digits" / "hasfl" / "seed42"
    longer = copy.deepcopy(config)
    longer["federation"]["rounds"] = ROUNDS + 2
    _train(longer, stages["a"], folder)
    expected = {str(folder): run_config(config, "digits", "hasfl", 42)}
    with pytest.raises(IntegrityError, match=r"another configuration \(config \(federation\)"):
        verify_runs_job([str(folder)], expected, str(tmp_path / "verified.json"))
    assert not (tmp_path / "verified.json").exists()
    verify_runs_job([str(folder)], {str(folder): run_config(longer, "digits", "hasfl", 42)},
                    str(tmp_path / "verified.json"))
    assert (tmp_path / "verified.json").exists()


# --- 3. a finished run's Parquet edited by hand ---------------------------------------------
@pytest.fixture()
def finished_results(config, stages, tmp_path) -> Path:
    """results/<name> with one data stage and one finished run, as the DAG lays them out."""
    results = tmp_path / "results" / "tiny"
    data = results / "data" / "digits" / "seed42"
    data.parent.mkdir(parents=True)
    import shutil

    shutil.copytree(stages["a"], data)
    _train(config, data, results / "runs" / "digits" / "fedavg" / "seed42", method="fedavg")
    return results


def _snakemake_overlay(results: Path) -> Path:
    overlay = results.parent / "tiny.yaml"
    overlay.write_text(yaml.safe_dump({"name": "tiny", "results_dir": str(results.parent), "datasets": ["digits"],
                                       "methods": ["fedavg"], "seeds": [42], "federation": {"rounds": ROUNDS},
                                       "hasfl": {"warmup": 1}, "threads_per_job": 1}))
    return overlay


def _snakemake(results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    overlay = _snakemake_overlay(results)
    return subprocess.run([sys.executable, "-m", "snakemake", *args, "--configfile", "presets/quick.yaml",
                           str(overlay)], cwd=REPO, capture_output=True, text=True, timeout=600)


def _plan(plan, results: Path, *argv: str):
    """:func:`_snakemake`'s command as the Snakefile's session decides it, in process (conftest ``plan``)."""
    _snakemake_overlay(results)
    return plan(REPO, "presets/quick.yaml", results.parent / "tiny.yaml", argv=argv)


def _edit_keeping_mtime(path: Path) -> None:
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_3_edited_run_file_stops_verify_and_a_build_not_the_plan(hasfl_cli, plan, finished_results) -> None:
    """The plan reads manifests only (a dry run reads no result file: tests/test_dry_run.py); every file is checked
    against its manifest at ``onstart``, before any job of a build (test 4 runs one), and by ``hasfl verify``."""
    rounds = finished_results / "runs/digits/fedavg/seed42/rounds.parquet"
    assert verify_results(finished_results) == {"data": 1, "runs": 1, "unfinished": 0}
    _edit_keeping_mtime(rounds)
    res = _plan(plan, finished_results, "-n", "all")  # the Snakefile's session, in process
    assert res.code is None and "was modified" not in res.stderr
    with pytest.raises(IntegrityError, match=f"result file '{rounds}' was modified"):
        verify_results(finished_results, skip=res.session._repaired)  # what ``onstart`` runs
    cli = hasfl_cli("verify", str(finished_results))
    assert cli.returncode == 2 and "rounds.parquet" in cli.stderr and "was modified" in cli.stderr


def test_3_run_replaced_after_the_analysis_is_named(finished_results) -> None:
    """The analysis manifest records the identity of each run it read: a run trained again (or
    removed) after the analysis stops `verify_analysis` (results-page, hasfl verify)."""
    run = finished_results / "runs/digits/fedavg/seed42"
    verified = finished_results / "runs" / "verified.json"
    verified.write_text(json.dumps({str(run): read_manifest(run)["identity"]["digest"]}))
    table = finished_results / "tables" / "t.md"
    table.parent.mkdir()
    table.write_text("| a |\n|---|\n| 1 |\n")
    manifest = write_analysis_manifest(finished_results, [str(table)], verified)
    assert manifest["runs"] == {"runs/digits/fedavg/seed42": read_manifest(run)["identity"]["digest"]}
    assert verify_analysis(finished_results)["files"].keys() == {"tables/t.md"}
    identity = dict(read_manifest(run)["identity"], digest="0" * 64)
    write_run_manifest(run, [n for n in read_manifest(run)["files"]], identity)
    with pytest.raises(IntegrityError, match=f"run folder '{run}' holds another run than the analysis"):
        verify_analysis(finished_results)
    (run / "manifest.json").unlink()
    with pytest.raises(IntegrityError, match="is gone or unfinished"):
        verify_analysis(finished_results)


# --- 4. an edited data-stage Parquet is detected before anything is deleted ------------------
@pytest.mark.snakemake
def test_4_edited_data_stage_file_deletes_nothing(finished_results) -> None:
    run = finished_results / "runs/digits/fedavg/seed42"
    before = _files(run)
    partition = finished_results / "data/digits/seed42/partition.parquet"
    data = bytearray(partition.read_bytes())
    data[len(data) // 2] ^= 0x01
    partition.write_bytes(bytes(data))  # a new mtime too: Snakemake would rerun (and first delete) the run
    res = _snakemake(finished_results, "--cores", "1", "all")
    assert res.returncode == 1 and "partition.parquet' was modified" in res.stderr
    assert _files(run) == before  # every finished file still there, unchanged


# --- 5. a bit-flipped checkpoint is not resumed ----------------------------------------------
def test_5_bit_flipped_checkpoint_is_ignored(config, stages, reference, tmp_path, caplog) -> None:
    ref_a = tmp_path / "ref"
    _train(config, stages["a"], ref_a)
    out = tmp_path / "run"
    out.mkdir()
    ckpt = _leave_checkpoint(config, stages["a"], out, _identity_of(ref_a))
    with zipfile.ZipFile(ckpt) as z:  # flip one bit inside the largest stored tensor
        info = max(z.infolist(), key=lambda i: i.file_size)
    raw = bytearray(ckpt.read_bytes())
    at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + info.file_size // 2
    raw[at] ^= 0x10
    ckpt.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="hasfl.train"):
        _train(config, stages["a"], out, checkpoint_every=3)
    assert "ignoring unreadable checkpoint" in caplog.text and "CRC" in caplog.text
    assert _files(out) == reference["a"]


# --- 6. one results folder, one writer -------------------------------------------------------
@pytest.mark.snakemake
def test_6_second_writer_on_one_results_folder_is_refused(plan, finished_results) -> None:
    lock = ResultsLock(finished_results)
    lock.acquire()
    try:
        res = _snakemake(finished_results, "--cores", "1", "all")
        assert res.returncode == 1 and "is being written by another run" in res.stderr
        assert f'"pid": {os.getpid()}' in res.stderr  # names the holder
        dry = _plan(plan, finished_results, "-n", "all")  # a dry run writes nothing: allowed
        assert dry.code is None, dry.stderr[-2000:]
    finally:
        lock.release()
    assert _plan(plan, finished_results, "-n", "all").code is None


# --- 7, 8. validation -------------------------------------------------------------------------
@pytest.mark.parametrize(("overlay", "message"), [
    ({"hasfl": {"beta": float("nan")}}, "config key 'hasfl.beta': must be a finite number, got nan"),
    ({"analysis": {"ci_level": float("nan")}}, "config key 'analysis.ci_level': must be a finite number"),
    ({"method_params": {"random_budget": {"tolerance": float("nan")}}},
     "config key 'method_params.random_budget.tolerance': must be a finite number"),
    ({"partition": {"alpha": float("inf")}}, "config key 'partition.alpha': must be a finite number, got inf"),
    ({"seeds": [42.0]}, "config key 'seeds[0]': expected an integer, got float 42.0"),
    ({"name": ".."}, "config key 'name': '..' is not a plain folder name"),
    ({"federation": {"rounds": 1_000_000_000}}, "config key 'federation.rounds': must be <= 100000"),
])
def test_7_8_bad_values_are_named(overlay, message) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(deep_merge(load_config(), overlay))
    assert message in str(err.value)


def test_7_nan_in_a_preset_stops_the_workflow_before_any_job(tmp_path) -> None:
    """``.nan`` read from a preset file (YAML's spelling) is refused by what the Snakefile's session runs on its config
    files (read, merged over config.yaml, validated: :func:`hasfl.config.load_config`), in process; that the session
    stops Snakemake with such a message before any job, in one line, tests/test_config.py and test_identity.py check
    end to end."""
    overlay = tmp_path / "nan.yaml"
    overlay.write_text("hasfl: {beta: .nan}\nresults_dir: " + str(tmp_path) + "\n")
    with pytest.raises(ConfigError) as err:
        load_config([REPO / "presets/quick.yaml", overlay], base=REPO / "config.yaml")
    assert "config key 'hasfl.beta': must be a finite number" in str(err.value)


def test_8_non_utf8_config_is_named_in_one_line(hasfl_cli, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    res = hasfl_cli("config", "--config", str(bad))
    assert res.returncode == 2
    assert res.stderr.strip() == f"hasfl: error: config file '{bad}' is not UTF-8 text (byte 9: invalid continuation byte)"


def test_8_non_utf8_base_config_stops_the_workflow_in_one_line(plan, tmp_path) -> None:
    """The Snakefile reads its base preset (config.yaml) through hasfl first: a non-UTF-8 byte in it
    is named with the file and the byte, no traceback."""
    work = tmp_path / "wf"
    work.mkdir()
    for name in ("Snakefile", "workflow", "presets"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
    (work / "config.yaml").write_bytes((REPO / "config.yaml").read_bytes() + b"# caf\xe9\n")
    res = plan(work, "presets/quick.yaml", basedir=work)  # the Snakefile's first line, in process
    assert res.code == 1, res.stderr
    offset = (REPO / "config.yaml").stat().st_size + 5
    assert (f"hasfl: config file '{work / 'config.yaml'}' is not UTF-8 text (byte {offset}: invalid continuation "
            "byte)") in res.stderr
    assert "Traceback" not in res.stderr and 'File "' not in res.stderr


@pytest.mark.processes
def test_8_sigterm_is_logged_with_the_checkpoint_round(tmp_path) -> None:
    preset = tmp_path / "p.yaml"
    overlay = yaml.safe_load((REPO / "presets/quick.yaml").read_text())
    overlay.update({"execution": {"checkpoint_every": 2}, "federation": {"rounds": 400}, "threads_per_job": 1})
    preset.write_text(yaml.safe_dump(overlay))
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "hasfl.cli", "train", "--config", str(preset), "--dataset",
                             "digits", "--method", "fedavg", "--seed", "42", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (out / "checkpoint.pt").exists():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "terminated (SIGTERM) after round" in err and "checkpoint at round" in err
    assert "resumes from it" in err and "Traceback" not in err


def test_8_killed_worker_socket_folder_is_removed_at_next_start(tmp_path) -> None:
    from hasfl.dag import worker

    stale = tmp_path / "hasfl-w-stale"
    stale.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    (stale / "pid").write_text(str(proc.pid))  # a worker that is gone (SIGKILL leaves this behind)
    (stale / "s").write_text("")
    alive = tmp_path / "hasfl-w-alive"
    alive.mkdir()
    (alive / "pid").write_text(str(os.getpid()))
    assert worker.remove_stale_folders(str(tmp_path)) == [stale]
    assert not stale.exists() and alive.exists()
