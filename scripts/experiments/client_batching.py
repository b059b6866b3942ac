#!/usr/bin/env python3
"""The batched client step (config ``client_step: batched``, hasfl.fl.batched) against the sequential engine.

What it measures: a short federation of the paper's model for one dataset (synthetic data of the real
shapes, equal-size clients, the preset's capacity tiers, 1 local epoch), run
by the real engine twice from the same seed: ``client_step: sequential`` (one client after another) and
``client_step: batched`` (a round's same-width clients as one ``torch.func.vmap`` step); evaluation on 64
synthetic test samples every round (it is not timed: the numbers are the local-training phase). Reports the
local-training seconds per round of each (the engine's own ``local_sgd`` phase, rounds after the first),
the speedup, and the largest difference of the final global weights (float rounding only).
With ``--jobs K`` it starts K such measurements at once (K processes, as K packed training jobs share a
GPU) and reports the aggregate client-steps per second of each engine: the number that decides adoption.

Results:

* 2-core Xeon (2026-11-30, the earlier one-step version): 320.6 ms per client-step batched against 99.5
  ms one after another (x0.31: oneDNN runs the grouped convolutions far slower); weights equal to 6e-8.
* 2-core AMD EPYC with AVX-512 (2026-12-01, this version, defaults: the paper CIFAR-10 CNN, hasfl, 10
  clients x 64 samples a round, 3 rounds): local training 2.195 s per round batched against 1.159 s
  sequential (x0.53); same 30 client steps; final weights within 4.3e-6.
* GPU: not measured yet (scripts/gpu-check.sh runs it alone and packed). *Not adopted* until it is faster
  there under packing.

Run: ``python scripts/experiments/client_batching.py [--dataset cifar10] [--method hasfl] [--rounds 3]
[--client-n 64] [--jobs 1]``; prints JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from hasfl.bench.harness import rnd, sync
from hasfl.bench.workload import synthetic_bundle, synthetic_tables
from hasfl.config import PAPER_CONFIG, load_config, run_config
from hasfl.fl.engine import run_federation
from hasfl.fl.runtime import PhaseClock, resolve_device


def federation(config: Mapping[str, Any], device: torch.device, dataset: str, method: str, rounds: int,
               client_n: int) -> tuple[Any, Any, Any, dict[str, Any]]:
    """The synthetic federation and the run config (seed 42) both engines run."""
    n = int(config["federation"]["clients"])
    bundle = synthetic_bundle(dataset, n * client_n, 64, device)
    partition, clients = synthetic_tables(n, client_n, config, 42)
    cfg = run_config(config, dataset, method, 42)
    cfg["device"] = str(device)
    cfg["federation"].update(rounds=rounds, eval_every=1)  # progress (the per-round timings) comes at evaluations
    cfg["dataset_params"]["optim"]["local_epochs"] = 1
    return bundle, partition, clients, cfg


def bench_client_batching(config: Mapping[str, Any], device: torch.device, dataset: str = "cifar10",
                          method: str = "hasfl", rounds: int = 3, client_n: int = 64) -> dict[str, Any]:
    """Seconds of local training per round, sequential vs batched, and the largest final-weight difference."""
    bundle, partition, clients, cfg = federation(config, device, dataset, method, rounds, client_n)
    out: dict[str, Any] = {"dataset": dataset, "method": method, "rounds": rounds, "client_n": client_n,
                           "clients_per_round": int(cfg["federation"]["clients_per_round"]), "device": str(device)}
    finals, per_round, steps = {}, {}, {}
    for step in ("sequential", "batched"):
        run_cfg = copy.deepcopy(cfg)
        run_cfg["client_step"] = step
        marks: list[float] = []
        clock = PhaseClock(sync=lambda: sync(device))

        def progress(_t: int, _row: Mapping[str, Any], clock: PhaseClock = clock, marks: list[float] = marks) -> None:
            marks.append(clock.snapshot().get("local_sgd", 0.0))

        tic = time.perf_counter()
        result = run_federation(bundle, partition, clients, run_cfg, progress=progress, clock=clock)
        sync(device)
        wall = time.perf_counter() - tic
        rounds_s = [b - a for a, b in zip([0.0, *marks[:-1]], marks, strict=True)]
        use = rounds_s[1:] or rounds_s
        per_round[step] = sorted(use)[len(use) // 2]
        steps[step] = int(result.participation["steps"].sum())
        finals[step] = result.final_state
        out[step] = {"local_sgd_s_per_round": rnd(per_round[step], 5), "wall_s": rnd(wall, 3),
                     "client_steps": steps[step]}
    a, b = finals["sequential"], finals["batched"]
    out["batched_speedup"] = rnd(per_round["sequential"] / per_round["batched"], 3)
    # The trained weights and the BN running statistics apart: the statistics are the server's forward passes over
    # client data through every layer (Table 5's static / mixed modes), where the two engines' rounding is amplified
    # again. How far both go is set by the CPU kernel (measured, emnist heterofl, 2 rounds, 16 samples a client:
    # weights 4.3e-6 on AVX-512 and 8.3e-6 under ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2; statistics 4.3e-6
    # and 1.9e-5; batch norm over 16 samples amplifies the rounding of mm against bmm).
    diff = {k: float((a[k] - b[k]).abs().max()) for k in a if a[k].is_floating_point()}
    stats = [k for k in diff if k.endswith(("running_mean", "running_var"))]
    out["max_abs_diff_final_weights"] = max(v for k, v in diff.items() if k not in stats)
    out["max_abs_diff_bn_statistics"] = max((diff[k] for k in stats), default=0.0)
    out["same_client_steps"] = steps["sequential"] == steps["batched"]
    return out


def packed(argv: Sequence[str], jobs: int) -> dict[str, Any]:
    """``jobs`` measurements at once, one process each; aggregate client-steps per second of each engine."""
    cmd = [sys.executable, __file__, *argv, "--jobs", "1"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(jobs)]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a packed measurement failed: return codes {[p.returncode for p in procs]}")
    agg = {}
    for step in ("sequential", "batched"):
        per = [o[step]["client_steps"] / o["rounds"] / o[step]["local_sgd_s_per_round"] for o in outs]
        agg[step] = rnd(sum(per), 2)
    return {"jobs": jobs, "client_steps_per_s_total": agg,
            "batched_speedup_packed": rnd(agg["batched"] / agg["sequential"], 3), "runs": outs}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--dataset", default="cifar10", choices=("cifar10", "emnist", "shakespeare"))
    ap.add_argument("--method", default="hasfl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--client-n", type=int, default=64, help="train samples per client (one local epoch)")
    ap.add_argument("--jobs", type=int, default=1, help="measurements at once, one process each")
    args = ap.parse_args(argv)
    if args.jobs > 1:
        out = packed(["--device", args.device, "--dataset", args.dataset, "--method", args.method,
                      "--rounds", str(args.rounds), "--client-n", str(args.client_n)], args.jobs)
    else:
        torch.set_num_threads(1)
        out = bench_client_batching(load_config(PAPER_CONFIG), resolve_device(args.device), args.dataset,
                                    args.method, args.rounds, args.client_n)
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
