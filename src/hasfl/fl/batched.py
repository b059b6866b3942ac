"""The batched client step (config ``client_step: batched``): a round's same-width clients as one vectorised step.

Algorithm 1 lines 9-13 for every client of a round that trains the same width, at once: their
sub-models are stacked, and each local SGD step of all of them is one ``torch.func.vmap`` of
``grad_and_value`` over the stacked parameters and buffers (``functional_call`` on one module of the
width), followed by the shared optimiser's arithmetic (:class:`hasfl.fl.client.SGDState`: clipping,
weight decay, momentum, learning rate) per client on the stacked tensors. On a GPU, where a small
model's step is bound by kernel launches rather than arithmetic, one launch then serves k clients.

What it keeps from the sequential engine, exactly: each client's mini-batches (the same generator,
the same permutation per epoch, single-sample batches skipped under batch norm), its starting
weights and batch-norm statistics (the engine's extraction and :class:`hasfl.fl.bn_stats.WidthStatistics`),
its step count and mean loss, and the order in which updates are aggregated. What differs: float
rounding (convolutions become grouped ones, norms are summed in another order); the weights agree
with the sequential engine's to the tolerance tests/test_batched.py states. So a batched run is
another engine: ``client_step`` enters its identity (:func:`hasfl.config.run_config`).

Clients whose data run out earlier step in smaller groups; at each step clients are grouped by
their batch's size (a short last batch of an epoch). Only methods whose client is the plain
:class:`~hasfl.fl.client.LocalSGD` (registry ``plain_local_sgd``) can run batched: FedProx,
SCAFFOLD and FjORD change the step with hooks. An experiment, not adopted: on the CPU it is slower
(grouped convolutions in oneDNN); scripts/experiments/client_batching.py measures it against the
sequential engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hasfl.fl.client import ClientData, LocalResult, LocalSGD, OptimConfig

__all__ = ["BatchedRound", "check_batchable", "client_batches", "train_group"]


def check_batchable(method: str, client: LocalSGD) -> None:
    """Refuse, before any round, a method whose local step is not the plain shared optimiser."""
    if type(client) is not LocalSGD:
        raise ValueError(f"config key 'client_step' is 'batched', but method '{method}' trains with "
                         f"{type(client).__name__}, whose step has hooks the batched step does not run; "
                         f"use client_step: sequential for it")


def client_batches(data: ClientData, optim: OptimConfig, generator: torch.Generator, has_bn: bool) -> list[Tensor]:
    """The sample indices of each local step of one client, in order: :meth:`LocalSGD.train`'s batches
    (one permutation per epoch from ``generator``; a single-sample batch is skipped under batch norm)."""
    out: list[Tensor] = []
    bs = optim.batch_size
    for _ in range(optim.local_epochs):
        order = data.index[torch.randperm(data.n, generator=generator).to(data.index.device)]
        for start in range(0, data.n, bs):
            batch = order[start:start + bs]
            if has_bn and batch.numel() < 2:
                continue
            out.append(batch)
    return out


def train_group(module: nn.Module, starts: Sequence[Mapping[str, Tensor]], data: Sequence[ClientData],
                generators: Sequence[torch.Generator], optim: OptimConfig, lr: float, inputs: Callable[[Tensor], Tensor],
                autocast: Callable[[], AbstractContextManager[Any]]) -> list[tuple[dict[str, Tensor], LocalResult]]:
    """K local epochs of k same-width clients at once; client j starts from ``starts[j]`` (a state dict
    of ``module``'s width) and trains on ``data[j]`` with batches from ``generators[j]``. Returns each
    client's final state and :class:`LocalResult`, in order."""
    from torch.func import functional_call, grad_and_value, vmap

    k = len(starts)
    p_names = [n for n, _ in module.named_parameters()]
    b_names = [n for n, _ in module.named_buffers()]
    P = {n: torch.stack([s[n].detach() for s in starts]) for n in p_names}
    B = {n: torch.stack([s[n].detach() for s in starts]) for n in b_names}
    has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())
    steps = [client_batches(d, optim, g, has_bn) for d, g in zip(data, generators, strict=True)]
    module.train()

    def loss_fn(prm: dict[str, Tensor], buf: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        with autocast():
            return F.cross_entropy(functional_call(module, (prm, buf), (x,)), y)

    step_fn = vmap(grad_and_value(loss_fn))
    mom: dict[str, Tensor] = {n: torch.zeros_like(t) for n, t in P.items()} if optim.momentum else {}
    losses: list[list[Tensor]] = [[] for _ in range(k)]
    for s in range(max((len(b) for b in steps), default=0)):
        by_size: dict[int, list[int]] = {}
        for j in range(k):
            if s < len(steps[j]):
                by_size.setdefault(int(steps[j][s].numel()), []).append(j)
        for members in by_size.values():
            _step_members(members, k, s, P, B, mom, steps, data, inputs, step_fn, optim, lr, losses)
    out = []
    for j in range(k):
        state = {**{n: P[n][j] for n in p_names}, **{n: B[n][j] for n in b_names}}
        if not losses[j]:
            out.append((state, LocalResult(loss=float("nan"), steps=0, finite=True)))
            continue
        mean = float(torch.stack(losses[j]).mean())
        out.append((state, LocalResult(loss=mean, steps=len(losses[j]), finite=bool(np.isfinite(mean)))))
    return out


@torch.no_grad()
def _sgd(prm: dict[str, Tensor], grads: dict[str, Tensor], mom: dict[str, Tensor], first: bool,
         optim: OptimConfig, lr: float) -> dict[str, Tensor]:
    """:class:`SGDState`'s step for a stack of clients (dimension 0): per-client gradient-norm clipping,
    weight decay, momentum (the buffer is the gradient at the first step); returns the new momentum."""
    names = list(prm)
    g = [grads[n] for n in names]
    if optim.clip > 0:
        sq = torch.stack([t.flatten(1).square().sum(1) for t in g]).sum(0)  # (clients,)
        coef = torch.clamp(optim.clip / (sq.sqrt() + 1e-6), max=1.0)
        g = [t * coef.view(-1, *([1] * (t.dim() - 1))) for t in g]
    if optim.weight_decay:
        g = [t + optim.weight_decay * prm[n] for t, n in zip(g, names, strict=True)]
    if optim.momentum:
        step = g if first else [optim.momentum * mom[n] + t for t, n in zip(g, names, strict=True)]
        new_mom = dict(zip(names, step, strict=True))
    else:
        step, new_mom = g, {}
    for n, t in zip(names, step, strict=True):
        prm[n] = prm[n] - lr * t
    return new_mom


def _step_members(members: list[int], k: int, s: int, P: dict[str, Tensor], B: dict[str, Tensor],
                  mom: dict[str, Tensor], steps: list[list[Tensor]], data: Sequence[ClientData],
                  inputs: Callable[[Tensor], Tensor], step_fn: Any, optim: OptimConfig, lr: float,
                  losses: list[list[Tensor]]) -> None:
    """Step ``members`` (clients whose s-th batch has one size) together; the others keep their state."""
    whole = len(members) == k
    idx = None if whole else torch.tensor(members, device=next(iter(P.values())).device)

    def pick(stack: dict[str, Tensor]) -> dict[str, Tensor]:
        return dict(stack) if whole else {n: t.index_select(0, idx) for n, t in stack.items()}

    prm, buf = pick(P), pick(B)
    x = torch.stack([inputs(data[j].x[steps[j][s]]) for j in members])
    y = torch.stack([data[j].y[steps[j][s]] for j in members])
    grads, loss = step_fn(prm, buf, x, y)  # buf's batch-norm statistics move in place
    new_mom = _sgd(prm, grads, pick(mom) if mom else {}, s == 0, optim, lr)
    for stack, part in ((P, prm), (B, buf), (mom, new_mom)):
        for n, t in part.items():
            if whole:
                stack[n] = t
            else:
                stack[n].index_copy_(0, idx, t)
    for j, v in zip(members, loss.detach(), strict=True):
        losses[j].append(v)


@dataclass
class BatchedRound:
    """One round's local training by the batched step, handed to the engine client by client.

    :meth:`train` extracts every participant's sub-model as the engine does (window, batch-norm
    statistics of its width), groups the participants by width and trains each group at once;
    :meth:`result` then loads a client's trained state into the module the engine extracted for it."""

    results: dict[int, tuple[dict[str, Tensor], LocalResult]]

    @classmethod
    def train(cls, participants: Sequence[int], trained_widths: Sequence[float], extract: Callable[[int, float],
              nn.Module], data: Mapping[int, ClientData], generators: Mapping[int, torch.Generator],
              optim: OptimConfig, lr: float, inputs: Callable[[Tensor], Tensor],
              autocast: Callable[[], AbstractContextManager[Any]], width_key: Callable[[float], str]) -> BatchedRound:
        """``extract(i, p)`` returns client i's width-p module loaded from w(t) (the engine's lines 7-8)."""
        groups: dict[str, list[tuple[int, nn.Module, dict[str, Tensor]]]] = {}
        for i, p in zip(participants, trained_widths, strict=True):
            module = extract(i, p)
            start = {n: t.detach().clone() for n, t in module.state_dict().items()}
            groups.setdefault(width_key(p), []).append((i, module, start))
        results: dict[int, tuple[dict[str, Tensor], LocalResult]] = {}
        for members in groups.values():
            ids = [i for i, _, _ in members]
            trained = train_group(members[0][1], [s for _, _, s in members], [data[i] for i in ids],
                                  [generators[i] for i in ids], optim, lr, inputs, autocast)
            results.update(zip(ids, trained, strict=True))
        return cls(results)

    @torch.no_grad()
    def result(self, client: int, module: nn.Module) -> LocalResult:
        """Load client ``client``'s trained state into ``module`` (its width's); its local result."""
        state, res = self.results[client]
        for n, t in module.state_dict().items():
            t.copy_(state[n])
        return res
