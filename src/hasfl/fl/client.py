"""Local training (paper Section 4.1, Algorithm 1 lines 6-15) and its method variants.

:class:`LocalSGD` is the shared local optimiser: SGD with momentum, weight decay,
gradient-norm clipping and a learning rate decayed per round, K local epochs over
the client's in-memory data in mini-batches drawn by index; optimiser state is
fresh every round. The baselines change exactly one hook each:

* :class:`FedProx` adds (mu / 2) ||w - w_global||^2 to the loss (Li et al. 2020).
* :class:`ScaffoldClient` corrects every gradient by c - c_i and updates the client's
  control variate with option II (Karimireddy et al. 2020), under plain SGD; the server
  half (:class:`hasfl.fl.server.ScaffoldServer`) owns the variates.
* :class:`FjordDistill` trains the client's largest width and distils it into the
  sampled width in the same step (ordered dropout with self-distillation,
  Horvath et al. 2021).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hasfl.fl.server import ScaffoldServer
from hasfl.models.bn import batch_statistics
from hasfl.models.cost import Cost
from hasfl.models.family import ModelFamily
from hasfl.models.slicing import SliceRule, region


@dataclass(frozen=True)
class OptimConfig:
    """Local optimiser settings of one dataset (config ``dataset_params.<d>.optim``)."""

    lr: float
    lr_decay: float
    local_epochs: int
    batch_size: int
    momentum: float
    weight_decay: float
    clip: float

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> OptimConfig:
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__})

    def lr_at(self, t: int) -> float:
        """Learning rate of round t: lr * decay^t."""
        return self.lr * self.lr_decay**t


@dataclass
class ClientData:
    """One client's train samples: indices into the dataset's train tensors."""

    client_id: int
    index: Tensor
    x: Tensor
    y: Tensor

    @property
    def n(self) -> int:
        return int(self.index.numel())


def client_data(partition: Any, bundle: Any) -> dict[int, ClientData]:
    """Every client's train samples from the data stage's ``partition`` table (indices into
    ``bundle``'s train tensors, on their device)."""
    rows = partition[partition["split"] == "train"]
    return {int(c): ClientData(int(c), torch.tensor(g["sample_index"].to_numpy(), device=bundle.train_x.device),
                               bundle.train_x, bundle.train_y)
            for c, g in rows.groupby("client_id", sort=True)}


@dataclass
class LocalResult:
    """What a client reports besides its parameters."""

    loss: float
    steps: int
    finite: bool


class LocalSGD:
    """The shared local optimiser; subclasses override one hook each."""

    def __init__(self, optim: OptimConfig, inputs_fn: Any, params: Mapping[str, Any] | None = None) -> None:
        self.optim = optim
        self.inputs = inputs_fn
        self.params = dict(params or {})
        # context of each forward pass + loss; the engine sets it from config ``precision``
        # (hasfl.fl.engine.Numerics.autocast); backward and the optimiser step run outside it
        self.autocast: Callable[[], AbstractContextManager[Any]] = nullcontext

    # --- hooks --------------------------------------------------------------
    def momentum(self) -> float:
        return self.optim.momentum

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        """Called before one client's local training (allocated width p, module width p_trained)."""

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(model(x), y)

    def after_backward(self, model: nn.Module) -> None:
        """Called between backward and the clipped optimiser step."""

    def after_step(self, model: nn.Module) -> None:
        """Called after each optimiser step."""

    def end_client(self, client: int, model: nn.Module, steps: int, lr: float) -> None:
        """Called after one client's local training."""

    def forward_macs(self, costs: Callable[[float], Cost], p: float, p_trained: float) -> float:
        """Forward multiply-accumulates per training sample (Table 1's count) of a client allocated
        ``p`` that trains a width-``p_trained`` module."""
        return float(costs(p_trained).macs)

    def upload_mb(self, costs: Callable[[float], Cost], p: float, p_trained: float) -> float:
        """What a client allocated ``p`` that trains a width-``p_trained`` module uploads (Table 1: one float32
        copy of the module)."""
        return float(costs(p_trained).upload_mb)

    def held(self, window: Any) -> Any:
        """What the participation ledger records of the coordinates the last client held (its ``kind`` and
        ``shift``): its window (:class:`hasfl.models.slicing.Window`), unless the method holds coordinates
        otherwise."""
        return window

    def run(self, client: int, model: nn.Module, data: ClientData, lr: float, generator: torch.Generator,
            p: float, p_trained: float) -> LocalResult:
        """One client's local update (Algorithm 1 lines 9-13) with the method's hooks around it."""
        self.begin_client(client, model, p, p_trained)
        result = self.train(model, data, lr, generator)
        self.end_client(client, model, result.steps, lr)
        return result

    # --- the loop -------------------------------------------------------------
    def train(self, model: nn.Module, data: ClientData, lr: float, generator: torch.Generator) -> LocalResult:
        """K local epochs of mini-batch SGD on ``data`` (Algorithm 1 lines 9-13)."""
        sgd = SGDState([q for q in model.parameters()], lr, self.momentum(), self.optim.weight_decay, self.optim.clip)
        has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
        model.train()
        losses: list[Tensor] = []
        bs = self.optim.batch_size
        for _ in range(self.optim.local_epochs):
            order = data.index[torch.randperm(data.n, generator=generator).to(data.index.device)]
            for start in range(0, data.n, bs):
                batch = order[start:start + bs]
                if has_bn and batch.numel() < 2:
                    continue  # batch norm cannot train on a single sample
                sgd.zero_grad()
                with self.autocast():
                    loss = self.loss(model, self.inputs(data.x[batch]), data.y[batch])
                loss.backward()
                self.after_backward(model)
                sgd.step()
                self.after_step(model)
                losses.append(loss.detach())
        if not losses:
            return LocalResult(loss=float("nan"), steps=0, finite=True)
        mean = float(torch.stack(losses).mean())
        return LocalResult(loss=mean, steps=len(losses), finite=bool(np.isfinite(mean)))


class SGDState:
    """torch.optim.SGD semantics (dampening 0, no Nesterov) with gradient-norm clipping first.

    g <- clip(g); g <- g + wd * w; b <- m * b + g (b = g at the first step); w <- w - lr * b.
    Written with foreach kernels: the same arithmetic as torch.optim.SGD without its
    per-step bookkeeping (and without importing torch._dynamo, seconds per job).
    """

    def __init__(self, params: list[Tensor], lr: float, momentum: float, weight_decay: float, clip: float) -> None:
        self.params, self.lr, self.momentum, self.wd, self.clip = params, lr, momentum, weight_decay, clip
        self.buf: list[Tensor] | None = None

    def zero_grad(self) -> None:
        for q in self.params:
            q.grad = None

    @torch.no_grad()
    def step(self) -> None:
        pairs = [(q, q.grad) for q in self.params if q.grad is not None]
        params, grads = [q for q, _ in pairs], [g for _, g in pairs]
        if self.clip > 0:
            total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            coef = torch.clamp(self.clip / (total + 1e-6), max=1.0)
            torch._foreach_mul_(grads, coef)
        if self.wd:
            torch._foreach_add_(grads, params, alpha=self.wd)
        step = grads
        if self.momentum:
            if self.buf is None:
                self.buf = [g.clone() for g in grads]
            else:
                torch._foreach_mul_(self.buf, self.momentum)
                torch._foreach_add_(self.buf, grads)
            step = self.buf
        torch._foreach_add_(params, step, alpha=-self.lr)


def add_to_grads(params: list[Tensor], terms: list[Tensor]) -> None:
    """grad <- grad + term for every parameter that has a gradient, in one foreach kernel."""
    pairs = [(q.grad, t) for q, t in zip(params, terms, strict=True) if q.grad is not None]
    torch._foreach_add_([g for g, _ in pairs], [t for _, t in pairs])


class FedProx(LocalSGD):
    """Local loss + (mu / 2) ||w - w_global||^2 on top of the shared optimiser.

    The term's gradient mu (w - w_global) is added to the gradient after backward with
    foreach kernels instead of through autograd (a handful of ops per step instead of
    several per parameter tensor, which made a GPU step 1.9x as long as a plain one).
    It is the autograd gradient to the bit: autograd forms (mu / 2) * (2 (w - w_global)),
    which rounds once to the same float as mu * (w - w_global), and adds it to the
    cross-entropy gradient. The reported loss includes the term's value.
    """

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        self._params = list(model.parameters())
        self._anchor = [q.detach().clone() for q in self._params]

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        mu = float(self.params["mu"])
        with torch.no_grad():
            diff = torch._foreach_sub(self._params, self._anchor)
            prox = torch.stack(torch._foreach_norm(diff)).square().sum()
            torch._foreach_mul_(diff, mu)
            self._pull = diff  # the term's gradient at these weights, added after backward
        return F.cross_entropy(model(x), y) + 0.5 * mu * prox

    def after_backward(self, model: nn.Module) -> None:
        add_to_grads(self._params, self._pull)


class ScaffoldClient(LocalSGD):
    """SCAFFOLD's client half, option II control variates, plain local SGD (momentum from method params).

    Local step: g <- g + c - c_i. After K steps: c_i+ = c_i - c + (x - y_i) / (K lr), handed to
    the server half (:class:`hasfl.fl.server.ScaffoldServer`), which owns c and every c_i.
    """

    def __init__(self, optim: OptimConfig, inputs_fn: Any, server: ScaffoldServer,
                 params: Mapping[str, Any] | None = None) -> None:
        super().__init__(optim, inputs_fn, params)
        self.server = server

    def momentum(self) -> float:
        return float(self.params.get("momentum", 0.0))

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        c, c_i = self.server.variates(client, model)
        names = [n for n, _ in model.named_parameters()]
        self._start = {n: q.detach().clone() for n, q in model.named_parameters()}
        self._params = list(model.parameters())
        self._corr = [c[n] - c_i[n] for n in names]

    def after_backward(self, model: nn.Module) -> None:
        add_to_grads(self._params, self._corr)  # g <- g + c - c_i

    def end_client(self, client: int, model: nn.Module, steps: int, lr: float) -> None:
        c, c_i = self.server.variates(client, model)
        scale = 1.0 / (max(1, steps) * lr)
        self.server.receive(client, {n: c_i[n] - c[n] + (self._start[n] - q.detach()) * scale
                                     for n, q in model.named_parameters()})


def relative_rule(rule: SliceRule, big_shape: torch.Size) -> SliceRule:
    """Re-base a global->small rule onto a larger sub-model tensor of shape ``big_shape``.

    Leading-prefix slices do not depend on the source size; a gate-block view
    ``(4, H, ...)`` becomes ``(4, H_big, ...)``.
    """
    if rule.view is None:
        return rule
    groups = rule.view[0]
    return SliceRule((groups, big_shape[0] // groups, *big_shape[1:]), rule.index)


class FjordDistill(LocalSGD):
    """FjORD: the client trains its largest width (pmax) and, in the same step, the
    sampled width p as a nested sub-network distilled from it.

    loss = CE(z_pmax, y) + KL(softmax(z_pmax).detach() || softmax(z_p)); if p = pmax, CE only.
    The client uploads its pmax-width update; the allocated (reported) width is p. Both
    widths are the policy's choice (:class:`hasfl.fl.policies.FjordPolicy`).
    """

    def __init__(self, optim: OptimConfig, inputs_fn: Any, family: ModelFamily,
                 params: Mapping[str, Any] | None = None) -> None:
        super().__init__(optim, inputs_fn, params)
        self.family = family
        # the distilled student normalises by batch statistics and keeps no running ones: its
        # parameters are views of the client's module, which alone reports statistics
        self._students: dict[tuple[str, str], tuple[nn.Module, dict[str, SliceRule]]] = {}

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        small, large = self.family.widths(p), self.family.widths(p_trained)
        self._student = None
        if small == large:
            return  # the sampled width is the trained width: plain cross-entropy
        key = (repr(small), repr(large))
        if key not in self._students:
            big = model.state_dict()
            rel = {k: relative_rule(r, big[k].shape) for k, r in self.family.slice_rules(p).items()}
            self._students[key] = (batch_statistics(self.family.build(p)), rel)
        student, rel = self._students[key]
        trained = dict(model.named_parameters())
        # the student's parameters are views of the trained module's, reshaped to its own shapes
        self._student = (student, [(k, trained[k], rel[k], q.shape) for k, q in student.named_parameters()])

    def forward_macs(self, costs: Callable[[float], Cost], p: float, p_trained: float) -> float:
        """The pmax-width forward pass plus, when the widths differ, the distilled student's."""
        own = float(costs(p_trained).macs)
        return own if self.family.widths(p) == self.family.widths(p_trained) else own + costs(p).macs

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        if self._student is None:
            return loss
        student, views = self._student
        tensors = {k: region(q, rule).reshape(shape) for k, q, rule, shape in views}
        z = torch.func.functional_call(student, tensors, (x,))
        kd = F.kl_div(F.log_softmax(z, dim=1), F.softmax(logits.detach(), dim=1), reduction="batchmean")
        return loss + kd
