"""Tests for hasfl.models: nested width slicing (Algorithm 2) and Table 1 costs."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from hasfl.models import (
    CNNFamily,
    LSTMFamily,
    build_family,
    coverage_mask,
    extract,
    family_from_config,
    region,
    table1,
)

PS = (0.25, 0.5, 0.75, 1.0)

# Paper Table 1: (params M, MACs/sample M, upload MB) per model and p.
TABLE1 = {
    "CIFAR-10 CNN": [(0.21, 10.0, 0.82), (0.82, 39.2, 3.26), (1.83, 87.4, 7.32), (3.25, 154.9, 13.00)],
    "EMNIST CNN": [(0.21, 7.5, 0.85), (0.83, 29.7, 3.31), (1.85, 66.6, 7.40), (3.28, 118.2, 13.10)],
    "Shakespeare LSTM": [(0.06, 4.1, 0.24), (0.22, 16.1, 0.86), (0.47, 35.9, 1.88), (0.82, 63.6, 3.30)],
}


def test_family_from_config_is_build_family_of_the_block(small_cnn, small_lstm) -> None:
    """A config block ``dataset_params.<d>.model`` (arch + keyword arguments) builds the family
    build_family builds; the shared tiny families (conftest) are built that way."""
    assert isinstance(small_cnn, CNNFamily) and isinstance(small_lstm, LSTMFamily)
    block = {"arch": "cnn", "channels": [8, 12, 16], "pool_after": [0, 1], "pool_out": 2, "hidden": 20}
    fam = family_from_config(block, [3, 16, 16], 7)
    direct = build_family("cnn", in_shape=(3, 16, 16), num_classes=7, channels=[8, 12, 16], pool_after=[0, 1],
                          pool_out=2, hidden=20)
    assert block["arch"] == "cnn"  # the block is not consumed
    assert fam.in_shape == direct.in_shape == small_cnn.in_shape == (3, 16, 16)
    for p in PS:
        assert fam.sub_shapes(p) == direct.sub_shapes(p) == small_cnn.sub_shapes(p)
    with pytest.raises(ValueError, match="'chanels'"):
        family_from_config({"arch": "cnn", "chanels": [8]}, (3, 16, 16), 7)


def randomized_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Global state with random values everywhere, incl. BN affine and running stats."""
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                t.fill_(3)
            elif name.endswith("running_var"):
                t.uniform_(0.5, 2.0)
            else:
                t.normal_(0.0, 0.5)
    return model.state_dict()


# --- 1. Table 1 ---------------------------------------------------------------
def test_table1_all_cells() -> None:
    rows = table1()
    assert len(rows) == 12
    for row in rows:
        params_m, macs_m, mb = TABLE1[row["model"]][PS.index(row["p"])]
        cell = f'{row["model"]} p={row["p"]}'
        assert round(row["params"] / 1e6, 2) == pytest.approx(params_m), cell
        assert round(row["macs"] / 1e6, 1) == pytest.approx(macs_m), cell
        assert round(row["upload_mb"], 2) == pytest.approx(mb), cell
        assert row["upload_mb"] == pytest.approx(row["params"] * 4 / 1e6)


def test_table1_exact_full_width_counts() -> None:
    by = {(r["model"], r["p"]): r for r in table1(p_values=(0.25, 1.0))}
    assert by["CIFAR-10 CNN", 1.0]["params"] == 3_249_994
    assert by["CIFAR-10 CNN", 1.0]["macs"] == 154_866_688
    assert by["CIFAR-10 CNN", 0.25]["params"] == 205_018
    assert by["EMNIST CNN", 1.0]["params"] == 3_275_518
    assert by["EMNIST CNN", 1.0]["macs"] == 118_185_984
    assert by["Shakespeare LSTM", 1.0]["params"] == 824_160
    assert by["Shakespeare LSTM", 1.0]["macs"] == 63_594_496


def test_width_rounding_is_robust_ceil() -> None:
    fam = build_family("cnn", in_shape=(3, 32, 32), num_classes=10)
    assert fam.widths(0.75) == {"channels": [48, 48, 96, 96, 192, 192], "hidden": 384}
    assert fam.widths(0.3)["channels"][0] == 20  # ceil(19.2)
    assert fam.widths(1.0)["channels"] == [64, 64, 128, 128, 256, 256]


