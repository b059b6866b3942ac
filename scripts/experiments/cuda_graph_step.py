#!/usr/bin/env python3
"""One local step eager vs replayed from a captured CUDA graph (scratch code, not in the engine; CUDA only).

What it measures: one ``SGDState`` step (forward, backward, clipped SGD with momentum, fixed
learning rate) of the paper model of each dataset at width p = 0.5 and the paper batch, eager vs
replayed from a CUDA graph captured with PyTorch's whole-network recipe (three warm-up steps on a
side stream, gradients set to None, capture; each replay first copies the batch indices into a
static tensor).

Result on one H200 (2026-11-30, PyTorch defaults, i.e. TF32 convolutions): 5.74 -> 1.33 ms per
step on CIFAR-10 (x4.31), 4.11 -> 1.07 ms on EMNIST (x3.85), 3.09 -> 1.08 ms on Shakespeare
(x2.86) for one job alone. *Not adopted*: with 8 jobs sharing the GPU under MPS (see
``concurrency.py --graph``) the paper preset's device-hours only fell from 15.1 to 14.5: the GPU's
arithmetic, not the launches, bounds throughput then. The engine would also need the learning
rate as a device tensor (it decays per round).

Run on a GPU: ``python scripts/experiments/cuda_graph_step.py [--steps 200] [--p 0.5]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from hasfl.bench.harness import loadavg, rnd, sync
from hasfl.bench.workload import family_of, optim_for, synthetic_bundle
from hasfl.config import PAPER_CONFIG, load_config
from hasfl.fl.client import SGDState
from hasfl.fl.runtime import Numerics, resolve_device


class GraphStep:
    """One local step of ``dataset``'s paper model at width p, eager (:meth:`eager`) or
    replayed from a captured CUDA graph (:meth:`replay`)."""

    def __init__(self, config: Mapping[str, Any], dataset: str, p: float, device: torch.device, steps: int) -> None:
        optim = optim_for(config, dataset)
        bs = optim.batch_size
        self.bundle = synthetic_bundle(dataset, steps * bs, 8, device)
        torch.manual_seed(0)
        self.model = family_of(config, dataset, self.bundle).build(p).to(device)
        self.model.train()
        self.sgd = SGDState(list(self.model.parameters()), optim.lr, optim.momentum, optim.weight_decay, optim.clip)
        g = torch.Generator().manual_seed(0)
        self.batches = [t.to(device) for t in torch.randperm(steps * bs, generator=g).split(bs)]
        self.device, self.batch_size = device, bs
        self.static_b = self.batches[0].clone()
        self.graph: torch.cuda.CUDAGraph | None = None
        self.loss: Tensor | None = None

    def _forward_backward(self, b: Tensor) -> Tensor:
        loss = F.cross_entropy(self.model(self.bundle.inputs(self.bundle.train_x[b])), self.bundle.train_y[b])
        loss.backward()
        return loss

    def eager(self, b: Tensor) -> None:
        self.sgd.zero_grad()
        self._forward_backward(b)
        self.sgd.step()

    def capture(self) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self.eager(self.static_b)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.sgd.zero_grad()
        with torch.cuda.graph(self.graph):
            self.loss = self._forward_backward(self.static_b)
            self.sgd.step()

    def replay(self, b: Tensor) -> None:
        assert self.graph is not None
        self.static_b.copy_(b)
        self.graph.replay()

    def seconds_per_step(self, fn: Callable[[Tensor], None]) -> float:
        for b in self.batches[:5]:
            fn(b)
        sync(self.device)
        tic = time.perf_counter()
        for b in self.batches:
            fn(b)
        sync(self.device)
        return (time.perf_counter() - tic) / len(self.batches)


def bench_cuda_graph_step(config: Mapping[str, Any], device: torch.device, p: float = 0.5, steps: int = 200,
                          datasets: Sequence[str] = ("cifar10", "emnist", "shakespeare")) -> dict[str, Any]:
    """Eager vs graph-replayed step per dataset; a dataset whose capture fails records the error."""
    if device.type != "cuda":
        return {"status": "skipped", "reason": "CUDA graphs need a CUDA device"}
    rows = []
    for ds in datasets:
        try:
            st = GraphStep(config, ds, p, device, steps)
            eager = st.seconds_per_step(st.eager)
            st.capture()
            replay = st.seconds_per_step(st.replay)
            assert st.loss is not None
            rows.append({"dataset": ds, "p": p, "batch_size": st.batch_size, "eager_step_ms": rnd(eager * 1e3, 3),
                         "graph_step_ms": rnd(replay * 1e3, 3), "speedup": rnd(eager / replay, 2),
                         "loss_finite": bool(torch.isfinite(st.loss).item())})
        except Exception as exc:  # a measurement, not the engine: record why it failed and go on
            rows.append({"dataset": ds, "p": p, "error": f"{type(exc).__name__}: {exc}"[:300]})
    return {"status": "measured", "rows": rows, "steps": steps, "loadavg": loadavg()}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--precision", default="fp32", choices=("fp32", "tf32"), help="no bf16 variant")
    ap.add_argument("--p", type=float, default=0.5)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    dev = resolve_device(args.device)
    config = load_config(PAPER_CONFIG)
    with Numerics.for_run(dev, args.precision, image=True).backend_flags():
        out = bench_cuda_graph_step(config, dev, args.p, args.steps)
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
