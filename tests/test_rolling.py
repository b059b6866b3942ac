"""Issue 27: sub-models that are not prefixes. FedRolex's rolling windows cut from the global model as the official
rule says (every family, wrapped windows included); aggregation, the estimator's coordinates and the BN statistics
follow the same rules; the two rolling methods train, are deterministic, record their windows in the participation
ledger, and cover the units a prefix leaves stranded."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.fl.bn_stats import WidthStatistics
from hasfl.fl.estimator import divergence
from hasfl.models.slicing import (
    PREFIX,
    SliceRule,
    Window,
    assign_,
    coverage_mask,
    gather,
    is_basic,
    region_shape,
    rolling,
    scatter_add_,
    width,
)
from hasfl.registry import METHODS


def official(size: int, p: float, t: int) -> torch.Tensor:
    """FedRolex's index (``AIoT-MLSys-Lab/FedRolex`` resnet_server.py, split_model): the rolled arange, first
    ceil(size * p) entries; a window of every unit is the units in their own order here (docs/decisions.md)."""
    kept = width(p, size)
    if kept >= size:
        return torch.arange(size)
    return torch.roll(torch.arange(size), t % size, -1)[:kept]


@pytest.mark.parametrize("arch", ["cnn", "lstm"])
@pytest.mark.parametrize("p", [0.25, 0.5, 0.75, 1.0])
def test_rolling_sub_models_equal_the_official_index_rule(arch, p, small_cnn, small_lstm, index_reference):
    family = small_cnn if arch == "cnn" else small_lstm
    if arch == "cnn":  # the width-p sub-model of round t by index tensors (written from the rule, not the rules)
        def reference(fam, st, p, t):
            return index_reference.cnn(fam, st, [official(c, p, t) for c in fam.channels], official(fam.hidden, p, t))
    else:
        def reference(fam, st, p, t):
            return index_reference.lstm(fam, st, official(fam.hidden, p, t))
    state = index_reference.random_state(family)
    shapes = family.sub_shapes(p)
    wrapped = 0
    for t in range(0, 2 * max(12, getattr(family, "hidden", 12)) + 3):
        sub = family.extract(state, p, rolling(t))
        ref = reference(family, state, p, t)
        assert set(sub) == set(ref)
        for k in ref:
            assert sub[k].shape == shapes[k], (k, t)
            assert torch.equal(sub[k], ref[k].reshape(shapes[k])), (arch, p, t, k)
        wrapped += not all(is_basic(r) for r in family.slice_rules(p, rolling(t)).values())
    if p < 1.0:
        assert wrapped > 0  # the rounds tried reach wrapped windows
    # the prefix window is Algorithm 2's: the leading units, and the cached nested rules
    assert family.slice_rules(p, PREFIX) is family.slice_rules(p)


def test_a_full_window_and_a_prefix_window_are_the_nested_rules(small_cnn):
    for t in (0, 3, 17):
        assert small_cnn.slice_rules(1.0, rolling(t)) == small_cnn.slice_rules(1.0)
    assert small_cnn.slice_rules(0.5, rolling(0)) == small_cnn.slice_rules(0.5)  # round 0 starts every layer at 0
    assert small_cnn.slice_rules(0.5, rolling(1)) != small_cnn.slice_rules(0.5)
    assert Window("rolling", 0).span(8, 4) == slice(0, 4)
    with pytest.raises(ValueError, match="kind must be one of"):
        Window("random")
    with pytest.raises(ValueError, match="no shift"):
        Window("prefix", 3)


def _dense(full: torch.Tensor, rule: SliceRule, sub: torch.Tensor) -> torch.Tensor:
    """``sub`` scattered into zeros of ``full``'s shape through index tensors (independent of the blocks)."""
    base = torch.zeros_like(full if rule.view is None else full.view(rule.view))
    idx = []
    for d, span in enumerate(rule.index):
        pieces = span if isinstance(span, tuple) else (span,)
        idx.append(torch.cat([torch.arange(base.shape[d])[s] for s in pieces]))
    grids = torch.meshgrid(*idx, indexing="ij") if idx else ()
    shape = region_shape(full, rule)
    if grids:
        base[grids] = sub.reshape(shape)
    else:
        base.copy_(sub.reshape(shape))
    return base.reshape(full.shape)


