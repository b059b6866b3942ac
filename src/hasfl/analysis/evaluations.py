"""Run-level evaluations: what a table computes from one run alone -- its final model under each
batch-norm mode, its sub-models' accuracies, its stale coordinates, its coverage replay -- as one job per run and
table, kept in the run store beside the run and linked into each results folder; the table's own job only gathers.

A table whose registry entry names a ``per_run`` function (:attr:`hasfl.analysis.artifacts.Artifact.per_run`,
``"module:function"`` taking one :class:`RunInputs` and returning that run's rows) is computed in two steps:

* **evaluate** (rule ``evaluate``, one job per run: :func:`hasfl.dag.store.evaluate_run`): for each table that reads
  the run, its rows into ``evals/<dataset>/<method>/seed<s>/<table>/rows.parquet`` (:func:`evaluate_job`), each an
  entry of the run store of its own. An entry's identity (:func:`hasfl.dag.store.evaluation_identity`) is the sha256
  of every run and data-stage file it reads, the table's config values for the run's dataset and the digest of the
  evaluation's code (the files its module imports, :func:`hasfl.dag.identity.evaluation_code_digest`): a variant
  that shares a run links its evaluations, and an edit of code an evaluation does not import re-evaluates nothing
  (the job links that entry again). One job per run, not per run and table: the tables of one run share the loaded
  dataset and model, and a job's own cost (a process, Snakemake's bookkeeping: about 0.6 s) is paid once per run.
* **gather** (the table's rule, :func:`gather_rows`): every run's rows in run order (dataset, method, seed), then what the
  table adds over runs (verdicts, floor flags, dtypes).

In one process (a table's ``job(...)``, ``hasfl`` commands, tests) :func:`evaluate_runs` does both steps without
files between them: the same per-run function, so the two paths give the same rows (tests/test_evaluations.py).

Torch-free at import (the DAG imports the registry that names these functions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EVAL_FILE", "EVALS", "PER_RUN_PARAMS", "RunInputs", "eval_dir", "evaluate_job", "evaluate_runs",
           "evaluation_specs", "gather_rows", "per_run_params", "run_inputs"]

PathLike = str | Path
#: The folder of the evaluations in a results folder (``<results>/evals/<dataset>/<method>/seed<s>/<table>/``).
EVALS = "evals"
#: The one file of an evaluation (beside its manifest.json).
EVAL_FILE = "rows.parquet"
#: The config values (:data:`hasfl.analysis.artifacts.PARAM_KEYS`) a per-run evaluation may take, each narrowed to
#: the run's dataset by the DAG (``models`` / ``data``); a table's other values (thresholds, datasets) belong to its
#: gather step.
PER_RUN_PARAMS = ("models", "data", "atol", "last_rounds")

_EVAL_RE = re.compile(rf"{EVALS}/(?P<dataset>[^/]+)/(?P<method>[^/]+)/seed(?P<seed>\d+)/?$")


def eval_dir(results: PathLike, dataset: str, method: str, seed: int) -> str:
    """The folder of run ``dataset/method/seed<seed>``'s evaluations in the results folder ``results`` (one folder per
    table in it, each linked to its store entry)."""
    return f"{results}/{EVALS}/{dataset}/{method}/seed{int(seed)}"


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
                     code_of: Callable[[str], str]) -> dict[str, dict[str, Any]]:
    """What the evaluate job of a run of ``method`` on ``dataset`` evaluates, per table that reads the run
    (:func:`hasfl.analysis.artifacts.run_tables`, registry order): its per-run function, its code digest
    (``code_of(function)``), the run files and data-stage files it reads and its config values
    (:func:`per_run_params`). The rule's param and the run store's prediction read this one spec."""
    from hasfl.analysis.artifacts import ARTIFACTS, run_tables

    out = {}
    for name in run_tables(dataset, method, config["datasets"], config["methods"]):
        art = ARTIFACTS[name]
        assert art.per_run is not None
        out[name] = {"function": art.per_run, "code": code_of(art.per_run), "run_files": list(art.run_files),
                     "data_files": ["manifest.json", *(("partition.parquet", "clients.parquet") if art.data_tables
                                                       else ())],
                     "params": per_run_params(config, art.params, dataset)}
    return out


@dataclass
class RunInputs:
    """One run as a per-run evaluation reads it: its files by name, its data stage's files by name, the preset's
    model spec of its dataset (``model``, ``in_shape``, ``num_classes``: :func:`hasfl.analysis.inputs.preset_models`)
    and the table's config values; ``cache`` is shared by the runs of one process (one model family and one loaded
    dataset per dataset)."""

    dataset: str
    method: str
    seed: int
    files: dict[str, Path]
    data: dict[str, Path]
    spec: dict[str, Any]
    params: Mapping[str, Any]
    cache: dict[Any, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """The run folder (for messages)."""
        return next(iter(self.files.values())).parent.as_posix()

    def require(self, table: str, names: Iterable[str], why: str = "") -> None:
        """Raise a ValueError naming the run and the files of ``names`` it lacks among the inputs."""
        missing = [n for n in names if n not in self.files]
        if missing:
            raise ValueError(f"{table}: run {self.where} lacks {', '.join(missing)} among the inputs{why}")

    def family(self) -> Any:
        """The model family of the run's dataset (built once per dataset and process)."""
        key = ("family", self.dataset)
        if key not in self.cache:
            from hasfl.models import family_from_config

            s = self.spec
            self.cache[key] = family_from_config(s["model"], s["in_shape"], s["num_classes"])
        return self.cache[key]

    def dataset_params(self) -> dict[str, Any]:
        """The config block ``dataset_params.<dataset>`` (param ``data``)."""
        return dict(self.params["data"]["dataset_params"][self.dataset])

    def bundle(self) -> Any:
        """The run's dataset, loaded once per dataset and process (param ``data``: ``data_dir`` and its block)."""
        key = ("bundle", self.dataset)
        if key not in self.cache:
            from hasfl.data import load_dataset

            self.cache[key] = load_dataset(self.dataset, self.params["data"]["data_dir"], self.dataset_params())
        return self.cache[key]


