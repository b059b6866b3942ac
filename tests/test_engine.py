"""Tests for the federated engine (hasfl.fl): aggregation, estimator, policies, local
optimisers and the round loop (paper Section 3: Algorithms 1-2, Eqs. 2-6, Prop. 3,
Figures 1-2; Section 4.1 baselines).

Everything runs on CPU on the offline digits dataset with one torch thread; the
federations are shrunk to a few rounds so the whole module stays fast.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace as replace_optim
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hasfl.config import data_config, load_config, run_config
from hasfl.data import load_dataset
from hasfl.data.stage import build_tables
from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.fl.client import ClientData, FedProx, FjordDistill, LocalSGD, OptimConfig, Scaffold, relative_rule
from hasfl.fl.engine import family_for, participant_schedule, run_federation
from hasfl.fl.estimator import HeterogeneityTracker, divergence
from hasfl.fl.methods import METHODS
from hasfl.fl.policies import FjordPolicy, HasflPolicy, RandomBudgetPolicy, coverage_guarantee
from hasfl.fl.train import train_job
from hasfl.io import write_parquet
from hasfl.models import build_family, coverage_mask, region
from hasfl.models.slicing import SliceRule

REPO = Path(__file__).resolve().parents[1]
SEED = 42
ALL = slice(None)

ROUNDS_COLUMNS = ["round", "test_acc", "test_loss", "avg_p", "mean_h_tilde", "n_participants", "train_loss"]
# Issue 3's six columns, then the two diagnostics documented in hasfl.fl.train.
CLIENTS_COLUMNS = ["client_id", "pmax", "p_final", "h_tilde_final", "times_sampled", "mean_p",
                   "p_max_allocated", "p_max_trained"]
FULL_MODEL = ("fedavg", "scaffold", "fedprox")
RUN_FILES = ("rounds.parquet", "clients.parquet", "init.pt", "final.pt")


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Several torch threads on a small shared CPU only slow these tiny models down."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def base_cfg() -> dict:
    cfg = load_config(REPO / "presets" / "quick.yaml")
    cfg["device"] = "cpu"
    return cfg


def small_cfg(cfg: dict, rounds: int, **hasfl: float) -> dict:
    """The quick preset with ``rounds`` rounds and optional overrides of the hasfl block."""
    out = copy.deepcopy(cfg)
    out["federation"]["rounds"] = rounds
    out["hasfl"].update(hasfl)
    return out


@pytest.fixture(scope="module")
def digits(base_cfg):
    """(bundle, partition, clients) of digits for SEED."""
    bundle = load_dataset("digits", base_cfg["data_dir"], base_cfg["dataset_params"]["digits"])
    partition, clients = build_tables(bundle, data_config(base_cfg, "digits"), SEED)
    return bundle, partition, clients


def federate(cfg: dict, digits, method: str, **kwargs):
    bundle, partition, clients = digits
    return run_federation(bundle, partition, clients, run_config(cfg, "digits", method, SEED), **kwargs)


def digits_family(cfg: dict, bundle):
    return family_for(bundle, cfg["dataset_params"]["digits"]["model"])


def float_keys(state: dict) -> list[str]:
    return [k for k, v in state.items() if v.is_floating_point()]


# --------------------------------------------------------------------------- 1. aggregation
def test_aggregation_hand_computed_example() -> None:
    """Algorithm 1 line 18 on a 4x4 weight + 4-bias with overlapping nested widths."""
    glob = {"w": torch.full((4, 4), 5.0), "b": torch.full((4,), 5.0)}
    # client: (rules, delta in sub-model shape, n_samples)
    a = ({"w": SliceRule(None, (slice(0, 2), slice(0, 2))), "b": SliceRule(None, (slice(0, 2),))},
         {"w": torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": torch.tensor([1.0, 2.0])}, 1)
    b = ({"w": SliceRule(None, (slice(0, 4), slice(0, 3))), "b": SliceRule(None, (slice(0, 4),))},
         {"w": torch.full((4, 3), 8.0), "b": torch.tensor([10.0, 20.0, 30.0, 40.0])}, 3)
    c = ({"w": SliceRule(None, (slice(0, 1), slice(0, 1))), "b": SliceRule(None, (slice(0, 1),))},
         {"w": torch.tensor([[-4.0]]), "b": torch.tensor([100.0])}, 2)
    agg = CoordinateAggregator(glob, ["w", "b"])
    for rules, delta, n in (a, b, c):
        agg.add(delta, rules, n)
    bar = agg.mean()

    # b: row 0 = A,B,C; row 1 = A,B; rows 2,3 = B only.
    expected_b = torch.tensor([(1 * 1 + 3 * 10 + 2 * 100) / 6, (1 * 2 + 3 * 20) / 4, 30.0, 40.0])
    expected_w = torch.tensor([
        [(1 * 1 + 3 * 8 + 2 * -4) / 6, (1 * 2 + 3 * 8) / 4, 8.0, 0.0],
        [(1 * 3 + 3 * 8) / 4, (1 * 4 + 3 * 8) / 4, 8.0, 0.0],
        [8.0, 8.0, 8.0, 0.0],
        [8.0, 8.0, 8.0, 0.0],
    ])
    torch.testing.assert_close(bar["b"], expected_b, rtol=0, atol=1e-6)
    torch.testing.assert_close(bar["w"], expected_w, rtol=0, atol=1e-6)
    covered = agg.covered()
    assert covered["b"].all()
    assert torch.equal(covered["w"], torch.tensor([[True, True, True, False]] * 4))
    # Line 19: the uncovered column keeps the global value exactly.
    new_w = glob["w"] + bar["w"]
    assert torch.equal(new_w[:, 3], glob["w"][:, 3])


def test_aggregation_gate_view_rule() -> None:
    """A gate-blocked (LSTM-style) rule scatters into the leading rows of every gate."""
    glob = {"g": torch.zeros(8)}  # 4 gates x 2 units
    rule = {"g": SliceRule((4, 2), (ALL, slice(0, 1)))}
    agg = CoordinateAggregator(glob, ["g"])
    agg.add({"g": torch.tensor([1.0, 2.0, 3.0, 4.0])}, rule, 1)
    agg.add({"g": torch.tensor([3.0, 4.0, 5.0, 6.0])}, rule, 3)
    assert torch.equal(agg.mean()["g"], torch.tensor([2.5, 0.0, 3.5, 0.0, 4.5, 0.0, 5.5, 0.0]))


@pytest.mark.parametrize("widths", [(0.25, 0.5, 1.0), (0.25, 0.5)])
def test_aggregation_cnn_family(base_cfg, digits, widths) -> None:
    """Real CNN slice rules: every coordinate is the n-weighted mean over exactly its covering clients."""
    family = digits_family(base_cfg, digits[0])
    glob = family.build(1.0).state_dict()
    keys = float_keys(glob)
    n = {0.25: 1, 0.5: 3, 1.0: 2}
    value = {0.25: 1.0, 0.5: 10.0, 1.0: 100.0}
    agg = CoordinateAggregator(glob, keys)
    for p in widths:
        sub = family.sub_shapes(p)
        agg.add({k: torch.full(sub[k], value[p]) for k in keys}, family.slice_rules(p), n[p])
    bar = agg.mean()
    masks = {p: coverage_mask(glob, family.slice_rules(p)) for p in widths}
    for k in keys:
        num = sum(n[p] * value[p] * masks[p][k].double() for p in widths)
        den = sum(n[p] * masks[p][k].double() for p in widths)
        expected = torch.where(den > 0, num / den.clamp_min(1), torch.zeros_like(num)).float()
        torch.testing.assert_close(bar[k], expected, rtol=1e-6, atol=0, msg=k)
        union = masks[max(widths)][k]  # nested masks: the union is the widest one
        assert torch.equal(agg.covered()[k], union), k
        assert torch.all(bar[k][~union] == 0), k
    # The nested regions really overlap: fc1.weight holds all three kinds of coordinates.
    fc1 = bar["fc1.weight"]
    assert torch.isclose(fc1[0, 0], torch.tensor(sum(n[p] * value[p] for p in widths) / sum(n[p] for p in widths)))
    assert (fc1 == 0).any() == (1.0 not in widths)


# --------------------------------------------------------------------------- 2. Proposition 3
def test_proposition3_uniform_freezes_outer_coordinates(base_cfg, digits) -> None:
    cfg = small_cfg(base_cfg, rounds=4)
    assert cfg["method_params"]["uniform"]["p"] == 0.5
    res = federate(cfg, digits, "uniform")
    assert res.summary["status"] == "completed"
    assert (res.clients["p_max_allocated"] <= 0.5).all() and (res.rounds["avg_p"] <= 0.5).all()
    family = digits_family(cfg, digits[0])
    mask = coverage_mask(res.init_state, family.slice_rules(0.5))
    for k in float_keys(res.init_state):
        init, final = res.init_state[k], res.final_state[k]
        outside = ~mask[k]
        assert torch.equal(final[outside], init[outside]), f"{k}: uncovered coordinates moved"
        assert not torch.equal(final[mask[k]], init[mask[k]]), f"{k}: covered coordinates did not move"
    assert sum(int((~m).sum()) for m in mask.values()) > 0


# Seed 45: both pmax = 1.0 clients sit out round 0 and take part in rounds 1-3, so with
# adaptation after every round (warmup 0, t_adapt 1) they are only ever sampled at the
# widths Eq. 6 (+ coverage) gives them -- never at the initial p(0) = pmax.
ADAPT_SEED = 45


@pytest.fixture(scope="module")
def adapting_runs(base_cfg, digits):
    """hasfl and hasfl_nocov for ADAPT_SEED, adapting every round from t = 0 (t_norm 2), 4 rounds."""
    cfg = small_cfg(base_cfg, rounds=4, warmup=0, t_adapt=1, t_norm=2)
    bundle = digits[0]
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


def test_proposition3_coverage_moves_outer_coordinates(adapting_runs, digits) -> None:
    cfg, runs, top = adapting_runs
    res = runs["hasfl"]
    sampled_top = [i for i in top if res.clients.loc[i, "times_sampled"] > 0]
    assert sampled_top and (res.clients.loc[sampled_top, "p_max_allocated"] == 1.0).all()
    assert (res.clients.loc[top, "p_final"] == 1.0).all()
    family = digits_family(cfg, digits[0])
    inner = coverage_mask(res.init_state, family.slice_rules(0.75))  # the widest non-top client
    moved = 0
    for k in float_keys(res.init_state):
        outside = ~inner[k]
        if outside.any():
            assert not torch.equal(res.final_state[k][outside], res.init_state[k][outside]), k
            moved += 1
    assert moved >= 5


def test_proposition3_without_coverage_freezes_beyond_largest_allocation(adapting_runs, digits) -> None:
    """hasfl_nocov: p_bar = the largest width ever allocated < 1, so outside it nothing moves."""
    cfg, runs, top = adapting_runs
    res = runs["hasfl_nocov"]
    p_bar = float(res.clients["p_max_allocated"].max())
    assert p_bar < 1.0
    assert (res.clients.loc[top, "p_max_allocated"] < 1.0).all()
    family = digits_family(cfg, digits[0])
    mask = coverage_mask(res.init_state, family.slice_rules(p_bar))
    frozen = 0
    for k in float_keys(res.init_state):
        outside = ~mask[k]
        assert torch.equal(res.final_state[k][outside], res.init_state[k][outside]), k
        frozen += int(outside.sum())
    assert frozen > 0


# --------------------------------------------------------------------------- 3. allocation rule
FIG1_PMAX = np.array([0.3, 0.8, 0.5])
FIG1_H = np.array([2.1, 0.3, 1.2])


def policy(pmax, coverage: bool) -> HasflPolicy:
    return HasflPolicy(np.asarray(pmax, dtype=float), p_min=0.4, gamma=0.25, epsilon=1e-8, coverage=coverage)


def test_figure1_allocation_with_coverage() -> None:
    h_bar = FIG1_H.mean()  # 1.2
    eq6 = 0.4 + 0.25 * FIG1_H / (h_bar + 1e-8)  # 0.8375, 0.4625, 0.65
    np.testing.assert_allclose(eq6, [0.8375, 0.4625, 0.65], atol=1e-8)
    p = policy(FIG1_PMAX, coverage=True).allocation(FIG1_H)
    # Client 1: its cap 0.3; client 2: 0.8 via the coverage guarantee; client N: its cap 0.5.
    np.testing.assert_allclose(p, [0.3, 0.8, 0.5], rtol=0, atol=1e-12)
    # Only H relative to the average matters (Figure 1 shows H relative to the average).
    np.testing.assert_allclose(policy(FIG1_PMAX, True).allocation(7.0 * FIG1_H), p, atol=1e-9)


def test_figure1_allocation_without_coverage() -> None:
    p = policy(FIG1_PMAX, coverage=False).allocation(FIG1_H)
    np.testing.assert_allclose(p, [0.3, 0.4 + 0.25 * 0.3 / 1.2, 0.5], rtol=0, atol=1e-8)
    assert p[1] < FIG1_PMAX[1]


def test_policy_adapt_applies_allocation() -> None:
    pol = policy(FIG1_PMAX, coverage=True)
    np.testing.assert_array_equal(pol.p, FIG1_PMAX)  # Algorithm 1 line 3: p(0) = pmax
    pol.adapt(FIG1_H)
    np.testing.assert_allclose(pol.p, [0.3, 0.8, 0.5], atol=1e-12)
    np.testing.assert_allclose(pol.widths(0, np.array([2, 0]), np.random.default_rng(0)), [0.5, 0.3])


def test_coverage_guarantee_all_top_clients() -> None:
    p = coverage_guarantee(np.array([0.4, 0.45, 0.6, 0.5]), np.array([1.0, 0.5, 1.0, 0.75]))
    np.testing.assert_array_equal(p, [1.0, 0.45, 1.0, 0.5])


@pytest.mark.parametrize("pmax", [1.0, 0.6, 0.3])
def test_figure2_curves(pmax: float) -> None:
    """p = min(pmax, 0.4 + 0.25 h), h = H / H_bar: linear from 0.4, then a plateau at pmax."""
    grid = np.linspace(0.0, 3.0, 31)
    got = []
    for h in grid:
        h_tilde = np.array([h, (4.0 - h) / 3, (4.0 - h) / 3, (4.0 - h) / 3])  # mean exactly 1
        assert h_tilde.mean() == pytest.approx(1.0, abs=1e-12)
        got.append(policy([pmax, 1.0, 1.0, 1.0], coverage=False).allocation(h_tilde)[0])
    got = np.array(got)
    np.testing.assert_allclose(got, np.minimum(pmax, 0.4 + 0.25 * grid), atol=1e-7)
    kink = (pmax - 0.4) / 0.25
    rising, flat = grid < kink - 1e-9, grid > kink + 1e-9
    if rising.sum() >= 2:
        np.testing.assert_allclose(np.diff(got[rising]) / np.diff(grid[rising]), 0.25, atol=1e-6)
    assert np.all(got[flat] == pmax)
    assert got.max() <= pmax


# --------------------------------------------------------------------------- 4. determinism
@pytest.mark.parametrize("method", ["hasfl", "fjord"])
def test_train_job_deterministic(base_cfg, tmp_path, method) -> None:
    cfg = small_cfg(base_cfg, rounds=3, warmup=0, t_adapt=1)
    run = {}
    for name, seed in (("a", SEED), ("b", SEED), ("c", SEED + 1)):
        summary = train_job(cfg, "digits", method, seed, tmp_path / name)
        assert summary["status"] == "completed"
        run[name] = {f: (tmp_path / name / f).read_bytes() for f in RUN_FILES}
    for f in RUN_FILES:
        assert run["a"][f] == run["b"][f], f"{method}: {f} differs between two runs of the same seed"
        assert run["a"][f] != run["c"][f], f"{method}: {f} identical for different seeds"


# --------------------------------------------------------------------------- 5. random budget
def test_random_budget_matches_hasfl_budget(base_cfg, digits, tmp_path) -> None:
    cfg = small_cfg(base_cfg, rounds=8, warmup=2, t_adapt=2)
    hasfl = train_job(cfg, "digits", "hasfl", SEED, tmp_path / "hasfl")
    hasfl_rounds = pd.read_parquet(tmp_path / "hasfl" / "rounds.parquet")
    assert hasfl_rounds["avg_p"].nunique() > 1, "hasfl never re-allocated: the budget test would be vacuous"
    rb = train_job(cfg, "digits", "random_budget", SEED, tmp_path / "rb", hasfl_run=tmp_path / "hasfl" / "run.json")
    assert rb["target_avg_p"] == pytest.approx(hasfl["avg_p"])
    assert abs(rb["avg_p"] - hasfl["avg_p"]) <= cfg["method_params"]["random_budget"]["tolerance"]
    rb_rounds = pd.read_parquet(tmp_path / "rb" / "rounds.parquet")
    assert rb_rounds["avg_p"].nunique() > 1
    clients = pd.read_parquet(tmp_path / "rb" / "clients.parquet")
    sampled = clients[clients["times_sampled"] > 0]
    assert (sampled["p_max_allocated"] <= sampled["pmax"] + 1e-12).all()
    top = sampled[sampled["pmax"] == clients["pmax"].max()]
    assert len(top) > 0 and (top["mean_p"] == top["pmax"]).all()


def test_random_budget_policy_widths(digits) -> None:
    pmax = digits[2].sort_values("client_id")["pmax"].to_numpy(dtype=float)
    schedule = participant_schedule(SEED, len(pmax), 10, 30)
    target = 0.42  # attainable: between the floor and the mean pmax of the schedule
    pol = RandomBudgetPolicy(pmax, schedule, target, np.random.default_rng(0))
    assert abs(pol.achieved - target) < 1e-6
    per_client: dict[int, set[float]] = {}
    means = []
    for t, part in enumerate(schedule):
        w = pol.widths(t, part, np.random.default_rng(1))
        means.append(w.mean())
        assert np.all(w <= pmax[part] + 1e-12) and np.all(w >= RandomBudgetPolicy.P_FLOOR)
        assert np.all(w[pmax[part] == 1.0] == 1.0)  # coverage clients
        for i, p in zip(part, w, strict=True):
            per_client.setdefault(int(i), set()).add(float(p))
    assert np.mean(means) == pytest.approx(target, abs=1e-6)
    varying = [i for i, ps in per_client.items() if pmax[i] < 1.0 and len(ps) > 1]
    assert len(varying) >= 5, "random_budget widths should vary over rounds"
    with pytest.raises(RuntimeError):
        pol.widths(0, schedule[1], np.random.default_rng(1))


# --------------------------------------------------------------------------- 6. estimator
def test_divergence_hand_example() -> None:
    delta_bar = {"w": torch.tensor([1.0, 2.0, 3.0, 4.0]), "v": torch.tensor([[1.0, 1.0], [1.0, 1.0]]),
                 "ignored": torch.tensor([50.0])}
    rules = {"w": SliceRule(None, (slice(0, 2),)), "v": SliceRule(None, (slice(0, 1), slice(0, 2))),
             "ignored": SliceRule(None, (ALL,))}
    delta = {"w": torch.tensor([2.0, 0.0]), "v": torch.tensor([[3.0, 1.0]]), "ignored": torch.tensor([0.0])}
    eps = 0.5
    # numerator: (2-1)^2 + (0-2)^2 + (3-1)^2 + (1-1)^2 = 9; denominator: 1 + 4 + 1 + 1 = 7
    h = divergence(delta, delta_bar, rules, ["w", "v"], eps)
    assert h == pytest.approx(9.0 / (7.0 + eps), rel=1e-12)
    # Unrestricted (the whole delta_bar, client zero outside its mask) would be inflated.
    unrestricted = (9.0 + 3**2 + 4**2 + 2 * 1.0) / (7.0 + 9 + 16 + 2 + eps)
    assert h != pytest.approx(unrestricted)


def test_tracker_ema_and_normalisation() -> None:
    tr = HeterogeneityTracker(3, beta=0.9, t_norm=4)
    np.testing.assert_array_equal(tr.h_tilde, [1.0, 1.0, 1.0])  # H~(0) = 1
    tr.update(np.array([0, 2]), np.array([3.0, 0.5]))
    np.testing.assert_allclose(tr.h_tilde, [0.9 + 0.3, 1.0, 0.9 + 0.05])
    tr.update(np.array([0]), np.array([2.0]))
    np.testing.assert_allclose(tr.h_tilde, [0.9 * 1.2 + 0.2, 1.0, 0.95])
    before = tr.h_tilde.copy()
    for t in (0, 1, 2, 3, 5):
        assert not tr.normalize_if_due(t)
    np.testing.assert_array_equal(tr.h_tilde, before)
    assert tr.normalize_if_due(4)
    assert tr.h_tilde.mean() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(tr.h_tilde, before / before.mean())
    np.testing.assert_array_equal(np.argsort(tr.h_tilde), np.argsort(before))
    assert tr.normalize_if_due(8)


def test_engine_normalises_every_t_norm_rounds(adapting_runs) -> None:
    res = adapting_runs[1]["hasfl"]  # t_adapt 1, t_norm 2: normalised after t = 2
    mean_h = res.rounds.set_index("round")["mean_h_tilde"]
    assert mean_h[3] == pytest.approx(1.0, abs=1e-12)
    assert mean_h[1] != pytest.approx(1.0, abs=1e-6)  # EMA moved it, no normalisation at t = 0
    assert np.all(np.isfinite(res.clients["h_tilde_final"]))


# --------------------------------------------------------------------------- 7. FjORD
def small_cnn():
    return build_family("cnn", in_shape=(1, 8, 8), num_classes=5, channels=[4, 8], pool_after=[0],
                        pool_out=2, hidden=12)


def small_lstm():
    return build_family("lstm", in_shape=(6,), num_classes=11, embed_dim=5, hidden=12, layers=2)


def random_state(family) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    state = family.build(1.0).state_dict()
    for k, t in state.items():
        if t.is_floating_point():
            t.normal_()
    return state


@pytest.mark.parametrize("make", [small_cnn, small_lstm], ids=["cnn", "lstm"])
@pytest.mark.parametrize(("p", "big_p"), [(0.25, 0.5), (0.25, 1.0), (0.5, 0.75)])
def test_relative_rule_matches_direct_extraction(make, p, big_p) -> None:
    family = make()
    glob = random_state(family)
    big = family.extract(glob, big_p)
    direct = family.extract(glob, p)
    shapes = family.sub_shapes(p)
    for k, rule in family.slice_rules(p).items():
        rebased = region(big[k], relative_rule(rule, big[k].shape)).reshape(shapes[k])
        assert torch.equal(rebased, direct[k]), k


def test_relative_rule_is_needed_for_gate_blocks() -> None:
    family = small_lstm()
    big = family.extract(random_state(family), 0.5)
    with pytest.raises(RuntimeError):  # the global (4, 12, ...) view does not fit a (4 * 6, ...) tensor
        region(big["lstm.weight_hh_l0"], family.slice_rules(0.25)["lstm.weight_hh_l0"])


def test_fjord_policy_draws_only_allowed_tiers() -> None:
    tiers = [0.25, 0.5, 0.75, 1.0]
    pmax = np.array([0.25, 0.5, 0.75, 1.0, 0.5])
    pol = FjordPolicy(pmax, tiers)
    rng = np.random.default_rng(0)
    seen: dict[int, set[float]] = {i: set() for i in range(len(pmax))}
    for t in range(200):
        part = np.arange(len(pmax))
        w = pol.widths(t, part, rng)
        assert np.all(w <= pmax) and set(w) <= set(tiers)
        np.testing.assert_array_equal(pol.p, w)
        for i, p in enumerate(w):
            seen[i].add(float(p))
    for i, cap in enumerate(pmax):
        assert seen[i] == {x for x in tiers if x <= cap}


def fjord_grads(family, p, big_p, distill: bool):
    torch.manual_seed(1)
    x, y = torch.randn(6, 1, 8, 8), torch.randint(0, 5, (6,))
    glob = random_state(family)
    model = family.build(big_p)
    model.load_state_dict(family.extract(glob, big_p))
    optim = OptimConfig(lr=0.1, lr_decay=1.0, local_epochs=1, batch_size=6, momentum=0.0, weight_decay=0.0,
                        clip=1e9)
    trainer = FjordDistill(optim, lambda v: v, family)
    assert trainer.model_width(p, big_p) == big_p  # the client trains (and uploads) its pmax width
    trainer.begin_client(0, model, p, big_p)
    loss = trainer.loss(model, x, y) if distill else F.cross_entropy(model(x), y)
    loss.backward()
    return model, float(loss.detach()), {k: q.grad.clone() for k, q in model.named_parameters()}


def test_fjord_distillation_backpropagates_into_shared_parameters() -> None:
    family = small_cnn()
    p, big_p = 0.25, 0.75
    model, loss_kd, g_kd = fjord_grads(family, p, big_p, distill=True)
    _, loss_ce, g_ce = fjord_grads(family, p, big_p, distill=False)
    assert np.isfinite(loss_kd) and loss_kd > loss_ce  # KL term > 0 for different logits
    big_shapes = {k: q.shape for k, q in model.named_parameters()}
    touched = 0
    for k, rule in family.slice_rules(p).items():
        if k not in g_kd:
            continue
        inside = torch.zeros(big_shapes[k], dtype=torch.bool)
        region(inside, relative_rule(rule, big_shapes[k])).fill_(True)
        diff = g_kd[k] - g_ce[k]
        torch.testing.assert_close(diff[~inside], torch.zeros_like(diff[~inside]), rtol=0, atol=1e-6, msg=k)
        touched += int(bool((diff[inside].abs() > 1e-7).any()))
    assert touched >= len(g_kd) - 1  # the KD gradient reaches (almost) every shared tensor


def test_fjord_same_width_is_plain_cross_entropy() -> None:
    family = small_cnn()
    _, loss_kd, g_kd = fjord_grads(family, 0.5, 0.5, distill=True)
    _, loss_ce, g_ce = fjord_grads(family, 0.5, 0.5, distill=False)
    assert loss_kd == loss_ce
    for k in g_kd:
        assert torch.equal(g_kd[k], g_ce[k]), k


# --------------------------------------------------------------------------- 8. SCAFFOLD / FedProx
def toy_clients(n_clients: int = 3):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 3, generator=gen)
    y = (x[:, 0] + 0.5 * torch.randn(60, generator=gen) > 0).long()
    return [ClientData(i, torch.arange(20 * i, 20 * i + 20), x, y) for i in range(n_clients)]


def toy_optim(**kw) -> OptimConfig:
    base = dict(lr=0.1, lr_decay=1.0, local_epochs=2, batch_size=8, momentum=0.0, weight_decay=0.0, clip=1e9)
    base.update(kw)
    return OptimConfig(**base)


def scaffold_round(trainer: Scaffold, global_model: nn.Module, clients, lr: float, n_total: int, t: int):
    """One SCAFFOLD round on a toy linear model; returns (x - y_i)/(K lr) per client and c_i before."""
    glob = {k: v.clone() for k, v in global_model.state_dict().items()}
    trainer.begin_round(glob)
    drift, c_i_before = {}, {}
    deltas = []
    for data in clients:
        model = copy.deepcopy(global_model)
        c_i_before[data.client_id] = {k: v.clone() for k, v in trainer.c_i.get(data.client_id, {}).items()}
        trainer.begin_client(data.client_id, model, 1.0, 1.0)
        res = trainer.train(model, data, lr, torch.Generator().manual_seed(100 * t + data.client_id))
        trainer.end_client(data.client_id, model, res.steps, lr)
        drift[data.client_id] = {k: (glob[k] - q.detach()) / (res.steps * lr) for k, q in model.named_parameters()}
        deltas.append({k: q.detach() - glob[k] for k, q in model.named_parameters()})
    with torch.no_grad():
        for k, q in global_model.named_parameters():
            q.add_(sum(d[k] for d in deltas) / len(deltas))
    trainer.end_round(glob, n_total)
    return drift, c_i_before


def test_scaffold_control_variates_option_ii() -> None:
    torch.manual_seed(0)
    global_model = nn.Linear(3, 2)
    clients = toy_clients(3)[:2]  # 2 participants of N = 4
    trainer = Scaffold(toy_optim(), lambda v: v, {"momentum": 0.0, "global_lr": 1.0})
    lr, n_total = 0.1, 4
    drift, _ = scaffold_round(trainer, global_model, clients, lr, n_total, t=0)
    # Round 0: c = c_i = 0, so c_i+ = (x - y_i) / (K lr) = Delta c_i, and c = (1/N) sum_i Delta c_i.
    for k in trainer.c:
        expected = sum(drift[i][k] for i in (0, 1)) / n_total
        torch.testing.assert_close(trainer.c[k], expected, rtol=1e-6, atol=1e-7)
        for i in (0, 1):
            torch.testing.assert_close(trainer.c_i[i][k], drift[i][k], rtol=1e-6, atol=1e-7)
    assert any(bool(v.abs().sum() > 0) for v in trainer.c.values())

    # Round 1 with client 0 only: c_i+ = c_i - c + drift; c += (1/N) (c_i+ - c_i).
    c_before = {k: v.clone() for k, v in trainer.c.items()}
    drift1, c_i_before = scaffold_round(trainer, global_model, clients[:1], lr, n_total, t=1)
    for k in trainer.c:
        new_ci = c_i_before[0][k] - c_before[k] + drift1[0][k]
        torch.testing.assert_close(trainer.c_i[0][k], new_ci, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(trainer.c[k], c_before[k] + (new_ci - c_i_before[0][k]) / n_total,
                                   rtol=1e-5, atol=1e-6)


def test_scaffold_corrects_gradients_by_c_minus_ci() -> None:
    trainer = Scaffold(toy_optim(), lambda v: v, {"momentum": 0.0})
    model = nn.Linear(3, 2)
    trainer.begin_client(5, model, 1.0, 1.0)
    trainer.c = {k: torch.full_like(v, 2.0) for k, v in trainer.c.items()}
    trainer.c_i[5] = {k: torch.full_like(v, 0.5) for k, v in trainer.c_i[5].items()}
    trainer.begin_client(5, model, 1.0, 1.0)
    for q in model.parameters():
        q.grad = torch.ones_like(q)
    trainer.after_backward(model)
    for q in model.parameters():
        assert torch.all(q.grad == 1.0 + 2.0 - 0.5)


def prox_distance(mu: float, cls=FedProx) -> float:
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    anchor = [q.detach().clone() for q in model.parameters()]
    trainer = cls(toy_optim(local_epochs=5, momentum=0.9), lambda v: v, {"mu": mu})
    trainer.begin_client(0, model, 1.0, 1.0)
    trainer.train(model, toy_clients(1)[0], 0.1, torch.Generator().manual_seed(3))
    return float(sum((q.detach() - a).pow(2).sum() for q, a in zip(model.parameters(), anchor)).sqrt())


def test_fedprox_stays_closer_to_anchor() -> None:
    free, prox = prox_distance(0.0), prox_distance(1.0)
    assert free > 0 and prox < 0.9 * free
    assert prox_distance(0.0) == pytest.approx(prox_distance(0.0, cls=LocalSGD), rel=1e-6)


class AutogradFedProx(LocalSGD):
    """FedProx as the textbook writes it: the proximal term inside the loss, differentiated by autograd."""

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        self._anchor = [q.detach().clone() for q in model.parameters()]

    def loss(self, model: nn.Module, x, y):
        prox = sum((q - a).pow(2).sum() for q, a in zip(model.parameters(), self._anchor, strict=True))
        return F.cross_entropy(model(x), y) + 0.5 * float(self.params["mu"]) * prox


class LoopScaffold(Scaffold):
    """SCAFFOLD's gradient correction as one add_ per parameter tensor."""

    def after_backward(self, model: nn.Module) -> None:
        for q, c in zip(model.parameters(), self._corr, strict=True):
            q.grad.add_(c)