def test_wrapped_rules_gather_scatter_and_aggregate_as_dense_masks(small_cnn):
    """Coordinate-wise aggregation (Algorithm 1 line 18) of clients at different widths and rounds' windows equals
    the dense-mask formula; gather / assign_ / scatter_add_ are inverse to each other on every rule."""
    torch.manual_seed(1)
    state = {k: torch.randn(v.shape) if v.is_floating_point() else v
             for k, v in small_cnn.build(1.0).state_dict().items()}
    keys = [k for k, v in state.items() if v.is_floating_point()]
    agg = CoordinateAggregator(state, keys)
    num = {k: torch.zeros_like(state[k]) for k in keys}
    den = {k: torch.zeros_like(state[k]) for k in keys}
    clients = [(0.25, 5, 3.0), (0.5, 5, 7.0), (0.75, 11, 2.0), (0.5, 2, 4.0)]
    for p, t, n in clients:
        rules = small_cnn.slice_rules(p, rolling(t))
        delta = {k: torch.randn(region_shape(state[k], rules[k])) for k in keys}
        agg.add(delta, rules, n)
        masks = coverage_mask({k: state[k] for k in keys}, {k: rules[k] for k in keys})
        for k in keys:
            num[k] += n * _dense(state[k], rules[k], delta[k])
            den[k] += n * masks[k].float()
            assert torch.equal(masks[k], _dense(state[k], rules[k], torch.ones(delta[k].shape)).bool())
            back = torch.empty(delta[k].shape)
            assign_(back, _dense(state[k], rules[k], delta[k]), rules[k])
            assert torch.equal(back, delta[k])
            assert torch.equal(gather(_dense(state[k], rules[k], delta[k]), rules[k]), delta[k])
            acc = torch.zeros_like(state[k])
            scatter_add_(acc, rules[k], delta[k], alpha=2.0)
            assert torch.equal(acc, 2.0 * _dense(state[k], rules[k], delta[k]))
    mean = agg.mean()
    for k in keys:
        expect = torch.where(den[k] > 0, num[k] / den[k].clamp_min(1e-30), torch.zeros_like(den[k]))
        torch.testing.assert_close(mean[k], expect, rtol=1e-6, atol=1e-7)
    # Eq. 4 restricted to a rolled client's own coordinates
    p, t = 0.5, 5
    rules = small_cnn.slice_rules(p, rolling(t))
    delta = {k: torch.randn(region_shape(state[k], rules[k])) for k in keys}
    dense = {k: _dense(state[k], rules[k], delta[k]) for k in keys}
    masks = coverage_mask({k: state[k] for k in keys}, {k: rules[k] for k in keys})
    num_e = sum(float(((dense[k] - mean[k]) * masks[k]).double().pow(2).sum()) for k in keys)
    den_e = sum(float((mean[k] * masks[k]).double().pow(2).sum()) for k in keys)
    assert divergence(delta, mean, rules, keys, 1e-12) == pytest.approx(num_e / (den_e + 1e-12), rel=1e-9)


