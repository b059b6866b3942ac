"""Run-level evaluations: what a table computes from one run alone -- its final model under each
batch-norm mode, its sub-models' accuracies, its stale coordinates, its coverage replay -- as one job per run and
table, kept in the run store beside the run and linked into each results folder; the table's own job only gathers.

A table whose registry entry names a ``per_run`` function (:attr:`hasfl.analysis.artifacts.Artifact.per_run`,
``"module:function"`` taking one :class:`RunInputs` and returning that run's rows) is computed in two steps:

* **evaluate** (rule ``evaluate``, one job per run: :func:`hasfl.dag.jobs.evaluate_run`): for each table that reads
  the run, its rows into ``evals/<dataset>/<method>/seed<s>/<table>/rows.parquet`` (:func:`evaluate_job`), each an
  entry of the run store of its own. An entry's identity (:func:`hasfl.dag.outputs.evaluation_identity`) is the sha256
  of every run and data-stage file it reads, the table's config values for the run's dataset and the digest of the
  evaluation's code (the files its module imports, :func:`hasfl.dag.identity.evaluation_code_digest`): a variant
  that shares a run links its evaluations, and an edit of code an evaluation does not import re-evaluates nothing
  (the job links that entry again). One job per run, not per run and table: the tables of one run share the loaded
  dataset and model, and a job's own cost (a process, Snakemake's bookkeeping: about 0.6 s) is paid once per run.
* **gather** (the table's rule, :func:`gather_rows`): every run's rows in run order (dataset, method, seed), then what the
  table adds over runs (verdicts, floor flags, dtypes).

In one process (a table's ``job(...)``, ``hasfl`` commands, tests) :func:`evaluate_runs` does both steps without
files between them: the same per-run function, so the two paths give the same rows (tests/test_evaluations.py).

Where the code lies: the per-run functions, one module per table under :mod:`hasfl.analysis.per_run`, and the job
side (:class:`RunInputs`, :func:`evaluate_job`: :mod:`hasfl.analysis.per_run.base`) import only what they compute,
never a table's gather step, a finding, the report or the artifact entries; an evaluation's code digest is their
import closure. So an edit of a verdict rule, a page note or a table's display keys no evaluation anew. This module
holds what the DAG reads (:func:`evaluation_specs`, the rules' param) and the gather step; it re-exports the job side.

Torch-free at import (the DAG imports the registry that names these functions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.analysis.per_run.base import (EVAL_FILE, EVALS, RunInputs, eval_dir, evaluate_job, evaluate_runs,
                                         run_inputs)

__all__ = ["EVAL_FILE", "EVALS", "PER_RUN_PARAMS", "RunInputs", "eval_dir", "evaluate_job", "evaluate_runs",
           "evaluation_specs", "gather_rows", "job_params", "per_run_params", "run_inputs"]

PathLike = str | Path
#: The config values (:data:`hasfl.analysis.artifacts.PARAM_KEYS`) a per-run evaluation may take, each narrowed to
#: the run's dataset by the DAG (``models`` / ``data``); a table's other values (thresholds, datasets) belong to its
#: gather step.
PER_RUN_PARAMS = ("models", "data", "atol", "last_rounds")

_EVAL_RE = re.compile(rf"{EVALS}/(?P<dataset>[^/]+)/(?P<method>[^/]+)/seed(?P<seed>\d+)/?$")


def job_params(models: Mapping[str, Mapping[str, Any]], data_dir: PathLike,
               dataset_params: Mapping[str, Mapping[str, Any]], **more: Any) -> dict[str, Any]:
    """A per-run table's ``models`` and ``data`` values (and ``more``) as its in-process ``job(...)`` hands them to
    :func:`evaluate_runs`: the shape :func:`per_run_params` gives one run in the DAG."""
    return {"models": dict(models), "data": {"data_dir": str(data_dir), "dataset_params": dict(dataset_params)},
            **more}


def per_run_params(config: Mapping[str, Any], params: Iterable[str], dataset: str) -> dict[str, Any]:
    """The config values of :data:`PER_RUN_PARAMS` among a table's ``params`` (its entry's), narrowed to ``dataset``:
    ``models`` its model block, ``data`` where the raw files lie and its ``dataset_params`` block, ``atol`` the
    threshold ``f5_atol``, ``last_rounds`` the table setting ``table4c_last_rounds`` (:mod:`hasfl.analysis.specs`);
    canonical (sorted keys, plain JSON values)."""
    import json
    import os

    from hasfl.analysis.specs import resolve_table_settings, resolve_thresholds

    block = config.get("analysis") or {}
    values = {
        "models": lambda: {dataset: dict(config["dataset_params"][dataset]["model"])},
        "data": lambda: {"data_dir": os.path.normpath(str(config["data_dir"])),
                         "dataset_params": {dataset: dict(config["dataset_params"][dataset])}},
        "atol": lambda: resolve_thresholds(block)["f5_atol"],
        "last_rounds": lambda: resolve_table_settings(block)["table4c_last_rounds"],
    }
    out = {k: values[k]() for k in params if k in PER_RUN_PARAMS}
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def evaluation_specs(config: Mapping[str, Any], dataset: str, method: str,
                     code_of: Callable[[str, str, str], str]) -> dict[str, dict[str, Any]]:
    """What the evaluate job of a run of ``method`` on ``dataset`` evaluates, per table that reads the run
    (:func:`hasfl.analysis.artifacts.run_tables`, registry order): its per-run function, its code digest
    (``code_of(function, method, dataset)``), the run files and data-stage files it reads and its config values
    (:func:`per_run_params`). The rule's param and the run store's prediction read this one spec."""
    from hasfl.analysis.artifacts import ARTIFACTS, run_tables

    out = {}
    for name in run_tables(dataset, method, config["datasets"], config["methods"]):
        art = ARTIFACTS[name]
        assert art.per_run is not None
        out[name] = {"function": art.per_run, "code": code_of(art.per_run, method, dataset),
                     "run_files": list(art.run_files),
                     "data_files": ["manifest.json", *(("partition.parquet", "clients.parquet") if art.data_tables
                                                       else ())],
                     "params": per_run_params(config, art.params, dataset)}
    return out


def _eval_key(path: PathLike) -> tuple[str, str, int]:
    m = _EVAL_RE.search(Path(path).as_posix())
    if m is None:
        raise ValueError(f"'{path}' is not a run's evaluations folder (expected .../{EVALS}/<dataset>/<method>/"
                         "seed<seed>)")
    return m["dataset"], m["method"], int(m["seed"])


def gather_rows(eval_dirs: Sequence[PathLike], table: str) -> list[dict[str, Any]]:
    """The rows of ``table`` of every run's evaluations folder (:func:`eval_dir`), in run order (dataset, method,
    seed), as :func:`evaluate_runs` gives them.

    Raises:
        ValueError: a path is not a run's evaluations folder, or two are of one run.
        hasfl.io.InputFileError: a folder lacks the table's rows (naming the file).
    """
    from hasfl.io import read_parquet

    keyed = sorted((_eval_key(p), Path(p)) for p in eval_dirs)
    twice = [k for (k, _), (k2, _) in zip(keyed, keyed[1:], strict=False) if k == k2]
    if twice:
        raise ValueError(f"two evaluations folders of run {'/'.join(map(str, twice[0]))} among the inputs")
    rows: list[dict[str, Any]] = []
    for _, folder in keyed:
        rows += read_parquet(folder / table / EVAL_FILE).to_dict("records")
    return rows
