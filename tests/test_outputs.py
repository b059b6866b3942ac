"""A run's identity in one place (issue 46 point 3): :class:`hasfl.dag.outputs.RunRecord`.

The record's key is the run store's key as it was before the record existed (a transcription of the former
``hasfl.dag.store.run_key`` pins every existing entry's key), its identity is the manifest's, and what changes no
byte on a device class (``cuda_deterministic`` on the CPU, fault 19) changes neither its key nor its staleness.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from hasfl.config import load_config
from hasfl.dag.identity import run_slice
from hasfl.dag.outputs import INERT_ON, RunRecord, data_source, keyed_config
from hasfl.integrity import run_identity

TABLES = {"partition.parquet": "p" * 64, "clients.parquet": "c" * 64}


def _former_run_key(run_cfg, *, data_stage, inputs, code, budget, device_class) -> str:
    """``hasfl.dag.store.run_key`` as it was at 9191219 (every store entry made before the record sits under it)."""
    value = {"config": dict(run_cfg), "data_stage": data_stage,
             "inputs": {n: str(inputs.get(n)) for n in ("partition.parquet", "clients.parquet")}, "code": code,
             "budget": None if budget is None else dict(budget), "device_class": device_class}
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


@pytest.fixture(scope="module")
def config():
    return load_config("presets/quick.yaml")


@pytest.mark.parametrize("method", ["hasfl", "fedprox", "random_budget", "fedecover"])
@pytest.mark.parametrize("device_class", ["cpu", "cuda:NVIDIA H100 80GB HBM3"])
def test_the_key_is_the_former_store_key(config, method, device_class) -> None:
    source = data_source({"dataset": "digits", "seed": 42, "config": {}, "raw": {}, "code": "x"})
    budget = {"method": "hasfl", "avg_p": 0.61, "identity": "d" * 64} if method == "random_budget" else None
    record = RunRecord.planned(config, "digits", method, 42, code="c" * 64, device_class=device_class)
    record = record.reading({"identity": {"dataset": "digits", "seed": 42, "config": {}, "raw": {}, "code": "x"},
                             "files": {n: {"sha256": v} for n, v in TABLES.items()}}).matching(budget)
    assert record.data_stage == source and dict(record.inputs) == TABLES
    assert record.key() == _former_run_key(run_slice(config, "digits", method, 42), data_stage=source, inputs=TABLES,
                                           code="c" * 64, budget=budget, device_class=device_class)
    # the manifest's identity, and the record read back from it, key the same entry
    ident = record.identity("tensors")
    assert ident == run_identity(record.config, TABLES, data_digest="tensors", code="c" * 64, budget=budget,
                                 device_class=device_class)
    assert RunRecord.recorded(ident, source).key() == record.key()
    assert record.stale(ident) is None and record.why_stale(ident) is None


def test_what_changes_no_cpu_byte_keys_nothing_on_the_cpu(config) -> None:
    """Fault 19: ``device: auto`` keeps ``cuda_deterministic`` in the slice (the job may land on a GPU)."""
    assert config["device"] == "auto" and INERT_ON["cpu"] == {"cuda_deterministic": True}
    on = load_config("presets/quick.yaml", overrides=["cuda_deterministic=false"])
    default = RunRecord.planned(config, "digits", "hasfl", 42, code="c", device_class="cpu")
    other = RunRecord.planned(on, "digits", "hasfl", 42, code="c", device_class="cpu")
    assert other.config["cuda_deterministic"] is False
    assert other.key() == default.key()  # the entry every existing CPU run of the default sits under
    assert other.stale(default.identity("t")) is None and default.stale(other.identity("t")) is None
    assert keyed_config(other.config, "cpu") == dict(default.config)
    gpu = "cuda:NVIDIA H100 80GB HBM3"
    assert other.on(gpu).key() != default.on(gpu).key()  # on a GPU the value changes the bytes: another run
    assert other.stale(default.on(gpu).identity("t")) == "config"
    assert default.why_stale(other.on(gpu).identity("t")) == "config (cuda_deterministic)"


def test_staleness_names_the_config_keys_and_the_code(config) -> None:
    record = RunRecord.planned(config, "digits", "fedprox", 42, code="new", device_class="cpu")
    mu = load_config("presets/quick.yaml", overrides=["method_params.fedprox.mu=0.5"])
    assert record.why_stale(RunRecord.planned(mu, "digits", "fedprox", 42, code="new").on("cpu").identity("t")) == \
        "config (method_params.mu)"
    assert record.why_stale({**record.identity("t"), "code": "old"}) == "training code"
