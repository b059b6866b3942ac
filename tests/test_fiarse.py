"""FIARSE's rules (``HarliWu/FIARSE`` at 281519c; docs/decisions.md "FIARSE's rules") in :mod:`hasfl.fl.methods.fiarse`, each checked
against a transcription of the official rule written here with numpy and loops (never calling the module):

* tau = the k-th largest |theta| of the concatenated masked entries, k = int(numel * share)
  (``fiarse/model/resnet_masked.py:72-93``); the mask |w| >= tau keeps ties (``model_utils.py:24-38, 52-63``);
* the gradient: the official layer ``w * Bern(|w|, tau)`` with a bool ``Bern`` output gives the plain masked
  gradient ("executed"); with a float output its written backward would give g m (1 + 2 tau |w| / (|w|+tau)^2)
  ("written"); both checked against autograd of explicit formulas and against a transcription of the layer;
* the server average over the clients whose delta is nonzero, 0/0 -> 0 (``fiarse/server.py:65-90``);
* the per-coordinate count of the round's participants whose round-start mask keeps a coordinate.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from hasfl.fl.methods import fiarse
from hasfl.models.partition import parameter_shapes

SHAPES = {  # three sizes of "masked layers" (weights, then a bias where the layer has one)
    "small": [(3,), (4, 5)],
    "medium": [(6, 3, 3, 3), (10, 6), (10,)],
    "large": [(16, 8, 3, 3), (8, 16, 3, 3), (10, 8), (10,)],
}
SEEDS = range(5)
SHARES = (1.0, 0.75, 0.5, 0.29, 0.25, 1 / 16, 1 / 64)


def draw(shape_set: str, seed: int, grid: float | None = None) -> list[np.ndarray]:
    """float32 weights of one size and seed; on a coarse ``grid`` when given (many ties)."""
    rng = np.random.default_rng(seed)
    out = []
    for shape in SHAPES[shape_set]:
        w = rng.normal(size=shape).astype(np.float32)
        if grid is not None:
            w = (np.round(w / grid) * grid).astype(np.float32)
        out.append(w)
    return out


# --------------------------------------------------------------------------- official rules, transcribed
def ref_threshold(weights: list[np.ndarray], share: float) -> np.float32:
    """All magnitudes in one vector, sorted from the largest; k = the float product truncated; tau = the k-th."""
    scores = np.concatenate([np.abs(w).reshape(-1) for w in weights])
    k = int(len(scores) * share)
    ranked = sorted(scores.tolist(), reverse=True)
    return np.float32(ranked[k - 1])


def ref_mask(w: np.ndarray, tau: float) -> np.ndarray:
    flat = [abs(float(x)) >= float(tau) for x in w.reshape(-1)]
    return np.array(flat, dtype=bool).reshape(w.shape)


def ref_aggregate(global_state: dict[str, np.ndarray], clients: list[dict[str, np.ndarray]],
                  lr_global: float) -> dict[str, np.ndarray]:
    """Coordinate by coordinate: the deltas global - client that are nonzero, their plain mean, 0 if none."""
    out = {}
    for name, g in global_state.items():
        flat_g = g.reshape(-1)
        new = np.empty_like(flat_g)
        step = 1.0 if ("running_mean" in name or "running_var" in name) else lr_global
        for j in range(flat_g.size):
            deltas = [float(flat_g[j]) - float(c[name].reshape(-1)[j]) for c in clients]
            nonzero = [d for d in deltas if d != 0.0]
            mean = sum(nonzero) / len(nonzero) if nonzero else 0.0
            new[j] = flat_g[j] - step * mean
        out[name] = new.reshape(g.shape)
    return out


# --------------------------------------------------------------------------- threshold and mask
@pytest.mark.parametrize("shape_set", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("grid", [None, 0.25])
def test_threshold_and_mask_equal_the_official_rule(shape_set, seed, grid) -> None:
    ws = draw(shape_set, seed, grid)
    tensors = [torch.from_numpy(w) for w in ws]
    n = sum(w.size for w in ws)
    for share in (*SHARES, 1.5 / n):  # the last keeps k = 1
        if int(n * share) < 1:
            continue
        tau = fiarse.threshold(tensors, share)
        assert tau.dtype == torch.float32 and tau.ndim == 0
        assert float(tau) == float(ref_threshold(ws, share)), (share, float(tau))
        kept = 0
        for w, t in zip(ws, tensors, strict=True):
            m = fiarse.mask(t, tau)
            assert m.dtype == torch.bool
            np.testing.assert_array_equal(m.numpy(), ref_mask(w, float(tau)))
            kept += int(m.sum())
        assert kept >= int(n * share)  # ties at tau are all kept
        if grid is None:
            assert kept == int(n * share)  # continuous draws: no ties
        if share == 1.0:
            assert kept == n


def test_ties_at_tau_are_kept_and_k_truncates() -> None:
    w = torch.tensor([0.5, -0.5, 0.5, 0.1, -2.0, 0.0])
    tau = fiarse.threshold([w], 0.5)  # k = 3: |w| sorted 2, .5, .5, .5, .1, 0 -> tau = .5
    assert float(tau) == 0.5
    assert fiarse.mask(w, tau).tolist() == [True, True, True, False, True, False]  # 4 kept, k = 3
    assert fiarse.budget_k(100, 0.29) == 28  # 100 * 0.29 = 28.999999999999996, truncated
    assert float(fiarse.threshold([torch.arange(1.0, 101.0)], 0.29)) == 73.0  # the 28th largest of 1..100
    assert fiarse.budget_k(7, 1.0) == 7
    assert float(fiarse.threshold([w], 1.0)) == 0.0 and bool(fiarse.mask(w, 0.0).all())


def test_a_share_that_keeps_nothing_fails_as_the_official_topk_does() -> None:
    w = [torch.ones(10)]
    assert float(fiarse.threshold(w, 0.1)) == 1.0  # k = 1
    for share in (0.09, 1e-6, 0.0, 1.5):
        with pytest.raises(ValueError, match="keeps"):
            fiarse.threshold(w, share)


def test_threshold_is_over_all_layers_together() -> None:
    """One tau for the whole model: a layer of small weights may lose every coordinate."""
    big, small = torch.full((4,), 3.0), torch.full((4,), 0.1)
    tau = fiarse.threshold([big, small], 0.5)
    assert float(tau) == 3.0
    assert fiarse.mask(big, tau).all() and not fiarse.mask(small, tau).any()


# --------------------------------------------------------------------------- the gradient
class OfficialStep(torch.autograd.Function):
    """Transcription of the official ``Bern``: forward |w| >= tau as returned (bool unless ``as_float``);
    backward 2 tau / (s + tau)^2 on the kept scores, non-finite values set to 0, nothing for tau."""

    @staticmethod
    def forward(ctx, scores, tau, as_float):
        ctx.save_for_backward(scores, tau)
        kept = scores >= tau
        return kept.to(scores.dtype) if as_float else kept

    @staticmethod
    def backward(ctx, grad_out):
        scores, tau = ctx.saved_tensors
        r = torch.nan_to_num(2 * tau / (scores + tau) ** 2, nan=0.0, posinf=0.0, neginf=0.0)
        return grad_out * r * (scores >= tau), None, None


def official_layer_grad(w: torch.Tensor, tau: torch.Tensor, coef: torch.Tensor, as_float: bool) -> torch.Tensor:
    """d/dw of sum(coef * w * Step(|w|, tau)): the official masked layer's effective weight."""
    w = w.clone().requires_grad_(True)
    (coef * (w * OfficialStep.apply(w.abs(), tau, as_float))).sum().backward()
    return w.grad


