"""Table 4b, per run (Section 4.3): a run's coordinates untrained since the warm-up round t0 (Proposition 3) and, when
the run is capped after t0, the accuracy of the full model, of the model with them reset to init.pt and of the
sub-model (:func:`hasfl.analysis.stale.stale_row`; the evaluate job's rows, gathered by
:mod:`hasfl.analysis.tables.table4b_stale_coordinates`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from hasfl.analysis.per_run.base import RunInputs
from hasfl.analysis.per_run.files import read_json

__all__ = ["NAME", "RUN_FILES", "evaluate_run", "refuse_unnested"]

NAME = "table4b_stale_coordinates"
#: The run files a row reads (the table's artifact entry lists the same: tests/test_evaluations.py).
RUN_FILES = ("clients.parquet", "init.pt", "warmup.pt", "final.pt", "run.json")


def refuse_unnested(table: str, runs: Mapping[tuple[str, str, int], Any]) -> None:
    """Raise when a run of a method whose sub-models are not nested prefixes is among ``table``'s inputs
    (:attr:`hasfl.registry.MethodInfo.nested`): its never-trained coordinates are not the ones outside a
    width mask, so the check would misjudge it; the workflow gives such a table only nested methods."""
    from hasfl.registry import METHODS

    bad = sorted({m for _d, m, _s in runs if m in METHODS and not METHODS[m].nested})
    if bad:
        raise ValueError(f"{table}: method(s) {', '.join(bad)} do not train nested sub-models (registry entry "
                         "nested=False); Proposition 3's coordinate check does not apply to them")


def evaluate_run(run: RunInputs) -> list[dict[str, Any]]:
    """One run's row of Table 4b (Section 4.3): its coordinates untrained since t0 and, when the run is capped after
    t0, the accuracy of the full model, of the model with them reset to init.pt and of the sub-model.

    Needs clients.parquet (with ``p_max_trained_after_warmup``), init.pt, warmup.pt, final.pt and run.json (with
    ``t0``); raises a ValueError naming the file (and column) the run lacks. A run that diverged or never trained a
    round after t0 keeps its row with the reason as ``status`` (:func:`hasfl.analysis.coverage.left_out_reason`), is
    not evaluated and is left out of the display, the summary and F5.
    """
    from hasfl.analysis import stale
    from hasfl.analysis.coverage import COMPLETED, left_out_reason, load_global_state, load_state, non_finite
    from hasfl.models.bn import split_state

    refuse_unnested(NAME, {(run.dataset, run.method, run.seed): run.files})
    run.require("table4b", RUN_FILES, " (warmup.pt is the global state at the end of round t0 = "
                "hasfl.warmup)")
    f = run.files
    summary = read_json(f["run.json"])
    if summary.get("t0") is None:
        raise ValueError(f"table4b: {f['run.json'].as_posix()} lacks 't0' (the warm-up round index); the run "
                         "predates the warm-up checkpoint -- rerun its training job")
    p_hi = stale.max_trained_width_after_warmup(pd.read_parquet(f["clients.parquet"]), f["clients.parquet"].as_posix())
    final, final_bn = split_state(load_global_state(str(f["final.pt"])))
    warmup = load_state(str(f["warmup.pt"]))
    # diverged or never passed t0: kept with the reason as its status, not evaluated, left out of F5
    why = left_out_reason(summary, bad_files=non_finite({"warmup.pt": warmup, "final.pt": {**final, **final_bn}}),
                          trained_after_t0=p_hi > 0.0)
    status = why or str(summary.get("status", COMPLETED))
    evaluate = p_hi < 1.0 and status == COMPLETED
    res = stale.stale_row(init=load_state(str(f["init.pt"])), warmup=warmup, final=final, family=run.family(),
                          p_hi_after_t0=p_hi, bundle=run.bundle() if evaluate else None, evaluate=evaluate,
                          atol=float(run.params["atol"]), final_bn=final_bn,
                          bn_mode=run.spec["model"].get("bn_stats", "per_width"), device=run.device)
    acc = summary.get("final_test_acc")
    return [{"dataset": run.dataset, "method": run.method, "seed": run.seed, "status": status,
             "t0": int(summary["t0"]), "acc_logged_pct": float(acc) * 100.0 if acc is not None else math.nan, **res}]