@pytest.mark.parametrize("pair", ["fedprox", "scaffold"])
def test_foreach_hooks_match_the_per_tensor_formulation_to_the_bit(base_cfg, digits, pair) -> None:
    """FedProx's foreach proximal gradient is autograd's gradient of (mu/2)||w - w_g||^2 and
    SCAFFOLD's foreach correction is the per-tensor one: after several momentum / weight-decay /
    clipped steps of a sliced CNN from a moved anchor, the weights are identical bit for bit."""
    bundle = digits[0]
    family = digits_family(base_cfg, bundle)
    optim = replace_optim(OptimConfig.from_config(base_cfg["dataset_params"]["digits"]["optim"]), clip=0.5,
                          weight_decay=5e-4, momentum=0.9, local_epochs=2)
    data = ClientData(0, torch.arange(200), bundle.train_x, bundle.train_y)
    params = {"mu": 0.3} if pair == "fedprox" else {"momentum": 0.9}
    classes = (FedProx, AutogradFedProx) if pair == "fedprox" else (Scaffold, LoopScaffold)
    states, losses = [], []
    for cls in classes:
        torch.manual_seed(0)
        model = family.build(0.5)
        trainer = cls(optim, bundle.inputs, params)
        if pair == "scaffold":
            trainer.begin_client(0, model, 0.5, 0.5)
            gen = torch.Generator().manual_seed(9)
            trainer.c = {k: 0.01 * torch.randn(v.shape, generator=gen) for k, v in trainer.c.items()}
        trainer.begin_client(0, model, 0.5, 0.5)
        with torch.no_grad():  # move off the anchor so the proximal term is not zero at the first step
            for q in model.parameters():
                q.add_(0.05)
        res = trainer.train(model, data, 0.05, torch.Generator().manual_seed(1))
        states.append(model.state_dict())
        losses.append(res.loss)
    for k, v in states[0].items():
        assert torch.equal(v, states[1][k]), k
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)  # the proximal value is summed in another order


