"""What every benchmark section shares: the budget, timing, interleaving, rounding and the machine.

Every number of ``hasfl bench`` is the median of repeated trials that :func:`interleaved`
runs in rotating order, so that a drift of the machine's load falls evenly on the
contenders. On a GPU every timed block ends with :func:`sync`.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["FULL", "QUICK", "Budget", "OpCounter", "interleaved", "loadavg", "machine_info", "median", "rnd", "sync"]


@dataclass(frozen=True)
class Budget:
    """How much to measure: trials per number, seconds per trial, sizes of the synthetic federations."""

    name: str
    trials: int                   # interleaved trials per number (medians)
    min_trial_s: float            # a trial runs enough local steps to last this long (0: one step)
    max_steps: int                # at most this many local steps per trial
    batch_size: int | None        # None: the dataset's configured batch size (64 in the paper)
    factor_batch: int | None      # batch of the method step-factor trials (None: as batch_size)
    fed_rounds: int               # rounds per instrumented federation (the first is warm-up)
    fed_client_n: int             # train samples per client in the synthetic federations
    fed_per_round: int            # participants per round in the synthetic federations
    fed_test_n: int               # test samples in the paper-scale federations
    eval_n: int                   # test samples for the evaluation-throughput measurement
    gemm_n: int                   # size of the reference matmul (n x n x n)
    quick_models: bool            # also time the quick preset's models against the bare loop


FULL = Budget("full", trials=5, min_trial_s=1.5, max_steps=64, batch_size=None, factor_batch=None, fed_rounds=3,
              fed_client_n=128, fed_per_round=10, fed_test_n=128, eval_n=2048, gemm_n=2048, quick_models=True)
# The smoke test: one local step per trial, two trials, quarter-batch clients in the federations
# and method-factor steps of 16 samples, so it runs in about a minute on one idle core.
QUICK = Budget("quick", trials=2, min_trial_s=0.0, max_steps=4, batch_size=None, factor_batch=16, fed_rounds=2,
               fed_client_n=16, fed_per_round=2, fed_test_n=32, eval_n=128, gemm_n=1024, quick_models=False)


def sync(device: torch.device) -> None:
    """Wait for the device's queued kernels (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median(xs: Sequence[float]) -> float:
    """Median, NaN for no values."""
    return float(statistics.median(xs)) if xs else math.nan


def rnd(x: float | None, nd: int = 4) -> float | None:
    """Round for JSON: ``nd`` decimals, or ``nd`` significant digits for small values; None for NaN/inf."""
    if x is None or not math.isfinite(x):
        return None
    return float(round(x, nd)) if abs(x) >= 1e-2 or x == 0 else float(f"{x:.{nd}g}")


def loadavg() -> list[float]:
    """The 1/5/15-minute load averages ([] where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        return []


def interleaved(fns: Mapping[str, Callable[[], float]], trials: int) -> dict[str, list[float]]:
    """Run every ``fn`` ``trials`` times, rotating the order each trial; returns their durations.

    Each fn returns its own measured duration, so untimed set-up stays out of it.
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
    model's local step on a GPU costs about the same at every width (launch-bound), so what a
    method adds to a step there is mostly its count of extra operators.
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
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`)."""
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
    except AttributeError:  # pragma: no cover - not on Linux
        usable = os.cpu_count() or 0
    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model(),
        "python": platform.python_version(),
        "loadavg_start": loadavg(),
        "date": datetime.now().isoformat(timespec="seconds"),
    }
