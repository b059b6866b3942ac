"""The round loop end to end (hasfl.fl.engine.run_federation, hasfl.fl.train.train_job): every
method of Section 4.1, Proposition 3, the random-budget control, determinism, precision, and
adding a method in one place.

Everything runs on CPU on the offline digits dataset with one torch thread; the federations
are shrunk to a few rounds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.config import data_config, run_config
from hasfl.data.stage import build_tables
from hasfl.fl.engine import run_federation
from hasfl.fl.records import ROUND_COLUMNS
from hasfl.fl.sampling import participant_schedule
from hasfl.dag.jobs import train_job
from hasfl.io import write_parquet
from hasfl.models import coverage_mask
from hasfl.models.bn import width_key
from hasfl.registry import METHODS, RUN_FILES

pytestmark = pytest.mark.usefixtures("one_thread")

# Issue 3's six columns, then the two diagnostics documented in hasfl.fl.train.
CLIENTS_COLUMNS = ["client_id", "pmax", "p_final", "h_tilde_final", "times_sampled", "mean_p",
                   "p_max_allocated", "p_max_trained", "p_max_trained_after_warmup", "est_within_tier_final",
                   "est_probe_final", "est_reported"]
FULL_MODEL = ("fedavg", "scaffold", "fedprox", "shuffled")  # shuffled: every client the whole network, one block trained
BYTE_FILES = tuple(f for f in RUN_FILES if f != "timings.json")  # wall times are the one file that differs


def float_keys(state: dict) -> list[str]:
    return [k for k, v in state.items() if v.is_floating_point()]


def job(cfg: dict, method: str, seed: int, out, **kwargs) -> dict:
    """train_job of ``method`` on digits with exactly its config slices."""
    return train_job(run_config(cfg, "digits", method, seed), data_config(cfg, "digits"), out, **kwargs)


# --------------------------------------------------------------------------- Proposition 3
def test_proposition3_uniform_freezes_outer_coordinates(engine_cfg, federate, digits_family) -> None:
    cfg = engine_cfg(rounds=4)
    assert cfg["method_params"]["uniform"]["p"] == 0.5
    res = federate(cfg, "uniform")
    assert res.summary["status"] == "completed"
    assert (res.clients["p_max_allocated"] <= 0.5).all() and (res.rounds["avg_p"] <= 0.5).all()
    mask = coverage_mask(res.init_state, digits_family.slice_rules(0.5))
    for k in float_keys(res.init_state):
        init, final = res.init_state[k], res.final_state[k]
        outside = ~mask[k]
        assert torch.equal(final[outside], init[outside]), f"{k}: uncovered coordinates moved"
        if k.endswith(("running_mean", "running_var")):  # nobody trains full width: its BN set stays
            assert torch.equal(final, init), k
            c = int(mask[k].sum())
            assert not torch.equal(res.final_state[width_key(k.rsplit(".", 1)[0], c, k.rsplit(".", 1)[1])],
                                   init[:c]), f"{k}: the width-0.5 statistics did not move"
        else:
            assert not torch.equal(final[mask[k]], init[mask[k]]), f"{k}: covered coordinates did not move"
    assert sum(int((~m).sum()) for m in mask.values()) > 0


# Seed 45: both pmax = 1.0 clients sit out round 0 and take part in rounds 1-3, so with
# adaptation after every round (warmup 0, t_adapt 1) they are only ever sampled at the
# widths Eq. 6 (+ coverage) gives them -- never at the initial p(0) = pmax.
ADAPT_SEED = 45


@pytest.fixture(scope="module")
def adapting_runs(engine_cfg, digits):
    """hasfl and hasfl_nocov for ADAPT_SEED, adapting every round from t = 0 (t_norm 2), 4 rounds."""
    cfg = engine_cfg(rounds=4, warmup=0, t_adapt=1, t_norm=2)
    bundle = digits.bundle
    partition, clients = build_tables(bundle, data_config(cfg, "digits"), ADAPT_SEED)
    runs = {m: run_federation(bundle, partition, clients, run_config(cfg, "digits", m, ADAPT_SEED))
            for m in ("hasfl", "hasfl_nocov")}
    pmax = clients.sort_values("client_id")["pmax"].to_numpy()
    top = np.flatnonzero(pmax == pmax.max())
    fed = cfg["federation"]
    schedule = participant_schedule(ADAPT_SEED, fed["clients"], fed["clients_per_round"], fed["rounds"])
    assert pmax.max() == 1.0 and len(top) == 2
    assert not np.isin(top, schedule[0]).any() and all(np.isin(top, s).any() for s in schedule[1:])
    return cfg, runs, top


def test_proposition3_coverage_moves_outer_coordinates(adapting_runs, digits_family) -> None:
    cfg, runs, top = adapting_runs
    res = runs["hasfl"]
    sampled_top = [i for i in top if res.clients.loc[i, "times_sampled"] > 0]
    assert sampled_top and (res.clients.loc[sampled_top, "p_max_allocated"] == 1.0).all()
    assert (res.clients.loc[top, "p_final"] == 1.0).all()
    inner = coverage_mask(res.init_state, digits_family.slice_rules(0.75))  # the widest non-top client
    moved = 0
    for k in float_keys(res.init_state):
        outside = ~inner[k]
        if outside.any():
            assert not torch.equal(res.final_state[k][outside], res.init_state[k][outside]), k
            moved += 1
    assert moved >= 5


def test_proposition3_without_coverage_freezes_beyond_largest_allocation(adapting_runs, digits_family) -> None:
    """hasfl_nocov: p_bar = the largest width ever allocated < 1, so outside it nothing moves."""
    cfg, runs, top = adapting_runs
    res = runs["hasfl_nocov"]
    p_bar = float(res.clients["p_max_allocated"].max())
    assert p_bar < 1.0
    assert (res.clients.loc[top, "p_max_allocated"] < 1.0).all()
    mask = coverage_mask(res.init_state, digits_family.slice_rules(p_bar))
    frozen = 0
    for k in float_keys(res.init_state):
        outside = ~mask[k]
        assert torch.equal(res.final_state[k][outside], res.init_state[k][outside]), k
        frozen += int(outside.sum())
    assert frozen > 0


def test_engine_normalises_every_t_norm_rounds(adapting_runs) -> None:
    res = adapting_runs[1]["hasfl"]  # t_adapt 1, t_norm 2: normalised after t = 2
    mean_h = res.rounds.set_index("round")["mean_h_tilde"]
    assert mean_h[3] == pytest.approx(1.0, abs=1e-12)
    assert mean_h[1] != pytest.approx(1.0, abs=1e-6)  # EMA moved it, no normalisation at t = 0
    assert np.all(np.isfinite(res.clients["h_tilde_final"]))


# --------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("method", ["hasfl", "fjord", "fedlps"])
def test_train_job_deterministic(engine_cfg, digits, tmp_path, method) -> None:
    cfg = engine_cfg(rounds=3, warmup=0, t_adapt=1)
    run = {}
    for name, seed in (("a", digits.seed), ("b", digits.seed), ("c", digits.seed + 1)):
        summary = job(cfg, method, seed, tmp_path / name)
        assert summary["status"] == "completed"
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(RUN_FILES)  # no checkpoint left
        run[name] = {f: (tmp_path / name / f).read_bytes() for f in BYTE_FILES}
    for f in BYTE_FILES:
        assert run["a"][f] == run["b"][f], f"{method}: {f} differs between two runs of the same seed"
        if f != "local_models.pt" or method == "fedlps":  # empty for a method that keeps no local models
            assert run["a"][f] != run["c"][f], f"{method}: {f} identical for different seeds"
        else:
            assert torch.load(tmp_path / "a" / f, weights_only=True) == {}


def test_train_job_threads_come_from_the_config_slice(engine_cfg, digits, tmp_path, monkeypatch) -> None:
    """The job runs with torch's thread count from its run_cfg (config ``threads_per_job``)."""
    import hasfl.fl.train

    cfg = engine_cfg(rounds=1)
    cfg["threads_per_job"] = 3
    rc = run_config(cfg, "digits", "fedavg", digits.seed)
    assert rc["threads"] == 3

    class Stop(Exception):
        pass

    def federation(*args, **kwargs):
        raise Stop(torch.get_num_threads())

    monkeypatch.setattr(hasfl.fl.train, "run_federation", federation)
    before = torch.get_num_threads()
    try:
        with pytest.raises(Stop) as exc:
            train_job(rc, data_config(cfg, "digits"), tmp_path)
    finally:
        torch.set_num_threads(before)
    assert exc.value.args == (3,)


