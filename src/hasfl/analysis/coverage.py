"""Proposition 3 (Section 3.3): coordinates no client ever trains stay at initialization.

The masks of Algorithm 2 are nested (p <= p' implies m_p is a subset of m_p'), so the
union of every mask used in a run is the mask at the run's largest trained width

    p_hi = max over clients of ``p_max_trained``   (run clients.parquet)

(``p_max_trained`` is the width of the module a client actually trained and uploaded;
it equals the allocated width for every method but FjORD; ``p_max_allocated`` is the
fallback for run files without it). A coordinate outside that mask was covered by no
participant in any round. For each run we count those coordinates and check, against
init.pt / final.pt, whether every one of them still equals its initial value. The
statement is exact for every float tensor of the state dict (parameters and
BatchNorm running statistics, all of which are sliced and aggregated with their
channels); integer buffers are never aggregated and are skipped.

A run that diverged (run.json status, or non-finite values in a state it saved) or never trained
a round after the warm-up round t0 = ``hasfl.warmup`` cannot show Proposition 3: it is *left out*
of this table's display, of Table 4b's and of F5 (:func:`left_out_reason`). Its row stays in the
Parquet file with the reason as its ``status`` (every other row: ``completed``), so F5 reads it from
the table and names it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from hasfl.models import coverage_mask
from hasfl.models.bn import split_state
from hasfl.models.family import ModelFamily

__all__ = ["COLUMNS", "COMPLETED", "check_shapes", "left_out_reason", "load_state", "max_trained_width",
           "non_finite", "prop3_run"]

#: The status of a run these tables (and F5) read; any other status is the reason it is left out.
COMPLETED = "completed"

COLUMNS = ["dataset", "method", "seed", "status", "p_hi", "capped", "n_coords", "n_never_covered",
           "frac_never_covered", "n_never_covered_changed", "max_abs_change_never_covered", "prop3_holds",
           "n_covered_changed", "frac_covered_changed"]


def max_trained_width(clients: pd.DataFrame) -> float:
    """p_hi: the largest width any client trained in the run (see the module docstring).

    Raises:
        ValueError: when the clients table has neither ``p_max_trained`` nor ``p_max_allocated``.
    """
    for col in ("p_max_trained", "p_max_allocated"):
        if col in clients.columns:
            return float(clients[col].max())
    raise ValueError("prop3: clients.parquet lacks the column 'p_max_trained' (or 'p_max_allocated'): the largest "
                     "width each client trained is needed to know which coordinates were never covered")


def prop3_run(init: Mapping[str, Tensor], final: Mapping[str, Tensor], family: ModelFamily, p_hi: float,
              atol: float = 0.0) -> dict[str, Any]:
    """Never-covered coordinates of one run and whether they all kept their initial value.

    ``prop3_holds`` is True when every never-covered coordinate satisfies
    ``|final - init| <= atol`` (vacuously True when there are none); a NaN change counts
    as changed.
    """
    if set(init) != set(final):
        raise ValueError(f"prop3: init.pt and final.pt have different keys: {sorted(set(init) ^ set(final))}")
    keys = [k for k in sorted(init) if init[k].is_floating_point()]
    check_shapes(init, family)
    if p_hi <= 0.0:  # no client ever trained: nothing was covered
        masks = {k: torch.zeros(init[k].shape, dtype=torch.bool) for k in keys}
    elif p_hi >= 1.0:
        masks = {k: torch.ones(init[k].shape, dtype=torch.bool) for k in keys}
    else:
        rules = family.slice_rules(p_hi)
        missing = [k for k in keys if k not in rules]
        if missing:
            raise ValueError(f"prop3: the model family has no slice rule for {missing}; wrong model config?")
        masks = coverage_mask({k: init[k] for k in keys}, {k: rules[k] for k in keys})
    n = n_never = n_never_changed = n_cov_changed = 0
    max_change = 0.0
    for k in keys:
        a, b = init[k].detach().double(), final[k].detach().double()
        if a.shape != b.shape:
            raise ValueError(f"prop3: '{k}' has shape {tuple(a.shape)} in init.pt but {tuple(b.shape)} in final.pt")
        change = (b - a).abs()
        changed = ~(change <= atol)  # NaN counts as changed
        never = ~masks[k]
        n += a.numel()
        n_never += int(never.sum())
        n_never_changed += int((changed & never).sum())
        n_cov_changed += int((changed & ~never).sum())
        if bool(never.any()):
            m = change[never]
            max_change = math.nan if bool(torch.isnan(m).any()) else max(max_change, float(m.max()))
    n_cov = n - n_never
    return {
        "p_hi": float(p_hi),
        "capped": bool(p_hi < 1.0),
        "n_coords": n,
        "n_never_covered": n_never,
        "frac_never_covered": n_never / n if n else math.nan,
        "n_never_covered_changed": n_never_changed,
        "max_abs_change_never_covered": max_change if n_never else math.nan,
        "prop3_holds": n_never_changed == 0,
        "n_covered_changed": n_cov_changed,
        "frac_covered_changed": n_cov_changed / n_cov if n_cov else math.nan,
    }


def non_finite(states: Mapping[str, Mapping[str, Tensor]]) -> list[str]:
    """The names (e.g. ``final.pt``) of the ``states`` with a NaN or infinite float value."""
    return [name for name, st in states.items()
            if any(v.is_floating_point() and not bool(torch.isfinite(v).all()) for v in st.values())]


def left_out_reason(summary: Mapping[str, Any], *, bad_files: Sequence[str] = (),
                    trained_after_t0: bool | None = None) -> str | None:
    """Why a run cannot show Proposition 3 (it is left out of its tables' display and of F5), else None.

    ``summary`` is run.json: a ``status`` other than completed (``diverged``: the loss or the
    parameters became non-finite, in round ``diverged_round``); or fewer than ``t0 + 2`` rounds
    (``rounds_completed``; rounds 0 .. t0 are the warm-up, so no round after t0 = ``hasfl.warmup``
    was trained: warmup.pt is final.pt and every coordinate looks "untrained after t0"). Where
    run.json lacks ``rounds_completed``, ``trained_after_t0`` (whether any client trained after t0)
    decides. ``bad_files``: saved states with non-finite values (:func:`non_finite`), a divergence
    the engine's flag did not see; a NaN never counts as a moved coordinate.
    """
    status = str(summary.get("status", COMPLETED))
    if status == "diverged" or bad_files:
        r = summary.get("diverged_round")
        where = f"diverged in round {int(r)}" if r is not None and status == "diverged" else "diverged"
        return where + (f" (non-finite values in {', '.join(bad_files)})" if bad_files else "")
    if status != COMPLETED:
        return status
    t0, done = summary.get("t0"), summary.get("rounds_completed")
    if t0 is None:
        return None
    if done is not None:
        if int(done) <= int(t0) + 1:
            return f"never passed t0 = {int(t0)} ({int(done)} round{'' if int(done) == 1 else 's'})"
    elif trained_after_t0 is False:
        return f"never passed t0 = {int(t0)} (no client trained after it)"
    return None


def check_shapes(state: Mapping[str, Tensor], family: ModelFamily) -> None:
    """Raise unless ``state`` has exactly the keys and shapes of ``family.build(1.0)``.

    Guards against reading a run trained with another model config: slicing a
    differently sized tensor would silently mark every coordinate "covered".
    """
    ref = {k: tuple(v.shape) for k, v in family.build(1.0).state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if ref != got:
        bad = sorted(k for k in set(ref) | set(got) if ref.get(k) != got.get(k))
        raise ValueError(f"prop3: init.pt does not match the configured model ({len(bad)} tensors differ, e.g. "
                         f"'{bad[0]}': file {got.get(bad[0])} vs config {ref.get(bad[0])}); was the run trained "
                         "with another dataset_params.<dataset>.model? Rerun its training job.")


def load_state(path: str) -> dict[str, Tensor]:
    """The model's state_dict in a global state saved by the training stage (``torch.load(weights_only=True)``),
    without the batch-norm statistics of other widths beside it (:func:`load_global_state`)."""
    return split_state(load_global_state(path))[0]


def load_global_state(path: str) -> dict[str, Tensor]:
    """A global state saved by the training stage: the model's state_dict and, once clients trained below
    full width, the batch-norm statistics per width and mixed (:mod:`hasfl.models.bn`)."""
    return torch.load(path, map_location="cpu", weights_only=True)