# --- 2. CNN slicing equivalence ---------------------------------------------------
def zero_outside(model: nn.Module, fam: CNNFamily, p: float) -> nn.Module:
    """Copy of the global CNN with every non-kept channel/unit and every weight reading
    from one set to 0, written by hand from widths(p) (independent of the slice rules)."""
    masked = copy.deepcopy(model)
    w = fam.widths(p)
    prev = None  # input image channels are all kept
    with torch.no_grad():
        for conv, bn, c in zip(masked.convs, masked.bns, w["channels"]):
            conv.weight[c:] = 0
            conv.bias[c:] = 0
            if prev is not None:
                conv.weight[:, prev:] = 0
            bn.weight[c:] = 0
            bn.bias[c:] = 0
            prev = c
        h = w["hidden"]
        masked.fc1.weight[h:] = 0
        masked.fc1.weight[:, prev * fam.pool_out**2 :] = 0
        masked.fc1.bias[h:] = 0
        masked.fc2.weight[:, h:] = 0
    return masked


@pytest.mark.parametrize("p", (0.25, 0.5, 0.75))
def test_cnn_slicing_matches_zeroed_global(small_cnn, p: float) -> None:
    torch.manual_seed(0)
    fam = small_cnn
    glob = fam.build(1.0)
    state = randomized_state(glob)
    sub = fam.build(p)
    sub.load_state_dict(extract(state, fam.slice_rules(p), fam.sub_shapes(p)))
    ref = zero_outside(glob, fam, p)

    w = fam.widths(p)
    ins = [3, *w["channels"][:-1]]
    for i, (c_in, c) in enumerate(zip(ins, w["channels"])):
        assert sub.convs[i].weight.shape == (c, c_in, 3, 3)
        assert sub.convs[i].bias.shape == (c,)
        for t in (sub.bns[i].weight, sub.bns[i].bias, sub.bns[i].running_mean, sub.bns[i].running_var):
            assert t.shape == (c,)
        assert sub.bns[i].num_batches_tracked.item() == 3
    assert sub.fc1.weight.shape == (w["hidden"], w["channels"][-1] * 2 * 2)
    assert sub.fc2.weight.shape == (7, w["hidden"])
    assert sub.fc2.bias.shape == (7,)

    x = torch.randn(4, 3, 16, 16)
    sub.eval(), ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(sub(x), ref(x), atol=1e-5, rtol=1e-5)
        assert not torch.allclose(sub(x), glob.eval()(x), atol=1e-3)  # the check is not vacuous
    # Train mode (batch statistics) agrees as well.
    sub.train(), ref.train()
    with torch.no_grad():
        torch.testing.assert_close(sub(x), ref(x), atol=1e-5, rtol=1e-5)


def test_cnn_default_shapes() -> None:
    fam = build_family("cnn", in_shape=(1, 28, 28), num_classes=62)
    sub = fam.build(0.5)
    assert sub.convs[0].weight.shape == (32, 1, 3, 3)
    assert sub.convs[5].weight.shape == (128, 128, 3, 3)
    assert sub.fc1.weight.shape == (256, 128 * 16)
    assert sub.fc2.weight.shape == (62, 256)
    assert sub(torch.zeros(2, 1, 28, 28)).shape == (2, 62)


def test_extract_is_a_copy_with_sub_shapes(small_cnn) -> None:
    fam = small_cnn
    state = fam.build(1.0).state_dict()
    for p in PS:
        sub = fam.extract(state, p)
        assert {k: v.shape for k, v in sub.items()} == fam.sub_shapes(p)
        for k, v in sub.items():
            assert v.is_contiguous()
            assert v.untyped_storage().data_ptr() != state[k].untyped_storage().data_ptr()


# --- 3. Nesting and coverage ------------------------------------------------------
@pytest.mark.parametrize("make", ("small_cnn", "small_lstm"))
def test_rules_cover_every_key_and_masks_nest(request, make) -> None:
    fam = request.getfixturevalue(make)
    glob = fam.build(1.0)
    full = glob.state_dict()
    param_names = {n for n, _ in glob.named_parameters()}
    masks = {p: coverage_mask(full, fam.slice_rules(p)) for p in PS}
    for p in PS:
        assert set(fam.slice_rules(p)) == set(full)
        covered = sum(int(masks[p][k].sum()) for k in param_names)
        assert covered == fam.cost(p).params
        assert covered == sum(t.numel() for t in fam.build(p).parameters())
    for k in full:
        assert bool(masks[1.0][k].all()), k
        for lo, hi in zip(PS, PS[1:]):
            assert not bool((masks[lo][k] & ~masks[hi][k]).any()), (k, lo, hi)


def test_full_width_extract_is_identity(small_cnn, small_lstm) -> None:
    for fam in (small_cnn, small_lstm):
        state = fam.build(1.0).state_dict()
        sub = fam.extract(state, 1.0)
        for k in state:
            assert torch.equal(sub[k], state[k])


