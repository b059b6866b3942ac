#!/usr/bin/env python3
"""Clients of equal width batched into one ``torch.func.vmap`` step vs one client after another.

What it measures: one plain-SGD step of ``k`` clients of width p (CIFAR CNN, p = 0.25, k = 10,
batch 64, the engine's fp32 numerics) as one ``vmap(grad(...))`` call over their stacked
parameters (convolutions become grouped ones) against ``k`` steps one client after another, the
engine's way; same batches. Reports ms per client-step and the largest difference of the updated
weights (float rounding only, if the batching is exact).

Result on the 2-core Xeon (2026-11-30): 320.6 ms per client-step batched against 99.5 ms one
after another (x0.31: oneDNN runs the grouped convolutions far slower); weights agree to 6e-8.
*Not adopted.* On a GPU, where a step is launch-bound, this is the measurement to make before
building it.

Run: ``python scripts/experiments/client_batching.py [--clients 10] [--p 0.25] [--batch 64]``; prints JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from hasfl.bench.harness import interleaved, median, rnd, sync
from hasfl.bench.workload import family_of, optim_for, synthetic_bundle
from hasfl.config import PAPER_CONFIG, load_config
from hasfl.fl.runtime import Numerics, resolve_device


def bench_client_batching(config: Mapping[str, Any], device: torch.device, dataset: str = "cifar10",
                          p: float = 0.25, k: int = 10, batch: int | None = None, trials: int = 3) -> dict[str, Any]:
    """ms per client-step, vmapped vs sequential, and the largest weight difference after one step."""
    from torch.func import functional_call, grad, stack_module_state, vmap

    optim = optim_for(config, dataset, batch)
    bs = optim.batch_size
    bundle = synthetic_bundle(dataset, k * bs, 8, device)
    fam = family_of(config, dataset, bundle)
    numerics = Numerics.for_run(device, "fp32", bundle.task == "image")
    torch.manual_seed(0)
    models = [numerics.prepare(fam.build(p)) for _ in range(k)]
    start = [copy.deepcopy(m.state_dict()) for m in models]
    params, buffers = stack_module_state(models)  # copies: the batched clients' own tensors
    stacked0 = {n: t.clone() for n, t in {**params, **buffers}.items()}
    skeleton = copy.deepcopy(models[0]).to("meta")
    x_all = bundle.inputs(bundle.train_x)  # k batches: client i trains on the i-th
    xs, ys = x_all.view(k, bs, *x_all.shape[1:]), bundle.train_y.view(k, bs)
    lr = optim.lr

    def loss_fn(prm: dict[str, Tensor], buf: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(functional_call(skeleton, (prm, buf), (x,)), y)

    grads_of = vmap(grad(loss_fn))

    def batched() -> float:
        sync(device)
        tic = time.perf_counter()
        g = grads_of(params, buffers, xs, ys)
        with torch.no_grad():
            torch._foreach_add_(list(params.values()), [g[n] for n in params], alpha=-lr)
        sync(device)
        return time.perf_counter() - tic

    def sequential() -> float:
        sync(device)
        tic = time.perf_counter()
        for i, m in enumerate(models):
            ps = list(m.parameters())
            for q in ps:
                q.grad = None
            F.cross_entropy(m(xs[i]), ys[i]).backward()
            with torch.no_grad():
                torch._foreach_add_(ps, [q.grad for q in ps], alpha=-lr)
        sync(device)
        return time.perf_counter() - tic

    def reset() -> None:
        with torch.no_grad():
            for n, t in {**params, **buffers}.items():
                t.copy_(stacked0[n])
        for m, s0 in zip(models, start, strict=True):
            m.load_state_dict(s0)

    with numerics.backend_flags():
        batched(), sequential()  # warm-up, then one step of each from the same weights to compare
        reset()
        batched(), sequential()
        with torch.no_grad():
            diff = max(float((params[n][i] - q).abs().max()) for i, m in enumerate(models)
                       for n, q in m.named_parameters())
        times = interleaved({"vmap": batched, "sequential": sequential}, trials)
    ms = {key: median(v) / k * 1e3 for key, v in times.items()}
    return {"dataset": dataset, "p": p, "clients": k, "batch": bs,
            "ms_per_client_step": {key: rnd(v, 3) for key, v in ms.items()},
            "vmap_speedup": rnd(ms["sequential"] / ms["vmap"], 3), "max_abs_diff_after_one_step": rnd(diff, 3)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--dataset", default="cifar10", choices=("cifar10", "emnist", "shakespeare"))
    ap.add_argument("--p", type=float, default=0.25)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--batch", type=int, default=None, help="default: the paper preset's (64)")
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = bench_client_batching(load_config(PAPER_CONFIG), resolve_device(args.device), args.dataset, args.p,
                                args.clients, args.batch, args.trials)
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