class ClonedBufferFjord(FjordDistill):
    """FjORD's student as first written: a full module, its running statistics cloned slices."""

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        big = model.state_dict()
        self._ref = (self.family.build(p),
                     {k: relative_rule(r, big[k].shape) for k, r in self.family.slice_rules(p).items()})

    def loss(self, model: nn.Module, x, y):
        logits = model(x)
        student, rel = self._ref
        shapes = {k: v.shape for k, v in student.state_dict().items()}
        params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
        tensors = {k: region(params[k], rel[k]).reshape(shapes[k]) for k in params}
        tensors.update({k: region(buffers[k], rel[k]).reshape(shapes[k]).clone() for k in buffers})
        z = torch.func.functional_call(student, tensors, (x,))
        kd = F.kl_div(F.log_softmax(z, dim=1), F.softmax(logits.detach(), dim=1), reduction="batchmean")
        return F.cross_entropy(logits, y) + kd


def test_fjord_student_without_running_statistics_trains_the_same_bits(base_cfg, digits) -> None:
    """The distilled student keeps no running batch-norm statistics (it normalises by the batch's in
    training either way): the client's module, its running statistics included, and the losses are
    identical to the student that carried cloned slices of them."""
    bundle = digits[0]
    family = digits_family(base_cfg, bundle)
    optim = replace_optim(OptimConfig.from_config(base_cfg["dataset_params"]["digits"]["optim"]), local_epochs=2)
    data = ClientData(0, torch.arange(200), bundle.train_x, bundle.train_y)
    states, losses = [], []
    for cls in (FjordDistill, ClonedBufferFjord):
        torch.manual_seed(0)
        model = family.build(0.75)
        trainer = cls(optim, bundle.inputs, family)
        trainer.begin_client(0, model, 0.25, 0.75)
        losses.append(trainer.train(model, data, 0.05, torch.Generator().manual_seed(1)).loss)
        states.append(model.state_dict())
    assert any("running_mean" in k for k in states[0])
    for k, v in states[0].items():
        assert torch.equal(v, states[1][k]), k
    assert losses[0] == losses[1]


