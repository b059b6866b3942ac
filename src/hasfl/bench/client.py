"""Client update vs a bare PyTorch loop: samples/s of the engine's local update against
``torch.optim.SGD`` (momentum, weight decay) + ``clip_grad_norm_`` + cross-entropy training
the same sliced module on the same in-memory uint8 tensors over the same index batches.

Target: the worst ratio (ours / bare) of the paper's CNN and LSTM at p = 1 and p = 0.25 is
at least 0.9.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from hasfl.fl.runtime import family_for

from .harness import Budget, interleaved, loadavg, median, rnd
from .workload import PAPER_DATA, ClientTimer, optim_for, synthetic_bundle

__all__ = ["QUICK_DATA", "bench_client_vs_bare"]

# The quick preset's models (extra rows, full mode): digits 8x8; Shakespeare windows of seq_len characters.
QUICK_DATA: dict[str, dict[str, Any]] = {
    "digits": {"task": "image", "shape": (1, 8, 8), "classes": 10, "mean": (0.3,), "std": (0.4,)},
    "shakespeare": {"task": "text", "shape": (40,), "classes": 96},
}


def _cases(config: Mapping[str, Any], quick_config: Mapping[str, Any] | None) -> list[tuple[str, str, Mapping[
        str, Any], Mapping[str, Any], Mapping[str, Any], bool]]:
    """(label, dataset, data spec, model config, optim config, extra) of every row."""
    dp = config["dataset_params"]
    cases = [("CNN (CIFAR-10)", "cifar10", PAPER_DATA["cifar10"], dp["cifar10"]["model"], dp["cifar10"]["optim"],
              False),
             ("LSTM (Shakespeare)", "shakespeare", PAPER_DATA["shakespeare"], dp["shakespeare"]["model"],
              dp["shakespeare"]["optim"], False)]
    if quick_config is not None:
        qd, qs = quick_config["dataset_params"]["digits"], quick_config["dataset_params"]["shakespeare"]
        cases += [("quick digits CNN", "digits", QUICK_DATA["digits"], qd["model"], qd["optim"], True),
                  ("quick Shakespeare LSTM", "shakespeare", {**QUICK_DATA["shakespeare"], "shape": (qs["seq_len"],)},
                   qs["model"], qs["optim"], True)]
    return cases


def bench_client_vs_bare(config: Mapping[str, Any], budget: Budget, device: torch.device,
                         quick_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Samples/s of ``LocalSGD.train`` and of the bare loop at p = 1 and 0.25 (with ``quick_config``
    also the quick preset's models, reported but not part of the target)."""
    rows = []
    for label, ds, spec, model_cfg, optim_cfg, extra in _cases(config, quick_config):
        bs = budget.batch_size or int(optim_cfg["batch_size"])
        bundle = synthetic_bundle(ds, budget.max_steps * bs, 8, device, spec=spec)
        family = family_for(bundle, model_cfg)
        optim = optim_for({"dataset_params": {ds: {"optim": optim_cfg}}}, ds, bs)
        for p in (1.0, 0.25):
            c = ClientTimer(family, p, bundle, optim, device, precision=config["precision"])
            c.calibrate(budget.min_trial_s, budget.max_steps)
            c.bare()  # warm the torch.optim path too
            times = interleaved({"ours": c.ours, "bare": c.bare}, budget.trials)
            n = c.steps * bs
            ours, bare = n / median(times["ours"]), n / median(times["bare"])
            rows.append({"model": label, "dataset": ds, "p": p, "batch_size": bs, "samples_per_trial": n,
                         "ours_samples_per_s": rnd(ours, 2), "bare_samples_per_s": rnd(bare, 2),
                         "ratio": rnd(ours / bare), "extra": extra})
    return {"rows": rows, "min_ratio": min(r["ratio"] for r in rows if not r["extra"]), "loadavg": loadavg()}