def run_inputs(run_files: Sequence[PathLike], manifests: Sequence[PathLike], params: Mapping[str, Any],
               data_tables: Sequence[PathLike] = ()) -> list[RunInputs]:
    """The runs among ``run_files`` in run order (dataset, method, seed), with their data stage's files among
    ``data_tables`` and ``manifests`` and the model spec of ``params["models"]`` (one shared cache)."""
    from hasfl.analysis.inputs import preset_models
    from hasfl.analysis.runs import group_data_files, group_run_files

    runs = group_run_files(run_files)
    models = dict(params.get("models") or {})
    specs = preset_models(manifests, {d: models[d] for d in dict.fromkeys(d for d, _, _ in runs) if d in models})
    stage = group_data_files([*data_tables, *manifests])
    cache: dict[Any, Any] = {}
    out = []
    for (dataset, method, seed), files in runs.items():
        if dataset not in specs:
            raise ValueError(f"no model config for dataset '{dataset}' of run {next(iter(files.values())).parent} "
                             "(param 'models')")
        out.append(RunInputs(dataset, method, int(seed), dict(files), dict(stage.get((dataset, int(seed)), {})),
                             specs[dataset], params, cache))
    return out


def evaluate_runs(per_run: Callable[[RunInputs], list[dict[str, Any]]], run_files: Sequence[PathLike],
                  manifests: Sequence[PathLike], params: Mapping[str, Any],
                  data_tables: Sequence[PathLike] = ()) -> list[dict[str, Any]]:
    """Every run's rows in run order, in this process (the table's ``job(...)``)."""
    rows: list[dict[str, Any]] = []
    for run in run_inputs(run_files, manifests, params, data_tables):
        rows += per_run(run)
    return rows


def evaluate_job(function: str, run_files: Sequence[PathLike], manifests: Sequence[PathLike],
                 params: Mapping[str, Any], out_parquet: PathLike, data_tables: Sequence[PathLike] = (),
                 cache: dict[Any, Any] | None = None) -> int:
    """One run's evaluation for one table: ``function`` (``"module:function"``) over it, its rows into
    ``out_parquet``; ``cache``: shared with the run's other tables (:attr:`RunInputs.cache`). Returns the row count.

    Raises:
        ValueError: ``run_files`` are not of exactly one run.
    """
    import pandas as pd

    from hasfl.io import write_parquet
    from hasfl.registry import resolve

    runs = run_inputs(run_files, manifests, params, data_tables)
    if len(runs) != 1:
        raise ValueError(f"an evaluate job reads one run, got {len(runs)} ({', '.join(r.where for r in runs)})")
    if cache is not None:
        runs[0].cache = cache
    rows = resolve(function)(runs[0])
    write_parquet(pd.DataFrame.from_records(rows), out_parquet)
    return len(rows)


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