# --------------------------------------------------------------------------- 9. every method
@pytest.fixture(scope="module")
def all_method_runs(base_cfg, tmp_path_factory):
    """Every method of METHODS, 2 rounds on digits (hasfl first: random_budget needs its run.json)."""
    cfg = small_cfg(base_cfg, rounds=2)
    root = tmp_path_factory.mktemp("methods")
    order = ["hasfl"] + [m for m in METHODS if m != "hasfl"]
    out = {}
    for m in order:
        hasfl_run = root / "hasfl" / "run.json" if m == "random_budget" else None
        summary = train_job(cfg, "digits", m, SEED, root / m, hasfl_run=hasfl_run)
        out[m] = (summary, pd.read_parquet(root / m / "rounds.parquet"), pd.read_parquet(root / m / "clients.parquet"),
                  json.loads((root / m / "run.json").read_text()))
    return cfg, out


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_runs(all_method_runs, method) -> None:
    cfg, runs = all_method_runs
    summary, rounds, clients, run_json = runs[method]
    assert summary == run_json and run_json["status"] == "completed" and run_json["method"] == method
    assert list(rounds.columns) == ROUNDS_COLUMNS
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


def test_heterofl_avg_p_is_mean_pmax_of_participants(all_method_runs) -> None:
    cfg, runs = all_method_runs
    _, rounds, clients, _ = runs["heterofl"]
    pmax = clients.sort_values("client_id")["pmax"].to_numpy()
    fed = cfg["federation"]
    schedule = participant_schedule(SEED, fed["clients"], fed["clients_per_round"], fed["rounds"])
    expected = [pmax[s].mean() for s in schedule]
    np.testing.assert_allclose(rounds["avg_p"].to_numpy(), expected, rtol=0, atol=1e-12)