# --- 4. LSTM gate-blocked equivalence ---------------------------------------------
def reference_lstm(state: dict[str, torch.Tensor], x: torch.Tensor, H: int, h: int, layers: int) -> torch.Tensor:
    """Hand-written LSTM using gate-blocked slices of the GLOBAL weights."""

    def gates(t: torch.Tensor) -> torch.Tensor:  # rows [g*H, g*H + h) of each gate g
        return torch.cat([t[g * H : g * H + h] for g in range(4)])

    seq = state["embed.weight"][x]  # (B, T, E)
    for layer in range(layers):
        w_ih = gates(state[f"lstm.weight_ih_l{layer}"])
        if layer > 0:
            w_ih = w_ih[:, :h]
        w_hh = gates(state[f"lstm.weight_hh_l{layer}"])[:, :h]
        b = gates(state[f"lstm.bias_ih_l{layer}"]) + gates(state[f"lstm.bias_hh_l{layer}"])
        hs = torch.zeros(x.shape[0], h)
        cs = torch.zeros(x.shape[0], h)
        outs = []
        for t in range(x.shape[1]):
            z = seq[:, t] @ w_ih.T + hs @ w_hh.T + b
            i, f, g, o = z.split(h, dim=1)
            cs = torch.sigmoid(f) * cs + torch.sigmoid(i) * torch.tanh(g)
            hs = torch.sigmoid(o) * torch.tanh(cs)
            outs.append(hs)
        seq = torch.stack(outs, dim=1)
    return seq[:, -1] @ state["fc.weight"][:, :h].T + state["fc.bias"]


@pytest.mark.parametrize("p", PS)
def test_lstm_slicing_matches_gate_blocked_reference(small_lstm, p: float) -> None:
    torch.manual_seed(1)
    fam = small_lstm
    state = randomized_state(fam.build(1.0))
    sub = fam.build(p)
    sub.load_state_dict(fam.extract(state, p))
    h = fam.widths(p)["hidden"]
    assert sub.lstm.weight_ih_l0.shape == (4 * h, 5)
    assert sub.lstm.weight_ih_l1.shape == (4 * h, h)
    assert sub.embed.weight.shape == (11, 5)
    assert sub.fc.weight.shape == (11, h) and sub.fc.bias.shape == (11,)
    x = torch.randint(0, 11, (3, 6))
    with torch.no_grad():
        torch.testing.assert_close(sub(x), reference_lstm(state, x, 12, h, 2), atol=1e-5, rtol=1e-5)


def test_lstm_rules_slice_inside_gate_blocks(small_lstm) -> None:
    fam = small_lstm
    full = fam.build(1.0).state_dict()
    mask = coverage_mask(full, fam.slice_rules(0.5))["lstm.bias_ih_l0"]
    expected = torch.zeros(4, 12, dtype=torch.bool)
    expected[:, :6] = True
    assert torch.equal(mask, expected.flatten())


# --- 5. region() round trip -----------------------------------------------------
@pytest.mark.parametrize("make", ("small_cnn", "small_lstm"))
@pytest.mark.parametrize("p", (0.25, 0.5, 0.75))
def test_region_write_round_trip(request, make, p: float) -> None:
    torch.manual_seed(2)
    fam = request.getfixturevalue(make)
    full = fam.build(1.0).state_dict()
    rules = fam.slice_rules(p)
    sub = {k: torch.randn(s) if full[k].is_floating_point() else torch.tensor(5) for k, s in fam.sub_shapes(p).items()}
    acc = {k: torch.zeros_like(v) for k, v in full.items()}
    masks = coverage_mask(full, rules)
    for k, rule in rules.items():
        view = region(acc[k], rule)
        view.add_(sub[k].view_as(view))
        assert view.untyped_storage().data_ptr() == acc[k].untyped_storage().data_ptr()  # a view, not a copy
    back = extract(acc, rules, fam.sub_shapes(p))
    for k in sub:
        assert torch.equal(back[k], sub[k]), k
        if acc[k].is_floating_point():  # nothing written outside the slice
            assert not bool(acc[k][~masks[k]].any()), k


# --- 6. build_family errors ---------------------------------------------------
def test_build_family_errors_name_the_bad_key() -> None:
    with pytest.raises(ValueError, match="'resnet'"):
        build_family("resnet", in_shape=(3, 32, 32), num_classes=10)
    with pytest.raises(ValueError, match="'chanels'"):
        build_family("cnn", in_shape=(3, 32, 32), num_classes=10, chanels=[8])
    with pytest.raises(ValueError, match="'channels'"):
        build_family("lstm", in_shape=(80,), num_classes=96, channels=[8])
    with pytest.raises(ValueError, match="in_shape"):
        build_family("lstm", in_shape=(3, 32, 32), num_classes=10)
    with pytest.raises(ValueError, match="width fraction"):
        build_family("cnn", in_shape=(3, 32, 32), num_classes=10).slice_rules(0.0)