def test_rolled_bn_statistics_live_in_global_channel_coordinates(small_cnn):
    """Per-width BN sets of a rolling run: channel j of a client's layer is global channel window[j]; a width's set
    moves only on the channels the round's clients trained at that width (sample-weighted)."""
    global_model = small_cnn.build(1.0)
    bn = WidthStatistics(global_model, nested=False)
    layer, C, p = "bns.0", small_cnn.channels[0], 0.5
    c = width(p, C)
    w = global_model.state_dict()
    bn.begin_round(w, narrower=True)
    ends = {}
    for client, (t, n) in enumerate([(3, 2.0), (3, 6.0)]):
        module = small_cnn.build(p)
        rules = small_cnn.slice_rules(p, rolling(t))
        bn.prepare(module, rules)
        m = dict(module.named_modules())[layer]
        assert torch.equal(m.running_mean, torch.zeros(c)) and torch.equal(m.running_var, torch.ones(c))
        with torch.no_grad():
            m.running_mean.copy_(torch.arange(c, dtype=torch.float32) + 10 * client)
            m.running_var.fill_(2.0 + client)
            m.num_batches_tracked += 4
        ends[client] = (m.running_mean.clone(), m.running_var.clone(), n)
        bn.add(module, rules, n, w)
    bn.finish_round(1.0)
    idx = official(C, p, 3)
    mean, var = bn.width[(layer, c)]
    assert mean.shape == (C,)
    expect = (2.0 * ends[0][0] + 6.0 * ends[1][0]) / 8.0  # changes from 0, sample-weighted
    assert torch.allclose(mean[idx], expect)
    outside = torch.ones(C, dtype=torch.bool)
    outside[idx] = False
    assert torch.equal(mean[outside], torch.zeros(int(outside.sum())))
    assert torch.equal(var[outside], torch.ones(int(outside.sum())))
    # the next client of that width, one round later, starts from its own channels of the set
    module = small_cnn.build(p)
    rules = small_cnn.slice_rules(p, rolling(4))
    bn.prepare(module, rules)
    m = dict(module.named_modules())[layer]
    assert torch.equal(m.running_mean, mean[official(C, p, 4)])
    # evaluated at full width, the full model takes every channel of the set (hasfl.models.bn.state_for_mode)
    from hasfl.models.bn import state_for_mode

    full = state_for_mode({**w, **bn.entries()}, small_cnn, 1.0, "per_width")
    assert torch.equal(full[f"{layer}.running_mean"], mean)


def test_registry_nested_flags_agree_with_what_each_method_trains(engine_cfg, federate, one_thread):
    """One round of every method: its ledger's windows are prefixes exactly when its registry entry says nested."""
    cfg = engine_cfg(rounds=2, warmup=0)
    for name, info in METHODS.items():
        if info.budget_of is not None:
            continue  # a control needs its reference run's budget; same module as random_budget
        res = federate(cfg, name)
        kinds = set(res.participation["window"])
        # FIARSE: a magnitude mask; the shuffled partitions: a block of K = 4 (config.yaml)
        own = {"fedecover": "sampled", "fiarse": "masked", "shuffled": "partition/4"}.get(name, "rolling")
        assert kinds == ({"prefix"} if info.nested else {own}), name
        assert res.summary["status"] == "completed", name


def test_rolling_runs_cover_what_uniform_strands_and_are_deterministic(engine_cfg, federate, interrupted, one_thread,
                                                                      tmp_path):
    """uniform_rolling trains units beyond Uniform's cap that Uniform leaves at their initial values (Proposition 3's
    stale coordinates); a rolling run repeats to the bit and resumes from a checkpoint to the bit."""
    cfg = engine_cfg(rounds=6, warmup=0)
    uni = federate(cfg, "uniform")
    rol = federate(cfg, "uniform_rolling")
    key = "convs.0.weight"
    C = uni.init_state[key].shape[0]
    cap = width(0.5, C)
    assert torch.equal(uni.final_state[key][cap:], uni.init_state[key][cap:])  # stranded by the prefix
    moved = (rol.final_state[key] != rol.init_state[key]).flatten(1).any(1)
    assert bool(moved[cap:].any())
    assert (rol.participation["p"] <= 0.5 + 1e-12).all()
    assert rol.participation["p"].tolist() == uni.participation["p"].tolist()  # same widths, same cost
    assert rol.rounds["upload_mb"].tolist() == uni.rounds["upload_mb"].tolist()

    again = federate(cfg, "uniform_rolling")
    for k, v in rol.final_state.items():
        assert torch.equal(again.final_state[k], v), k
    assert again.participation.equals(rol.participation) and again.rounds.equals(rol.rounds)

    resumed = interrupted(cfg, "fedrolex", tmp_path / "checkpoint.pt", at=4, every=2)
    whole = federate(cfg, "fedrolex")
    for k, v in whole.final_state.items():
        assert torch.equal(resumed.final_state[k], v), k
    assert resumed.participation.equals(whole.participation) and resumed.rounds.equals(whole.rounds)
    assert any(k.startswith("bn_width.") and v.numel() == whole.final_state[k.split(".", 1)[1].rsplit(".", 2)[0]
                                                                             + ".running_mean"].numel()
               for k, v in whole.final_state.items() if k.endswith("running_mean"))


