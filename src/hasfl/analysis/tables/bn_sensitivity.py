"""Batch-norm sensitivity: every run's final model evaluated under each BN statistics mode (per width,
mixed across widths, test-batch, HeteroFL's static), and each finding's verdict under each method's
declared rule (as findings.json) and with every method's final accuracy under one mode alike
(:mod:`hasfl.analysis.bn_sensitivity`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import findings as findings_mod
from hasfl.analysis.inputs import preset_models, read_tables
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.runs import group_data_files, group_run_files, read_json
from hasfl.analysis.specs import resolve_thresholds
from hasfl.analysis.tables.base import ReportContext
from hasfl.io import write_parquet

PathLike = str | Path
NAME = "bn_sensitivity"
FINDINGS = "bn_sensitivity_findings"


def job(run_files: Sequence[PathLike], manifests: Sequence[PathLike],
                       models: Mapping[str, Mapping[str, Any]], data_dir: PathLike,
                       dataset_params: Mapping[str, Mapping[str, Any]], table_paths: Mapping[str, PathLike],
                       datasets: Sequence[str], thresholds: Mapping[str, Any], out_parquet: PathLike,
                       out_md: PathLike, out_findings: PathLike,
                       data_tables: Sequence[PathLike] = ()) -> pd.DataFrame:
    """Every run's final model under every batch-norm mode, and each finding's verdict under the other
    modes (:mod:`hasfl.analysis.bn_sensitivity`). Needs, per run, final.pt and run.json; the finding
    tables as findings.json reads them; for the ``static`` mode, the data stage's partition.parquet and
    clients.parquet of every dataset x seed (``data_tables``)."""
    from hasfl.analysis import bn_sensitivity as bns
    from hasfl.analysis.coverage import load_global_state
    from hasfl.data import load_dataset
    from hasfl.models import family_from_config

    specs = preset_models(manifests, models)
    stage = group_data_files(data_tables)
    capable: dict[tuple[str, int], list[Any]] = {}  # the static mode's batches, one list per dataset x seed
    families: dict[str, Any] = {}
    bundles: dict[str, Any] = {}
    rows = []
    for (dataset, method, seed), f in group_run_files(run_files).items():
        missing = [n for n in ("final.pt", "run.json") if n not in f]
        if missing:
            where = next(iter(f.values())).parent.as_posix()
            raise ValueError(f"bn_sensitivity: run {where} lacks {', '.join(missing)} among the inputs")
        model = specs[dataset]["model"]
        if model.get("arch") != "cnn":
            continue  # no batch norm: every mode is the same model
        if dataset not in families:
            families[dataset] = family_from_config(model, specs[dataset]["in_shape"], specs[dataset]["num_classes"])
            bundles[dataset] = load_dataset(dataset, data_dir, dataset_params[dataset])
        summary = read_json(f["run.json"])
        status = str(summary.get("status", "completed"))
        logged = summary.get("final_test_acc")
        run_mode = str(model.get("bn_stats", "per_width"))
        state = load_global_state(str(f["final.pt"])) if status == "completed" else None
        for mode in bns.modes_of(run_mode):
            acc = math.nan
            if state is not None and mode == bns.STATIC:
                key = (dataset, int(seed))
                if key not in capable:
                    tables = stage.get(key, {})
                    if not {"partition.parquet", "clients.parquet"} <= set(tables):
                        raise ValueError(f"bn_sensitivity: the static mode of {dataset}/{method}/seed{seed} needs "
                                         "the data stage's partition.parquet and clients.parquet among the inputs")
                    capable[key] = bns.capable_batches(bundles[dataset], pd.read_parquet(tables["partition.parquet"]),
                                                       pd.read_parquet(tables["clients.parquet"]), 1.0,
                                                       int(dataset_params[dataset]["optim"]["batch_size"]))
                acc = bns.final_accuracy(families[dataset], bundles[dataset], state, run_mode, mode, capable[key])
            elif state is not None:
                acc = bns.final_accuracy(families[dataset], bundles[dataset], state, run_mode, mode)
            rows.append({"dataset": dataset, "method": method, "seed": int(seed), "status": status,
                         "run_mode": run_mode, "mode": mode, "final_acc_pct": acc,
                         "logged_final_acc_pct": float(logged) * 100.0 if logged is not None else math.nan})
    df = pd.DataFrame.from_records(rows, columns=bns.COLUMNS).astype({"seed": "int64"})
    names = findings_mod.table_names(list(table_paths))
    verdicts = bns.findings_under_modes(df, read_tables({n: table_paths[n] for n in names}), datasets,
                                        resolve_thresholds(thresholds))
    write_parquet(df, out_parquet)
    write_parquet(verdicts, out_findings)
    root = results_root(out_parquet)
    sources = source_list([*run_files, *manifests, *data_tables, *table_paths.values()], root)
    write_text(out_md, "# Batch-norm sensitivity\n\n" + bns.markdown(df, verdicts)
                + "\n## Read from\n\n" + "\n".join(f"- `{s}`" for s in sources) + "\n")
    return df


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: every run's final.pt and run.json, the finding tables, the data stage's tables, the raw
    data."""
    data = params["data"]
    job(list(inputs["runs"]), list(inputs["manifests"]), dict(params["models"]), data["data_dir"],
        {k: dict(v) for k, v in data["dataset_params"].items()},
        {n: inputs[n][0] for n in params["tables"]}, params["datasets"], params["thresholds"], outputs["parquet"],
        outputs["md"], outputs[FINDINGS], list(inputs["data_tables"]))


def summary(ctx: ReportContext) -> str:
    """report.md's batch-norm section: the table and the verdicts under the other modes."""
    from hasfl.analysis.bn_sensitivity import markdown as bn_markdown

    return (f"From `tables/{NAME}.parquet` and `tables/{FINDINGS}.parquet`. "
            + bn_markdown(ctx.tables[NAME], ctx.tables.get(FINDINGS, pd.DataFrame()), level="##"))
