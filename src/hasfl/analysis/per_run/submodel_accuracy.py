"""Sub-model accuracy: the sub-models the last round's participants held, cut from the final global model and
evaluated under each method's declared batch-norm rule (F9's sub-model unit; docs/decisions.md, the section
on F9's sub-model unit). No training.

Per run (every run of a method shown in Table 4, and of Uniform): the participants of the last round of its
participation.parquet, each with its trained width ``p_trained`` and its window (``prefix``: the leading units;
``rolling``: :class:`hasfl.models.slicing.Window` ``("rolling", shift)``; ``sampled``: FedEcover's units replayed
from the run's seed, :func:`hasfl.analysis.per_run.coverage_over_time.row_windows`; ``masked``: FIARSE's magnitude
mask at the participant's share, :class:`MaskedShare`; ``partition/K``: its block of the shuffled partition,
:class:`PartitionBlock`, the other coordinates 0). Each participant's
sub-model is cut from final.pt at that width and window and evaluated on the full test set with the batch-norm
statistics of the method's rule (:attr:`hasfl.registry.MethodInfo.eval_bn`):

* ``per_width`` / ``mixed``: a prefix, :func:`hasfl.models.bn.model_at`; another window, that width's set (or the
  mixed set), which a non-nested run keeps in global channel coordinates (:mod:`hasfl.fl.bn_stats`), gathered at
  the window's channels; the full channel count: the global model's own buffers (per_width).
* ``batch``: the test batch's own statistics (batches of :data:`hasfl.analysis.per_run.bn_sensitivity.EVAL_BATCH`).
* ``static``: recomputed for that sub-model over the train data of the clients whose cap allows its width
  (:func:`hasfl.analysis.per_run.bn_sensitivity.static_statistics`, :func:`~hasfl.analysis.per_run.bn_sensitivity.capable_batches`).

Where a rule cannot apply cleanly (the run kept no running statistics; a window's width set missing or not in
global coordinates) the sub-model is evaluated with ``batch`` and ``bn_used`` / ``bn_note`` say so. The run's
``submodel_acc_pct`` is the unweighted mean over its last round's participants.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hasfl.analysis.per_run.base import RunInputs
from hasfl.analysis.per_run.files import read_json
from hasfl.registry import MASKED_WINDOW, METHODS, PARTITION_WINDOW

if TYPE_CHECKING:
    from torch import Tensor, nn

    from hasfl.models.family import ModelFamily
    from hasfl.models.slicing import Window


PathLike = str | Path
NAME = "submodel_accuracy"
#: one row per run
COLUMNS = ["dataset", "method", "seed", "status", "last_round", "n_participants", "n_submodels", "mean_p_trained",
           "windows", "bn_rule", "bn_used", "bn_note", "submodel_acc_pct", "min_submodel_acc_pct",
           "max_submodel_acc_pct"]
#: what a model without batch norm is evaluated with (every rule is the same model)
NO_BN = "none"

__all__ = ["COLUMNS", "NAME", "NO_BN", "MaskedShare", "PartitionBlock", "evaluate_run", "last_round_submodels",
           "masked_model", "run_row", "submodel_accuracy", "submodel_model"]


@dataclass(frozen=True)
class MaskedShare:
    """A FIARSE participant's sub-model (ledger window ``masked``): the global model masked at the budget ``share``
    of its allocated width (:func:`hasfl.models.magnitude.parameter_shares`), as the official code evaluates each
    size (``FIARSE:fiarse/server.py:103-107, 133-136``: the threshold of the evaluated model itself)."""

    share: float
    kind: str = MASKED_WINDOW
    nested: bool = False


@dataclass(frozen=True)
class PartitionBlock:
    """A shuffled-partition participant's sub-model (ledger window ``partition/K``, Deng et al. 2025): the global
    model's parameter coordinates of block ``block`` of the run's partition into ``partitions`` blocks drawn from
    ``seed`` (:func:`hasfl.models.partition.blocks`), the others 0, as the participant's network ``w * m_k`` is
    (:mod:`hasfl.fl.methods.shuffled`)."""

    block: int
    partitions: int
    seed: int
    nested: bool = False

    @property
    def kind(self) -> str:
        """The ledger's window (``partition/K``)."""
        return f"{PARTITION_WINDOW}/{self.partitions}"


