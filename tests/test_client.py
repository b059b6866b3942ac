"""Local training (hasfl.fl.client; paper Section 4.1, Algorithm 1 lines 6-15): the shared
optimiser, and the hooks of FedProx, SCAFFOLD's client half and FjORD's self-distillation."""

from __future__ import annotations

import copy
from dataclasses import replace as replace_optim

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hasfl.fl.client import (
    ClientData,
    FedProx,
    FjordDistill,
    LocalSGD,
    OptimConfig,
    ScaffoldClient,
    SGDState,
    client_data,
    relative_rule,
)
from hasfl.fl.policies import FjordPolicy
from hasfl.fl.server import ScaffoldServer
from hasfl.models import region

pytestmark = pytest.mark.usefixtures("one_thread")


def toy_clients(n_clients: int = 3):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 3, generator=gen)
    y = (x[:, 0] + 0.5 * torch.randn(60, generator=gen) > 0).long()
    return [ClientData(i, torch.arange(20 * i, 20 * i + 20), x, y) for i in range(n_clients)]


def toy_optim(**kw) -> OptimConfig:
    base = dict(lr=0.1, lr_decay=1.0, local_epochs=2, batch_size=8, momentum=0.0, weight_decay=0.0, clip=1e9)
    base.update(kw)
    return OptimConfig(**base)


def digits_optim(cfg: dict, **kw) -> OptimConfig:
    return replace_optim(OptimConfig.from_config(cfg["dataset_params"]["digits"]["optim"]), **kw)


def random_state(family) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    state = family.build(1.0).state_dict()
    for k, t in state.items():
        if t.is_floating_point():
            t.normal_()
    return state


# --------------------------------------------------------------------------- the shared optimiser
@pytest.mark.parametrize("momentum,wd,clip", [(0.9, 1e-4, 0.5), (0.0, 0.0, 10.0), (0.9, 0.0, 1e-3)])
def test_sgd_state_matches_torch_optim(momentum, wd, clip):
    """The in-house local optimiser equals torch.optim.SGD + clip_grad_norm_ (Section 4.1)."""
    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    ref = copy.deepcopy(ours)
    sgd = SGDState(list(ours.parameters()), 0.1, momentum, wd, clip)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=momentum, weight_decay=wd)
    for _ in range(6):
        x, y = torch.randn(8, 5), torch.randint(0, 3, (8,))
        sgd.zero_grad()
        torch.nn.functional.cross_entropy(ours(x), y).backward()
        sgd.step()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(x), y).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), clip)
        opt.step()
    for a, b in zip(ours.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)


class Recording(LocalSGD):
    """LocalSGD that records the hooks the loop calls."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple] = []

    def begin_client(self, client, model, p, p_trained):
        self.calls.append(("begin", client, p, p_trained))

    def after_backward(self, model):
        self.calls.append(("after_backward",))

    def end_client(self, client, model, steps, lr):
        self.calls.append(("end", client, steps, lr))


def test_run_is_begin_train_end_and_equals_train() -> None:
    """``run`` = begin_client + K epochs of train (after_backward every step) + end_client, and it
    trains exactly what ``train`` trains."""
    data = toy_clients(1)[0]
    states = []
    for use_run in (True, False):
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        trainer = Recording(toy_optim(), lambda v: v)
        gen = torch.Generator().manual_seed(4)
        res = trainer.run(7, model, data, 0.1, gen, 0.5, 0.75) if use_run else trainer.train(model, data, 0.1, gen)
        states.append(model.state_dict())
    steps = 2 * 3  # 2 epochs of 20 samples in batches of 8
    assert res.steps == steps and res.finite
    for k, v in states[0].items():
        assert torch.equal(v, states[1][k]), k
    trainer = Recording(toy_optim(), lambda v: v)
    res = trainer.run(7, nn.Linear(3, 2), data, 0.1, torch.Generator().manual_seed(4), 0.5, 0.75)
    assert trainer.calls == [("begin", 7, 0.5, 0.75), *[("after_backward",)] * steps, ("end", 7, steps, 0.1)]


def test_client_data_from_the_partition_table(digits) -> None:
    """Every client's train indices, in the partition's order, over the bundle's train tensors."""
    data = client_data(digits.partition, digits.bundle)
    train = digits.partition[digits.partition["split"] == "train"]
    assert sorted(data) == sorted(digits.clients["client_id"].tolist())
    for c, d in data.items():
        expected = train.loc[train["client_id"] == c, "sample_index"].to_numpy()
        assert d.client_id == c and np.array_equal(d.index.numpy(), expected)
        assert d.n == int(digits.clients.set_index("client_id").loc[c, "n_train"])
        assert d.x is digits.bundle.train_x and d.y is digits.bundle.train_y