def test_the_participation_ledger(engine_cfg, federate, one_thread):
    """One row per participant per round: widths, window and shift, samples, steps, loss, costs, estimates."""
    from hasfl.fl.records import PARTICIPATION_COLUMNS

    cfg = engine_cfg(rounds=4, warmup=1)
    res = federate(cfg, "hasfl")
    led = res.participation
    assert tuple(led.columns) == PARTICIPATION_COLUMNS
    k = cfg["federation"]["clients_per_round"]
    assert len(led) == 4 * k and led["round"].tolist() == [r for r in range(1, 5) for _ in range(k)]
    assert (led["window"] == "prefix").all() and (led["window_shift"] == 0).all()
    # per round, the ledger's mean allocated width is rounds.parquet's avg_p
    means = led.groupby("round")["p"].mean()
    evaluated = res.rounds.set_index("round")["avg_p"]
    for r, v in evaluated.items():
        assert means[r] == pytest.approx(v, rel=1e-12)
    adapting = [t for t in range(4) if t >= 1 and t % int(cfg["hasfl"]["t_adapt"]) == 0]
    has_h = led.groupby("round")["h_hat"].apply(lambda s: bool(s.notna().all()))
    assert [r - 1 for r, v in has_h.items() if v] == adapting
    assert led["steps"].gt(0).all() and led["samples"].gt(0).all() and np.isfinite(led["local_loss"]).all()
    assert led["upload_mb"].gt(0).all() and led["train_mmacs"].gt(0).all()
    rol = federate(cfg, "fedrolex").participation
    assert (rol["window"] == "rolling").all() and (rol["window_shift"] == rol["round"] - 1).all()
    assert isinstance(led, pd.DataFrame) and not math.isnan(float(led["h_tilde"].iloc[0]))


def test_hasfl_diagnose_reads_the_ledger(engine_cfg, federate, one_thread, tmp_path, capsys, digits):
    """`hasfl diagnose participation.parquet --join clients.parquet`: one row per client (its last round's estimate),
    the columns of the joined per-client table; clear errors for a table it cannot join."""
    from hasfl.analysis.diagnose import DiagnoseError, join_clients, per_client
    from hasfl.cli import main
    from hasfl.io import write_parquet

    res = federate(engine_cfg(rounds=5, warmup=1), "hasfl")
    led, clients = res.participation, digits.clients
    write_parquet(led, tmp_path / "participation.parquet")
    write_parquet(clients, tmp_path / "clients.parquet")
    one = per_client(led, "last")
    assert one["client_id"].is_unique and set(one["client_id"]) == set(led["client_id"])
    for r in one.to_dict("records"):  # the row of the client's last round
        rows = led[led["client_id"] == r["client_id"]]
        assert r["round"] == rows["round"].max() and r["h_tilde"] == rows["h_tilde"].iloc[-1]
    mean = per_client(led, "mean")
    assert mean.set_index("client_id")["p"].to_dict() == pytest.approx(led.groupby("client_id")["p"].mean().to_dict())
    joined = join_clients(one, clients, "clients.parquet")
    assert (joined["pmax"].to_numpy() == clients.set_index("client_id").loc[joined["client_id"], "pmax"].to_numpy()).all()
    assert main(["diagnose", str(tmp_path / "participation.parquet"), "--join", str(tmp_path / "clients.parquet"),
                 "--estimate", "h_tilde", "--capacity", "pmax", "--truth", "tv", "--permutations", "200"]) == 0
    out = capsys.readouterr().out
    assert f"{one['client_id'].nunique()} clients" in out and "verdict:" in out
    with pytest.raises(DiagnoseError, match="has no row for client"):
        join_clients(one, clients[clients["client_id"] != int(one["client_id"].iloc[0])], "few.parquet")
    with pytest.raises(DiagnoseError, match="several rows for a client"):
        join_clients(one, led, "participation.parquet")
    with pytest.raises(DiagnoseError, match="no 'client_id' column"):
        join_clients(one, clients.drop(columns="client_id"), "bad.parquet")