def last_round_submodels(family: ModelFamily, ledger: pd.DataFrame,
                         seed: int) -> tuple[int, list[tuple[float, Any]]]:
    """(the ledger's last round, (p_trained, window) of each of its participants in ledger order); ``ledger`` as
    :func:`hasfl.analysis.per_run.coverage_over_time.read_ledger` returns it (sampled windows are replayed
    over the whole ledger, so it must be the run's whole ledger). A masked (FIARSE) row's window is its
    :class:`MaskedShare`, a shuffled-partition row's its :class:`PartitionBlock`."""
    from hasfl.analysis.per_run.coverage_over_time import partitions_of, row_windows

    last = int(ledger["round"].max())
    sel = [i for i, r in enumerate(ledger["round"].tolist()) if int(r) == last]
    k = partitions_of(str(ledger["window"].iloc[0]))
    if k is not None:
        return last, [(float(ledger["p_trained"].iloc[i]),
                       PartitionBlock(int(ledger["window_shift"].iloc[i]), k, int(seed))) for i in sel]
    if set(ledger["window"]) == {MASKED_WINDOW}:
        from hasfl.models.magnitude import parameter_shares

        share = parameter_shares(family)
        return last, [(float(ledger["p_trained"].iloc[i]), MaskedShare(share(float(ledger["p"].iloc[i]))))
                      for i in sel]
    windows = row_windows(family, ledger, int(seed))
    return last, [(float(ledger["p_trained"].iloc[i]), windows[i]) for i in sel]


def masked_model(family: ModelFamily, state: Mapping[str, Tensor], held: MaskedShare | PartitionBlock, rule: str,
                 static_batches: Callable[[float], Sequence[Any]] | None = None,
                 device: str = "cpu") -> tuple[nn.Module, str, str]:
    """The full model of a saved global state masked to the coordinates a participant ``held``, under ``rule``: a
    :class:`MaskedShare` keeps the ranked coordinates at or above the share's threshold (:mod:`hasfl.models.magnitude`),
    a :class:`PartitionBlock` its block's, the others set to 0; then the batch-norm rule (the ``static`` statistics
    recomputed on the masked model, on ``device``; ``batch``: the test batch's, at evaluation)."""
    import torch

    from hasfl.analysis.per_run.bn_sensitivity import STATIC, static_statistics
    from hasfl.models.bn import model_at

    def masked(model: nn.Module) -> nn.Module:
        with torch.no_grad():
            if isinstance(held, PartitionBlock):
                from hasfl.models.partition import blocks, parameter_shapes

                ids = blocks(parameter_shapes(family), held.partitions, held.seed)
                for n, w in model.named_parameters():
                    w.mul_(ids[n] == held.block)
                return model
            from hasfl.models.magnitude import mask, masked_parameters, threshold

            ranked = masked_parameters(model)
            tau = threshold(list(ranked.values()), held.share)
            for w in ranked.values():
                w.mul_(mask(w, tau))
        return model

    if rule == STATIC:
        batches = list(static_batches(1.0)) if static_batches is not None else []
        model = masked(model_at(family, 1.0, state, "per_width"))
        if batches:
            return static_statistics(model, batches, device), STATIC, ""
        from hasfl.models.bn import batch_statistics

        return batch_statistics(model), "batch", "static: no train data of a client allowed this width"
    from hasfl.models.slicing import Window

    model, used, why = submodel_model(family, state, 1.0, Window(), rule, static_batches, device)
    return masked(model), used, why


def _bn_counts(family: ModelFamily) -> dict[str, int]:
    import torch

    from hasfl.models.bn import bn_layers

    with torch.random.fork_rng(devices=[]):
        return bn_layers(family.build(1.0))


