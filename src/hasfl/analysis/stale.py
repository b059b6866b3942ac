"""Coordinates nobody trains after the warm-up (Section 4.3, Proposition 3).

Algorithm 1 allocates ``p_i = pmax_i`` until the first adaptation round ``t0`` (config
``hasfl.warmup``), so under ``hasfl_nocov`` the top-tier clients first train the outer
channels and then, once Eq. 6 caps every client below full width, abandon them. Those
coordinates are not "at their random initialization" (Section 4.3's wording); they are
*stale*: trained during the warm-up, frozen since. For every run of the preset:

* ``p_hi_after_t0`` = max over clients of ``p_max_trained_after_warmup`` (run
  clients.parquet): the largest width any participant trained and uploaded in a round
  ``t > t0``. Nested masks (Algorithm 2) make the width-``p_hi_after_t0`` mask the union
  of every mask used after ``t0``, so a coordinate outside it was trained by no one.
* The run is *capped after t0* when ``p_hi_after_t0 < 1``. Then (F5, the argument of
  Proposition 3 started at ``t0`` instead of 0) every such coordinate must be equal in
  ``warmup.pt`` (the global state at the end of round ``t0``) and ``final.pt``.
* ``frac_stale_trained_before_t0``: the share of those coordinates that differ between
  ``init.pt`` and ``warmup.pt`` -- trained during the warm-up, hence not "at their random
  initialization".
* For capped runs, Table 4b: test accuracy of the full final model, of the same model
  with the stale coordinates reset to ``init.pt``, and of its own sub-model at width
  ``p_hi_after_t0`` (the stale coordinates dropped), batch norm evaluating as the run's
  ``model.bn_stats`` says (per width by default: :mod:`hasfl.models.bn`).

Reads only run files and the dataset (through :func:`hasfl.data.load_dataset`); the
evaluation is written here (full test set, ``model.eval()``, batches) so that the
analysis never imports the training engine.
"""

from __future__ import annotations

import hashlib
import math
import weakref
from collections.abc import Mapping
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from hasfl.analysis.coverage import check_shapes
from hasfl.data.base import DatasetBundle
from hasfl.models import coverage_mask
from hasfl.models.bn import model_at
from hasfl.models.family import ModelFamily

__all__ = [
    "AFTER_WARMUP_COLUMN",
    "COLUMNS",
    "CPU_EVAL_BATCH",
    "GPU_EVAL_BATCH",
    "evaluate_accuracy",
    "model_signature",
    "frozen_since",
    "max_trained_width_after_warmup",
    "reset_state",
    "stale_masks",
    "stale_row",
]

#: clients.parquet column of the engine contract: the largest width a client trained in rounds t > t0.
AFTER_WARMUP_COLUMN = "p_max_trained_after_warmup"

COLUMNS = ["dataset", "method", "seed", "status", "t0", "p_hi_after_t0", "capped_after_t0", "n_coords", "n_stale",
           "frac_stale", "n_stale_changed", "max_abs_change_stale", "frozen_since_t0", "frac_stale_trained_before_t0",
           "acc_logged_pct",
           "acc_full_pct", "acc_reset_pct", "acc_sub_pct"]


def max_trained_width_after_warmup(clients: pd.DataFrame, source: str = "clients.parquet") -> float:
    """``p_hi_after_t0``: the largest width any client trained and uploaded after round t0.

    Raises:
        ValueError: naming ``source`` and the column when clients.parquet predates the
            engine contract (no ``p_max_trained_after_warmup``).
    """
    if AFTER_WARMUP_COLUMN not in clients.columns:
        raise ValueError(f"table4b: '{source}' lacks the column '{AFTER_WARMUP_COLUMN}' (the largest width each "
                         "client trained after the warm-up round t0); the run predates that column -- "
                         "rerun its training job")
    v = pd.to_numeric(clients[AFTER_WARMUP_COLUMN], errors="coerce")
    return float(v.max()) if v.notna().any() else 0.0