# --------------------------------------------------------------------------- FjORD
@pytest.mark.parametrize("make", ["small_cnn", "small_lstm"], ids=["cnn", "lstm"])
@pytest.mark.parametrize(("p", "big_p"), [(0.25, 0.5), (0.25, 1.0), (0.5, 0.75)])
def test_relative_rule_matches_direct_extraction(request, make, p, big_p) -> None:
    family = request.getfixturevalue(make)
    glob = random_state(family)
    big = family.extract(glob, big_p)
    direct = family.extract(glob, p)
    shapes = family.sub_shapes(p)
    for k, rule in family.slice_rules(p).items():
        rebased = region(big[k], relative_rule(rule, big[k].shape)).reshape(shapes[k])
        assert torch.equal(rebased, direct[k]), k


def test_relative_rule_is_needed_for_gate_blocks(small_lstm) -> None:
    family = small_lstm
    big = family.extract(random_state(family), 0.5)
    with pytest.raises(RuntimeError):  # the global (4, 12, ...) view does not fit a (4 * 6, ...) tensor
        region(big["lstm.weight_hh_l0"], family.slice_rules(0.25)["lstm.weight_hh_l0"])


def fjord_grads(family, p, big_p, distill: bool):
    torch.manual_seed(1)
    x, y = torch.randn(6, *family.in_shape), torch.randint(0, family.num_classes, (6,))
    glob = random_state(family)
    model = family.build(big_p)
    model.load_state_dict(family.extract(glob, big_p))
    optim = OptimConfig(lr=0.1, lr_decay=1.0, local_epochs=1, batch_size=6, momentum=0.0, weight_decay=0.0,
                        clip=1e9)
    trainer = FjordDistill(optim, lambda v: v, family)
    # the client trains (and uploads) its pmax width: FjORD's policy says so
    assert FjordPolicy(np.array([big_p]), [0.25, 0.5, 0.75, 1.0]).trained_widths(np.array([0]), np.array([p])) == big_p
    trainer.begin_client(0, model, p, big_p)
    loss = trainer.loss(model, x, y) if distill else F.cross_entropy(model(x), y)
    loss.backward()
    return model, float(loss.detach()), {k: q.grad.clone() for k, q in model.named_parameters()}


def test_fjord_distillation_backpropagates_into_shared_parameters(small_cnn) -> None:
    family = small_cnn
    p, big_p = 0.25, 0.75
    model, loss_kd, g_kd = fjord_grads(family, p, big_p, distill=True)
    _, loss_ce, g_ce = fjord_grads(family, p, big_p, distill=False)
    assert np.isfinite(loss_kd) and loss_kd > loss_ce  # KL term > 0 for different logits
    big_shapes = {k: q.shape for k, q in model.named_parameters()}
    touched = set()
    for k, rule in family.slice_rules(p).items():
        if k not in g_kd:
            continue
        inside = torch.zeros(big_shapes[k], dtype=torch.bool)
        region(inside, relative_rule(rule, big_shapes[k])).fill_(True)
        diff = g_kd[k] - g_ce[k]
        torch.testing.assert_close(diff[~inside], torch.zeros_like(diff[~inside]), rtol=0, atol=1e-6, msg=k)
        if (diff[inside].abs() > 1e-7).any():
            touched.add(k)
    # The KD gradient reaches every shared tensor, except perhaps the conv biases: they feed batch
    # norm under batch statistics, so their gradient is zero up to rounding.
    conv_biases = {k for k in g_kd if k.startswith("convs.") and k.endswith(".bias")}
    assert len(conv_biases) == len(family.channels)
    assert touched >= set(g_kd) - conv_biases, set(g_kd) - conv_biases - touched


def test_fjord_same_width_is_plain_cross_entropy(small_cnn) -> None:
    family = small_cnn
    _, loss_kd, g_kd = fjord_grads(family, 0.5, 0.5, distill=True)
    _, loss_ce, g_ce = fjord_grads(family, 0.5, 0.5, distill=False)
    assert loss_kd == loss_ce
    for k in g_kd:
        assert torch.equal(g_kd[k], g_ce[k]), k


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