def _window_state(family: ModelFamily, state: Mapping[str, Tensor], p: float, window: Window,
                  mode: str) -> tuple[dict[str, Tensor] | None, str]:
    """The width-``p`` state of ``window`` cut from a saved global state with the running statistics of ``mode``
    (``per_width`` or ``mixed``) gathered at the window's channels; (None, why) when that set is not there."""
    from hasfl.models.bn import STATS, mixed_key, split_state, width_key
    from hasfl.models.slicing import gather

    own, extra = split_state(state)
    rules = family.slice_rules(p, window)
    sub = family.extract(own, p, window)
    for layer, full in _bn_counts(family).items():
        key = f"{layer}.running_mean"
        if key not in sub:
            continue
        count = int(sub[key].numel())
        if mode == "per_width" and count == full:
            continue  # the global buffers, already gathered
        for stat in STATS:
            k = width_key(layer, count, stat) if mode == "per_width" else mixed_key(layer, stat)
            src = extra.get(k)
            if src is None and mode == "mixed":
                src = own[f"{layer}.{stat}"]  # no client below full width yet: the mixed set is the full one
            if src is None or int(src.numel()) != full:
                return None, (f"{layer}: no {mode} statistics of {count} channels in global coordinates"
                              if src is None or mode == "per_width" else f"{layer}: the {mode} set is not full size")
            sub[f"{layer}.{stat}"] = gather(src, rules[f"{layer}.{stat}"]).clone()
    return sub, ""


def submodel_model(family: ModelFamily, state: Mapping[str, Tensor], p: float, window: Window, rule: str,
                   static_batches: Callable[[float], Sequence[Any]] | None = None,
                   device: str = "cpu") -> tuple[nn.Module, str, str]:
    """(the width-``p`` sub-model of ``window`` of a saved global state, ready to evaluate under ``rule``, the mode
    it was given -- ``rule``, ``batch`` where ``rule`` cannot apply, or :data:`NO_BN` -- and why it differs).
    ``static_batches(p)``: the train inputs of the clients allowed width ``p`` (the ``static`` rule, its statistics
    pass on ``device``)."""
    import torch

    from hasfl.analysis.per_run.bn_sensitivity import STATIC, static_statistics
    from hasfl.models.bn import RUNNING_MODES, batch_statistics, model_at, split_state

    counts = _bn_counts(family)
    own, _ = split_state(state)
    has_running = any(k.endswith(".running_mean") for k in own)

    def build(sub: Mapping[str, Tensor]) -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            model = family.build(p)
        model.load_state_dict(sub)
        return model

    def windowed(mode: str) -> tuple[nn.Module | None, str]:
        if window.nested:
            return model_at(family, p, state, mode), ""
        sub, why = _window_state(family, state, p, window, mode)
        return (build(sub), "") if sub is not None else (None, why)

    if not counts:
        return (model_at(family, p, state, "per_width") if window.nested else build(family.extract(own, p, window)),
                NO_BN, "")
    if not has_running:
        why = "" if rule == "batch" else "the run kept no running statistics (bn_stats: batch)"
        model = model_at(family, p, state, "batch") if window.nested else batch_statistics(build(
            family.extract(own, p, window)))
        return model, "batch", why
    if rule in RUNNING_MODES:
        model, why = windowed(rule)
        if model is not None:
            return model, rule, ""
        return batch_statistics(build(family.extract(own, p, window))), "batch", why
    if rule == STATIC:
        batches = list(static_batches(p)) if static_batches is not None else []
        model = model_at(family, p, state, "per_width") if window.nested else build(family.extract(own, p, window))
        if not batches:
            return batch_statistics(model), "batch", "static: no train data of a client allowed this width"
        return static_statistics(model, batches, device), STATIC, ""
    if rule == "batch":
        model = model_at(family, p, state, "batch") if window.nested else batch_statistics(
            build(family.extract(own, p, window)))
        return model, "batch", ""
    raise ValueError(f"submodel_accuracy: unknown batch-norm rule {rule!r}")


