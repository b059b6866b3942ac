"""The analysis rules' entry points: :func:`run_artifact` runs any table or figure of the registry
(:data:`hasfl.analysis.artifacts.ARTIFACTS`; the DAG's generated rules call it through one glue
script), :func:`job_findings` writes findings.json and :func:`job_report` report.md.

Every job reads exactly the files it is given and writes atomically (hasfl.io).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.analysis import findings as findings_mod
from hasfl.analysis import report
from hasfl.analysis.artifacts import ARTIFACTS, artifact_methods
from hasfl.analysis.inputs import read_tables
from hasfl.analysis.markdown import write_text
from hasfl.analysis.runs import read_json
from hasfl.analysis.specs import resolve_thresholds
from hasfl.io import write_json
from hasfl.registry import resolve

__all__ = ["ANALYSIS_THREADS", "fixed_threads", "job_figure", "job_findings", "job_report", "run_artifact"]

log = logging.getLogger("hasfl.analysis")

PathLike = str | Path

#: torch threads of every analysis job: the rules declare none (Snakemake gives a job 1, so SLURM's jobs ran with
#: 1), but a job forked from the warm worker inherited torch's default (every core), so the same evaluation ran with
#: another reduction order on another machine (docs/analysis-cost.md measured it). Fixed, whatever runs the job.
ANALYSIS_THREADS = 1


def fixed_threads() -> None:
    """Run this job's torch on :data:`ANALYSIS_THREADS` threads: set now when torch is loaded (the warm worker's
    fork), else through ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``, which torch reads when the job imports it."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(ANALYSIS_THREADS)
    else:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(ANALYSIS_THREADS)


def run_artifact(name: str, inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str],
                 params: Mapping[str, Any]) -> None:
    """Compute artifact ``name`` (its registry entry's ``compute``) from ``inputs`` into ``outputs``.

    ``params`` are the entry's config values; a figure's ``methods`` are narrowed to the ones it shows
    (:func:`hasfl.analysis.artifacts.artifact_methods`) that the preset runs, and it gets ``n_seeds``.
    """
    fixed_threads()
    if name not in ARTIFACTS:
        raise ValueError(f"unknown analysis artifact '{name}'; expected one of {', '.join(ARTIFACTS)}")
    art = ARTIFACTS[name]
    args: dict[str, Any] = {**params, "artifact": name}
    if art.kind == "figure":
        preset = params.get("methods", artifact_methods(art))
        args["methods"] = [m for m in artifact_methods(art) if m in preset]
        args["n_seeds"] = len(params.get("seeds", [])) or None
    log.info("%s: %d input groups, %d outputs", name, len(inputs), len(outputs))
    resolve(art.compute)({k: [str(p) for p in v] for k, v in inputs.items()}, dict(outputs), args)


def job_figure(slug: str, run_files: Sequence[PathLike], data_clients: Sequence[PathLike], params: Mapping[str, Any],
               out_png: PathLike, out_pdf: PathLike, manifests: Sequence[PathLike] = (),
               tables: Mapping[str, PathLike] | None = None) -> None:
    """Figure ``slug`` with named inputs (:func:`run_artifact`); ``tables``: table name -> file."""
    inputs = {"runs": list(run_files), "data_clients": list(data_clients), "manifests": list(manifests),
              **{k: [v] for k, v in (tables or {}).items()}}
    run_artifact(slug, inputs, {"png": str(out_png), "pdf": str(out_pdf)}, params)


def job_findings(table_paths: Mapping[str, PathLike], datasets: Sequence[str], thresholds: Mapping[str, Any],
                 out_json: PathLike, seed_hours: Mapping[str, Mapping[str, float]] | None = None,
                 bn_sensitivity: PathLike | None = None, horizon: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """findings.json from the tables (``table_paths`` keyed by table name); ``seed_hours``: the pre-flight's
    job-hours per seed of each dataset x method, to price the seeds an inconclusive unit needs;
    ``bn_sensitivity``: tables/bn_sensitivity.parquet, every run's final model under every batch-norm mode,
    from which each run's final accuracy is read under its method's declared rule
    (:func:`hasfl.analysis.bn_sensitivity.tables_under`; without it, every run as trained); ``horizon``: the preset's
    ``rounds``, ``eval_every`` and ``seeds``, recorded with every finding and estimand (every verdict is at it)."""
    missing = [n for n in findings_mod.REQUIRED_TABLES if n not in table_paths]
    if missing:
        raise ValueError(f"findings: the tables {', '.join(missing)} are not among the inputs")
    # F7 / F8 (the estimator findings) are evaluated when their tables are given (the workflow always
    # gives them); one of them without the other is an error.
    names = findings_mod.table_names(list(table_paths))  # F9's sub-model table when given (OPTIONAL_TABLES)
    t = read_tables({n: table_paths[n] for n in names})
    th = resolve_thresholds(thresholds)
    sens = rules = None
    if bn_sensitivity is not None:
        import pandas as pd

        from hasfl.analysis import bn_sensitivity as bns

        sens, rules = pd.read_parquet(bn_sensitivity), bns.declared_rules()
        t = bns.tables_under(t, sens, rules)
    items = findings_mod.evaluate_findings(t, datasets=datasets, thresholds=th, seed_hours=seed_hours,
                                           horizon=horizon)
    if sens is not None:
        bns.annotate_rules(items, sens, rules)
    from hasfl.analysis.calibration import dataset_calibration, unit_calibration

    alpha = findings_mod.alpha_of(th)
    noise = dataset_calibration(t, datasets, alpha)
    doc = {"thresholds": th, "alpha": alpha, "verdicts": list(findings_mod.VERDICTS), "horizon": dict(horizon or {}),
           "findings": items,
           # the trend rule simulated at the evaluation noise these runs show, and each unit's power at its own
           # spread and seeds (hasfl.analysis.calibration)
           "trend_calibration": noise, "unit_calibration": unit_calibration(items, noise, alpha)}
    # Round-trip through json to fail here (not in the report) on anything non-serialisable.
    json.dumps(doc, allow_nan=False)
    write_json(out_json, doc)
    return doc


def job_report(name: str, config_summary: Mapping[str, Any], table_paths: Mapping[str, PathLike],
               findings_path: PathLike, figure_slugs: Sequence[str], out_md: PathLike,
               figure_context: Mapping[str, Any] | None = None, configfiles: Sequence[str] = ()) -> str:
    """report.md (relative links to figures/ and tables/ beside it) from every table of the registry
    (``table_paths``: name -> file, the comparison and extra outputs included); ``figure_context``: the
    preset's numbers the figure captions quote (:func:`hasfl.analysis.artifacts.figure_caption`);
    ``configfiles``: the config files the DAG was given (the commands of :mod:`hasfl.analysis.provenance`)."""
    from hasfl.analysis.provenance import report_lines

    doc = read_json(findings_path)
    prov = report_lines(Path(out_md).parent, config_summary, doc["findings"], list(configfiles),
                        findings_mod.FINDING_RUNS)
    text = report.report_markdown(name=name, config_summary=config_summary, tables=read_tables(table_paths),
                                  findings=doc, figures=figure_slugs, figure_context=figure_context,
                                  provenance=prov)
    write_text(out_md, text)
    return text
