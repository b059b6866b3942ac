"""Magnitude masks (FIARSE, Wu et al., NeurIPS 2024; official code ``HarliWu/FIARSE`` at 281519c): which coordinates a
budget share keeps of a model, shared by the method (:mod:`hasfl.fl.methods.fiarse`, which trains under them) and the
analysis (which evaluates and counts them). References ``file:line`` are to that commit.

* :func:`masked_parameters`: the entries ranked and masked -- weight then bias of every conv and linear layer
  (``fiarse/model/model_utils.py:73-92, 135-154``) and, our decision for a recurrent model (``fiarse/`` has none),
  every weight and bias of a recurrent layer (an LSTM's gate matrices are linear maps); batch norm and embeddings
  are neither ranked nor masked.
* :func:`threshold`: tau, the k-th largest ``|theta|`` over them all, k = :func:`budget_k`
  (``fiarse/model/resnet_masked.py:72-93``); :func:`mask`: ``|w| >= tau`` (ties kept).
* :func:`parameter_shares`: a width's budget as a share of the parameters (issue 48: FIARSE matched to a width by
  parameter share).
* :func:`coverage_from_kept`: how many of a round's participants held each ranked coordinate, from their masks'
  kept counts (the masks of one global model are nested by share).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from hasfl.models.family import ModelFamily
from hasfl.registry import MASKED_WINDOW

__all__ = ["MASKED", "budget_k", "coverage_from_kept", "mask", "masked_numel", "masked_parameters", "parameter_shares",
           "threshold"]

#: The participation ledger's ``window`` of a participant that holds a magnitude mask (FIARSE)
MASKED = MASKED_WINDOW


def budget_k(numel: int, share: float) -> int:
    """How many coordinates a share keeps before ties: ``int(numel * share)``, the float product truncated
    (``fiarse/model/resnet_masked.py:80``). The official ``topk`` has no k-th value for k = 0 (it fails there),
    nor for k > numel: both raise here."""
    k = int(int(numel) * float(share))
    if not 1 <= k <= numel:
        raise ValueError(f"fiarse: share {share} of {numel} coordinates keeps {k} (needs 1 <= k <= {numel})")
    return k


def threshold(weights: Sequence[Tensor], share: float) -> Tensor:
    """tau: the k-th largest ``|w|`` over all of ``weights`` together, counted with multiplicity, k =
    :func:`budget_k` of their total size (``fiarse/model/resnet_masked.py:72-83, 114-123``). A 0-d tensor,
    detached (the official tau carries no gradient: ``model_utils.py:38`` returns None for it)."""
    with torch.no_grad():
        scores = torch.cat([w.detach().reshape(-1).abs() for w in weights])
        k = budget_k(scores.numel(), share)
        # the k-th largest is the (n - k + 1)-th smallest
        return torch.kthvalue(scores, scores.numel() - k + 1).values


def mask(w: Tensor, tau: Tensor | float) -> Tensor:
    """The coordinates kept: ``|w| >= tau`` (ties kept; ``fiarse/model/model_utils.py:30, 57``)."""
    return w.detach().abs() >= tau


def masked_parameters(model: nn.Module) -> dict[str, Tensor]:
    """The entries FIARSE ranks and masks: weight then bias of every conv and linear layer, in module order
    (``resnet_masked.py:114-123``, ``model_utils.py:73-92, 135-154``), and every parameter of a recurrent layer (our
    decision: the module docstring); batch norm, embeddings and the rest are left out."""
    out: dict[str, Tensor] = {}
    for name, module in model.named_modules():
        if isinstance(module, (nn.Linear, nn.modules.conv._ConvNd)):
            for attr in ("weight", "bias"):
                p = getattr(module, attr, None)
                if p is not None:
                    out[f"{name}.{attr}" if name else attr] = p
        elif isinstance(module, nn.RNNBase):  # our decision: the recurrent layer's matrices and biases, in its order
            for attr, p in module.named_parameters(recurse=False):
                out[f"{name}.{attr}" if name else attr] = p
    return out


def masked_numel(model: nn.Module) -> int:
    """How many coordinates :func:`masked_parameters` holds."""
    return sum(int(w.numel()) for w in masked_parameters(model).values())


def parameter_shares(family: ModelFamily) -> Callable[[float], float]:
    """share(p): the width-p sub-model's parameters over the full model's (issue 48: FIARSE matched to a width by
    parameter share). Counted without touching torch's random stream, once per physical width."""
    cache: dict[str, float] = {}

    def params(p: float) -> int:
        with torch.random.fork_rng(devices=[]):
            return int(family.cost(p).params)

    full = params(1.0)

    def share(p: float) -> float:
        key = repr(family.widths(p))
        if key not in cache:
            cache[key] = params(p) / full
        return cache[key]

    return share


def coverage_from_kept(kept: Sequence[int], numel: int) -> np.ndarray:
    """How many of a round's participants held each masked-layer coordinate, as a histogram: entry ``j`` is the
    number of coordinates held by exactly ``j`` participants, from the ledger's kept counts (the masks are nested
    by share: the coordinates the m-th largest mask keeps are held by at least m participants)."""
    ordered = sorted((int(k) for k in kept), reverse=True)
    hist = np.zeros(len(ordered) + 1, dtype=np.int64)
    at_least = [int(numel)] + ordered  # held by >= 0, >= 1, >= 2, ... participants
    for j in range(len(ordered) + 1):
        hist[j] = at_least[j] - (at_least[j + 1] if j + 1 < len(at_least) else 0)
    return hist