# --------------------------------------------------------------------------- random budget
def test_random_budget_matches_hasfl_budget(engine_cfg, digits, tmp_path) -> None:
    cfg = engine_cfg(rounds=8, warmup=2, t_adapt=2)
    hasfl = job(cfg, "hasfl", digits.seed, tmp_path / "hasfl")
    hasfl_rounds = pd.read_parquet(tmp_path / "hasfl" / "rounds.parquet")
    assert hasfl_rounds["avg_p"].nunique() > 1, "hasfl never re-allocated: the budget test would be vacuous"
    rb = job(cfg, "random_budget", digits.seed, tmp_path / "rb", hasfl_run=tmp_path / "hasfl" / "run.json")
    assert rb["target_avg_p"] == pytest.approx(hasfl["avg_p"])
    assert abs(rb["avg_p"] - hasfl["avg_p"]) <= cfg["method_params"]["random_budget"]["tolerance"]
    rb_rounds = pd.read_parquet(tmp_path / "rb" / "rounds.parquet")
    assert rb_rounds["avg_p"].nunique() > 1
    clients = pd.read_parquet(tmp_path / "rb" / "clients.parquet")
    sampled = clients[clients["times_sampled"] > 0]
    assert (sampled["p_max_allocated"] <= sampled["pmax"] + 1e-12).all()
    top = sampled[sampled["pmax"] == clients["pmax"].max()]
    assert len(top) > 0 and (top["mean_p"] == top["pmax"]).all()
    # the budget comes from the registry's budget_of: without the run it is refused, naming it
    with pytest.raises(ValueError, match="random_budget needs --hasfl-run"):
        job(cfg, "random_budget", digits.seed, tmp_path / "rb2")
    with pytest.raises(ValueError, match="is not a hasfl run"):
        job(cfg, "random_budget", digits.seed, tmp_path / "rb2", hasfl_run=tmp_path / "rb" / "run.json")