def submodel_accuracy(family: ModelFamily, bundle: Any, state: Mapping[str, Tensor], p: float, window: Window,
                      rule: str, static_batches: Callable[[float], Sequence[Any]] | None = None,
                      device: str = "cpu") -> tuple[float, str, str]:
    """(test accuracy in percent of the sub-model of :func:`submodel_model`, computed on ``device``, the mode used,
    why it differs)."""
    from hasfl.analysis.per_run.bn_sensitivity import EVAL_BATCH
    from hasfl.analysis.stale import evaluate_accuracy

    if isinstance(window, (MaskedShare, PartitionBlock)):
        model, used, why = masked_model(family, state, window, rule, static_batches, device)
    else:
        model, used, why = submodel_model(family, state, p, window, rule, static_batches, device)
    return 100.0 * evaluate_accuracy(model, bundle, EVAL_BATCH if used == "batch" else None, device), used, why


def _window_text(windows: Sequence[Window]) -> str:
    return "/".join(sorted({w.kind for w in windows}))


def run_row(dataset: str, method: str, seed: int, status: str, family: ModelFamily, bundle: Any,
            state: Mapping[str, Tensor] | None, ledger: pd.DataFrame, rule: str,
            static_batches: Callable[[float], Sequence[Any]] | None = None, device: str = "cpu") -> dict[str, Any]:
    """One run's row (:data:`COLUMNS`): its last round's sub-models evaluated on ``device`` (``state`` None: not
    completed, accuracies NaN). A sub-model held by several participants is evaluated once and counted once per
    holder."""
    last, subs = last_round_submodels(family, ledger, seed)
    row: dict[str, Any] = {"dataset": dataset, "method": method, "seed": int(seed), "status": status,
                           "last_round": last, "n_participants": len(subs),
                           "n_submodels": len(set(subs)),
                           "mean_p_trained": float(sum(p for p, _ in subs) / len(subs)) if subs else math.nan,
                           "windows": _window_text([w for _, w in subs]), "bn_rule": rule, "bn_used": "",
                           "bn_note": "", "submodel_acc_pct": math.nan, "min_submodel_acc_pct": math.nan,
                           "max_submodel_acc_pct": math.nan}
    if state is None or not subs:
        return row
    done: dict[tuple[float, Window], tuple[float, str, str]] = {}
    for key in subs:
        if key not in done:
            done[key] = submodel_accuracy(family, bundle, state, key[0], key[1], rule, static_batches, device)
    accs = [done[k][0] for k in subs]
    row.update(bn_used=", ".join(sorted({u for _, u, _ in done.values()})),
               bn_note="; ".join(dict.fromkeys(w for _, _, w in done.values() if w)),
               submodel_acc_pct=float(sum(accs) / len(accs)), min_submodel_acc_pct=float(min(accs)),
               max_submodel_acc_pct=float(max(accs)))
    return row


def evaluate_run(run: RunInputs) -> list[dict[str, Any]]:
    """One run's row (:func:`run_row`): its last round's sub-models under its method's declared batch-norm rule. Needs
    participation.parquet, final.pt and run.json; the ``static`` rule, the data stage's partition.parquet and
    clients.parquet of the run's dataset x seed."""
    from hasfl.analysis.per_run import bn_sensitivity as bns
    from hasfl.analysis.coverage import load_global_state
    from hasfl.analysis.per_run.coverage_over_time import read_ledger

    run.require(NAME, ("participation.parquet", "final.pt", "run.json"))
    f = run.files
    summary = read_json(f["run.json"])
    status = str(summary.get("status", "completed"))
    state = load_global_state(str(f["final.pt"])) if status == "completed" else None
    rule = METHODS[run.method].eval_bn if run.method in METHODS else "per_width"

    def static_batches(p: float) -> list[Any]:
        key = ("capable", run.dataset, run.seed, float(p))
        if key not in run.cache:
            if not {"partition.parquet", "clients.parquet"} <= set(run.data):
                raise ValueError(f"submodel_accuracy: the static rule of {run.dataset}/seed{run.seed} needs the data "
                                 "stage's partition.parquet and clients.parquet among the inputs")
            run.cache[key] = bns.capable_batches(run.bundle(), pd.read_parquet(run.data["partition.parquet"]),
                                                 pd.read_parquet(run.data["clients.parquet"]), p,
                                                 int(run.dataset_params()["optim"]["batch_size"]))
        return run.cache[key]

    return [run_row(run.dataset, run.method, run.seed, status, run.family(), run.bundle(), state,
                    read_ledger(f["participation.parquet"]), rule, static_batches, run.device)]
