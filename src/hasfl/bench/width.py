"""Width scaling: the time of one local step at p = 0.25 / 0.5 / 0.75 relative to p = 1 for the
paper's CNNs and LSTM, and the per-sample training costs the paper-scale projection uses.

Target: a CNN step at p = 0.25 takes at most 1/6 of a step at p = 1 (Table 1's MACs ratio is
about 1/16).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .harness import Budget, interleaved, loadavg, median, rnd
from .workload import ClientTimer, family_of, optim_for, synthetic_bundle

__all__ = ["WIDTHS", "bench_width_scaling"]

WIDTHS = (0.25, 0.5, 0.75, 1.0)


def bench_width_scaling(config: Mapping[str, Any], budget: Budget, device: torch.device,
                        datasets: Sequence[str] = ("cifar10", "emnist", "shakespeare")) -> dict[str, Any]:
    """One local step of ``LocalSGD.train`` at each width, interleaved per dataset."""
    rows = []
    per_sample: dict[str, dict[str, float]] = {}
    for ds in datasets:
        optim = optim_for(config, ds, budget.batch_size)
        bundle = synthetic_bundle(ds, budget.max_steps * optim.batch_size, 8, device)
        family = family_of(config, ds, bundle)
        clients = {p: ClientTimer(family, p, bundle, optim, device, precision=config["precision"]) for p in WIDTHS}
        for c in clients.values():
            c.calibrate(budget.min_trial_s, budget.max_steps)
        times = interleaved({str(p): c.ours for p, c in clients.items()}, budget.trials)
        step = {p: median(times[str(p)]) / clients[p].steps for p in WIDTHS}
        per_sample[ds] = {str(p): step[p] / optim.batch_size for p in WIDTHS}
        macs1 = family.cost(1.0).macs
        for p in WIDTHS:
            rows.append({"model": "LSTM" if ds == "shakespeare" else "CNN", "dataset": ds, "p": p,
                         "batch_size": optim.batch_size, "step_ms": rnd(step[p] * 1e3, 3),
                         "rel_to_full": rnd(step[p] / step[1.0]), "macs_rel": rnd(family.cost(p).macs / macs1),
                         "steps_per_trial": clients[p].steps})
    cnn = next(r for r in rows if r["model"] == "CNN" and r["p"] == 0.25)
    return {"rows": rows, "per_sample_s": per_sample, "cnn_p025_rel": cnn["rel_to_full"], "loadavg": loadavg()}