# --------------------------------------------------------------------------- every method
def _run_every_method(cfg: dict, seed: int, root: Path) -> dict[str, dict]:
    """Every method of the registry trained into ``root/<method>`` (a matched control after the run it matches):
    each job's returned summary."""
    order = [m for m in METHODS if METHODS[m].budget_of is None] + [m for m in METHODS if METHODS[m].budget_of]
    summaries = {}
    for m in order:
        budget_of = METHODS[m].budget_of
        summaries[m] = job(cfg, m, seed, root / m, hasfl_run=root / budget_of / "run.json" if budget_of else None)
    return summaries


@pytest.fixture(scope="module")
def all_method_folders(engine_cfg, digits, tmp_path_factory) -> tuple[dict, Path, dict[str, dict]]:
    """Every method of the registry, 2 rounds on digits: the config, the folder of their runs, the jobs' summaries."""
    cfg = engine_cfg(rounds=2)
    root = tmp_path_factory.mktemp("methods")
    return cfg, root, _run_every_method(cfg, digits.seed, root)


@pytest.fixture(scope="module")
def all_method_runs(all_method_folders):
    """Every method's run (:func:`all_method_folders`): its job's summary, rounds, clients and run.json."""
    cfg, root, summaries = all_method_folders
    return cfg, {m: (summaries[m], pd.read_parquet(root / m / "rounds.parquet"),
                     pd.read_parquet(root / m / "clients.parquet"), json.loads((root / m / "run.json").read_text()))
                 for m in METHODS}


def test_every_method_is_deterministic(all_method_folders, digits, tmp_path) -> None:
    """Same config + seed -> the same bytes, for every method of the registry (the DAG's own twice-run:
    tests/test_determinism.py on the shared world's methods)."""
    cfg, first, _summaries = all_method_folders
    _run_every_method(cfg, digits.seed, tmp_path)
    for m in METHODS:
        for f in BYTE_FILES:
            assert (first / m / f).read_bytes() == (tmp_path / m / f).read_bytes(), f"{m}: {f} differs"


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_runs(all_method_runs, method) -> None:
    cfg, runs = all_method_runs
    summary, rounds, clients, run_json = runs[method]
    assert summary == run_json and run_json["status"] == "completed" and run_json["method"] == method
    assert list(rounds.columns) == list(ROUND_COLUMNS)
    assert list(rounds.columns) == ["round", "test_acc", "test_loss", "avg_p", "avg_p_trained", "upload_mb",
                                    "train_mmacs", "probe_gmacs", "mean_h_tilde", "n_participants", "train_loss"]
    assert list(clients.columns) == CLIENTS_COLUMNS
    assert rounds["round"].tolist() == [1, 2]
    assert np.all(np.isfinite(rounds["test_acc"])) and np.all((rounds["test_acc"] >= 0) & (rounds["test_acc"] <= 1))
    assert np.all(np.isfinite(rounds["test_loss"])) and np.all(np.isfinite(rounds["train_loss"]))
    assert (rounds["n_participants"] == cfg["federation"]["clients_per_round"]).all()
    assert len(clients) == cfg["federation"]["clients"]
    assert clients["times_sampled"].sum() == 2 * cfg["federation"]["clients_per_round"]
    if method not in FULL_MODEL:
        sampled = clients[clients["times_sampled"] > 0]
        assert (sampled["mean_p"] <= sampled["pmax"] + 1e-12).all()
    assert run_json["avg_p"] == pytest.approx(rounds["avg_p"].mean())


