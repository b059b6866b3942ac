"""Batch-norm statistics per width (issue 23; hasfl.fl.bn_stats, hasfl.models.bn).

* After one round of HeteroFL on the quick digits federation, the statistics of every width equal
  the sample-weighted mean of the statistics of exactly the clients that trained at that width,
  recomputed here by training each participant's sub-model again outside the engine; the mixed set
  equals the coordinate-wise mean over every client that holds the channel.
* ``bn_stats: mixed`` and ``per_width`` train bit-identical parameters; each run's final.pt evaluated
  under its own mode gives its logged final accuracy.
* A full-width method has no extra keys (its files keep their bytes); resume is byte-identical.
* The evaluation rules of ``per_width`` for a width nobody trained, and clear errors for bad modes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hasfl.config import run_config
from hasfl.fl.client import LocalSGD, OptimConfig, client_data
from hasfl.fl.sampling import local_generator, participant_schedule
from hasfl.models import family_from_config
from hasfl.models.bn import (
    check_mode,
    counts_key,
    mixed_key,
    model_at,
    resolve_count,
    split_state,
    state_for_mode,
    width_key,
)
from hasfl.models.slicing import width as kept

LAYERS = ("bns.0", "bns.1", "bns.2", "bns.3")


def _client_statistics(cfg, digits, family, method="heterofl"):
    """Round 0 redone by hand: each participant's width, sample count and BN statistics after its
    local training from the initial global model (its statistics start at 0 / 1 at every width)."""
    rc = run_config(cfg, "digits", method, digits.seed)
    torch.manual_seed(digits.seed)
    init = family.build(1.0).state_dict()
    table = digits.clients.sort_values("client_id")
    pmax, n_train = table["pmax"].to_numpy(), table["n_train"].to_numpy()
    participants = participant_schedule(digits.seed, int(cfg["federation"]["clients"]),
                                        int(cfg["federation"]["clients_per_round"]), 1)[0]
    optim = OptimConfig.from_config(rc["dataset_params"]["optim"])
    data = client_data(digits.partition, digits.bundle)
    out = []
    for i in participants.tolist():
        module = family.build(float(pmax[i]))
        module.load_state_dict(family.extract(init, float(pmax[i])))
        LocalSGD(optim, digits.bundle.inputs).train(module, data[i], optim.lr_at(0), local_generator(digits.seed, 0, i))
        sd = module.state_dict()
        out.append((float(pmax[i]), float(n_train[i]), {L: (sd[f"{L}.running_mean"], sd[f"{L}.running_var"])
                                                        for L in LAYERS}))
    return out


def test_per_width_statistics_are_the_weighted_mean_of_the_clients_at_that_width(
        engine_cfg, federate, digits, digits_family, one_thread):
    cfg = engine_cfg(rounds=1)
    res = federate(cfg, "heterofl")
    model, extra = split_state(res.final_state)
    clients = _client_statistics(cfg, digits, digits_family)
    full = {L: int(model[f"{L}.running_mean"].numel()) for L in LAYERS}
    checked = 0
    for L in LAYERS:
        counts = sorted({kept(p, full[L]) for p, _, _ in clients})
        assert extra[counts_key(L)].tolist() == counts
        for c in counts:
            group = [(n, st[L]) for p, n, st in clients if kept(p, full[L]) == c]
            w = sum(n for n, _ in group)
            mean = sum(n * s[0].double() for n, s in group) / w
            var = sum(n * s[1].double() for n, s in group) / w
            got = ((model[f"{L}.running_mean"], model[f"{L}.running_var"]) if c == full[L]
                   else (extra[width_key(L, c, "running_mean")], extra[width_key(L, c, "running_var")]))
            torch.testing.assert_close(got[0].double(), mean, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(got[1].double(), var, rtol=1e-5, atol=1e-6)
            checked += 1
        # mixed: every channel averaged over every client holding it, whatever its width
        s_mean, s_var, wsum = (torch.zeros(full[L], dtype=torch.float64) for _ in range(3))
        for p, n, st in clients:
            c = kept(p, full[L])
            s_mean[:c] += n * st[L][0].double()
            s_var[:c] += n * st[L][1].double()
            wsum[:c] += n
        covered = wsum > 0
        mixed_mean = extra[mixed_key(L, "running_mean")].double()
        mixed_var = extra[mixed_key(L, "running_var")].double()
        torch.testing.assert_close(mixed_mean[covered], (s_mean / wsum)[covered], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(mixed_var[covered], (s_var / wsum)[covered], rtol=1e-5, atol=1e-6)
    assert checked >= 2 * len(LAYERS)  # HeteroFL's round 0 trains several widths at every layer


def test_widths_differ_and_evaluation_uses_the_width_of_the_model(engine_cfg, federate, digits_family, one_thread):
    """The per-width sets differ from the prefix of the full-width set (else the mode would change
    nothing), and a width-p model gets the set of its own width."""
    res = federate(engine_cfg(rounds=2), "heterofl")
    model, extra = split_state(res.final_state)
    c = int(extra[counts_key("bns.0")][0])
    own = extra[width_key("bns.0", c, "running_mean")]
    assert not torch.allclose(own, model["bns.0.running_mean"][:c])
    p = c / model["bns.0.running_mean"].numel()
    sub = state_for_mode(res.final_state, digits_family, p, "per_width")
    assert torch.equal(sub["bns.0.running_mean"], own)
    mixed = state_for_mode(res.final_state, digits_family, p, "mixed")
    assert torch.equal(mixed["bns.0.running_mean"], extra[mixed_key("bns.0", "running_mean")][:c])


def test_a_full_width_method_keeps_its_state_bytes(engine_cfg, federate, one_thread):
    """FedAvg trains only width 1: no extra keys, and the mixed and per-width modes are the same model."""
    res = federate(engine_cfg(rounds=2), "fedavg")
    assert split_state(res.final_state)[1] == {}
    assert all(not k.startswith("bn_") for k in res.final_state)


def test_mixed_mode_evaluates_the_tracked_mixed_statistics(engine_cfg, federate, digits, digits_family, one_thread):
    """A run under bn_stats: mixed logs the accuracy of its mixed statistics; its final.pt evaluated under
    'mixed' gives the logged final accuracy, and its parameters equal the per-width run's bit for bit."""
    from hasfl.analysis.stale import evaluate_accuracy

    cfg = engine_cfg(rounds=3)
    per_width = federate(cfg, "uniform")
    cfg["dataset_params"]["digits"]["model"]["bn_stats"] = "mixed"
    mixed = federate(cfg, "uniform")
    for k, v in per_width.final_state.items():
        assert torch.equal(mixed.final_state[k], v), k  # the mode changes evaluation only
    acc = evaluate_accuracy(model_at(digits_family, 1.0, mixed.final_state, "mixed"), digits.bundle)
    assert acc == pytest.approx(mixed.summary["final_test_acc"], abs=1.5 / len(digits.bundle.test_y))
    acc_pw = evaluate_accuracy(model_at(digits_family, 1.0, per_width.final_state, "per_width"), digits.bundle)
    assert acc_pw == pytest.approx(per_width.summary["final_test_acc"], abs=1.5 / len(digits.bundle.test_y))