def stale_masks(state: Mapping[str, Tensor], family: ModelFamily, p: float) -> dict[str, Tensor]:
    """True on the float coordinates outside every width-``p`` slice (all of them when p <= 0, none when p >= 1)."""
    keys = [k for k in sorted(state) if state[k].is_floating_point()]
    if p >= 1.0:
        return {k: torch.zeros(state[k].shape, dtype=torch.bool) for k in keys}
    if p <= 0.0:
        return {k: torch.ones(state[k].shape, dtype=torch.bool) for k in keys}
    rules = family.slice_rules(p)
    missing = [k for k in keys if k not in rules]
    if missing:
        raise ValueError(f"table4b: the model family has no slice rule for {missing}; wrong model config?")
    covered = coverage_mask({k: state[k] for k in keys}, {k: rules[k] for k in keys})
    return {k: ~m for k, m in covered.items()}


def frozen_since(before: Mapping[str, Tensor], after: Mapping[str, Tensor], masks: Mapping[str, Tensor],
                 atol: float = 0.0) -> dict[str, Any]:
    """Whether every masked coordinate kept its value from ``before`` to ``after`` (|change| <= atol; NaN = moved)."""
    if set(before) != set(after):
        raise ValueError(f"table4b: the two states have different keys: {sorted(set(before) ^ set(after))}")
    n = n_stale = n_changed = 0
    max_change = 0.0
    for k, m in masks.items():
        a, b = before[k].detach().double(), after[k].detach().double()
        if a.shape != b.shape:
            raise ValueError(f"table4b: '{k}' has shape {tuple(a.shape)} before but {tuple(b.shape)} after")
        change = (b - a).abs()
        n += a.numel()
        n_stale += int(m.sum())
        n_changed += int((~(change <= atol) & m).sum())
        if bool(m.any()):
            sel = change[m]
            max_change = math.nan if bool(torch.isnan(sel).any()) else max(max_change, float(sel.max()))
    return {"n_coords": n, "n_stale": n_stale, "frac_stale": n_stale / n if n else math.nan,
            "n_stale_changed": n_changed, "max_abs_change_stale": max_change if n_stale else math.nan,
            "frozen_since_t0": n_changed == 0}


