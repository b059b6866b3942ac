"""The accuracy floors a run must beat, and which runs never did.

Two floors per dataset, from the data stage's manifest summary (the test set every
run is evaluated on):

* the **majority-class rate** ``majority_rate``: the accuracy of always predicting the
  test set's most common class (next character, for Shakespeare);
* the **chance rate** ``chance_rate`` = 1 / number of classes.

A run is **at the floor** (``at_floor``) when its *best* test accuracy over every
evaluated round is at most the majority-class rate plus the tolerance
:func:`hasfl.analysis.specs.floor_tolerance_pct` (0.5 points, or one test example if
that is more): in no round did it predict better than the class frequencies. It is
**at chance** (``at_chance``) when the best accuracy stays within the same tolerance of
the chance rate, and **ends at the floor** (``final_at_floor``) when its final accuracy
does (a run that learned and then collapsed). The majority-class rate is never below
the chance rate, so ``at_chance`` implies ``at_floor``. A run without a finite accuracy,
or a dataset whose manifest predates the floors, gets NA: unknown, never "fine".

Every function is pure: frames and mappings in, frames out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.specs import floor_tolerance_pct

__all__ = ["FLAG_COLUMNS", "FLOOR_COLUMNS", "add_floor_flags", "dataset_floors", "floor_counts", "floor_phrase",
           "is_missing", "summary_floors"]

#: Per-dataset floor columns (percentage points).
FLOOR_COLUMNS = ("majority_pct", "chance_pct", "floor_tol_pct")
#: Per-run flags (nullable booleans).
FLAG_COLUMNS = ("at_floor", "at_chance", "final_at_floor")


def dataset_floors(summaries: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{dataset: {majority_pct, chance_pct, floor_tol_pct}}`` from manifest summaries.

    ``summaries`` maps a dataset to its manifest ``summary`` (``majority_rate``,
    ``chance_rate``, ``test_size``); a dataset whose summary lacks the rates is left out
    (its runs' flags become NA).
    """
    out = {}
    for dataset, s in summaries.items():
        if s.get("majority_rate") is None or s.get("chance_rate") is None:
            continue
        out[dataset] = {"majority_pct": 100.0 * float(s["majority_rate"]),
                        "chance_pct": 100.0 * float(s["chance_rate"]),
                        "floor_tol_pct": floor_tolerance_pct(int(s["test_size"]) if s.get("test_size") else None)}
    return out


def _le(value: float, level: float) -> Any:
    return pd.NA if not (math.isfinite(value) and math.isfinite(level)) else bool(value <= level)


def add_floor_flags(metrics: pd.DataFrame, floors: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """``metrics`` (one row per run with dataset, best_acc_pct, final_acc_pct) plus the floor
    columns of its dataset and the flags :data:`FLAG_COLUMNS` (NA where unknown)."""
    out = metrics.copy()
    rows = []
    for r in out.to_dict("records"):
        f = floors.get(r["dataset"], {})
        maj, chance, tol = (float(f.get(c, math.nan)) for c in FLOOR_COLUMNS)
        best, final = float(r.get("best_acc_pct", math.nan)), float(r.get("final_acc_pct", math.nan))
        rows.append({"majority_pct": maj, "chance_pct": chance, "floor_tol_pct": tol,
                     "at_floor": _le(best, maj + tol), "at_chance": _le(best, chance + tol),
                     "final_at_floor": _le(final, maj + tol)})
    for c in FLOOR_COLUMNS:
        out[c] = pd.Series([r[c] for r in rows], index=out.index, dtype="float64")
    for c in FLAG_COLUMNS:
        out[c] = pd.Series([r[c] for r in rows], index=out.index, dtype="boolean")
    return out


def floor_counts(runs: pd.DataFrame) -> dict[str, Any]:
    """Counts of flagged runs among ``runs`` (rows of :func:`add_floor_flags`).

    ``n_at_floor`` / ``n_at_chance`` / ``n_final_at_floor`` are NA when any run's flag is
    unknown; ``at_floor_seeds`` lists the seeds at the floor.
    """
    out: dict[str, Any] = {}
    for c in FLAG_COLUMNS:
        v = runs[c] if c in runs.columns else pd.Series([pd.NA] * len(runs), dtype="boolean")
        out[f"n_{c}"] = pd.NA if v.isna().any() else int(v.astype(bool).sum())
    flagged = runs[runs["at_floor"].fillna(False).astype(bool)] if "at_floor" in runs.columns else runs.iloc[:0]
    out["at_floor_seeds"] = ",".join(str(int(s)) for s in sorted(flagged["seed"]))
    return out


def is_missing(v: Any) -> bool:
    """None, pd.NA or NaN."""
    if v is None or v is pd.NA:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def floor_phrase(n_at_floor: Any, n_final_at_floor: Any, n: int) -> str:
    """What a reader should know about a (dataset, method) row: "" when nothing is flagged."""
    if n == 0:
        return ""
    if is_missing(n_at_floor):
        return "floor unknown"
    if int(n_at_floor):
        return f"at floor: {int(n_at_floor)} of {n} seeds"
    if not is_missing(n_final_at_floor) and int(n_final_at_floor):
        return f"ends at floor: {int(n_final_at_floor)} of {n} seeds"
    return ""


def summary_floors(summaries: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """The floors of one dataset from the summaries of its seeds (they must agree)."""
    first = dict(summaries[0])
    for other in summaries[1:]:
        for key in ("majority_rate", "chance_rate", "test_size"):
            if other.get(key) != first.get(key):
                raise ValueError(f"manifests of '{first.get('dataset')}' disagree on '{key}': "
                                 f"{first.get(key)!r} vs {other.get(key)!r}")
    return dataset_floors({"_": first}).get("_")
