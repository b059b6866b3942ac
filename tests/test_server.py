"""The server's step (hasfl.fl.server; Algorithm 1 line 19) and SCAFFOLD's control variates on the
server (option II of Karimireddy et al. 2020), with the client half of hasfl.fl.client."""

from __future__ import annotations

import copy

import torch
from torch import nn

from hasfl.fl.client import ClientData, OptimConfig, ScaffoldClient
from hasfl.fl.server import ScaffoldServer, ServerStep


def toy_clients(n_clients: int = 3):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 3, generator=gen)
    y = (x[:, 0] + 0.5 * torch.randn(60, generator=gen) > 0).long()
    return [ClientData(i, torch.arange(20 * i, 20 * i + 20), x, y) for i in range(n_clients)]


def toy_optim() -> OptimConfig:
    return OptimConfig(lr=0.1, lr_decay=1.0, local_epochs=2, batch_size=8, momentum=0.0, weight_decay=0.0, clip=1e9)


def test_server_step_adds_the_aggregated_update_and_keeps_no_state() -> None:
    w = {"a": torch.tensor([1.0, 2.0]), "b": torch.tensor([5.0]), "n": torch.tensor(3)}
    ServerStep().step(w, {"a": torch.tensor([0.5, -1.0]), "b": torch.tensor([1.0])}, ["a"])
    assert torch.equal(w["a"], torch.tensor([1.5, 1.0])) and torch.equal(w["b"], torch.tensor([5.0]))
    assert ServerStep().state() == {} and ServerStep().global_lr() == 1.0


def scaffold_round(client: ScaffoldClient, server: ScaffoldServer, global_model: nn.Module, clients, lr: float,
                   t: int):
    """One SCAFFOLD round on a toy linear model; returns (x - y_i)/(K lr) per client and c_i before."""
    glob = global_model.state_dict()  # shares storage: the server's step updates the model
    start = {k: v.clone() for k, v in glob.items()}
    keys = list(glob)
    server.begin_round()
    drift, c_i_before = {}, {}
    deltas = []
    for data in clients:
        model = copy.deepcopy(global_model)
        c_i_before[data.client_id] = {k: v.clone() for k, v in server.c_i.get(data.client_id, {}).items()}
        res = client.run(data.client_id, model, data, lr, torch.Generator().manual_seed(100 * t + data.client_id),
                         1.0, 1.0)
        drift[data.client_id] = {k: (start[k] - q.detach()) / (res.steps * lr) for k, q in model.named_parameters()}
        deltas.append({k: q.detach() - start[k] for k, q in model.named_parameters()})
    server.step(glob, {k: sum(d[k] for d in deltas) / len(deltas) for k in keys}, keys)
    for k in keys:  # line 19 with eta_g = 1
        torch.testing.assert_close(glob[k], start[k] + sum(d[k] for d in deltas) / len(deltas), rtol=0, atol=0)
    return drift, c_i_before


def test_scaffold_control_variates_option_ii() -> None:
    torch.manual_seed(0)
    global_model = nn.Linear(3, 2)
    clients = toy_clients(3)[:2]  # 2 participants of N = 4
    n_total = 4
    server = ScaffoldServer(n_total, global_lr=1.0)
    client = ScaffoldClient(toy_optim(), lambda v: v, server, {"momentum": 0.0, "global_lr": 1.0})
    lr = 0.1
    drift, _ = scaffold_round(client, server, global_model, clients, lr, t=0)
    # Round 0: c = c_i = 0, so c_i+ = (x - y_i) / (K lr) = Delta c_i, and c = (1/N) sum_i Delta c_i.
    for k in server.c:
        expected = sum(drift[i][k] for i in (0, 1)) / n_total
        torch.testing.assert_close(server.c[k], expected, rtol=1e-6, atol=1e-7)
        for i in (0, 1):
            torch.testing.assert_close(server.c_i[i][k], drift[i][k], rtol=1e-6, atol=1e-7)
    assert any(bool(v.abs().sum() > 0) for v in server.c.values())

    # Round 1 with client 0 only: c_i+ = c_i - c + drift; c += (1/N) (c_i+ - c_i).
    c_before = {k: v.clone() for k, v in server.c.items()}
    drift1, c_i_before = scaffold_round(client, server, global_model, clients[:1], lr, t=1)
    for k in server.c:
        new_ci = c_i_before[0][k] - c_before[k] + drift1[0][k]
        torch.testing.assert_close(server.c_i[0][k], new_ci, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(server.c[k], c_before[k] + (new_ci - c_i_before[0][k]) / n_total,
                                   rtol=1e-5, atol=1e-6)
    assert set(server.c_i) == {0, 1}  # only participants ever get a variate


def test_scaffold_server_global_lr_and_state_round_trip() -> None:
    """eta_g scales the model step; the variates survive state() / load_state() (checkpoints);
    a new round forgets the previous round's variate changes."""
    server = ScaffoldServer(2, global_lr=0.5)
    model = nn.Linear(2, 1)
    c, c_i = server.variates(1, model)
    assert all(torch.equal(v, torch.zeros_like(v)) for v in (*c.values(), *c_i.values()))
    server.begin_round()
    server.receive(1, {k: torch.ones_like(v) for k, v in c_i.items()})
    w = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    keys = list(w)
    server.step(w, {k: torch.full_like(v, 4.0) for k, v in w.items()}, keys)
    assert all(torch.equal(w[k], torch.full_like(w[k], 2.0)) for k in keys)
    assert all(torch.equal(v, torch.full_like(v, 0.5)) for v in server.c.values())  # (1/N) * 1
    other = ScaffoldServer(2, global_lr=0.5)
    other.load_state(copy.deepcopy(server.state()))
    assert set(other.c_i) == {1}
    for k in server.c:
        assert torch.equal(other.c[k], server.c[k]) and torch.equal(other.c_i[1][k], server.c_i[1][k])
    server.begin_round()
    server.step(w, {k: torch.zeros_like(v) for k, v in w.items()}, keys)
    assert all(torch.equal(v, torch.full_like(v, 0.5)) for v in server.c.values())


def test_server_step_without_participants_leaves_c_alone() -> None:
    """A SCAFFOLD server that never saw a client has no variates yet; its step is the plain step."""
    server = ScaffoldServer(3)
    w = {"a": torch.tensor([1.0])}
    server.begin_round()
    server.step(w, {"a": torch.tensor([2.0])}, ["a"])
    assert server.c is None and torch.equal(w["a"], torch.tensor([3.0]))
