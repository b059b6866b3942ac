"""The measured workloads: random data of the paper's shapes, one restartable client update,
and instrumented federations.

The data are random uint8 tensors of the real shapes: throughput does not depend on pixel
values. Timing of whole rounds goes through the engine's own hook, a
:class:`~hasfl.fl.runtime.PhaseClock` read after every evaluated round; nothing under
``hasfl.fl`` or ``hasfl.models`` is patched.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from hasfl.config import data_config, run_config
from hasfl.data.base import DatasetBundle
from hasfl.data.partition import assign_capacities
from hasfl.fl.client import ClientData, LocalSGD, OptimConfig
from hasfl.fl.engine import run_federation
from hasfl.fl.runtime import Numerics, PhaseClock, family_for
from hasfl.models.family import ModelFamily

from .harness import Budget, OpCounter, median, rnd, sync

# Paper datasets (Table 2): sizes, shapes, classes. Shakespeare's test count is what our
# loader yields at paper scale (top 20 roles, 80-char windows, 0.8 split).
PAPER_DATA: dict[str, dict[str, Any]] = {
    "cifar10": {"task": "image", "shape": (3, 32, 32), "classes": 10, "train": 50_000, "test": 10_000,
                "mean": (0.4914, 0.4822, 0.4465), "std": (0.2470, 0.2435, 0.2616)},
    "emnist": {"task": "image", "shape": (1, 28, 28), "classes": 62, "train": 697_932, "test": 116_323,
               "mean": (0.1736,), "std": (0.3317,)},
    "shakespeare": {"task": "text", "shape": (80,), "classes": 96, "train": 522_058, "test": 129_322},
}
PHASES = ("local_sgd", "slicing", "aggregation", "estimation", "evaluation")


def synthetic_bundle(dataset: str, n_train: int, n_test: int, device: torch.device, seed: int = 0,
                     spec: Mapping[str, Any] | None = None) -> DatasetBundle:
    """Random uint8 data of ``dataset``'s real shapes and class count (``spec``, default :data:`PAPER_DATA`)."""
    spec = spec or PAPER_DATA[dataset]
    g = torch.Generator().manual_seed(seed)
    hi = 256 if spec["task"] == "image" else spec["classes"]

    def xs(n: int) -> Tensor:
        return torch.randint(0, hi, (n, *spec["shape"]), generator=g, dtype=torch.uint8)

    def ys(n: int) -> Tensor:
        return torch.randint(0, spec["classes"], (n,), generator=g, dtype=torch.int64)

    bundle = DatasetBundle(name=dataset, task=spec["task"], train_x=xs(n_train), train_y=ys(n_train),
                           test_x=xs(n_test), test_y=ys(n_test), num_classes=spec["classes"],
                           input_shape=tuple(spec["shape"]), mean=spec.get("mean"), std=spec.get("std"))
    return bundle.to(device)


def optim_for(config: Mapping[str, Any], dataset: str, batch_size: int | None = None) -> OptimConfig:
    """The dataset's local optimiser, one local epoch, optionally another batch size."""
    opt = OptimConfig.from_config(config["dataset_params"][dataset]["optim"])
    return replace(opt, local_epochs=1, batch_size=batch_size or opt.batch_size)


def family_of(config: Mapping[str, Any], dataset: str, bundle: DatasetBundle) -> ModelFamily:
    """The dataset's model family (config ``dataset_params.<d>.model``)."""
    return family_for(bundle, config["dataset_params"][dataset]["model"])