def test_resume_with_per_width_statistics_is_byte_identical(engine_cfg, federate, tmp_path, one_thread):
    from hasfl.fl.checkpoint import Checkpointer

    class Stop(Exception):
        pass

    cfg = engine_cfg(rounds=3)
    full = federate(cfg, "heterofl")
    ckpt, identity = tmp_path / "checkpoint.pt", {"digest": "heterofl-run"}

    def stop(rnd, row):
        if rnd == 2:
            raise Stop

    with pytest.raises(Stop):
        federate(cfg, "heterofl", checkpointer=Checkpointer(ckpt, 1, identity), progress=stop)
    saved = torch.load(ckpt, weights_only=False)
    assert saved["bn_stats"]["width"]  # the per-width sets travel in the checkpoint
    resumed = federate(cfg, "heterofl", checkpointer=Checkpointer(ckpt, 1, identity))
    assert set(resumed.final_state) == set(full.final_state)
    for k, v in full.final_state.items():
        assert torch.equal(resumed.final_state[k], v), k
    assert resumed.rounds.equals(full.rounds)


def test_resolve_count_rules():
    assert resolve_count(16, [8, 16, 32]) == 16
    assert resolve_count(12, [8, 16, 32]) == 16   # nearest trained width above: its leading channels
    assert resolve_count(32, [8, 16]) == 16       # none above: the widest below (+ initial values)
    assert resolve_count(8, []) is None


