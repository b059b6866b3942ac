"""Server share of a round: instrumented rounds of :func:`~hasfl.fl.engine.run_federation`
split into local SGD, slicing, aggregation, estimation, evaluation and the rest.

"Server" is the engine's work outside local SGD. Target: at most 5 % of a round, reported
without and with evaluation. Two setups: CIFAR-10-shaped synthetic clients (test set sized
to the paper's ratio of evaluation to training samples) and the quick preset's real digits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .harness import Budget, loadavg
from .workload import PAPER_DATA, fed_config, instrumented_federation, quick_digits, synthetic_bundle, synthetic_tables

__all__ = ["bench_server_share"]


def bench_server_share(config: Mapping[str, Any], quick_config: Mapping[str, Any], budget: Budget,
                       device: torch.device) -> dict[str, Any]:
    """Median phase seconds of a round in both setups, with estimation forced every round."""
    n = config["federation"]["clients"]
    cfg = fed_config(config, "cifar10", "hasfl", budget, device)
    k = cfg["federation"]["clients_per_round"]
    samples = k * budget.fed_client_n
    paper_samples = (config["federation"]["clients_per_round"] * PAPER_DATA["cifar10"]["train"] / n
                     * config["dataset_params"]["cifar10"]["optim"]["local_epochs"])
    # evaluation : training work as in the paper (10,000 test : 10 clients x 2,500 samples x 5 epochs)
    n_test = max(8, round(PAPER_DATA["cifar10"]["test"] * samples / paper_samples))
    bundle = synthetic_bundle("cifar10", n * budget.fed_client_n, n_test, device)
    part, cl = synthetic_tables(n, budget.fed_client_n, config, 42)
    runs = [{"setup": f"cifar10-shaped synthetic, hasfl, {k} x {budget.fed_client_n} samples x 1 epoch per round, "
                      f"test {n_test} (paper ratio of test to training samples), estimation every round",
             **instrumented_federation(bundle, part, cl, cfg, device)}]
    qb, qpart, qcl, qcfg = quick_digits(quick_config, device, max(3, budget.fed_rounds + 1))
    qcfg["hasfl"].update(warmup=0, t_adapt=1)
    runs.append({"setup": "quick preset digits (real data and partition), hasfl, estimation every round",
                 **instrumented_federation(qb, qpart, qcl, qcfg, device)})
    return {"runs": runs, "loadavg": loadavg()}