def explicit_grad(w: torch.Tensor, tau: torch.Tensor, coef: torch.Tensor, written: bool) -> torch.Tensor:
    """Autograd of explicit formulas of the same value w * m: a constant mask (executed), or the mask plus
    h(|w|) - stopgrad(h(|w|)) on the kept coordinates with h(a) = -2 tau / (a + tau), h' = 2 tau / (a + tau)^2."""
    w = w.clone().requires_grad_(True)
    m = (w.detach().abs() >= tau).to(w.dtype)
    if written:
        h = -2 * tau / (w.abs() + tau)
        m = m + (h - h.detach()) * m
    (coef * (w * m)).sum().backward()
    return w.grad


@pytest.mark.parametrize("shape_set", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_backward_equals_explicit_formulas_and_the_official_layer(shape_set, seed) -> None:
    w = torch.from_numpy(np.concatenate([x.reshape(-1) for x in draw(shape_set, seed)]))
    coef = torch.from_numpy(np.random.default_rng(100 + seed).normal(size=w.shape).astype(np.float32))
    w[::7] = w[::7].sign() * 0.5  # ties: several coordinates exactly at tau = 0.5 below
    for tau in (torch.tensor(0.5), fiarse.threshold([w], 0.25), fiarse.threshold([w], 1.0)):
        for mode, as_float in (("executed", False), ("written", True)):
            x = w.clone().requires_grad_(True)
            y = fiarse.masked(x, tau, mode)
            np.testing.assert_array_equal(y.detach().numpy(), (w * (w.abs() >= tau)).numpy())
            (coef * y).sum().backward()
            ours = x.grad
            want = explicit_grad(w, tau, coef, written=mode == "written")
            torch.testing.assert_close(ours, want, rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(ours, official_layer_grad(w, tau, coef, as_float), rtol=1e-6, atol=1e-7)
            dropped = w.abs() < tau
            assert (ours[dropped] == 0).all()
        kept = w.abs() >= tau  # executed: the kept coordinates' gradient is coef itself, unscaled
        x = w.clone().requires_grad_(True)
        (coef * fiarse.masked(x, tau)).sum().backward()
        assert torch.equal(x.grad[kept], coef[kept])


def test_the_official_bool_mask_never_runs_its_backward() -> None:
    """Why "executed" is the default: a custom Function's bool output carries no gradient."""
    w = torch.tensor([0.5, -0.2, 0.05, -1.0])
    coef = torch.ones(4)
    tau = torch.tensor(0.2)
    assert official_layer_grad(w, tau, coef, as_float=False).tolist() == [1.0, 1.0, 0.0, 1.0]
    written = official_layer_grad(w, tau, coef, as_float=True)
    assert written[0] == pytest.approx(1 + 2 * 0.2 * 0.5 / 0.7**2)
    assert written[2] == 0.0


def test_written_gradient_at_tau_zero_and_w_zero_is_finite() -> None:
    """share = 1.0 can give tau = 0: 2 tau / (|w| + tau)^2 is 0/0 at w = 0, set to 0 as the official."""
    x = torch.tensor([0.0, 1.0, -2.0], requires_grad=True)
    fiarse.masked(x, 0.0, "written").sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_no_gradient_reaches_tau_and_a_bad_mode_fails() -> None:
    tau = torch.tensor(0.3, requires_grad=True)
    x = torch.tensor([0.5, 0.1], requires_grad=True)
    fiarse.masked(x, tau).sum().backward()
    assert tau.grad is None
    with pytest.raises(ValueError, match="executed"):
        fiarse.masked(x, 0.3, "paper")


# --------------------------------------------------------------------------- aggregation
def test_aggregate_on_a_coordinate_changed_by_zero_one_and_several_clients() -> None:
    g = {"w": torch.tensor([1.0, 1.0, 1.0, 1.0, 2.0])}
    clients = [
        {"w": torch.tensor([1.0, 0.4, 0.0, 1.0, 2.0])},  # delta [0, .6, 1, 0, 0]
        {"w": torch.tensor([1.0, 1.0, 0.5, 0.0, 2.0])},  # delta [0, 0, .5, 1, 0]
        {"w": torch.tensor([1.0, 1.0, 0.7, 3.0, 2.0])},  # delta [0, 0, .3, -2, 0]
    ]
    # coordinates 0 and 4: nobody -> unchanged; 1: one client -> its delta; 2: three; 3: two (1 and -2)
    want = [1.0, 0.4, 1.0 - (1.0 + 0.5 + 0.3) / 3, 1.0 - (1.0 - 2.0) / 2, 2.0]
    out = fiarse.aggregate(g, clients)
    torch.testing.assert_close(out["w"], torch.tensor(want))
    assert fiarse.changed_counts(g, clients)["w"].tolist() == [0, 1, 3, 2, 0]
    half = fiarse.aggregate(g, clients, lr_global=0.5)["w"]
    torch.testing.assert_close(half, g["w"] - 0.5 * (g["w"] - out["w"]))


def test_aggregate_is_a_plain_count_mean_not_sample_weighted() -> None:
    """Deltas 1 and 3 (and a client that left the coordinate alone): the step is their mean 2, whatever the
    clients' data sizes (the function takes none)."""
    g = {"w": torch.zeros(1)}
    out = fiarse.aggregate(g, [{"w": -torch.ones(1)}, {"w": -3 * torch.ones(1)}, {"w": torch.zeros(1)}])
    assert out["w"].tolist() == [-2.0]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n_clients", [1, 3, 6])
def test_aggregate_equals_the_official_rule_on_fabricated_states(seed, n_clients) -> None:
    rng = np.random.default_rng(seed)
    shapes = {"conv.weight": (4, 3, 3, 3), "fc.weight": (5, 8), "fc.bias": (5,), "bn.weight": (4,),
              "bn.running_mean": (4,), "bn.running_var": (4,)}
    g = {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    clients = []
    for _ in range(n_clients):
        c = {}
        for k, v in g.items():
            changed = rng.random(v.shape) < rng.uniform(0.0, 0.9)  # each client changes a random subset
            c[k] = np.where(changed, v - rng.normal(scale=0.1, size=v.shape), v).astype(np.float32)
        clients.append(c)
    lr_global = float(rng.choice([1.0, 0.5, 2.0]))
    ours = fiarse.aggregate({k: torch.from_numpy(v) for k, v in g.items()},
                            [{k: torch.from_numpy(v) for k, v in c.items()} for c in clients], lr_global)
    want = ref_aggregate(g, clients, lr_global)
    for k in g:
        assert ours[k].dtype == torch.float32
        np.testing.assert_allclose(ours[k].numpy(), want[k], rtol=1e-5, atol=1e-6, err_msg=k)
        untouched = np.all([c[k] == g[k] for c in clients], axis=0)
        np.testing.assert_array_equal(ours[k].numpy()[untouched], g[k][untouched])  # bit-identical


def test_aggregate_integer_buffers_and_nan() -> None:
    g = {"bn.num_batches_tracked": torch.tensor(10), "w": torch.zeros(2)}
    clients = [{"bn.num_batches_tracked": torch.tensor(13), "w": torch.zeros(2)},
               {"bn.num_batches_tracked": torch.tensor(14), "w": torch.zeros(2)}]
    out = fiarse.aggregate(g, clients, lr_global=0.1)
    assert out["bn.num_batches_tracked"].dtype == torch.int64
    assert int(out["bn.num_batches_tracked"]) == 13  # 10 + 3.5 with step 1 (a buffer), truncated
    bad = [{"bn.num_batches_tracked": torch.tensor(10), "w": torch.tensor([float("nan"), 0.0])}]
    with pytest.raises(ValueError, match="NaN"):
        fiarse.aggregate(g, bad)
    with pytest.raises(ValueError, match="no client"):
        fiarse.aggregate(g, [])


# --------------------------------------------------------------------------- coverage counts
@pytest.mark.parametrize("shape_set", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_coverage_counts_equal_the_participants_masks(shape_set, seed) -> None:
    ws = draw(shape_set, seed, grid=0.25 if seed % 2 else None)
    names = [f"layer{i}" for i in range(len(ws))]
    rng = np.random.default_rng(seed)
    n = sum(w.size for w in ws)
    shares = [float(s) for s in rng.choice([1.0, 0.5, 0.25, 1 / 16], size=int(rng.integers(1, 8)))
              if int(n * s) >= 1]
    counts = fiarse.coverage_counts({k: torch.from_numpy(w) for k, w in zip(names, ws, strict=True)}, shares)
    for k, w in zip(names, ws, strict=True):
        want = np.zeros(w.shape, dtype=np.int64)
        for share in shares:
            want += ref_mask(w, ref_threshold(ws, share))
        assert counts[k].dtype == torch.int64
        np.testing.assert_array_equal(counts[k].numpy(), want)
    if 1.0 in shares:
        assert all(int(c.min()) >= shares.count(1.0) for c in counts.values())


def test_masked_parameters_are_conv_and_linear_weights_and_biases() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.Conv2d(4, 4, 1),
                          nn.Flatten(), nn.Linear(4, 2))
    assert list(fiarse.masked_parameters(model)) == ["0.weight", "2.weight", "2.bias", "4.weight", "4.bias"]


# ------------------------------------------------------------------------------------------------ the method
def _masked_numel(family) -> int:
    return sum(int(w.numel()) for w in fiarse.masked_parameters(family.build(1.0)).values())


def test_the_method_is_deterministic_resumes_to_the_bit_and_its_ledger_counts_the_round_start_masks(
        engine_cfg, federate, interrupted, one_thread, tmp_path, digits_family) -> None:
    """A FIARSE run twice gives the same bytes; killed after round 2 and resumed from its checkpoint it gives the
    uninterrupted bytes; its ledger's kept counts (window ``masked``) equal a direct count of the round-start masks
    of round 1 (the global model then is init.pt), and the coverage histogram they give equals
    :func:`fiarse.coverage_counts` of that model at the participants' shares."""
    from hasfl.fl.sampling import participant_schedule

    cfg = engine_cfg(rounds=3, warmup=0)
    run = federate(cfg, "fiarse")
    led = run.participation
    assert run.summary["status"] == "completed"
    assert (led["window"] == "masked").all() and (led["p_trained"] == 1.0).all()
    uni = federate(cfg, "uniform")
    assert led["p"].tolist() == uni.participation["p"].tolist()  # Uniform's widths, as parameter shares
    again = federate(cfg, "fiarse")
    assert again.participation.equals(led) and again.rounds.equals(run.rounds)
    for k, v in run.final_state.items():
        assert torch.equal(again.final_state[k], v), k

    # round 1's round-start masks: the init model at each participant's share
    init = digits_family.build(1.0)
    init.load_state_dict(run.init_state)
    weights = fiarse.masked_parameters(init)
    share = fiarse.parameter_shares(digits_family)
    first = led[led["round"] == 1]
    shares = [share(p) for p in first["p"]]
    direct = [int(sum(int(fiarse.mask(w, fiarse.threshold(list(weights.values()), s)).sum())
                      for w in weights.values())) for s in shares]
    assert first["window_shift"].tolist() == direct
    counts = fiarse.coverage_counts(weights, shares)
    numel = _masked_numel(digits_family)
    held = np.bincount(torch.cat([c.reshape(-1) for c in counts.values()]).numpy(), minlength=len(shares) + 1)
    np.testing.assert_array_equal(fiarse.coverage_from_kept(direct, numel), held)
    assert first["client_id"].tolist() == participant_schedule(42, cfg["federation"]["clients"],
                                                               cfg["federation"]["clients_per_round"], 3)[0].tolist()

    resumed = interrupted(cfg, "fiarse", tmp_path / "checkpoint.pt", at=2, every=1)
    for k, v in run.final_state.items():
        assert torch.equal(resumed.final_state[k], v), k
    assert resumed.participation.equals(led) and resumed.rounds.equals(run.rounds)


def test_a_participant_moves_only_what_its_mask_keeps_and_pays_dense_compute(digits_family, digits) -> None:
    """Local training with the shared optimiser (momentum, weight decay, clipping) restricted to each step's mask: a
    coordinate dropped at the round's start is bit-identical after the round; kept ones move. The forward MACs are
    the whole model's; the upload is the kept values and their int32 index plus the unmasked entries."""
    from hasfl.fl.client import OptimConfig, client_data
    from hasfl.fl.records import WidthCosts

    torch.manual_seed(0)
    model = digits_family.build(1.0)
    share = fiarse.parameter_shares(digits_family)
    numel = _masked_numel(digits_family)
    other = sum(int(q.numel()) for q in model.parameters()) - numel
    optim = OptimConfig(lr=0.05, lr_decay=1.0, local_epochs=1, batch_size=16, momentum=0.9, weight_decay=1e-3,
                        clip=1.0)
    client = fiarse.FiarseClient(optim, digits.bundle.inputs, share, numel, other)
    before = {k: v.detach().clone() for k, v in fiarse.masked_parameters(model).items()}
    tau = fiarse.threshold(list(before.values()), share(0.5))
    data = client_data(digits.partition, digits.bundle)[0]
    res = client.run(0, model, data, 0.05, torch.Generator().manual_seed(1), 0.5, 1.0)
    assert res.steps > 0 and res.finite
    after = fiarse.masked_parameters(model)
    moved = 0
    for k, w in before.items():
        dropped = w.abs() < tau
        assert torch.equal(after[k].detach()[dropped], w[dropped]), k
        moved += int((after[k].detach() != w).sum())
    assert moved > 0 and client.kept == int(sum(int((w.abs() >= tau).sum()) for w in before.values()))
    assert client.held(None).kind == "masked" and client.held(None).shift == client.kept
    costs = WidthCosts(digits_family)
    assert client.forward_macs(costs, 0.5, 1.0) == costs(1.0).macs
    assert client.upload_mb(costs, 0.5, 1.0) == pytest.approx((fiarse.budget_k(numel, share(0.5)) * 8 + other * 4) / 1e6)
    assert share(1.0) == 1.0 and share(0.5) == pytest.approx(costs(0.5).params / costs(1.0).params)


def test_the_engines_mean_is_the_official_nonzero_delta_mean(seed: int = 3) -> None:
    """:class:`fiarse.NonzeroMean` (the engine's sums) stepped by the server equals :func:`fiarse.aggregate` (the
    official server, transcribed in this module's tests) on states whose deltas are zero at some coordinates."""
    from hasfl.models.slicing import SliceRule

    rng = np.random.default_rng(seed)
    g = {"a": torch.tensor(rng.normal(size=(4, 5)), dtype=torch.float32),
         "b": torch.tensor(rng.normal(size=(7,)), dtype=torch.float32)}
    clients = []
    for _ in range(3):
        c = {}
        for k, v in g.items():
            moved = v + torch.tensor(rng.normal(size=v.shape), dtype=torch.float32)
            c[k] = torch.where(torch.tensor(rng.random(v.shape) < 0.4), v, moved)
        clients.append(c)
    server = fiarse.FiarseServer()
    agg = server.aggregator(g, list(g))
    full = {k: SliceRule(None, tuple(slice(0, n) for n in v.shape)) for k, v in g.items()}
    for c in clients:
        delta = {k: c[k] - g[k] for k in g}
        agg.add(delta, full, 123.0)
    w = {k: v.clone() for k, v in g.items()}
    server.step(w, agg.mean(), list(g))
    want = fiarse.aggregate(g, clients)  # global - mean(global - client) = global + mean(client - global)
    for k in g:
        torch.testing.assert_close(w[k], want[k], rtol=0, atol=1e-6)


def test_a_preset_may_list_it_and_the_lstm_ranks_its_recurrent_weights() -> None:
    """The quick rolling overlay lists fiarse; on the Shakespeare LSTM the ranked set is every weight and bias of the
    recurrent layer and of the output layer (our decision: docs/decisions.md), the embedding unranked, and a FIARSE
    participant's gradient there is zero off its mask."""
    from hasfl.config import load_config
    from hasfl.models import family_from_config
    from hasfl.models.magnitude import masked_parameters

    assert "fiarse" in load_config(["presets/quick.yaml", "presets/quick-rolling.yaml"])["methods"]
    lstm = family_from_config({"arch": "lstm", "embed_dim": 4, "hidden": 8, "layers": 2}, (5,), 7)
    model = lstm.build(1.0)
    ranked = masked_parameters(model)
    assert list(ranked) == [n for n, _ in model.named_parameters() if not n.startswith("embed")]
    tau = fiarse.threshold(list(ranked.values()), 0.3)
    client = fiarse.FiarseClient(None, None, lambda p: 0.3, 1, 1)  # the loss reads neither optimiser nor inputs
    client.tau, client._names = tau, list(ranked)
    x, y = torch.randint(0, 7, (3, 5)), torch.randint(0, 7, (3,))
    client.loss(model, x, y).backward()
    for n, w in ranked.items():
        assert torch.equal(w.grad[w.detach().abs() < tau], torch.zeros_like(w.grad[w.detach().abs() < tau])), n
    assert model.embed.weight.grad is not None and bool(model.embed.weight.grad.abs().sum() > 0)


def test_table4c_reads_a_fiarse_run_from_its_kept_counts(engine_cfg, federate, one_thread, digits_family,
                                                         tmp_path) -> None:
    """Table 4c's row of a one-round FIARSE run: the uncovered fraction and the minimum coverage index equal a direct
    count of round 1's masks on init.pt (:func:`fiarse.coverage_counts` at the participants' shares), the unranked
    entries held by every participant; the unions over rounds it cannot replay are empty (NaN), with no block rows."""
    from hasfl.analysis.tables import table4c_coverage_over_time as t4c

    cfg = engine_cfg(rounds=1, warmup=0)
    run = federate(cfg, "fiarse")
    led = run.participation
    shapes = parameter_shapes(digits_family)
    rows = t4c.run_rows("digits", "fiarse", 42, led[list(t4c.LEDGER_COLUMNS)], {**run.summary, "t0": 0},
                        digits_family, shapes, 5)
    assert len(rows) == 1 and rows[0]["block"] == t4c.ALL_BLOCKS and rows[0]["window"] == "masked"
    init = digits_family.build(1.0)
    init.load_state_dict(run.init_state)
    share = fiarse.parameter_shares(digits_family)
    counts = fiarse.coverage_counts(fiarse.masked_parameters(init), [share(p) for p in led["p"]])
    total = sum(int(np.prod(v)) for v in shapes.values())
    assert rows[0]["coordinates"] == total
    assert rows[0]["uncovered_frac_mean"] == sum(int((c == 0).sum()) for c in counts.values()) / total
    assert rows[0]["gamma_min"] == min(int(c.min()) for c in counts.values()) == 0
    assert all(np.isnan(rows[0][k]) for k in ("frac_last_k", "frac_after_t0", "unit_gamma_min", "unit_count_cv"))
    # the table of a preset with and without FIARSE (found by the quick rolling overlay's DAG: the count columns were
    # cast to int64 and its empty unions failed): nullable where a FIARSE row leaves them empty, int64 otherwise
    uni = federate(cfg, "uniform")
    plain = t4c.run_rows("digits", "uniform", 42, uni.participation[list(t4c.LEDGER_COLUMNS)],
                         {**uni.summary, "t0": 0}, digits_family, shapes, 5)
    both = t4c._finish([*plain, *rows], tmp_path / "both.parquet", tmp_path / "both.md", [])
    alone = t4c._finish(plain, tmp_path / "plain.parquet", tmp_path / "plain.md", [])
    assert str(both["trained_last_k"].dtype) == "Int64" and str(alone["trained_last_k"].dtype) == "int64"
    assert str(both["gamma_min"].dtype) == "int64" and "FIARSE" in (tmp_path / "both.md").read_text()


def test_a_fiarse_sub_model_is_the_final_model_masked_at_its_share(engine_cfg, federate, one_thread, digits,
                                                                   digits_family) -> None:
    """The sub-model table cuts a FIARSE participant's sub-model as the official code evaluates a size: the final
    global model with its ranked coordinates below the share's threshold set to 0 (the threshold of that model
    itself), under FIARSE's declared rule (test-batch statistics). Checked against the model masked here by hand."""
    from hasfl.analysis.bn_sensitivity import EVAL_BATCH
    from hasfl.analysis.stale import evaluate_accuracy
    from hasfl.analysis.tables import submodel_accuracy as sa
    from hasfl.models.bn import model_at

    run = federate(engine_cfg(rounds=2, warmup=0), "fiarse")
    led = run.participation.copy()
    last, subs = sa.last_round_submodels(digits_family, led, 42)
    share = fiarse.parameter_shares(digits_family)
    last_rows = led[led["round"] == last]
    assert last == 2 and [w.share for _, w in subs] == [share(p) for p in last_rows["p"]]
    assert {p for p, _ in subs} == {1.0} and {w.kind for _, w in subs} == {"masked"}
    p = float(last_rows["p"].min())
    acc, used, why = sa.submodel_accuracy(digits_family, digits.bundle, run.final_state, 1.0,
                                          sa.MaskedShare(share(p)), "batch")
    by_hand = model_at(digits_family, 1.0, run.final_state, "batch")
    with torch.no_grad():
        ranked = fiarse.masked_parameters(by_hand)
        tau = fiarse.threshold(list(ranked.values()), share(p))
        for w in ranked.values():
            w.mul_((w.abs() >= tau).to(w.dtype))
    assert used == "batch" and why == ""
    assert acc == 100.0 * evaluate_accuracy(by_hand, digits.bundle, EVAL_BATCH)
    full, _, _ = sa.submodel_accuracy(digits_family, digits.bundle, run.final_state, 1.0, sa.MaskedShare(1.0), "batch")
    assert full == 100.0 * evaluate_accuracy(model_at(digits_family, 1.0, run.final_state, "batch"), digits.bundle,
                                             EVAL_BATCH)  # share 1 keeps every coordinate: the full model


def test_a_masked_ledger_is_read_whole_or_refused(tmp_path) -> None:
    """Table 4c's ledger reader keeps a FIARSE ledger's allocated widths (its masks' shares), refuses one that mixes
    masked rows with windows or lacks a valid ``p``, naming the file and the column."""
    import pandas as pd

    from hasfl.analysis.tables import table4c_coverage_over_time as t4c
    from hasfl.io import write_parquet

    rows = {"round": [1, 1], "p": [0.25, 0.5], "p_trained": [1.0, 1.0], "window": ["masked", "masked"],
            "window_shift": [10, 20]}
    write_parquet(pd.DataFrame(rows), tmp_path / "ok.parquet")
    assert t4c.read_ledger(tmp_path / "ok.parquet")["p"].tolist() == [0.25, 0.5]
    write_parquet(pd.DataFrame({**rows, "window": ["masked", "prefix"]}), tmp_path / "mixed.parquet")
    with pytest.raises(ValueError, match=r"mixed.parquet column 'window' holds \['masked', 'prefix'\]"):
        t4c.read_ledger(tmp_path / "mixed.parquet")
    write_parquet(pd.DataFrame({k: v for k, v in rows.items() if k != "p"}), tmp_path / "nop.parquet")
    with pytest.raises(ValueError, match=r"nop.parquet column 'p'"):
        t4c.read_ledger(tmp_path / "nop.parquet")