class ClientTimer:
    """One client update of a fixed sliced module, restartable from the same weights.

    :meth:`ours` times :meth:`LocalSGD.train <hasfl.fl.client.LocalSGD.train>` (or a method's
    trainer) over ``steps`` batches; :meth:`bare` the same epoch as a plain ``torch.optim.SGD`` loop.
    """

    def __init__(self, family: ModelFamily, p: float, bundle: DatasetBundle, optim: OptimConfig,
                 device: torch.device, trainer: LocalSGD | None = None, p_alloc: float | None = None,
                 precision: str = "fp32", numerics: Numerics | None = None) -> None:
        torch.manual_seed(0)
        self.numerics = numerics or Numerics.for_run(device, precision, bundle.task == "image")
        self.module = self.numerics.prepare(family.build(p))
        self.state0 = copy.deepcopy(self.module.state_dict())
        self.bundle, self.optim, self.device = bundle, optim, device
        self.trainer = trainer or LocalSGD(optim, bundle.inputs)
        self.trainer.autocast = self.numerics.autocast
        self.p, self.p_alloc = p, (p if p_alloc is None else p_alloc)
        self.steps, self.trial = 1, 0
        self._data: ClientData | None = None
        self.image = bundle.task == "image"
        if self.image:  # the bare loop normalises by hand
            self.mean = torch.tensor(bundle.mean or (0.0,), device=device).view(1, -1, 1, 1)
            self.std = torch.tensor(bundle.std or (1.0,), device=device).view(1, -1, 1, 1)

    def data(self) -> ClientData:
        """``steps`` batches of distinct random samples of the bundle."""
        n = self.steps * self.optim.batch_size
        g = torch.Generator().manual_seed(1000 + self.steps)
        index = torch.randperm(len(self.bundle.train_y), generator=g)[:n].to(self.device)
        return ClientData(0, index, self.bundle.train_x, self.bundle.train_y)

    def calibrate(self, min_trial_s: float, max_steps: int) -> None:
        """Warm up with one step; then, unless one step a trial is asked for (``min_trial_s`` 0),
        time two steps and pick the steps that make a trial last about ``min_trial_s``."""
        self.steps = 1
        self.ours()
        if min_trial_s > 0:
            self.steps = 2
            per_step = self.ours() / 2
            self.steps = int(min(max_steps, max(1, math.ceil(min_trial_s / max(per_step, 1e-6)))))
        self._data = self.data()

    def _reset(self) -> None:
        self.module.load_state_dict(self.state0)
        self.trial += 1

    def ours(self) -> float:
        """Seconds of one trainer ``train`` call over ``steps`` batches (one epoch)."""
        data = self._data
        if data is None or data.n != self.steps * self.optim.batch_size:
            data = self.data()
        self._reset()
        gen = torch.Generator().manual_seed(self.trial)
        self.trainer.begin_client(0, self.module, self.p_alloc, self.p)
        sync(self.device)
        with self.numerics.backend_flags():
            tic = time.perf_counter()
            self.trainer.train(self.module, data, self.optim.lr, gen)
            sync(self.device)
            return time.perf_counter() - tic

    def bare(self) -> float:
        """Seconds of the same epoch as a plain ``torch.optim.SGD`` loop (momentum, weight decay,
        ``clip_grad_norm_``, cross-entropy) over the same index batches."""
        data = self._data if self._data is not None else self.data()
        self._reset()
        gen = torch.Generator().manual_seed(self.trial)
        model, cfg, bs = self.module, self.optim, self.optim.batch_size
        sync(self.device)
        with self.numerics.backend_flags():
            tic = time.perf_counter()
            params = list(model.parameters())
            opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
            model.train()
            order = data.index[torch.randperm(data.n, generator=gen).to(data.index.device)]
            for s in range(0, data.n, bs):
                b = order[s:s + bs]
                xb = data.x[b]
                xb = (xb.float() / 255.0 - self.mean) / self.std if self.image else xb.long()
                opt.zero_grad(set_to_none=True)
                with self.numerics.autocast():
                    loss = F.cross_entropy(model(xb), data.y[b])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, cfg.clip)
                opt.step()
            sync(self.device)
            return time.perf_counter() - tic

    def ops_per_step(self) -> dict[str, float]:
        """Aten operators (and non-view kernels) one more local step dispatches: the count of a
        4-step epoch minus a 2-step one, halved, so set-up and the epoch's shuffle cancel out.
        The count does not depend on the batch size."""
        if len(self.bundle.train_y) < 4 * self.optim.batch_size:  # a shorter epoch would count fewer steps
            raise ValueError(f"ops_per_step needs 4 batches of {self.optim.batch_size}; the bundle holds "
                             f"{len(self.bundle.train_y)} samples")
        saved, counts = self.steps, []
        for steps in (2, 4):
            self.steps = steps
            with OpCounter() as c:
                self.ours()
            counts.append((c.ops, c.kernels))
        self.steps = saved
        (o2, k2), (o4, k4) = counts
        return {"ops": (o4 - o2) / 2, "kernels": (k4 - k2) / 2}