def test_fjord_uploads_pmax_width(all_method_runs) -> None:
    _, runs = all_method_runs
    clients = runs["fjord"][2]
    sampled = clients[clients["times_sampled"] > 0]
    assert (sampled["p_max_trained"] == sampled["pmax"]).all()
    assert (sampled["p_max_allocated"] <= sampled["pmax"]).all()


@pytest.mark.parametrize("batch_stats", [False, True])
def test_evaluator_matches_plain_evaluation(base_cfg, digits, batch_stats: bool) -> None:
    """The CPU evaluator (channels_last copy, batches of 64) gives the accuracy of evaluating the
    global model itself in one batch, the loss to float precision, and leaves the RNG alone."""
    from hasfl.fl.engine import Evaluator, Numerics, evaluate

    bundle = digits[0]
    family = digits_family(base_cfg, bundle)
    torch.manual_seed(3)
    model = family.build(1.0)
    for m in model.modules():  # non-trivial running statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    state = torch.random.get_rng_state()
    ev = Evaluator(family, Numerics.for_run(torch.device("cpu"), "fp32", image=True), batch_stats=batch_stats)
    assert torch.equal(torch.random.get_rng_state(), state)
    if batch_stats:
        assert ev.copy is None and ev.batch_size == Evaluator.BATCH
    else:
        assert ev.batch_size == Evaluator.CPU_BATCH and ev.batch_size < len(bundle.test_y)
        assert next(ev.copy.parameters()).dim() == 4
        conv = next(m for m in ev.copy.modules() if isinstance(m, nn.Conv2d))
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    acc, loss = ev(model, bundle)
    ref_acc, ref_loss = evaluate(model, bundle, batch_size=len(bundle.test_y))
    assert acc == ref_acc and loss == pytest.approx(ref_loss, rel=1e-5, abs=1e-6)
    # the copy follows the global model: change the model, evaluate again
    with torch.no_grad():
        next(model.parameters()).mul_(0.0)
    assert ev(model, bundle) == pytest.approx(evaluate(model, bundle, batch_size=len(bundle.test_y)), rel=1e-5)


