"""FIARSE's rules (Wu et al., NeurIPS 2024; official code ``HarliWu/FIARSE`` at commit 281519c, directory
``fiarse/``): importance-aware unstructured sub-models, the masked layers' gradient and the server's average.
A method of the registry (:func:`fiarse`, issue 48); docs/decisions.md "FIARSE's rules" says what each rule is, how
this module matches it and what our shared protocol cannot reproduce. References ``file:line`` below are to that
commit.

* Threshold. A client of budget share ``s`` keeps the coordinates whose magnitude is at least tau, the k-th
  largest ``|theta|`` over every weight *and bias* of the masked (conv and linear) layers of the GLOBAL model,
  with ``k = int(numel * s)`` (``fiarse/model/resnet_masked.py:72-93``: ``torch.topk`` of the concatenated
  magnitudes, tau its last value; the vector is ``to_vector('param')``, lines 114-123, which takes each masked
  layer's weight followed by its bias, ``fiarse/model/model_utils.py:73-92, 135-154``). tau is fixed for the
  round: the server sets it once per participant on its copy of the global model (``fiarse/server.py:54-55``).
* Mask. Every forward pass of a masked layer recomputes ``|w| >= tau`` from the CURRENT weights with that fixed
  tau, for the weight and the bias alike (``model_utils.py:52-63, 107-125``). Ties at tau are kept, so more
  than k coordinates may be; nothing but the magnitude decides.
* Gradient. The official layers multiply the weight by the output of ``Bern`` (``model_utils.py:24-38``), whose
  forward returns a BOOL tensor. PyTorch does not differentiate through a custom Function's non-floating
  outputs, so ``Bern.backward`` is never called: the gradient the official code computes is the plain masked
  gradient, ``dL/dw = g * 1{|w| >= tau}`` (``g = dL/d(w * m)``), kept coordinates unscaled, dropped ones 0.
  Had ``Bern`` returned a float mask, its written backward (``2 tau / (|w| + tau)^2`` on kept coordinates,
  non-finite values set to 0, nothing for tau) would compose with ``w * m`` and ``abs`` into
  ``g * m * (1 + 2 tau |w| / (|w| + tau)^2)``. :class:`MaskedWeight` does either: ``"executed"`` (the default,
  what the official code computes) or ``"written"``.
* Aggregation. Each participant returns ``global - local`` for every entry of the state dict (``fiarse/
  worker.py:54-57``); the server sums them and counts, per coordinate, the participants whose delta is nonzero,
  divides (a plain count, no sample weights), maps 0/0 to 0 and steps ``global - lr_global * mean``
  (``lr_global`` 1.0 by default, ``fiarse/add_parser_arguments.py:6``); batch-norm running statistics are
  stepped without ``lr_global``; a NaN in the sums stops training (``fiarse/server.py:42-90``).
* Batch norm (``model_utils.py:205-217``, the README's ``BetaResNet18_sbn``): ``track_running_stats=False``, so
  the batch's own statistics in training and at test; affine; never masked and never in the threshold.

Coordinates held in a round (:func:`coverage_counts`) are the round-start masks of the participants; all of
them come from one global model, so they are nested by share.

The method (:func:`fiarse`): Uniform's allocation p_i = min(p, pmax_i) (``method_params.fiarse.p``: 0.5 is Uniform's
budget, 1.0 each client's own capacity, beside HeteroFL and FedRolex), turned into a parameter share, the width-p_i
sub-model's parameters over the full model's (:func:`parameter_shares`). Each participant trains the WHOLE model
(``p_trained`` = 1) under its mask (:class:`FiarseClient`): the threshold from the global model at the round's start,
the mask recomputed in every forward pass, the gradient :class:`MaskedWeight`'s. The shared optimiser's weight
decay and momentum would move every coordinate and so end the nonzero-delta count's meaning: the step is restricted
to the coordinates kept at that step (a dropped coordinate keeps its value; docs/decisions.md). The server averages
each coordinate over the participants whose delta there is nonzero (:class:`NonzeroMean`, a plain count). What a
participant pays: dense forward MACs of the full model (unstructured masks save none) and an upload of its kept
values with one int32 index each plus the unmasked entries (:meth:`FiarseClient.upload_mb`, at the round-start
share). The participation ledger records a participant's round-start mask as window ``masked`` with
``window_shift`` = the number of masked-layer coordinates it kept (ties included): the masks are nested by share, so
these counts give how many participants held each coordinate (:func:`coverage_from_kept`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.fl.client import LocalSGD, OptimConfig
from hasfl.fl.methods import Method, MethodContext
from hasfl.fl.policies import UniformPolicy
from hasfl.fl.server import ServerStep
from hasfl.models.cost import Cost
from hasfl.models.magnitude import (MASKED, budget_k, coverage_from_kept, mask, masked_numel, masked_parameters,
                                   parameter_shares, threshold)

__all__ = ["BN_BUFFERS", "FiarseClient", "FullModelUniform", "MaskedWeight", "NonzeroMean", "aggregate", "budget_k",
           "changed_counts", "coverage_counts", "coverage_from_kept", "fiarse", "mask", "masked", "masked_parameters",
           "parameter_shares", "threshold"]  # the magnitude rules live in hasfl.models.magnitude (the analysis reads them)

Gradient = Literal["executed", "written"]

#: Substrings of the state-dict names stepped without the server learning rate (``fiarse/server.py:83-86``)
BN_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def _written_factor(w: Tensor, tau: Tensor) -> Tensor:
    """``1 + |w| * r``, r = ``2 tau / (|w| + tau)^2`` with NaN and infinities set to 0 (``model_utils.py:35-36``)."""
    a = w.abs()
    r = torch.nan_to_num(2 * tau / (a + tau) ** 2, nan=0.0, posinf=0.0, neginf=0.0)
    return 1 + a * r


class MaskedWeight(torch.autograd.Function):
    """``w * 1{|w| >= tau}`` in forward; backward per ``gradient`` (module doc): ``"executed"`` gives
    ``g * m``, ``"written"`` gives ``g * m * (1 + 2 tau |w| / (|w| + tau)^2)``; no gradient for tau."""

    @staticmethod
    def forward(ctx: Any, w: Tensor, tau: Tensor, gradient: Gradient = "executed") -> Tensor:
        if gradient not in ("executed", "written"):
            raise ValueError(f"fiarse: gradient must be 'executed' or 'written', got {gradient!r}")
        tau = torch.as_tensor(tau, dtype=w.dtype, device=w.device)
        ctx.save_for_backward(w, tau)
        ctx.gradient = gradient
        return w * mask(w, tau)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, None, None]:
        w, tau = ctx.saved_tensors
        grad = g * mask(w, tau)
        if ctx.gradient == "written":
            grad = grad * _written_factor(w, tau)
        return grad, None, None


def masked(w: Tensor, tau: Tensor | float, gradient: Gradient = "executed") -> Tensor:
    """The effective weight a masked layer computes with (``model_utils.py:52-63, 107-125``); ``tau`` is the
    round's fixed threshold, the mask follows the current ``w``."""
    return MaskedWeight.apply(w, torch.as_tensor(tau), gradient)


