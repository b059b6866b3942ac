"""Proposition 3 (Section 3.3): the coordinates no client trained (outside the width of the widest
sub-model trained) keep their initial value; one row per run (:mod:`hasfl.analysis.coverage`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.inputs import preset_models
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.runs import group_run_files, read_json
from hasfl.analysis.tables.base import capped_only, refuse_unnested, table_markdown, without_left_out
from hasfl.io import write_parquet
from hasfl.registry import SERVER_NOISE

PathLike = str | Path


#: clients.parquet's largest width trained after t0 (:data:`hasfl.analysis.stale.AFTER_WARMUP_COLUMN`).
AFTER = "p_max_trained_after_warmup"


def job(run_files: Sequence[PathLike], manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]],
        atol: float, out_parquet: PathLike, out_md: PathLike,
        server_noise: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Proposition 3 check of every run (needs clients.parquet, init.pt, final.pt, run.json); a run that
    diverged or never passed t0 keeps its row with the reason as ``status``
    (:func:`hasfl.analysis.coverage.left_out_reason`) and is left out of the display and of F5. So is a run of a
    method whose server adds noise to every coordinate each round (``server_noise``: method -> its positive scale,
    :data:`hasfl.registry.SERVER_NOISE`): no coordinate of it keeps its value, trained or not."""
    from hasfl.analysis import coverage
    from hasfl.models import family_from_config

    specs = preset_models(manifests, models)
    noise = {str(m): float(s) for m, s in (server_noise or {}).items()}

    def noisy(method: str) -> str:
        if noise.get(method, 0.0) <= 0.0:
            return ""
        return (f"its server adds noise to every coordinate each round (method_params.{method}."
                f"{SERVER_NOISE[method]} = {noise[method]:g}): none keeps its value")
    families = {}
    rows = []
    runs = group_run_files(run_files)
    refuse_unnested("prop3_coverage", runs)
    for (dataset, method, seed), f in runs.items():
        if dataset not in families:
            s = specs[dataset]
            families[dataset] = family_from_config(s["model"], s["in_shape"], s["num_classes"])
        clients = pd.read_parquet(f["clients.parquet"])
        p_hi = coverage.max_trained_width(clients)
        init, final = coverage.load_state(str(f["init.pt"])), coverage.load_state(str(f["final.pt"]))
        res = coverage.prop3_run(init, final, families[dataset], p_hi, atol)
        summary = read_json(f["run.json"])
        after = (bool((pd.to_numeric(clients[AFTER], errors="coerce") > 0).any()) if AFTER in clients.columns
                 else None)
        why = coverage.left_out_reason(summary, bad_files=coverage.non_finite({"final.pt": final}),
                                       trained_after_t0=after)
        status = why or noisy(method) or str(summary.get("status", coverage.COMPLETED))  # left out: the reason (F5)
        rows.append({"dataset": dataset, "method": method, "seed": int(seed), "status": status, **res})
    df = pd.DataFrame.from_records(rows, columns=coverage.COLUMNS)
    df = df.astype({"seed": "int64", "capped": "bool", "prop3_holds": "bool", "n_coords": "int64",
                    "n_never_covered": "int64", "n_never_covered_changed": "int64", "n_covered_changed": "int64"})
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    write_text(out_md, table_markdown("prop3_coverage", df, source_list([*run_files, *manifests], root)))
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: every run's clients.parquet, init.pt, final.pt and run.json."""
    job(list(inputs["runs"]), list(inputs["manifests"]), params["models"], params["atol"], outputs["parquet"],
        outputs["md"], params.get("server_noise"))


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """Only the capped runs, one line counting the others and one naming the runs left out (if any)."""
    if "capped" not in df.columns:
        return [("", df)]
    return without_left_out(df, lambda kept: capped_only(kept, "capped"))