# --------------------------------------------------------------------------- precision and layout
def test_numerics_for_run_rules() -> None:
    """channels_last only for image models on the CPU; tf32 needs CUDA; an unknown precision is named."""
    from hasfl.fl.engine import Numerics

    cpu = torch.device("cpu")
    assert Numerics.for_run(cpu, "fp32", image=True).channels_last
    assert not Numerics.for_run(cpu, "fp32", image=False).channels_last
    assert not Numerics.for_run(torch.device("meta"), "fp32", image=True).channels_last
    with pytest.raises(ValueError, match="config key 'precision' is 'tf32', which needs a CUDA device"):
        Numerics.for_run(cpu, "tf32", image=True)
    with pytest.raises(ValueError, match="config key 'precision' is 'fp16'; expected one of fp32, tf32, bf16"):
        Numerics.for_run(cpu, "fp16", image=True)
    assert isinstance(Numerics.for_run(cpu, "bf16", image=False).autocast(), torch.autocast)


def test_numerics_backend_flags_set_and_restored() -> None:
    """fp32 and bf16 force IEEE float32 in cuDNN/cuBLAS/oneDNN (PyTorch lets cuDNN use TF32) and restore after."""
    from hasfl.fl.engine import Numerics

    knobs = [torch.backends.cudnn.conv, torch.backends.cudnn.rnn, torch.backends.cuda.matmul]
    before = [k.fp32_precision for k in knobs]
    for precision in ("fp32", "bf16"):
        with Numerics(torch.device("cpu"), precision).backend_flags():
            assert [k.fp32_precision for k in knobs] == ["ieee"] * 3
        assert [k.fp32_precision for k in knobs] == before
    with Numerics(torch.device("cuda"), "tf32").backend_flags():
        assert [k.fp32_precision for k in knobs] == ["tf32"] * 3
        assert torch.backends.mkldnn.conv.fp32_precision == "ieee"  # TF32 is for the GPU's kernels only
    assert [k.fp32_precision for k in knobs] == before


