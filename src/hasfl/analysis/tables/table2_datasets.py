"""Paper Table 2 (Section 4.1): the data stage's dataset summaries with the accuracy floors
(majority-class and chance rates of the test set)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.inputs import manifest_summaries
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

PathLike = str | Path


def table2_datasets(summaries: Mapping[str, Sequence[Mapping[str, Any]]]) -> pd.DataFrame:
    """Table 2 from the manifests' ``summary`` blocks, one row per dataset, with the accuracy
    floors (majority-class and chance rates of the test set, in percent; NaN when a manifest
    predates them).

    ``summaries`` maps a dataset to the summaries of all its seeds; they must agree
    (the summary does not depend on the seed), otherwise a ValueError names the field.
    """
    rows = []
    for dataset in sorted(summaries):
        items = list(summaries[dataset])
        if not items:
            raise ValueError(f"table2: no manifest for dataset '{dataset}'")
        first = items[0]
        for other in items[1:]:
            for key in ("task", "classes", "train_size", "test_size", "input_shape", "clients", "majority_rate",
                        "chance_rate"):
                if other.get(key) != first.get(key):
                    raise ValueError(f"table2: manifests of '{dataset}' disagree on '{key}': {first.get(key)!r} vs "
                                     f"{other.get(key)!r}")
        rows.append({
            "dataset": dataset,
            "task": str(first["task"]),
            "classes": int(first["classes"]),
            "train_size": int(first["train_size"]),
            "test_size": int(first["test_size"]),
            "input_shape": " x ".join(str(int(s)) for s in first["input_shape"]),
            "clients": int(first["clients"]),
            "majority_pct": 100.0 * float(first["majority_rate"]) if first.get("majority_rate") is not None else math.nan,
            "chance_pct": 100.0 * float(first["chance_rate"]) if first.get("chance_rate") is not None else math.nan,
        })
    return pd.DataFrame.from_records(rows, columns=["dataset", "task", "classes", "train_size", "test_size",
                                                    "input_shape", "clients", "majority_pct", "chance_pct"])


def job(manifests: Sequence[PathLike], out_parquet: PathLike, out_md: PathLike) -> pd.DataFrame:
    """Table 2 from the data-stage manifests."""
    df = table2_datasets(manifest_summaries(manifests))
    write_parquet(df, out_parquet)
    write_text(out_md, table_markdown("table2_datasets", df, source_list(manifests, results_root(out_parquet))))
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: the data-stage manifests of every dataset x seed."""
    job(list(inputs["manifests"]), outputs["parquet"], outputs["md"])


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """Table 2 with the floors in percent."""
    out = df.copy()
    for c, label in (("majority_pct", "majority class (%)"), ("chance_pct", "chance (%)")):
        if c in out.columns:
            out[c] = out[c].map(lambda v: "--" if not math.isfinite(v) else f"{v:.2f}")
            out = out.rename(columns={c: label})
    return [("", out)]