def test_fedavg_trains_full_width(all_method_runs) -> None:
    _, runs = all_method_runs
    for m in FULL_MODEL:
        assert (runs[m][1]["avg_p"] == 1.0).all() and runs[m][0]["avg_p"] == 1.0, m


def test_heterofl_avg_p_is_mean_pmax_of_participants(all_method_runs, digits) -> None:
    cfg, runs = all_method_runs
    _, rounds, clients, _ = runs["heterofl"]
    pmax = clients.sort_values("client_id")["pmax"].to_numpy()
    fed = cfg["federation"]
    schedule = participant_schedule(digits.seed, fed["clients"], fed["clients_per_round"], fed["rounds"])
    expected = [pmax[s].mean() for s in schedule]
    np.testing.assert_allclose(rounds["avg_p"].to_numpy(), expected, rtol=0, atol=1e-12)


def test_fjord_uploads_pmax_width(all_method_runs) -> None:
    _, runs = all_method_runs
    clients = runs["fjord"][2]
    sampled = clients[clients["times_sampled"] > 0]
    assert (sampled["p_max_trained"] == sampled["pmax"]).all()
    assert (sampled["p_max_allocated"] <= sampled["pmax"]).all()


# --------------------------------------------------------------------------- precision
def test_bf16_run_is_deterministic_and_differs_from_fp32(engine_cfg, federate, tmp_path) -> None:
    """precision: bf16 runs the forward passes under autocast: the same run twice gives identical
    Parquet bytes, the result differs from fp32, and parameters stay float32."""
    cfg = engine_cfg(10)
    runs = {}
    for name, precision in (("a", "bf16"), ("b", "bf16"), ("fp32", "fp32")):
        c = {**cfg, "precision": precision}
        res = federate(c, "hasfl")
        out = tmp_path / name
        out.mkdir()
        write_parquet(res.rounds, out / "rounds.parquet")
        runs[name] = res
        assert res.timings["precision"] == precision and res.timings["channels_last"] is True
    assert (tmp_path / "a" / "rounds.parquet").read_bytes() == (tmp_path / "b" / "rounds.parquet").read_bytes()
    assert all(v.dtype in (torch.float32, torch.int64) for v in runs["a"].final_state.values())
    diff = max(float((runs["a"].final_state[k] - runs["fp32"].final_state[k]).abs().max())
               for k in float_keys(runs["a"].final_state))
    assert diff > 0
    accs = runs["a"].rounds["test_acc"].to_numpy()
    fp32_final = float(runs["fp32"].rounds["test_acc"].iloc[-1])
    # digits learns under bf16 as under fp32: the training loss falls and the final accuracies are close
    # (per-width BN statistics: about 0.17 under both after 10 rounds, chance 0.1; the loss 2.23 -> 1.58)
    loss = runs["a"].rounds["train_loss"].to_numpy()
    assert np.isfinite(accs).all() and loss[-1] < loss[0] and abs(accs[-1] - fp32_final) < 0.1


# --------------------------------------------------------------------------- adding a method
def test_a_method_is_added_in_one_place(engine_cfg, federate, monkeypatch) -> None:
    """One entry in hasfl.registry.METHODS is all a new method needs: the config accepts its name
    and a method_params block, its job slice reads that block, and the engine trains it."""
    from hasfl import registry
    from hasfl.config import ConfigError, validate_config
    from hasfl.fl import methods
    from hasfl.fl.client import LocalSGD
    from hasfl.fl.policies import UniformPolicy

    def half_width(ctx):  # every client at min(p, pmax), p from its own method_params block
        return methods.Method(UniformPolicy(ctx.pmax, ctx.params["p"]), LocalSGD(ctx.optim, ctx.inputs))

    monkeypatch.setitem(registry.METHODS, "half_width", registry.MethodInfo(half_width, "Half width", "fixed"))
    cfg = engine_cfg(2, warmup=0)  # hasfl.warmup <= federation.rounds - 2
    cfg["methods"] = ["hasfl", "half_width"]
    cfg["method_params"]["half_width"] = {"p": 0.5}
    validate_config(cfg)
    job_cfg = run_config(cfg, "digits", "half_width", 42)
    assert job_cfg["method_params"] == {"p": 0.5} and "p_min" not in job_cfg["hasfl"] and "gamma" not in job_cfg["hasfl"]
    assert "p_min" in run_config(cfg, "digits", "hasfl", 42)["hasfl"]
    res = federate(cfg, "half_width")
    assert res.summary["status"] == "completed" and res.summary["method"] == "half_width"
    sampled = res.clients[res.clients["times_sampled"] > 0]
    assert len(sampled) and np.allclose(sampled["p_max_allocated"], np.minimum(0.5, sampled["pmax"]))
    # a name the registry does not know is named, in methods and in method_params, and by the engine
    monkeypatch.delitem(registry.METHODS, "half_width")
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    assert "config key 'methods[1]': unknown method 'half_width'" in str(exc.value)
    assert "unknown config key 'method_params.half_width': not a method" in str(exc.value)
    with pytest.raises(ValueError, match="unknown method 'half_width'"):
        methods.build_method("half_width", None)


