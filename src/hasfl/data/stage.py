"""The data stage: per dataset x seed, the client partition and the client table.

Outputs (paper Sections 4.1, 4.4, 4.6):

* ``partition.parquet`` -- ``client_id, split, sample_index``: which stored sample
  (index into the dataset's train or test tensors) belongs to which client.
  Image datasets partition only the train set (evaluation uses the full test set);
  Shakespeare clients own their train and test windows.
* ``clients.parquet`` -- ``client_id, pmax, n_train, n_test, tv`` (+ ``play, role``
  for Shakespeare): capacity and ground-truth heterogeneity, the TV distance
  between the client's train label (next-character) distribution and the global
  train distribution.
* ``manifest.json`` -- the sha256 of both files and the dataset summary (Table 2),
  written last, so its presence means both files are complete.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hasfl.data.base import DatasetBundle
from hasfl.data.partition import assign_capacities, dirichlet_partition, distribution, tv_distance
from hasfl.io import sha256_file, write_json, write_parquet


def client_indices(bundle: DatasetBundle, data_cfg: Mapping[str, Any], seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per-client train and test sample indices for ``bundle`` under ``seed``."""
    n_clients = int(data_cfg["clients"])
    if bundle.task == "text":
        train_client = bundle.meta["train_client"].numpy()
        test_client = bundle.meta["test_client"].numpy()
        n_found = int(train_client.max()) + 1
        if n_found != n_clients:
            raise ValueError(f"dataset '{bundle.name}' has {n_found} natural clients but federation.clients = "
                             f"{n_clients}; set dataset_params.{bundle.name}.top_roles to {n_clients}")
        train = [np.flatnonzero(train_client == c).astype(np.int64) for c in range(n_clients)]
        test = [np.flatnonzero(test_client == c).astype(np.int64) for c in range(n_clients)]
        return train, test
    part = data_cfg["partition"]
    train = dirichlet_partition(bundle.train_y.numpy(), n_clients, part["alpha"], seed,
                                min_size=part["min_client_size"], max_attempts=part["max_attempts"])
    return train, [np.zeros(0, dtype=np.int64) for _ in range(n_clients)]


def build_tables(bundle: DatasetBundle, data_cfg: Mapping[str, Any], seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The partition table and the client table of one dataset x seed."""
    train, test = client_indices(bundle, data_cfg, seed)
    cap = data_cfg["capacity"]
    pmax = assign_capacities(cap["tiers"], cap["counts"], seed, shuffle=cap["shuffle"])
    labels = bundle.train_y.numpy()
    global_dist = distribution(labels, bundle.num_classes)
    rows = []
    for c, (tr, te) in enumerate(zip(train, test, strict=True)):
        rows.append({"client_id": c, "split": "train", "idx": tr})
        rows.append({"client_id": c, "split": "test", "idx": te})
    partition = pd.DataFrame({
        "client_id": np.concatenate([np.full(len(r["idx"]), r["client_id"], dtype=np.int64) for r in rows]),
        "split": np.concatenate([np.full(len(r["idx"]), r["split"], dtype=object) for r in rows]),
        "sample_index": np.concatenate([r["idx"] for r in rows]).astype(np.int64),
    })
    clients = pd.DataFrame({
        "client_id": np.arange(len(train), dtype=np.int64),
        "pmax": pmax,
        "n_train": np.array([len(t) for t in train], dtype=np.int64),
        "n_test": np.array([len(t) for t in test], dtype=np.int64),
        "tv": [tv_distance(distribution(labels[t], bundle.num_classes), global_dist) for t in train],
    })
    if "clients" in bundle.meta and bundle.task == "text":
        info = {int(d["client_id"]): d for d in bundle.meta["clients"]}
        clients["play"] = [str(info[c]["play"]) for c in clients["client_id"]]
        clients["role"] = [str(info[c]["role"]) for c in clients["client_id"]]
    return partition, clients


def dataset_summary(bundle: DatasetBundle, n_clients: int) -> dict[str, Any]:
    """The facts of Table 2 for one dataset, and the accuracy floors a run must beat: always
    predicting the test set's most common class (``majority_rate``) and guessing (``chance_rate``)."""
    counts = np.bincount(bundle.test_y.cpu().numpy(), minlength=int(bundle.num_classes))
    return {
        "dataset": bundle.name,
        "task": bundle.task,
        "classes": int(bundle.num_classes),
        "train_size": int(len(bundle.train_y)),
        "test_size": int(len(bundle.test_y)),
        "input_shape": list(bundle.input_shape),
        "clients": int(n_clients),
        "majority_rate": float(counts.max() / max(1, counts.sum())),
        "chance_rate": 1.0 / int(bundle.num_classes),
    }


def run_data_stage(bundle: DatasetBundle, data_cfg: Mapping[str, Any], seed: int, out_dir: str | Path,
                   identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write partition.parquet, clients.parquet and manifest.json for one dataset x seed; ``identity``
    (:func:`hasfl.identity.data_identity`: config slice, raw sha256, code) goes into the manifest."""
    out = Path(out_dir)
    partition, clients = build_tables(bundle, data_cfg, seed)
    files = {"partition.parquet": partition, "clients.parquet": clients}
    digests = {}
    for name, df in files.items():
        write_parquet(df, out / name)
        digests[name] = {"sha256": sha256_file(out / name), "rows": int(len(df))}
    manifest = {"seed": int(seed), "files": digests, "summary": dataset_summary(bundle, len(clients)),
                "data_config": dict(data_cfg)}
    if identity is not None:
        manifest["identity"] = dict(identity)
    write_json(out / "manifest.json", manifest)
    return manifest


def stage_job(data_cfg: Mapping[str, Any], seed: int, out_dir: str | Path,
              identity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The data_stage job: load the dataset of ``data_cfg``, write its tables and ``identity``."""
    import logging

    from hasfl.data import load_dataset

    bundle = load_dataset(data_cfg["dataset"], data_cfg["data_dir"], data_cfg["dataset_params"])
    manifest = run_data_stage(bundle, data_cfg, int(seed), out_dir, identity)
    logging.getLogger("hasfl.data").info("wrote %s", manifest)
    return manifest