def reset_state(final: Mapping[str, Tensor], init: Mapping[str, Tensor], masks: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``final`` with the masked coordinates replaced by their ``init`` values (other keys untouched)."""
    out = {k: v.detach().clone() for k, v in final.items()}
    for k, m in masks.items():
        out[k] = torch.where(m, init[k].to(out[k].dtype), out[k])
    return out


#: Correct counts already computed in this process, per test set (the bundle) and per model content and batch size
#: (:func:`model_signature`): one run's tables evaluate some models alike (the full model under the run's own rule in
#: the batch-norm sensitivity and in Table 4b, a width-1 sub-model), and each is computed once.
_COUNTS: dict[int, tuple[weakref.ref[Any], dict[tuple[str, int], int]]] = {}


def model_signature(model: nn.Module) -> str:
    """sha256 of what a forward pass of ``model`` in eval mode depends on: its modules as printed (the layers, their
    sizes and batch-norm settings, running statistics or not) and every tensor of its state (name, dtype, shape,
    bytes). Equal signatures, equal logits on equal inputs in equal batches (one thread, the same process)."""
    h = hashlib.sha256(repr(model).encode())
    for k, v in model.state_dict().items():
        t = v.detach().cpu().contiguous().reshape(-1)
        h.update(f"{k}|{t.dtype}|{tuple(v.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


#: Test batches where the batch size is a speed knob only (every batch-norm mode but ``batch``, whose statistics are
#: the batch's own): on the CPU (the batches every CPU evaluation has used) and on a GPU (the test set in a few large
#: batches; a GPU's counts are keyed by its device class, :func:`hasfl.analysis.per_run.base.evaluation_device`).
CPU_EVAL_BATCH = 512
GPU_EVAL_BATCH = 8192


@torch.inference_mode()
def evaluate_accuracy(model: nn.Module, bundle: DatasetBundle, batch_size: int | None = None,
                      device: str = "cpu") -> float:
    """Top-1 accuracy of ``model`` on the full test set of ``bundle`` (eval mode, batches of ``batch_size``; None:
    :data:`CPU_EVAL_BATCH` on the CPU, :data:`GPU_EVAL_BATCH` on a GPU), computed on ``device`` (the model is moved
    there). A model of the same content evaluated before in this process on the same bundle, batch size and device is
    not evaluated again (:func:`model_signature`): the count is the one its forward passes gave."""
    batch_size = int(batch_size or (CPU_EVAL_BATCH if device == "cpu" else GPU_EVAL_BATCH))
    model.eval()
    n = int(len(bundle.test_y))
    if n == 0:
        return math.nan
    held = _COUNTS.get(id(bundle))
    if held is None or held[0]() is not bundle:  # another bundle at a reused address: a new test set
        held = _COUNTS[id(bundle)] = (weakref.ref(bundle), {})
    seen = held[1]
    key = (model_signature(model), batch_size, device)
    if key not in seen:
        model.to(device)
        correct = 0
        for s in range(0, n, batch_size):
            logits = model(bundle.inputs(bundle.test_x[s:s + batch_size]).to(device))
            correct += int((logits.argmax(1).cpu() == bundle.test_y[s:s + batch_size]).sum())
        seen[key] = correct
    return seen[key] / n


def _accuracy_pct(family: ModelFamily, p: float, state: Mapping[str, Tensor], bundle: DatasetBundle,
                  bn_mode: str, device: str = "cpu") -> float:
    return 100.0 * evaluate_accuracy(model_at(family, p, state, bn_mode), bundle, device=device)


def stale_row(*, init: Mapping[str, Tensor], warmup: Mapping[str, Tensor], final: Mapping[str, Tensor],
              family: ModelFamily, p_hi_after_t0: float, bundle: DatasetBundle | None, evaluate: bool,
              atol: float = 0.0, final_bn: Mapping[str, Tensor] | None = None,
              bn_mode: str = "per_width", device: str = "cpu") -> dict[str, Any]:
    """One Table 4b row (without the run's identity): the F5 check from warm-up to final and, when the run
    is capped after t0 and ``evaluate`` is set, the three accuracies (percent, computed on ``device``), batch norm
    evaluating as ``bn_mode`` says with the statistics per width and mixed of ``final_bn`` (final.pt's extra keys)."""
    check_shapes(init, family)
    for name, st in (("warmup.pt", warmup), ("final.pt", final)):
        if set(st) != set(init):
            raise ValueError(f"table4b: {name} and init.pt have different keys: {sorted(set(st) ^ set(init))}")
    capped = bool(p_hi_after_t0 < 1.0)
    masks = stale_masks(init, family, p_hi_after_t0)
    row: dict[str, Any] = {"p_hi_after_t0": float(p_hi_after_t0), "capped_after_t0": capped,
                           **frozen_since(warmup, final, masks, atol)}
    before = frozen_since(init, warmup, masks, 0.0)  # which stale coordinates had left init.pt by t0
    row["frac_stale_trained_before_t0"] = (before["n_stale_changed"] / before["n_stale"] if before["n_stale"]
                                           else math.nan)
    row.update(acc_full_pct=math.nan, acc_reset_pct=math.nan, acc_sub_pct=math.nan)
    if capped and evaluate:
        if bundle is None:
            raise ValueError("table4b: a capped run needs the dataset to evaluate its models")
        extra = dict(final_bn or {})
        row["acc_full_pct"] = _accuracy_pct(family, 1.0, {**final, **extra}, bundle, bn_mode, device)
        row["acc_reset_pct"] = _accuracy_pct(family, 1.0, {**reset_state(final, init, masks), **extra}, bundle,
                                             bn_mode, device)
        if p_hi_after_t0 > 0.0:
            row["acc_sub_pct"] = _accuracy_pct(family, p_hi_after_t0, {**final, **extra}, bundle, bn_mode, device)
    return row