def test_registry_builders_resolve_to_the_methods_module() -> None:
    """Every method of the registry names a builder in its own module of hasfl.fl.methods that imports
    and is callable; the hasfl variants share one module, every control is the random budget."""
    import importlib

    from hasfl import registry

    # the paper's nine methods first, in its order (Section 4.1); a method added later only appends (its own test
    # names it), so this test does not list every name
    assert list(METHODS)[:9] == ["hasfl", "hasfl_nocov", "heterofl", "fjord", "uniform", "random_budget", "fedavg",
                                 "scaffold", "fedprox"]
    for name, info in METHODS.items():
        builder = name if info.budget_of is None else "random_budget"
        module = "hasfl" if name.startswith("hasfl") else builder
        assert registry.resolve(info.build) is getattr(importlib.import_module(f"hasfl.fl.methods.{module}"),
                                                       builder), name
    assert {m for m, i in METHODS.items() if i.allocation_rule} == {"hasfl", "hasfl_nocov", "hasfl_probe",
                                                                     "hasfl_reported"}
    assert {m: i.budget_of for m, i in METHODS.items() if i.budget_of} == {
        "random_budget": "hasfl", "random_budget_probe": "hasfl_probe", "random_budget_reported": "hasfl_reported"}
    with pytest.raises(ValueError, match="expected 'module:function'"):
        registry.resolve("no_colon")


def test_the_probe_is_charged_to_the_method_that_allocates_by_it(engine_cfg, federate, monkeypatch) -> None:
    """Issue 25 (costs): hasfl_probe pays for its E2 probes -- each participant's probe upload adds to
    upload_mb and its forward MACs, spread over its local samples, to train_mmacs, at the adaptation
    rounds only; hasfl, whose probes are a diagnostic, pays nothing for them."""
    from hasfl.fl.probe import Probe

    cfg = engine_cfg(16)  # warm-up 10, t_adapt 5: adaptation at (0-based) rounds 10 and 15
    cfg["federation"]["eval_every"] = 1
    paid = federate(cfg, "hasfl_probe").rounds.set_index("round")
    hasfl = federate(cfg, "hasfl").rounds.set_index("round")
    monkeypatch.setattr(Probe, "paid", lambda self, client, local, costs: (0.0, 0.0))
    free = federate(cfg, "hasfl_probe").rounds.set_index("round")
    assert free["avg_p_trained"].equals(paid["avg_p_trained"])  # the probe changes no allocation
    extra_mb = (paid["upload_mb"] - free["upload_mb"]).round(12)
    adapting = {11, 16}  # rounds are numbered from 1 in rounds.parquet
    assert set(extra_mb[extra_mb > 0].index) == adapting and (extra_mb[list(adapting)] == extra_mb[11]).all()
    assert set((paid["train_mmacs"] - free["train_mmacs"])[lambda d: d > 1e-12].index) == adapting
    assert hasfl["upload_mb"].equals(federate(cfg, "hasfl").rounds.set_index("round")["upload_mb"])
    assert (paid["probe_gmacs"][list(adapting)] > 0).all()


def test_a_run_records_the_cpu_it_computed_on(engine_cfg, digits, tmp_path) -> None:
    """timings.json (not the result) names the CPU model beside the kernels' capability and pins: MKL's path follows
    the CPU's maker unless MKL_CBWR fixes it, so two machines of one capability may differ (docs/guide/gpu.md)."""
    from hasfl.device import cpu_model

    job(engine_cfg(rounds=1), "fedavg", digits.seed, tmp_path / "run")
    timings = json.loads((tmp_path / "run" / "timings.json").read_text())
    assert timings["cpu"] == cpu_model() and timings["cpu_capability"] and "isa_env" in timings
