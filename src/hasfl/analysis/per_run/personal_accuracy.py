"""FedLPS's own evaluation (Xue et al. 2025; official code ``sunnyxuejj/FedLPS-main`` @b499bbb, read in
docs/peers/fedlps-official.md section 5): every client's model on that client's own test split, reported as the
unweighted mean over all clients (``FedLPS.py:240-275``). No training.

Per run (of a method whose runs keep local models, :data:`hasfl.analysis.artifacts.table_entries.PERSONAL_METHODS`),
one row per client of the federation:

* **its model**: the local model it kept (``local_models.pt``: its last local training at a rate above 1/4,
  :mod:`hasfl.fl.methods.fedlps`), else the final global model (``final.pt``), as the official evaluates a client
  without ``final_parameters`` with the dense global model (``FedLPS.py:242-251``);
* **batch norm**: the test batch's own statistics (the official models keep no running statistics,
  ``Models.py@27b236b:569, 573``), in batches of the dataset's local batch size (the official test loader's
  ``local_bs``, ``Hetero_Client.py:113-115``);
* **its test split** (:func:`own_test_split`): the data stage's test samples of the client where it has them
  (Shakespeare's roles); on an image dataset, whose test set is shared, the official rule
  (``sampling.py:190-298``: for each label of the client's shards, test samples of that label as many as a shard
  holds, clients sharing test samples) in this protocol's Dirichlet partition: for each label of the client's train
  split, as many test samples of that label as it has train samples of it (all of them when the test set holds
  fewer), without replacement, in one shuffled order, from a generator of the run's seed and the client's id.

Beside each client's accuracy, the final global model's on the same split (``global_acc_pct``): the global-model
comparison on the authors' splits. A client's accuracy is in percent; the table's means are unweighted over clients,
as the official's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hasfl.analysis.per_run.base import RunInputs
from hasfl.analysis.per_run.files import read_json

if TYPE_CHECKING:
    from torch import nn

    from hasfl.models.family import ModelFamily

__all__ = ["COLUMNS", "NAME", "RUN_FILES", "STREAM", "client_rows", "evaluate_run", "local_model", "own_test_split",
           "split_accuracy"]

NAME = "personal_accuracy"
RUN_FILES = ("local_models.pt", "final.pt", "run.json")
#: one row per client of a run
COLUMNS = ["dataset", "method", "seed", "status", "client_id", "pmax", "model", "p_local", "n_test", "acc_pct",
           "global_acc_pct"]
#: The numpy stream of a run seed an image client's test split is drawn from (with the client's id).
STREAM = 12


def own_test_split(train_labels: np.ndarray, test_labels: np.ndarray, seed: int, client: int) -> np.ndarray:
    """An image client's test split (module docstring): indices into the test set, per label of ``train_labels`` as
    many of that label as the client has (capped by the test set's), drawn without replacement and shuffled once."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(client), STREAM]))
    labels, counts = np.unique(np.asarray(train_labels), return_counts=True)
    parts = []
    for label, n in zip(labels.tolist(), counts.tolist(), strict=True):
        pool = np.flatnonzero(np.asarray(test_labels) == label)
        parts.append(rng.choice(pool, size=min(int(n), len(pool)), replace=False))
    split = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return split[rng.permutation(len(split))].astype(np.int64)


def split_accuracy(model: nn.Module, bundle: Any, index: np.ndarray, batch_size: int, device: str = "cpu") -> float:
    """Accuracy in percent of ``model`` (eval mode) on the test samples ``index`` in that order, in batches of
    ``batch_size`` (NaN for an empty split)."""
    import torch

    if len(index) == 0:
        return math.nan
    model.eval().to(device)
    idx = torch.as_tensor(index)
    correct = 0
    with torch.no_grad():
        for s in range(0, len(idx), batch_size):
            b = idx[s:s + batch_size]
            logits = model(bundle.inputs(bundle.test_x[b]).to(device))
            correct += int((logits.argmax(1).cpu() == bundle.test_y[b]).sum())
    return 100.0 * correct / len(idx)


def local_model(family: ModelFamily, kept: Mapping[str, Any]) -> nn.Module:
    """A kept local model (``{"p": width, "state": state_dict}``) as a module of its width, its batch norm
    normalising by each test batch's statistics."""
    import torch

    from hasfl.models.bn import batch_statistics

    with torch.random.fork_rng(devices=[]):
        model = family.build(float(kept["p"]))
    model.load_state_dict(kept["state"])
    return batch_statistics(model)


def client_rows(dataset: str, method: str, seed: int, status: str, clients: pd.DataFrame,
                splits: Mapping[int, np.ndarray], kept: Mapping[int, Mapping[str, Any]], global_model: nn.Module | None,
                family: ModelFamily, bundle: Any, batch_size: int, device: str = "cpu") -> list[dict[str, Any]]:
    """One row per client (:data:`COLUMNS`); ``global_model`` None: the run did not complete, accuracies NaN."""
    rows = []
    for cid, pmax in zip(clients["client_id"].astype(int), clients["pmax"].astype(float), strict=True):
        own = kept.get(cid)
        split = splits[cid]
        row = {"dataset": dataset, "method": method, "seed": int(seed), "status": status, "client_id": cid,
               "pmax": pmax, "model": "local" if own is not None else "global",
               "p_local": float(own["p"]) if own is not None else math.nan, "n_test": int(len(split)),
               "acc_pct": math.nan, "global_acc_pct": math.nan}
        if global_model is not None:
            row["global_acc_pct"] = split_accuracy(global_model, bundle, split, batch_size, device)
            row["acc_pct"] = (split_accuracy(local_model(family, own), bundle, split, batch_size, device)
                              if own is not None else row["global_acc_pct"])
        rows.append(row)
    return rows


def _splits(run: RunInputs, partition: pd.DataFrame, clients: pd.DataFrame) -> dict[int, np.ndarray]:
    bundle = run.bundle()
    test = partition[partition["split"] == "test"]
    if len(test):  # the data stage's own per-client test samples (Shakespeare)
        return {int(c): test.loc[test["client_id"] == c, "sample_index"].to_numpy(np.int64)
                for c in clients["client_id"]}
    train = partition[partition["split"] == "train"]
    train_y, test_y = bundle.train_y.numpy(), bundle.test_y.numpy()
    return {int(c): own_test_split(train_y[train.loc[train["client_id"] == c, "sample_index"].to_numpy()], test_y,
                                   run.seed, int(c)) for c in clients["client_id"]}


def evaluate_run(run: RunInputs) -> list[dict[str, Any]]:
    """One run's rows (:func:`client_rows`). Needs local_models.pt, final.pt and run.json, and the data stage's
    partition.parquet and clients.parquet of the run's dataset x seed."""
    import torch

    from hasfl.analysis.coverage import load_global_state
    from hasfl.models.bn import model_at

    run.require(NAME, RUN_FILES)
    if not {"partition.parquet", "clients.parquet"} <= set(run.data):
        raise ValueError(f"{NAME}: {run.dataset}/seed{run.seed} needs the data stage's partition.parquet and "
                         "clients.parquet among the inputs (each client's test split)")
    f = run.files
    status = str(read_json(f["run.json"]).get("status", "completed"))
    clients = pd.read_parquet(run.data["clients.parquet"])
    splits = _splits(run, pd.read_parquet(run.data["partition.parquet"]), clients)
    kept = {int(k): v for k, v in torch.load(f["local_models.pt"], map_location="cpu", weights_only=True).items()}
    family = run.family()
    global_model = (model_at(family, 1.0, load_global_state(str(f["final.pt"])), "batch")
                    if status == "completed" else None)
    return client_rows(run.dataset, run.method, run.seed, status, clients, splits, kept, global_model, family,
                       run.bundle(), int(run.dataset_params()["optim"]["batch_size"]), run.device)

