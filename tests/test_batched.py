"""The batched client step (config ``client_step: batched``, hasfl.fl.batched): a width's clients trained as one
vmap step compute the sequential engine's update. In float64 the two agree to 1e-10 (the same arithmetic, other
summation orders); in the engine's float32, one round's global weights agree to 1e-5, and the run records the
same widths, windows and step counts. A batched run is another identity; hooked methods are refused."""

from __future__ import annotations

import copy

import pytest
import torch

from hasfl.config import ConfigError, load_config, run_config, validate_config
from hasfl.fl.batched import client_batches, train_group
from hasfl.fl.client import ClientData, LocalSGD, OptimConfig
from hasfl.fl.sampling import local_generator
from hasfl.registry import METHODS

F64_TOL = 1e-10  # float64: only the summation order differs
#: float32, one round of the digits federation at mixed widths (measured 2.4e-7 for hasfl, 1.8e-7 for fedrolex; at
#: full width FedAvg's differences are 4.7e-5 after one round and grow about tenfold a round, as any change of
#: summation order does in this federation)
F32_ROUND_TOL = 1e-5


#: The conftest families' input shapes and classes.
SHAPES = {"small_cnn": ((3, 16, 16), 7), "small_lstm": ((6,), 11)}


def _clients(arch, n_sizes, dtype, seed=0):
    """Clients of different sizes (partial last batches, one single-sample batch) on random data."""
    g = torch.Generator().manual_seed(seed)
    total = sum(n_sizes)
    shape, classes = SHAPES[arch]
    if len(shape) == 1:  # the LSTM: token ids
        x = torch.randint(0, classes, (total, *shape), generator=g)
    else:
        x = torch.randn(total, *shape, generator=g, dtype=dtype)
    y = torch.randint(0, classes, (total,), generator=g)
    out, start = [], 0
    for c, n in enumerate(n_sizes):
        out.append(ClientData(c, torch.arange(start, start + n), x, y))
        start += n
    return out


@pytest.mark.parametrize("arch", ["small_cnn", "small_lstm"])
@pytest.mark.parametrize("momentum,clip,wd", [(0.9, 1.0, 5e-4), (0.0, 0.0, 0.0)])
def test_group_equals_sequential_local_sgd_in_float64(request, arch, momentum, clip, wd) -> None:
    family = request.getfixturevalue(arch)
    optim = OptimConfig(lr=0.05, lr_decay=1.0, local_epochs=2, batch_size=8, momentum=momentum, weight_decay=wd,
                        clip=clip)
    p = 0.5
    torch.manual_seed(3)
    module = family.build(p).double()
    starts = []
    for s in range(4):  # each client starts elsewhere (as clients of a rolling window would)
        torch.manual_seed(10 + s)
        m = family.build(p).double()
        starts.append({k: v.detach().clone() for k, v in m.state_dict().items()})
    data = _clients(arch, [8, 21, 9, 3], torch.float64)  # 9 = 8 + a single sample, skipped under BN
    sgd = LocalSGD(optim, lambda x: x)
    expected = []
    for j, d in enumerate(data):
        m = copy.deepcopy(module)
        m.load_state_dict(starts[j])
        res = sgd.train(m, d, optim.lr, local_generator(42, 0, j))
        expected.append(({k: v.detach().clone() for k, v in m.state_dict().items()}, res))
    got = train_group(module, starts, data, [local_generator(42, 0, j) for j in range(4)], optim, optim.lr,
                      lambda x: x, sgd.autocast)
    for (want, want_res), (state, res) in zip(expected, got, strict=True):
        assert res.steps == want_res.steps
        assert res.loss == pytest.approx(want_res.loss, abs=F64_TOL)
        for k, v in want.items():
            diff = (state[k].to(v.dtype) - v).abs().max().item() if v.numel() else 0.0
            assert diff <= F64_TOL, (k, diff)


