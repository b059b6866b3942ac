"""Batch-norm sensitivity, per run: a run's final global model evaluated on the full test set under each batch-norm
statistics mode its state allows (the evaluate job's rows; the verdicts under each mode:
:mod:`hasfl.analysis.bn_sensitivity`).

BN running statistics never enter training, so the modes of ``model.bn_stats`` (:mod:`hasfl.models.bn`:
``per_width``, ``mixed``, ``batch``) change only how a trained model is evaluated; every run tracks both running
modes in ``final.pt``. A run trained with ``bn_stats: batch`` has no running statistics: ``batch`` only.

A fourth mode is evaluated here only, never in training: ``static``, HeteroFL's static batch norm
done by clients (its official code: ``src/models/conv.py``, ``BatchNorm2d(momentum=None,
track_running_stats=track)``; ``src/test_classifier_fed.py``, ``running(dataset['train'], model)``
before ``test``): the statistics of the evaluated model recomputed by a forward pass, in training
mode and without gradients, over the train data of every client whose cap allows the evaluated
width (pmax = 1 for the full model), in batches of the dataset's local batch size, averaged over
the batches as ``momentum=None`` does. HeteroFL makes that pass over the whole train set on the
server; here only clients that may run the model make it, so no cap is broken.

Models without batch norm (Shakespeare's LSTM) do not depend on the mode and give no rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.per_run.base import RunInputs
from hasfl.analysis.per_run.files import read_json

__all__ = ["COLUMNS", "EVAL_BATCH", "STATIC", "capable_batches", "evaluate_run", "final_accuracy", "modes_of",
           "static_statistics"]

COLUMNS = ["dataset", "method", "seed", "status", "run_mode", "mode", "final_acc_pct", "logged_final_acc_pct"]
#: the evaluation-only mode (HeteroFL's static batch norm by the capable clients; see the module doc)
STATIC = "static"
#: test-set batch of the ``batch`` mode (the engine's evaluation batch when BN uses batch statistics,
#: hasfl.fl.runtime.Evaluator.BATCH): with batch statistics the batch changes the result
EVAL_BATCH = 2048


def modes_of(run_mode: str) -> tuple[str, ...]:
    """The modes a run trained under ``run_mode`` can be evaluated in (its own first; ``static`` last)."""
    from hasfl.models.bn import BN_MODES

    if run_mode == "batch":
        return ("batch",)
    return (run_mode, *(m for m in BN_MODES if m != run_mode), STATIC)


def final_accuracy(family: Any, bundle: Any, state: Mapping[str, Any], run_mode: str, mode: str,
                   static_batches: Sequence[Any] = (), device: str = "cpu") -> float:
    """Test accuracy (percent) of the full global model of ``state`` (a run trained under ``run_mode``) with
    the batch-norm statistics of ``mode``; ``static`` recomputes them over ``static_batches`` (NaN without); computed
    on ``device``."""
    from hasfl.analysis.stale import evaluate_accuracy
    from hasfl.models.bn import model_at

    if mode == STATIC:
        if not static_batches:
            return math.nan
        net = static_statistics(model_at(family, 1.0, state, run_mode), static_batches, device)
        return 100.0 * evaluate_accuracy(net, bundle, device=device)
    return 100.0 * evaluate_accuracy(model_at(family, 1.0, state, mode), bundle,
                                     EVAL_BATCH if mode == "batch" else None, device)


def static_statistics(model: Any, batches: Sequence[Any], device: str = "cpu") -> Any:
    """``model`` with the running statistics of every BN layer recomputed over ``batches`` (inputs),
    each batch weighing the same (``momentum=None``, HeteroFL's static batch norm); in eval mode, on ``device``."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    model.to(device).train()
    with torch.no_grad():
        for x in batches:
            if len(x) > 1:  # batch norm cannot normalise a single sample in training mode
                model(x.to(device))
    return model.eval()


def capable_batches(bundle: Any, partition: pd.DataFrame, clients: pd.DataFrame, p: float,
                    batch_size: int) -> list[Any]:
    """The train inputs of every client whose cap allows width ``p`` (pmax >= p), client by client in
    order of id, in batches of ``batch_size`` (the order the samples have in the partition)."""
    import torch

    capable = sorted(int(c) for c, q in zip(clients["client_id"], clients["pmax"], strict=True) if float(q) >= p)
    rows = partition[(partition["split"] == "train") & partition["client_id"].isin(capable)]
    out = []
    for _, g in rows.groupby("client_id", sort=True):
        idx = torch.tensor(g["sample_index"].to_numpy())
        for s in range(0, len(idx), batch_size):
            out.append(bundle.inputs(bundle.train_x[idx[s:s + batch_size]]))
    return out


def evaluate_run(run: RunInputs) -> list[dict[str, Any]]:
    """One run's rows (:data:`COLUMNS`): its final model under every batch-norm mode of
    its model's rule (none for a model without batch norm: every mode is the same model). Needs final.pt and
    run.json; the ``static`` mode, the data stage's partition.parquet and clients.parquet of the run's dataset x
    seed. A run that did not complete keeps its rows with NaN accuracies."""
    from hasfl.analysis.coverage import load_global_state

    run.require("bn_sensitivity", ("final.pt", "run.json"))
    model = run.spec["model"]
    if model.get("arch") != "cnn":
        return []
    f = run.files
    summary = read_json(f["run.json"])
    status = str(summary.get("status", "completed"))
    logged = summary.get("final_test_acc")
    run_mode = str(model.get("bn_stats", "per_width"))
    state = load_global_state(str(f["final.pt"])) if status == "completed" else None
    rows = []
    for mode in modes_of(run_mode):
        acc = math.nan
        if state is not None and mode == STATIC:
            if not {"partition.parquet", "clients.parquet"} <= set(run.data):
                raise ValueError(f"bn_sensitivity: the static mode of {run.dataset}/{run.method}/seed{run.seed} needs "
                                 "the data stage's partition.parquet and clients.parquet among the inputs")
            key = ("capable", run.dataset, run.seed, 1.0)
            if key not in run.cache:
                run.cache[key] = capable_batches(run.bundle(), pd.read_parquet(run.data["partition.parquet"]),
                                                     pd.read_parquet(run.data["clients.parquet"]), 1.0,
                                                     int(run.dataset_params()["optim"]["batch_size"]))
            acc = final_accuracy(run.family(), run.bundle(), state, run_mode, mode, run.cache[key], run.device)
        elif state is not None:
            acc = final_accuracy(run.family(), run.bundle(), state, run_mode, mode, device=run.device)
        rows.append({"dataset": run.dataset, "method": run.method, "seed": run.seed, "status": status,
                     "run_mode": run_mode, "mode": mode, "final_acc_pct": acc,
                     "logged_final_acc_pct": float(logged) * 100.0 if logged is not None else math.nan})
    return rows