def test_fjord_student_without_running_statistics_trains_the_same_bits(engine_cfg, digits, digits_family) -> None:
    """The distilled student keeps no running batch-norm statistics (it normalises by the batch's in
    training either way): the client's module, its running statistics included, and the losses are
    identical to the student that carried cloned slices of them."""
    bundle = digits.bundle
    family = digits_family
    optim = digits_optim(engine_cfg(), local_epochs=2)
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


# --------------------------------------------------------------------------- SCAFFOLD (client half) / FedProx
def test_scaffold_corrects_gradients_by_c_minus_ci() -> None:
    server = ScaffoldServer(n_clients=6)
    trainer = ScaffoldClient(toy_optim(), lambda v: v, server, {"momentum": 0.0})
    model = nn.Linear(3, 2)
    trainer.begin_client(5, model, 1.0, 1.0)
    server.c = {k: torch.full_like(v, 2.0) for k, v in server.c.items()}
    server.c_i[5] = {k: torch.full_like(v, 0.5) for k, v in server.c_i[5].items()}
    trainer.begin_client(5, model, 1.0, 1.0)
    for q in model.parameters():
        q.grad = torch.ones_like(q)
    trainer.after_backward(model)
    for q in model.parameters():
        assert torch.all(q.grad == 1.0 + 2.0 - 0.5)


def test_scaffold_client_momentum_from_method_params() -> None:
    """SCAFFOLD trains with plain SGD unless its method params say otherwise; the others use the dataset's."""
    server = ScaffoldServer(n_clients=1)
    assert ScaffoldClient(toy_optim(momentum=0.9), lambda v: v, server, {}).momentum() == 0.0
    assert ScaffoldClient(toy_optim(momentum=0.9), lambda v: v, server, {"momentum": 0.5}).momentum() == 0.5
    assert FedProx(toy_optim(momentum=0.9), lambda v: v, {"mu": 1.0}).momentum() == 0.9


def prox_distance(mu: float, cls=FedProx) -> float:
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    anchor = [q.detach().clone() for q in model.parameters()]
    trainer = cls(toy_optim(local_epochs=5, momentum=0.9), lambda v: v, {"mu": mu})
    trainer.run(0, model, toy_clients(1)[0], 0.1, torch.Generator().manual_seed(3), 1.0, 1.0)
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


class LoopScaffold(ScaffoldClient):
    """SCAFFOLD's gradient correction as one add_ per parameter tensor."""

    def after_backward(self, model: nn.Module) -> None:
        for q, c in zip(model.parameters(), self._corr, strict=True):
            q.grad.add_(c)


@pytest.mark.parametrize("pair", ["fedprox", "scaffold"])
def test_foreach_hooks_match_the_per_tensor_formulation_to_the_bit(engine_cfg, digits, digits_family, pair) -> None:
    """FedProx's foreach proximal gradient is autograd's gradient of (mu/2)||w - w_g||^2 and
    SCAFFOLD's foreach correction is the per-tensor one: after several momentum / weight-decay /
    clipped steps of a sliced CNN from a moved anchor, the weights are identical bit for bit."""
    bundle = digits.bundle
    family = digits_family
    optim = digits_optim(engine_cfg(), clip=0.5, weight_decay=5e-4, momentum=0.9, local_epochs=2)
    data = ClientData(0, torch.arange(200), bundle.train_x, bundle.train_y)
    params = {"mu": 0.3} if pair == "fedprox" else {"momentum": 0.9}
    classes = (FedProx, AutogradFedProx) if pair == "fedprox" else (ScaffoldClient, LoopScaffold)
    states, losses = [], []
    for cls in classes:
        torch.manual_seed(0)
        model = family.build(0.5)
        if pair == "scaffold":
            server = ScaffoldServer(n_clients=1)
            trainer = cls(optim, bundle.inputs, server, params)
            trainer.begin_client(0, model, 0.5, 0.5)
            gen = torch.Generator().manual_seed(9)
            server.c = {k: 0.01 * torch.randn(v.shape, generator=gen) for k, v in server.c.items()}
        else:
            trainer = cls(optim, bundle.inputs, params)
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
