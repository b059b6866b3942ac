"""Paper Table 1 (Section 3.4): params, MACs per sample and upload MB per width p of the paper's three
models and of the preset's own (exact counts from :meth:`hasfl.models.ModelFamily.cost`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.inputs import preset_models
from hasfl.analysis.labels import dataset_label
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet

PathLike = str | Path


#: Table 1 model names of :func:`hasfl.models.cost.table1` and their datasets.
PAPER_MODELS = {"CIFAR-10 CNN": "cifar10", "EMNIST CNN": "emnist", "Shakespeare LSTM": "shakespeare"}


P_VALUES = (0.25, 0.5, 0.75, 1.0)


def _cost_row(source: str, model: str, dataset: str, p: float, params: int, macs: int, upload_mb: float) -> dict[str, Any]:
    return {"source": source, "model": model, "dataset": dataset, "p": float(p), "params": int(params),
            "macs": int(macs), "upload_mb": float(upload_mb), "params_m": params / 1e6, "macs_m": macs / 1e6}


def table1_cost(preset_models: Mapping[str, Mapping[str, Any]], p_values: Sequence[float] = P_VALUES) -> pd.DataFrame:
    """Table 1 rows: the paper's three models (``source="paper"``) then the preset's (``"preset"``).

    ``preset_models`` maps a dataset to ``{"model": <config model block with arch>,
    "in_shape": [...], "num_classes": int}`` (shape and classes from the data stage
    manifest). Costs come from :meth:`hasfl.models.ModelFamily.cost`.
    """
    from hasfl.models import family_from_config, table1  # torch: imported only when a table is built

    rows = [_cost_row("paper", r["model"], PAPER_MODELS[r["model"]], r["p"], r["params"], r["macs"], r["upload_mb"])
            for r in table1(tuple(p_values))]
    for dataset in sorted(preset_models):
        spec = preset_models[dataset]
        family = family_from_config(spec["model"], spec["in_shape"], spec["num_classes"])
        name = f"{dataset_label(dataset)} {spec['model']['arch'].upper()} (preset)"
        for p in p_values:
            c = family.cost(p)
            rows.append(_cost_row("preset", name, dataset, p, c.params, c.macs, c.upload_mb))
    return pd.DataFrame.from_records(rows)


def job(manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]], out_parquet: PathLike,
               out_md: PathLike) -> pd.DataFrame:
    """Table 1 for the paper's three models and the preset's (``models``: dataset -> config model block)."""
    df = table1_cost(preset_models(manifests, models))
    write_parquet(df, out_parquet)
    root = results_root(out_parquet)
    write_text(out_md, table_markdown("table1_cost", df, source_list(manifests, root)))
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry (:mod:`hasfl.analysis.artifacts`): data-stage manifests, the preset's model blocks."""
    job(list(inputs["manifests"]), params["models"], outputs["parquet"], outputs["md"])


def _unit(full: float) -> tuple[float, str]:
    """(divisor, suffix) for counts whose largest value is ``full``: M from a million, k from a thousand."""
    if full >= 1e6:
        return 1e6, " M"
    if full >= 1e3:
        return 1e3, " k"
    return 1.0, ""


def _short(v: float) -> str:
    """3 significant digits, at least one decimal under 1000 (154.9, 39.2, 2.78, 0.0991)."""
    a = abs(v)
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}" if a else "0"


def _table1_display(df: pd.DataFrame) -> pd.DataFrame:
    """Table 1 with every model's params / MACs in the unit of its full width (k or M) and upload in MB or kB."""
    cells: dict[str, list[str]] = {"params": [], "macs": [], "upload": []}
    full = df.groupby("model")[["params", "macs", "upload_mb"]].max()
    for r in df.to_dict("records"):
        for key, col in (("params", "params"), ("macs", "macs")):
            div, suffix = _unit(float(full.at[r["model"], col]))
            cells[key].append(f"{_short(r[col] / div)}{suffix}" if div > 1 else str(int(r[col])))
        if float(full.at[r["model"], "upload_mb"]) < 0.1:
            cells["upload"].append(f"{_short(r['upload_mb'] * 1e3)} kB")
        else:
            cells["upload"].append(f"{_short(r['upload_mb'])} MB")
    return pd.DataFrame({"Source": df["source"], "Model": df["model"], "p": df["p"].map(lambda p: f"{p:.2f}"),
                         "Params": cells["params"], "MACs / sample": cells["macs"], "Upload": cells["upload"],
                         "Params (exact)": df["params"], "MACs (exact)": df["macs"]})


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """What a reader sees of Table 1."""
    return [("", _table1_display(df))]