def test_channels_last_training_matches_contiguous(base_cfg, digits) -> None:
    """The CPU training layout (channels_last) computes the same local update as a contiguous module,
    to float rounding, and its state loads back into the global model's layout."""
    from hasfl.fl.engine import Numerics

    bundle = digits[0]
    family = digits_family(base_cfg, bundle)
    optim = OptimConfig.from_config(base_cfg["dataset_params"]["digits"]["optim"])
    data = ClientData(0, torch.arange(256), bundle.train_x, bundle.train_y)
    states = {}
    for cl in (False, True):
        torch.manual_seed(0)
        module = Numerics(torch.device("cpu"), "fp32", channels_last=cl).prepare(family.build(0.5))
        conv = [m for m in module.modules() if isinstance(m, nn.Conv2d)][1]  # > 1 input channel
        assert conv.weight.is_contiguous(memory_format=torch.channels_last) == cl
        assert conv.weight.is_contiguous() != cl
        LocalSGD(optim, bundle.inputs).train(module, data, 0.05, torch.Generator().manual_seed(1))
        states[cl] = module.state_dict()
    for k, v in states[False].items():
        assert torch.allclose(v, states[True][k], rtol=1e-4, atol=1e-5), k


def test_bf16_run_is_deterministic_and_differs_from_fp32(base_cfg, digits, tmp_path) -> None:
    """precision: bf16 runs the forward passes under autocast: the same run twice gives identical
    Parquet bytes, the result differs from fp32, and parameters stay float32."""
    cfg = small_cfg(base_cfg, 10)
    runs = {}
    for name, precision in (("a", "bf16"), ("b", "bf16"), ("fp32", "fp32")):
        c = {**cfg, "precision": precision}
        res = federate(c, digits, "hasfl")
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
    # digits learns under bf16 as under fp32 (measured 0.331 vs 0.329 after 10 rounds; chance 0.1)
    assert np.isfinite(accs).all() and accs[-1] > 0.2 and abs(accs[-1] - fp32_final) < 0.1


