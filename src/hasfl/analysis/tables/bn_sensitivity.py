"""Batch-norm sensitivity: every run's final model evaluated under each BN statistics mode (per width,
mixed across widths, test-batch, HeteroFL's static), and each finding's verdict under each method's
declared rule (as findings.json) and with every method's final accuracy under one mode alike
(:mod:`hasfl.analysis.bn_sensitivity`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import findings as findings_mod
from hasfl.analysis.inputs import read_tables
from hasfl.analysis.markdown import results_root, source_list, write_text
from hasfl.analysis.evaluations import evaluate_runs, gather_rows, job_params
from hasfl.analysis.per_run.bn_sensitivity import evaluate_run
from hasfl.analysis.specs import resolve_thresholds
from hasfl.analysis.tables.base import ReportContext
from hasfl.io import write_parquet

PathLike = str | Path
NAME = "bn_sensitivity"
FINDINGS = "bn_sensitivity_findings"


def _finish(rows: Sequence[Mapping[str, Any]], table_paths: Mapping[str, PathLike], datasets: Sequence[str],
            thresholds: Mapping[str, Any], out_parquet: PathLike, out_md: PathLike, out_findings: PathLike,
            sources: Sequence[PathLike]) -> pd.DataFrame:
    """The table from every run's rows, and each finding's verdict under the other modes."""
    from hasfl.analysis import bn_sensitivity as bns

    df = pd.DataFrame.from_records(list(rows), columns=bns.COLUMNS).astype({"seed": "int64"})
    names = findings_mod.table_names(list(table_paths))
    verdicts = bns.findings_under_modes(df, read_tables({n: table_paths[n] for n in names}), datasets,
                                        resolve_thresholds(thresholds))
    write_parquet(df, out_parquet)
    write_parquet(verdicts, out_findings)
    root = results_root(out_parquet)
    write_text(out_md, "# Batch-norm sensitivity\n\n" + bns.markdown(df, verdicts)
                + "\n## Read from\n\n" + "\n".join(f"- `{s}`" for s in source_list(list(sources), root)) + "\n")
    return df


def job(run_files: Sequence[PathLike], manifests: Sequence[PathLike],
                       models: Mapping[str, Mapping[str, Any]], data_dir: PathLike,
                       dataset_params: Mapping[str, Mapping[str, Any]], table_paths: Mapping[str, PathLike],
                       datasets: Sequence[str], thresholds: Mapping[str, Any], out_parquet: PathLike,
                       out_md: PathLike, out_findings: PathLike,
                       data_tables: Sequence[PathLike] = ()) -> pd.DataFrame:
    """Every run's final model under every batch-norm mode (:func:`evaluate_run`, in this process), and each
    finding's verdict under the other modes (:mod:`hasfl.analysis.bn_sensitivity`). Needs, per run, final.pt and
    run.json; the finding tables as findings.json reads them; for the ``static`` mode, the data stage's
    partition.parquet and clients.parquet of every dataset x seed (``data_tables``)."""
    params = job_params(models, data_dir, dataset_params)
    rows = evaluate_runs(evaluate_run, run_files, manifests, params, data_tables)
    return _finish(rows, table_paths, datasets, thresholds, out_parquet, out_md, out_findings,
                   [*run_files, *manifests, *data_tables, *table_paths.values()])


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: every run's evaluation (rule ``evaluate``: :func:`evaluate_run`) and the finding tables."""
    tables = {n: inputs[n][0] for n in params["tables"]}
    _finish(gather_rows(inputs["evals"], NAME), tables, params["datasets"], params["thresholds"], outputs["parquet"],
            outputs["md"], outputs[FINDINGS], [*inputs["evals"], *tables.values()])


def summary(ctx: ReportContext) -> str:
    """report.md's batch-norm section: the table and the verdicts under the other modes."""
    from hasfl.analysis.bn_sensitivity import markdown as bn_markdown

    return (f"From `tables/{NAME}.parquet` and `tables/{FINDINGS}.parquet`. "
            + bn_markdown(ctx.tables[NAME], ctx.tables.get(FINDINGS, pd.DataFrame()), level="##"))