def synthetic_tables(n_clients: int, client_n: int, config: Mapping[str, Any],
                     seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Equal-size clients over a synthetic train set; pmax from the preset's capacity tiers."""
    cap = config["capacity"]
    pmax = assign_capacities(cap["tiers"], cap["counts"], seed, shuffle=cap["shuffle"])
    partition = pd.DataFrame({"client_id": np.repeat(np.arange(n_clients), client_n).astype(np.int64),
                              "split": "train", "sample_index": np.arange(n_clients * client_n, dtype=np.int64)})
    clients = pd.DataFrame({"client_id": np.arange(n_clients, dtype=np.int64), "pmax": pmax,
                            "n_train": np.full(n_clients, client_n, dtype=np.int64),
                            "n_test": np.zeros(n_clients, dtype=np.int64)})
    return partition, clients


def fed_config(config: Mapping[str, Any], dataset: str, method: str, budget: Budget,
               device: torch.device) -> dict[str, Any]:
    """A short federation of ``method``: ``budget.fed_rounds`` rounds, 1 local epoch,
    evaluation and estimation (Eq. 4) in every round."""
    cfg = run_config(config, dataset, method, 42)
    cfg["device"] = str(device)
    cfg["federation"].update(rounds=budget.fed_rounds, eval_every=1,
                             clients_per_round=min(budget.fed_per_round, cfg["federation"]["clients"]))
    cfg["dataset_params"]["optim"]["local_epochs"] = 1
    if budget.batch_size:
        cfg["dataset_params"]["optim"]["batch_size"] = budget.batch_size
    cfg["hasfl"].update(warmup=0, t_adapt=1)
    return cfg


def quick_digits(quick_config: Mapping[str, Any], device: torch.device,
                 rounds: int) -> tuple[DatasetBundle, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The quick preset's digits data, partition and hasfl run config (seed 42), ``rounds`` rounds."""
    from hasfl.data import load_dataset
    from hasfl.data.stage import build_tables

    bundle = load_dataset("digits", quick_config["data_dir"], quick_config["dataset_params"]["digits"])
    part, cl = build_tables(bundle, data_config(quick_config, "digits"), 42)
    cfg = run_config(quick_config, "digits", "hasfl", 42)
    cfg["device"] = str(device)
    cfg["federation"].update(rounds=rounds)
    return bundle, part, cl, cfg


def instrumented_federation(bundle: DatasetBundle, partition: pd.DataFrame, clients: pd.DataFrame,
                            run_cfg: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    """Run ``run_cfg`` with per-round phase timings from the engine's :class:`PhaseClock`;
    the median over the rounds after the first (every round must be evaluated)."""
    stamps: list[tuple[float, dict[str, float]]] = []
    clock = PhaseClock(sync=lambda: sync(device))

    def progress(rnd_: int, row: Mapping[str, Any]) -> None:
        sync(device)
        stamps.append((time.perf_counter(), clock.snapshot()))

    stamps.append((time.perf_counter(), {}))
    result = run_federation(bundle, partition, clients, run_cfg, progress=progress, clock=clock)
    per_round = []
    for (t0, a), (t1, b) in zip(stamps[:-1], stamps[1:], strict=True):
        row = {"round_s": t1 - t0}
        for k in PHASES:
            row[k + "_s"] = b.get(k, 0.0) - a.get(k, 0.0)
        row["other_server_s"] = row["round_s"] - sum(row[k + "_s"] for k in PHASES)
        per_round.append(row)
    use = per_round[1:] if len(per_round) > 1 else per_round
    med = {k: median([r[k] for r in use]) for k in per_round[0]}
    server_excl_eval = med["round_s"] - med["local_sgd_s"] - med["evaluation_s"]
    med["server_excl_eval_s"] = server_excl_eval
    med["server_share_excl_eval"] = server_excl_eval / med["round_s"]
    med["server_share_incl_eval"] = (server_excl_eval + med["evaluation_s"]) / med["round_s"]
    return {"median_round": {k: rnd(v, 5) for k, v in med.items()}, "rounds_measured": len(use),
            "engine_total_s": rnd(result.timings["total_s"], 4)}
