"""What one evaluate job runs (:mod:`hasfl.analysis.evaluations`): one run as a per-run evaluation reads it
(:class:`RunInputs`), a per-run function over it, its rows into the entry's file.

The code of every evaluation's store key, with its function's module (:func:`hasfl.dag.identity.evaluation_code_digest`):
it imports the file contract (:mod:`hasfl.analysis.per_run.files`), the models and data loaders it builds, the
registry that resolves the function and the Parquet writer; no table, finding, page or artifact entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["EVALS", "EVAL_FILE", "RunInputs", "eval_dir", "evaluate_job", "evaluate_runs", "evaluation_device",
           "run_inputs"]

PathLike = str | Path
#: The folder of the evaluations in a results folder (``<results>/evals/<dataset>/<method>/seed<s>/<table>/``).
EVALS = "evals"
#: The one file of an evaluation (beside its manifest.json).
EVAL_FILE = "rows.parquet"


def eval_dir(results: PathLike, dataset: str, method: str, seed: int) -> str:
    """The folder of run ``dataset/method/seed<seed>``'s evaluations in the results folder ``results`` (one folder per
    table in it, each linked to its store entry)."""
    return f"{results}/{EVALS}/{dataset}/{method}/seed{int(seed)}"


@dataclass
class RunInputs:
    """One run as a per-run evaluation reads it: its files by name, its data stage's files by name, the preset's
    model spec of its dataset (``model``, ``in_shape``, ``num_classes``: :func:`hasfl.analysis.inputs.preset_models`)
    and the table's config values; ``cache`` is shared by the runs of one process (one model family and one loaded
    dataset per dataset); ``device``: where its models are evaluated (:func:`evaluation_device`)."""

    dataset: str
    method: str
    seed: int
    files: dict[str, Path]
    data: dict[str, Path]
    spec: dict[str, Any]
    params: Mapping[str, Any]
    cache: dict[Any, Any] = field(default_factory=dict)
    device: str = "cpu"

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
    from hasfl.analysis.per_run.files import group_data_files, group_run_files, preset_models

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


def evaluation_device(setting: str) -> tuple[str, str]:
    """Where an evaluate job computes (on the device a training job would use): the run's config key
    ``device`` (its manifest's, which is this build's) resolved on this machine as a training job resolves it
    (:func:`hasfl.device.resolve`: ``auto`` takes CUDA when torch can use it), and its device class (``cpu``, or
    ``cuda:<the GPU's name>``: part of a GPU evaluation's store key, as of a run's). On a GPU, strict fp32 (no TF32)
    with cuDNN's deterministic algorithms and no benchmark: the same counts on the same GPU model, the CPU's
    arithmetic precision.

    Raises:
        hasfl.device.DeviceError: ``device: cuda`` where torch cannot use CUDA.
    """
    import torch

    from hasfl.device import resolve

    device = resolve(str(setting), torch.cuda.is_available())
    if not device.startswith("cuda"):
        return "cpu", "cpu"
    for knob in (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn):
        knob.fp32_precision = "ieee"
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    return device, f"cuda:{torch.cuda.get_device_name(torch.device(device))}"


def evaluate_job(function: str, run_files: Sequence[PathLike], manifests: Sequence[PathLike],
                 params: Mapping[str, Any], out_parquet: PathLike, data_tables: Sequence[PathLike] = (),
                 cache: dict[Any, Any] | None = None, device: str = "cpu") -> int:
    """One run's evaluation for one table: ``function`` (``"module:function"``) over it, its rows into
    ``out_parquet``; ``cache``: shared with the run's other tables (:attr:`RunInputs.cache`); ``device``: where its
    models are evaluated (:func:`evaluation_device`). Returns the row count.

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
    runs[0].device = device
    rows = resolve(function)(runs[0])
    write_parquet(pd.DataFrame.from_records(rows), out_parquet)
    return len(rows)