def test_lstm_forward_under_bf16_autocast(base_cfg) -> None:
    """The sliced char-LSTM trains under bf16 autocast: bf16 activations, float32 loss and gradients."""
    from hasfl.fl.engine import Numerics

    family = build_family("lstm", in_shape=(20,), num_classes=96, embed_dim=8, hidden=32, layers=2)
    module = family.build(0.5)
    x, y = torch.randint(0, 96, (8, 20)), torch.randint(0, 96, (8,))
    with Numerics(torch.device("cpu"), "bf16").autocast():
        logits = module(x)
        loss = nn.functional.cross_entropy(logits, y)
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    assert all(q.grad is not None and q.grad.dtype == torch.float32 for q in module.parameters())


# --------------------------------------------------------------------------- adding a method
def test_a_method_is_added_in_one_place(base_cfg, digits, monkeypatch) -> None:
    """One entry in hasfl.fl.methods.METHODS is all a new method needs: the config accepts its
    name and a method_params block, its job slice reads that block, and the engine trains it."""
    from hasfl.config import ConfigError, validate_config
    from hasfl.fl import methods
    from hasfl.fl.policies import UniformPolicy

    def half_width(ctx):  # every client at min(p, pmax), p from its own method_params block
        return UniformPolicy(ctx.pmax, ctx.params["p"]), methods._sgd(ctx)

    monkeypatch.setitem(methods.METHODS, "half_width", methods.MethodSpec(half_width))
    cfg = small_cfg(base_cfg, 2)
    cfg["methods"] = ["hasfl", "half_width"]
    cfg["method_params"]["half_width"] = {"p": 0.5}
    validate_config(cfg)
    job = run_config(cfg, "digits", "half_width", SEED)
    assert job["method_params"] == {"p": 0.5} and "p_min" not in job["hasfl"] and "gamma" not in job["hasfl"]
    assert "p_min" in run_config(cfg, "digits", "hasfl", SEED)["hasfl"]
    res = federate(cfg, digits, "half_width")
    assert res.summary["status"] == "completed"
    sampled = res.clients[res.clients["times_sampled"] > 0]
    assert len(sampled) and np.allclose(sampled["p_max_allocated"], np.minimum(0.5, sampled["pmax"]))
    # a name the registry does not know is named, in methods and in method_params
    monkeypatch.delitem(methods.METHODS, "half_width")
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg)
    assert "config key 'methods[1]': unknown method 'half_width'" in str(exc.value)
    assert "unknown config key 'method_params.half_width': not a method" in str(exc.value)
