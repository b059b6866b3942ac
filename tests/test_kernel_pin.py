"""The CPU kernel set a run is made under is part of what it is (hasfl.dag.outputs.cpu_class): a run made under the
portable kernel pin and one made without it are two store entries; a pinned build never links or keeps an unpinned
run; a resume never crosses them; a run recorded before the pin entered its class is read from its timings.json.
In-process on the quick preset's digits data stage with two rounds (seconds), no Snakemake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hasfl.config import data_config, load_config
from hasfl.dag.identity import data_identity, run_slice
from hasfl.dag.jobs import stage_data, train_run
from hasfl.dag.outputs import RunRecord, audit, cpu_class, job_record, keyed_config, made_under, other_kernels
from hasfl.integrity import IntegrityError, identity_difference, read_manifest

REPO = Path(__file__).resolve().parents[1]
PIN = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}
PINNED = "cpu:ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=COMPATIBLE,ONEDNN_MAX_CPU_ISA=AVX2"


@pytest.fixture()
def unpinned(monkeypatch):
    for name in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR",
                 "MKL_ENABLE_INSTRUCTIONS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _pin(monkeypatch) -> None:
    for name, value in PIN.items():
        monkeypatch.setenv(name, value)


def test_the_class_names_the_pin_and_an_unpinned_class_is_the_old_one(unpinned):
    assert cpu_class() == "cpu"  # no unpinned key moved
    assert cpu_class(PIN) == PINNED
    _pin(unpinned)
    assert cpu_class() == PINNED
    # what changes no byte on a CPU changes none under a pin either
    assert keyed_config({"cuda_deterministic": False}, PINNED) == keyed_config({"cuda_deterministic": False}, "cpu")


def test_a_pinned_and_an_unpinned_run_of_one_config_have_two_keys_and_identities():
    cfg = {"method": "fedavg", "dataset": "digits", "seed": 42}
    a, b = RunRecord(cfg, "code", "cpu"), RunRecord(cfg, "code", PINNED)
    assert a.key() != b.key()
    # a checkpoint and a finished run folder are refused across them (both compare the identity digest)
    ia, ib = a.identity("data"), b.identity("data")
    assert ia["digest"] != ib["digest"] and identity_difference(ia, ib) == ["device"]


def _world(tmp_path: Path) -> tuple[dict, dict, Path, Path]:
    cfg = load_config(REPO / "presets" / "quick.yaml", overrides=["federation.rounds=3", "hasfl.warmup=1"])
    results = tmp_path / "results" / "quick"
    results.mkdir(parents=True)
    dc = data_config(cfg, "digits")
    stage = results / "data/digits/seed42"
    stage_data(dc, 42, stage, data_identity(dc, 42, "test-code"), results)
    return cfg, dc, results, stage


def _train(cfg: dict, results: Path, stage: Path, out: Path) -> Path:
    train_run(run_slice(cfg, "digits", "fedavg", 42), data_config(cfg, "digits"), out, data_dir=stage,
              results=results)
    return (out / "manifest.json").resolve().parent


def test_a_pinned_build_trains_its_own_entry_and_audits_an_unpinned_run_as_rerun(tmp_path, unpinned):
    cfg, _, results, stage = _world(tmp_path)
    plain = _train(cfg, results, stage, results / "runs/digits/fedavg/seed42")
    assert read_manifest(plain)["identity"]["device_class"] == "cpu"
    _pin(unpinned)
    out = tmp_path / "pinned" / "runs/digits/fedavg/seed42"
    pinned = _train(cfg, results, stage, out)
    assert pinned != plain  # trained into its own entry, not linked from the unpinned one
    assert read_manifest(pinned)["identity"]["device_class"] == PINNED
    # the unpinned folder under a pinned build: rerun, naming the kernels (the job then links the pinned entry)
    found = audit(cfg | {"methods": ["fedavg"], "datasets": ["digits"], "seeds": [42]}, results,
                  data_code="test-code", train_code=lambda m, d: read_manifest(plain)["identity"]["code"],
                  device_class=cpu_class())
    assert "runs/digits/fedavg/seed42" in found.rerun
    assert "CPU kernels" in found.rerun["runs/digits/fedavg/seed42"]
    assert "no kernel pin" in found.rerun["runs/digits/fedavg/seed42"]
    unpinned.delenv("ATEN_CPU_CAPABILITY")
    record = job_record(run_slice(cfg, "digits", "fedavg", 42))[0]
    assert record.device_class == "cpu:MKL_CBWR=COMPATIBLE,ONEDNN_MAX_CPU_ISA=AVX2"  # a partial pin is its own class


def test_a_run_recorded_as_cpu_before_the_pin_entered_its_class_is_read_from_its_timings(tmp_path, unpinned):
    """An entry made under the pin by an earlier version says ``cpu``: a pinned build keeps such a run in its folder
    (no retraining of a page's runs), an unpinned build is refused its entry (naming it) instead of linking it."""
    cfg, _, results, stage = _world(tmp_path)
    entry = _train(cfg, results, stage, results / "runs/digits/fedavg/seed42")
    timings = json.loads((entry / "timings.json").read_text())
    assert timings["isa_env"] == {}
    identity = read_manifest(entry)["identity"]
    assert made_under(identity, entry) == "cpu" and other_kernels(identity, entry, "cpu") is None
    (entry / "timings.json").chmod(0o644)
    (entry / "timings.json").write_text(json.dumps({**timings, "isa_env": PIN}))  # as a pinned run before
    assert made_under(identity, entry) == PINNED
    spec = cfg | {"methods": ["fedavg"], "datasets": ["digits"], "seeds": [42]}
    code = identity["code"]
    kept = audit(spec, results, data_code="test-code", train_code=lambda m, d: code, device_class=PINNED)
    assert "runs/digits/fedavg/seed42" in kept.current
    redo = audit(spec, results, data_code="test-code", train_code=lambda m, d: code, device_class="cpu")
    assert "CPU kernels" in redo.rerun["runs/digits/fedavg/seed42"]
    out = tmp_path / "variant" / "runs/digits/fedavg/seed42"
    with pytest.raises(IntegrityError, match="recorded before the kernel pin") as err:
        _train(cfg, results, stage, out)
    assert str(entry) in str(err.value) and not out.exists()


def test_a_checkpoint_made_under_one_pin_is_not_resumed_under_another(tmp_path, caplog):
    """A run killed under the pin and started again without it (or the reverse) starts from round 0: the checkpoint
    carries the run's identity, whose device class names the pin."""
    import logging
    from types import SimpleNamespace

    from hasfl.fl.checkpoint import Checkpointer

    cfg = {"method": "fedavg", "dataset": "digits", "seed": 42}
    pinned, plain = (RunRecord(cfg, "code", c).identity("data") for c in (PINNED, "cpu"))
    Checkpointer(tmp_path / "checkpoint.pt", 1, pinned).save({"record": SimpleNamespace(next_round=3)})
    assert Checkpointer(tmp_path / "checkpoint.pt", 1, pinned).load() is not None
    with caplog.at_level(logging.WARNING):
        assert Checkpointer(tmp_path / "checkpoint.pt", 1, plain).load() is None
    assert "of another run (differs in: device)" in caplog.text


def test_a_new_folder_of_a_pinned_build_links_a_run_recorded_as_cpu_under_the_same_pin(tmp_path, unpinned):
    """The store serves a pinned build's new folder a run recorded as ``cpu`` before the pin entered its class when
    its timings.json names that very pin (hasfl.dag.store.run_entry: the judgement that already keeps such a run in
    its own folder), so a page's runs are not trained again; a run made under another pin is never served."""
    from hasfl.dag.store import run_entry, store_of

    cfg, dc, results, stage = _world(tmp_path)
    entry = _train(cfg, results, stage, results / "runs/digits/fedavg/seed42")
    timings = json.loads((entry / "timings.json").read_text())
    (entry / "timings.json").chmod(0o644)
    _pin(unpinned)
    record = job_record(run_slice(cfg, "digits", "fedavg", 42), data_manifest=read_manifest(stage))[0]
    assert record.device_class == PINNED
    # made without a pin: not served, the pinned key's own entry is named (its job trains)
    assert run_entry(store_of(results), record) == (record.key(), store_of(results) / "runs" / record.key())
    (entry / "timings.json").write_text(json.dumps({**timings, "isa_env": {**PIN, "MKL_CBWR": "AVX2"}}))
    assert run_entry(store_of(results), record)[0] == record.key()  # another pin: not served either
    (entry / "timings.json").write_text(json.dumps({**timings, "isa_env": PIN}))
    assert run_entry(store_of(results), record) == (entry.name, entry)
    out = tmp_path / "variant" / "runs/digits/fedavg/seed42"
    assert _train(cfg, results, stage, out) == entry  # linked, not trained: no entry of the pinned key was made
    assert not (store_of(results) / "runs" / record.key()).exists()
    kept = audit(cfg | {"methods": ["fedavg"], "datasets": ["digits"], "seeds": [42]}, tmp_path / "variant",
                 data_code="test-code", train_code=lambda m, d: record.code, device_class=PINNED)
    assert "runs/digits/fedavg/seed42" in kept.current