def coverage_counts(weights: Mapping[str, Tensor], shares: Sequence[float]) -> dict[str, Tensor]:
    """Per coordinate of the masked entries ``weights`` (the global model's, e.g. :func:`masked_parameters`),
    how many of a round's participants (budget ``shares``) hold it at the start of the round: the number
    whose mask ``|theta| >= tau(share)`` keeps it (int64). Local training may drop a coordinate that drifts
    below tau, never add one; a count of the deltas that changed is :func:`changed_counts`."""
    tensors = list(weights.values())
    counts = {k: torch.zeros(w.shape, dtype=torch.int64, device=w.device) for k, w in weights.items()}
    for share in shares:
        tau = threshold(tensors, share)
        for k, w in weights.items():
            counts[k] += mask(w, tau)
    return counts


def changed_counts(global_state: Mapping[str, Tensor],
                   client_states: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    """Per coordinate of every entry, how many clients' deltas ``global - client`` are nonzero (the official
    divisor, ``fiarse/server.py:69``), int64."""
    counts = {k: torch.zeros(g.shape, dtype=torch.int64, device=g.device) for k, g in global_state.items()}
    for c in client_states:
        for k, g in global_state.items():
            counts[k] += g - c[k] != 0
    return counts


def _aggregate_entry(name: str, g: Tensor, clients: Sequence[Tensor], lr_global: float) -> Tensor:
    """One state-dict entry of :func:`aggregate`."""
    work = g if g.is_floating_point() else g.to(torch.float64)
    total = torch.zeros_like(work)
    count = torch.zeros_like(work)
    for c in clients:  # in participant order, as the official sums
        delta = work - c.to(work.dtype)
        total += delta
        count += delta != 0
    if torch.isnan(total).any():
        raise ValueError(f"fiarse: NaN in the summed updates of {name!r} (the official run stops here)")
    mean = torch.nan_to_num(total / count, nan=0.0, posinf=0.0, neginf=0.0)
    step = 1.0 if any(b in name for b in BN_BUFFERS) else float(lr_global)
    return (work - step * mean).to(g.dtype)


def aggregate(global_state: Mapping[str, Tensor], client_states: Sequence[Mapping[str, Tensor]],
              lr_global: float = 1.0) -> dict[str, Tensor]:
    """The next global state (``fiarse/server.py:42-90``): per coordinate, the plain mean of ``global - client``
    over the clients whose delta there is nonzero (no sample weights), 0 where none changed it, stepped with
    ``lr_global`` (batch-norm buffers :data:`BN_BUFFERS` with 1). Every entry of ``global_state`` is
    aggregated, the unmasked ones (batch norm) too; integer entries are computed in float64 and cast back
    (truncation, as the official ``load_state_dict`` copy). Raises on a NaN in the summed updates."""
    if not client_states:
        raise ValueError("fiarse: no client states to aggregate")
    return {k: _aggregate_entry(k, g, [c[k] for c in client_states], lr_global) for k, g in global_state.items()}


# ------------------------------------------------------------------------------------------------ the method
@dataclass(frozen=True)
class MaskedHolding:
    """What the participation ledger records of a FIARSE participant (``kind`` / ``shift`` as a window's): its
    round-start mask, by the number of masked-layer coordinates it kept."""

    kept: int
    kind: str = MASKED

    @property
    def shift(self) -> int:
        return self.kept


class FullModelUniform(UniformPolicy):
    """Uniform's allocation p_i = min(p, pmax_i); the module every participant trains is the whole model."""

    def trained_widths(self, participants: np.ndarray, widths: np.ndarray) -> np.ndarray:
        return np.ones_like(widths, dtype=np.float64)


class FiarseClient(LocalSGD):
    """A FIARSE participant: the whole model trained under its magnitude mask (module docstring)."""

    def __init__(self, optim: OptimConfig, inputs_fn: Any, share: Callable[[float], float], masked_numel: int,
                 other_numel: int, gradient: Gradient = "executed") -> None:
        super().__init__(optim, inputs_fn)
        if gradient not in ("executed", "written"):
            raise ValueError(f"method_params.fiarse.gradient is {gradient!r}; expected 'executed' or 'written'")
        self.share, self.gradient = share, gradient
        self.masked_numel, self.other_numel = int(masked_numel), int(other_numel)
        self.tau: Tensor | None = None
        self.kept = 0
        self._names: list[str] = []
        self._before: list[tuple[Tensor, Tensor, Tensor]] = []

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        """tau from the global model the participant receives (``fiarse/server.py:54-55``), fixed for the round."""
        weights = masked_parameters(model)
        self._names = list(weights)
        self.tau = threshold(list(weights.values()), self.share(p))
        self.kept = int(sum(int(mask(w, self.tau).sum()) for w in weights.values()))

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        """The forward pass with every masked layer's effective weight ``w * 1{|w| >= tau}``."""
        params = dict(model.named_parameters())
        swapped = {n: masked(params[n], self.tau, self.gradient) for n in self._names}
        return F.cross_entropy(torch.func.functional_call(model, swapped, (x,)), y)

    def after_backward(self, model: nn.Module) -> None:
        """Keep the dropped coordinates' values: the step is restricted to this step's mask."""
        params = dict(model.named_parameters())
        self._before = [(params[n], mask(params[n], self.tau), params[n].detach().clone()) for n in self._names]

    def after_step(self, model: nn.Module) -> None:
        with torch.no_grad():
            for w, kept, before in self._before:
                w.copy_(torch.where(kept, w, before))
        self._before = []

    def forward_macs(self, costs: Callable[[float], Cost], p: float, p_trained: float) -> float:
        """Dense forward MACs of the whole model: an unstructured mask saves none."""
        return float(costs(1.0).macs)

    def upload_mb(self, costs: Callable[[float], Cost], p: float, p_trained: float) -> float:
        """Its kept values (float32) with one int32 index each, at the share's budget, and the unmasked entries."""
        return (budget_k(self.masked_numel, self.share(p)) * 8 + self.other_numel * 4) / 1e6

    def held(self, window: Any) -> MaskedHolding:
        return MaskedHolding(self.kept)


class NonzeroMean(CoordinateAggregator):
    """``fiarse/server.py:42-90``: per coordinate, the plain mean of the deltas over the participants whose delta
    there is nonzero (no sample weights); 0 where none changed it."""

    def weight(self, n_samples: float) -> float:
        return 1.0

    def held(self, key: str, delta: Tensor) -> Tensor:
        return (delta != 0).to(torch.float32)


class FiarseServer(ServerStep):
    """FIARSE's server: the nonzero-delta count mean, stepped with lr_global = 1 (its default)."""

    def aggregator(self, global_state: Mapping[str, Tensor], keys: list[str]) -> CoordinateAggregator:
        return NonzeroMean(global_state, keys)


def fiarse(ctx: MethodContext) -> Method:
    """FIARSE: Uniform's widths p_i = min(p, pmax_i) as parameter shares, the whole model trained under each
    participant's magnitude mask, the nonzero-delta mean (module docstring)."""
    with torch.random.fork_rng(devices=[]):
        full = ctx.family.build(1.0)
    ranked = masked_numel(full)
    other = sum(int(q.numel()) for q in full.parameters()) - ranked
    client = FiarseClient(ctx.optim, ctx.inputs, parameter_shares(ctx.family), ranked, other,
                          str(ctx.params.get("gradient", "executed")))  # type: ignore[arg-type]
    return Method(FullModelUniform(ctx.pmax, ctx.params["p"]), client, server=FiarseServer())
