"""Batch-norm statistics of nested sub-models: one set per width, and the evaluation modes.

A width-``p`` sub-model of a CNN has BN layers of ``ceil(p * C)`` channels. Which running
mean / variance such a layer normalises with at test time is ``dataset_params.<d>.model.bn_stats``
(docs/decisions.md "Batch-norm statistics under sub-models"):

* ``per_width`` (default): every distinct channel count ``c`` of a BN layer has its own running
  statistics, updated only by the clients that trained at ``c`` (FjORD's layers keep one set per
  width with shared affine parameters: Flower ``baselines/fjord``, ``od/layers/batch_norm.py``).
  The full count ``C`` is the global model's own buffers; the others live beside them in the
  global state under :data:`WIDTH_PREFIX` keys.
* ``mixed``: one full-size set, sliced with the channels and averaged coordinate-wise over every
  client whose sub-model holds the channel, whatever its width (this project's first choice;
  statistics measured inside sub-models of different widths are mixed). Kept beside the
  per-width sets under :data:`MIXED_PREFIX` keys once any client trains below full width.
* ``batch``: no running statistics; BN normalises with the test batch's own statistics.

Both running modes are tracked in every run (they change no parameter: BN running statistics
never enter training), so a run can be evaluated under any of them afterwards
(:func:`state_for_mode`). This module only reads and writes state dicts; the engine's
bookkeeping is :mod:`hasfl.fl.bn_stats`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn

from hasfl.models.family import ModelFamily

__all__ = [
    "BN_MODES",
    "EXTRA_PREFIXES",
    "MIXED_PREFIX",
    "RUNNING_MODES",
    "STATS",
    "WIDTH_PREFIX",
    "batch_statistics",
    "bn_layers",
    "model_at",
    "check_mode",
    "counts_key",
    "mixed_key",
    "resolve_count",
    "split_state",
    "state_for_mode",
    "trained_counts",
    "width_key",
]

#: config values of ``model.bn_stats``
BN_MODES = ("per_width", "mixed", "batch")
#: the modes that keep running statistics (a run trained under either can be evaluated under both)
RUNNING_MODES = ("per_width", "mixed")
WIDTH_PREFIX = "bn_width."
MIXED_PREFIX = "bn_mixed."
EXTRA_PREFIXES = (WIDTH_PREFIX, MIXED_PREFIX)
STATS = ("running_mean", "running_var")


def check_mode(mode: str, where: str = "model.bn_stats") -> str:
    """``mode`` if it is one of :data:`BN_MODES`; else a ValueError naming ``where``."""
    if mode == "running":
        raise ValueError(f"{where}: 'running' was renamed 'mixed' (statistics averaged across widths); the "
                         "default is now 'per_width' (docs/decisions.md \"Batch-norm statistics under sub-models\")")
    if mode not in BN_MODES:
        raise ValueError(f"{where} must be one of {', '.join(BN_MODES)}, got {mode!r}")
    return mode


def width_key(layer: str, count: int, stat: str) -> str:
    """Global-state key of the width-``count`` statistic ``stat`` of BN layer ``layer``."""
    return f"{WIDTH_PREFIX}{layer}.{int(count)}.{stat}"


def counts_key(layer: str) -> str:
    """Global-state key of the channel counts of ``layer`` that clients trained at (int64 tensor)."""
    return f"{WIDTH_PREFIX}{layer}.counts"


def mixed_key(layer: str, stat: str) -> str:
    """Global-state key of the full-size mixed statistic ``stat`` of BN layer ``layer``."""
    return f"{MIXED_PREFIX}{layer}.{stat}"


def bn_layers(model: nn.Module) -> dict[str, int]:
    """State-dict prefix -> channel count of every BN layer of ``model`` that tracks running statistics."""
    return {name: int(m.num_features) for name, m in model.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats}


def split_state(state: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """(the model's own state dict, the extra BN statistics) of a saved global state."""
    model = {k: v for k, v in state.items() if not k.startswith(EXTRA_PREFIXES)}
    extra = {k: v for k, v in state.items() if k.startswith(EXTRA_PREFIXES)}
    return model, extra


def resolve_count(count: int, trained: list[int]) -> int | None:
    """Which trained width's statistics a layer of ``count`` channels uses in ``per_width`` mode.

    ``count`` itself when trained; else the smallest trained count above it (its leading channels);
    else the widest trained count below it (its channels; initial values for the rest); None when
    nothing was trained at that layer.
    """
    if count in trained:
        return count
    above = [c for c in trained if c > count]
    if above:
        return min(above)
    below = [c for c in trained if c < count]
    return max(below) if below else None


def _stats_at(state: Mapping[str, Tensor], extra: Mapping[str, Tensor], layer: str, full: int,
              count: int) -> tuple[Tensor, Tensor] | None:
    """(mean, var) of the width-``count`` set of ``layer`` (full count ``full``), or None if absent."""
    if count == full:
        return state[f"{layer}.running_mean"], state[f"{layer}.running_var"]
    k = width_key(layer, count, "running_mean")
    if k not in extra:
        return None
    return extra[k], extra[width_key(layer, count, "running_var")]


def trained_counts(extra: Mapping[str, Tensor], layer: str, full: int) -> list[int]:
    """Channel counts of ``layer`` that some client trained at. A state without per-width keys is one
    whose clients all trained at full width (the keys are written once any trains below it)."""
    k = counts_key(layer)
    if k not in extra:
        return [full]
    return [int(c) for c in extra[k].tolist()]


def state_for_mode(state: Mapping[str, Tensor], family: ModelFamily, p: float, mode: str) -> dict[str, Tensor]:
    """The width-``p`` state dict of a saved global state (model keys + extra BN keys), with every BN
    layer's running statistics those of ``mode`` (``per_width`` or ``mixed``; see the module doc)."""
    if mode not in RUNNING_MODES:
        raise ValueError(f"state_for_mode: mode must be one of {RUNNING_MODES}, got {mode!r}")
    model, extra = split_state(state)
    sub = dict(model) if p >= 1.0 else family.extract(model, p)  # tensors are replaced below, never written
    for layer, full in _layer_counts(family).items():
        if f"{layer}.running_mean" not in sub:
            continue
        count = int(sub[f"{layer}.running_mean"].numel())
        if mode == "mixed":
            src = (extra.get(mixed_key(layer, "running_mean")), extra.get(mixed_key(layer, "running_var")))
            if src[0] is not None:
                sub[f"{layer}.running_mean"] = src[0][:count].clone()
                sub[f"{layer}.running_var"] = src[1][:count].clone()
            continue
        use = resolve_count(count, trained_counts(extra, layer, full))
        if use is None or use == count == full:
            continue
        stats = _stats_at(model, extra, layer, full, use)
        if stats is None:
            raise ValueError(f"bn statistics: '{counts_key(layer)}' lists width {use} but the state has no "
                             f"'{width_key(layer, use, 'running_mean')}'")
        mean, var = torch.zeros(count, dtype=stats[0].dtype), torch.ones(count, dtype=stats[1].dtype)
        # a set of ``use`` entries is in the sub-model's coordinates (nested windows); a full-size one in global
        # channel coordinates (rolling windows, hasfl.fl.bn_stats), so it holds every channel asked for
        k = count if stats[0].numel() == full else min(count, use)
        mean[:k], var[:k] = stats[0][:k], stats[1][:k]
        sub[f"{layer}.running_mean"], sub[f"{layer}.running_var"] = mean, var
    return sub


def _layer_counts(family: ModelFamily) -> dict[str, int]:
    cached: dict[str, int] | None = getattr(family, "_bn_layer_counts", None)
    if cached is None:
        with torch.random.fork_rng(devices=[]):
            cached = bn_layers(family.build(1.0))
        family._bn_layer_counts = cached  # type: ignore[attr-defined]
    return cached


def model_at(family: ModelFamily, p: float, state: Mapping[str, Tensor], mode: str) -> nn.Module:
    """The width-``p`` model of a saved global state (model keys + extra BN keys), its batch norm
    evaluating as ``mode`` says: the running statistics of ``per_width`` / ``mixed``
    (:func:`state_for_mode`), or the batch's own (``batch``; a run trained without running statistics
    has only this mode). A model without batch norm is the same model in every mode."""
    check_mode(mode, "bn mode")
    own, _ = split_state(state)
    has_running = any(k.endswith(".running_mean") for k in own)
    if mode in RUNNING_MODES and not has_running and _has_batch_norm(family):
        raise ValueError(f"bn mode {mode!r}: the state has no running statistics (trained with bn_stats: batch); "
                         "only 'batch' applies")
    if not has_running:
        model = family.build(p)
        model.load_state_dict(own if p >= 1.0 else family.extract(own, p))
        return model
    model = family.build(p)
    if not bn_layers(model):
        raise ValueError("bn mode: the model family builds no running statistics but the state has them; "
                         "build the family with the run's model.bn_stats")
    model.load_state_dict(state_for_mode(state, family, p, mode if mode in RUNNING_MODES else "per_width"))
    return batch_statistics(model) if mode == "batch" else model


def _has_batch_norm(family: ModelFamily) -> bool:
    with torch.random.fork_rng(devices=[]):
        return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in family.build(1.0).modules())


def batch_statistics(model: nn.Module) -> nn.Module:
    """``model`` with every BN layer normalising by the batch's own statistics (``batch`` mode):
    running statistics dropped, so eval mode uses batch statistics too."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.track_running_stats = False
            m.running_mean = m.running_var = m.num_batches_tracked = None
    return model