def test_an_untrained_full_width_uses_the_widest_trained_width(small_cnn):
    """Uniform never trains full width: at p = 1 a layer takes its width-0.5 statistics for the channels
    that width holds and the initial values (mean 0, variance 1) for the rest."""
    state = dict(small_cnn.build(1.0).state_dict())
    c = kept(0.5, 8)
    state[counts_key("bns.0")] = torch.tensor([c])
    state[width_key("bns.0", c, "running_mean")] = torch.arange(c, dtype=torch.float32) + 1
    state[width_key("bns.0", c, "running_var")] = torch.full((c,), 2.0)
    state["bns.0.running_mean"] = torch.full((8,), 7.0)  # never trained at full width: must not be used
    out = state_for_mode(state, small_cnn, 1.0, "per_width")
    assert out["bns.0.running_mean"].tolist() == [1, 2, 3, 4, 0, 0, 0, 0]
    assert out["bns.0.running_var"].tolist() == [2, 2, 2, 2, 1, 1, 1, 1]
    assert torch.equal(out["bns.1.running_mean"], state["bns.1.running_mean"])  # no per-width keys: as saved


def test_modes_are_checked_by_name():
    with pytest.raises(ValueError, match="renamed 'mixed'"):
        check_mode("running")
    with pytest.raises(ValueError, match="per_width, mixed, batch"):
        check_mode("static")
    with pytest.raises(ValueError, match="renamed 'mixed'"):
        family_from_config({"arch": "cnn", "channels": [4], "pool_after": [], "pool_out": 1, "hidden": 3,
                            "bn_stats": "running"}, (1, 4, 4), 2)


def test_batch_mode_needs_no_running_statistics(small_cnn):
    """A state without running statistics (trained with bn_stats: batch) has the batch mode only."""
    from hasfl.models import family_from_config

    fam = family_from_config({"arch": "cnn", "channels": [8, 12, 16], "pool_after": [0, 1], "pool_out": 2,
                              "hidden": 20, "bn_stats": "batch"}, (3, 16, 16), 7)
    state = fam.build(1.0).state_dict()
    assert not any(k.endswith("running_mean") for k in state)
    x = torch.randn(5, 3, 16, 16)
    assert model_at(fam, 1.0, state, "batch").eval()(x).shape == (5, 7)
    with pytest.raises(ValueError, match="no running statistics"):
        model_at(fam, 1.0, state, "per_width")
    # a state with running statistics evaluated under 'batch' ignores them
    run = small_cnn.build(1.0).state_dict()
    net = model_at(small_cnn, 1.0, run, "batch")
    assert all(m.running_mean is None for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d))
    assert np.isfinite(net.eval()(x).detach().numpy()).all()


def test_static_statistics_are_recomputed_from_the_capable_clients_only(digits, digits_family):
    """The evaluation-only 'static' mode (HeteroFL's static batch norm by clients): only clients with
    pmax >= the evaluated width contribute, and every BN layer's mean is the average of its batch means."""
    from hasfl.analysis.bn_sensitivity import capable_batches, static_statistics

    clients = digits.clients
    batches = capable_batches(digits.bundle, digits.partition, clients, 1.0, 32)
    top = set(clients.loc[clients["pmax"] >= 1.0, "client_id"].astype(int))
    rows = digits.partition[(digits.partition["split"] == "train") & digits.partition["client_id"].isin(top)]
    assert 0 < len(top) < len(clients) and sum(len(b) for b in batches) == len(rows)
    torch.manual_seed(0)
    net = static_statistics(digits_family.build(1.0), batches)
    first = net.bns[0]
    means = []
    with torch.no_grad():
        for x in batches:
            if len(x) > 1:
                means.append(net.convs[0](x).mean(dim=(0, 2, 3)))
    torch.testing.assert_close(first.running_mean, torch.stack(means).mean(0), rtol=1e-5, atol=1e-6)
    assert not first.training


def test_batch_mode_runs_keep_no_running_statistics(engine_cfg, federate, one_thread):
    """bn_stats: batch trains without running statistics: no BN buffers and no extra keys in the saved state."""
    cfg = engine_cfg(rounds=2)
    cfg["dataset_params"]["digits"]["model"]["bn_stats"] = "batch"
    res = federate(cfg, "heterofl")
    assert not any(k.endswith(("running_mean", "running_var")) or k.startswith("bn_") for k in res.final_state)
    assert np.isfinite(res.rounds["test_acc"]).all()