def test_client_batches_are_the_sequential_engines() -> None:
    """Same generator, same batches: a 17-sample client in batches of 8 under BN skips its single-sample batch."""
    optim = OptimConfig(lr=0.1, lr_decay=1.0, local_epochs=2, batch_size=8, momentum=0.0, weight_decay=0.0, clip=0.0)
    d = ClientData(0, torch.arange(100, 117), torch.zeros(200), torch.zeros(200))
    got = client_batches(d, optim, local_generator(1, 2, 3), has_bn=True)
    g = local_generator(1, 2, 3)
    want = []
    for _ in range(2):
        order = d.index[torch.randperm(17, generator=g)]
        want += [order[0:8], order[8:16]]
    assert len(got) == 4 and all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert len(client_batches(d, optim, local_generator(1, 2, 3), has_bn=False)) == 6


@pytest.mark.parametrize("method", ["hasfl", "fedrolex"])
def test_engine_round_matches_sequential(engine_cfg, federate, one_thread, method) -> None:
    """One round of the digits federation (mixed widths; rolling windows for fedrolex): the global weights agree
    to F32_ROUND_TOL and the ledgers agree in everything but the float losses."""
    runs = {}
    for step in ("sequential", "batched"):
        cfg = engine_cfg(rounds=1)
        cfg["client_step"] = step
        runs[step] = federate(cfg, method)
    a, b = runs["sequential"], runs["batched"]
    for k, v in a.final_state.items():
        if v.is_floating_point():
            assert (v - b.final_state[k]).abs().max().item() <= F32_ROUND_TOL, k
        else:
            assert torch.equal(v, b.final_state[k]), k
    la, lb = a.participation, b.participation
    assert la.drop(columns=["local_loss"]).equals(lb.drop(columns=["local_loss"]))
    assert (la["local_loss"] - lb["local_loss"]).abs().max() < 1e-5


def test_batched_is_another_identity_and_refuses_hooked_methods(engine_cfg, federate) -> None:
    cfg = load_config()
    assert "client_step" not in run_config(cfg, "cifar10", "hasfl", 42)  # the default engine: identities unchanged
    cfg["client_step"] = "batched"
    assert run_config(cfg, "cifar10", "hasfl", 42)["client_step"] == "batched"
    with pytest.raises(ConfigError, match=r"client_step.*fjord, scaffold, fedprox"):
        validate_config(cfg)
    cfg["methods"] = ["hasfl", "heterofl", "fedavg"]
    validate_config(cfg)
    run_cfg = engine_cfg(rounds=1)
    run_cfg["client_step"] = "batched"
    with pytest.raises(ValueError, match="method 'fedprox' trains with FedProx"):
        federate(run_cfg, "fedprox")


def test_registry_plain_local_sgd_is_the_methods_client(engine_cfg, digits) -> None:
    """The registry's flag (what config validation reads) agrees with the client class each builder makes."""
    import numpy as np

    from hasfl.config import run_config as rc
    from hasfl.fl.client import OptimConfig as OC
    from hasfl.fl.methods import MethodContext, build_method
    from hasfl.fl.runtime import family_for
    from hasfl.fl.sampling import participant_schedule

    cfg = engine_cfg(rounds=2, warmup=0)
    pmax = digits.clients.sort_values("client_id")["pmax"].to_numpy(dtype=np.float64)
    for name, info in METHODS.items():
        run_cfg = rc(cfg, "digits", name, 42)
        family = family_for(digits.bundle, run_cfg["dataset_params"]["model"])
        method = build_method(name, MethodContext(
            pmax=pmax, run_cfg=run_cfg, schedule=participant_schedule(42, 20, 10, 2), rng=np.random.default_rng(0),
            family=family, optim=OC.from_config(run_cfg["dataset_params"]["optim"]), inputs=digits.bundle.inputs,
            hasfl_avg_p=0.5, hasfl_diverged=True))  # a random-budget control matches 0.5 as closely as it can
        assert (type(method.client) is LocalSGD) == info.plain_local_sgd, name
