#!/usr/bin/env python3
"""A/B trials of engine variants, interleaved in one process (tried on 2026-11-30; the adopted ones
are now the engine's defaults, the rest were not adopted).

What it measures:

* ``eval``: evaluation of the CIFAR CNN at p = 1 in batches of 2,048 vs 64, each with and without a
  channels_last copy of the model. Result on the 2-core Xeon (fp32, 1,024 test images): 4.96 /
  3.54 / 4.08 / 2.75 ms per sample, i.e. batch 64 + channels_last x1.80 with identical accuracy
  (loss differs by 7e-8). *Adopted* as ``hasfl.fl.runtime.Evaluator`` on the CPU.
* ``step``: one local step by layout and precision: contiguous fp32 (the engine before
  channels_last), the engine's fp32 (channels_last image sub-models on the CPU), the engine
  under ``precision: bf16``; on a GPU also TF32 and channels_last + TF32 / bf16. Result on the
  Xeon (AMX): layout x1.19 (CIFAR CNN p = 1) and x1.35 (p = 0.25), LSTM unchanged; bf16 x3.28 /
  x1.85 (CNN p = 1 / 0.25), x2.06 / x1.66 (LSTM). Layout *adopted*; bf16 is an option
  (``precision: bf16``), not the default (docs/decisions.md, "Precision and memory layout").
* ``rounds``: whole ``run_federation`` runs under two values of config ``precision``, interleaved.
  Result (fp32 -> bf16, Xeon): CIFAR-shaped hasfl rounds x2.65 (evaluation x3.79), final weights
  within 1e-3; quick digits x1.06.

Run: ``python scripts/experiments/ab_variants.py --which eval,step,rounds [--device cpu]``;
prints a JSON report.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch

from hasfl.bench.harness import FULL, QUICK, Budget, interleaved, median, rnd, sync
from hasfl.bench.workload import (ClientTimer, family_of, fed_config, instrumented_federation, optim_for,
                                  quick_digits, synthetic_bundle, synthetic_tables)
from hasfl.config import PAPER_CONFIG, REPO_ROOT, load_config
from hasfl.fl.engine import run_federation
from hasfl.fl.runtime import Numerics, evaluate, resolve_device

# Extra local-step variants on a GPU: name -> (precision, channels_last; None = the engine's layout).
GPU_STEP_VARIANTS: dict[str, tuple[str, bool | None]] = {
    "engine tf32": ("tf32", None), "channels_last tf32": ("tf32", True), "channels_last bf16": ("bf16", True)}


def step_variants(device: torch.device, image: bool) -> dict[str, Numerics]:
    """The numerics one local step is timed under (channels_last variants for image models only)."""
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


def eval_variants(config: Mapping[str, Any], budget: Budget, device: torch.device) -> dict[str, Any]:
    """Evaluation batch size x channels_last, CIFAR CNN at p = 1."""
    n_eval = min(budget.eval_n, 1024)
    bundle = synthetic_bundle("cifar10", 8, n_eval, device)
    torch.manual_seed(0)
    model = family_of(config, "cifar10", bundle).build(1.0).to(device)
    model_cl = copy.deepcopy(model).to(memory_format=torch.channels_last)

    def ev(m: torch.nn.Module, bs: int, cl: bool) -> Callable[[], float]:
        def run() -> float:
            sync(device)
            tic = time.perf_counter()
            evaluate(m, bundle, batch_size=bs, channels_last=cl)
            sync(device)
            return (time.perf_counter() - tic) / n_eval
        return run

    variants = {"batch 2048": ev(model, 2048, False), "batch 64": ev(model, 64, False),
                "batch 2048 + channels_last": ev(model_cl, 2048, True),
                "batch 64 + channels_last": ev(model_cl, 64, True)}
    for f in variants.values():
        f()
    times = interleaved(variants, max(2, budget.trials - 2))
    ref, alt = evaluate(model, bundle), evaluate(model_cl, bundle, batch_size=64, channels_last=True)
    base = median(times["batch 2048"])
    return {"test_n": n_eval, "ms_per_sample": {k: rnd(median(v) * 1e3, 4) for k, v in times.items()},
            "speedup_vs_batch_2048": {k: rnd(base / median(v), 3) for k, v in times.items()},
            "acc": [ref[0], alt[0]], "loss_abs_diff": rnd(abs(ref[1] - alt[1]), 3)}


def step_variants_bench(config: Mapping[str, Any], budget: Budget, device: torch.device) -> list[dict[str, Any]]:
    """One local step by layout and precision, CIFAR CNN and LSTM at p = 1 and 0.25."""
    rows = []
    for ds in ("cifar10", "shakespeare"):
        optim = optim_for(config, ds, budget.batch_size)
        bundle = synthetic_bundle(ds, budget.max_steps * optim.batch_size, 8, device)
        family = family_of(config, ds, bundle)
        variants = step_variants(device, bundle.task == "image")
        for p in (1.0, 0.25):
            cs = {k: ClientTimer(family, p, bundle, optim, device, numerics=n) for k, n in variants.items()}
            first = cs["contiguous fp32"]
            first.calibrate(budget.min_trial_s, budget.max_steps)
            for c in cs.values():
                c.steps, c._data = first.steps, first._data
                c.ours()
            times = interleaved({k: c.ours for k, c in cs.items()}, budget.trials)
            ms = {k: median(v) / first.steps * 1e3 for k, v in times.items()}
            rows.append({"dataset": ds, "p": p, "steps": first.steps, **{f"{k} ms": rnd(v, 2) for k, v in ms.items()},
                         "layout speed-up": rnd(ms["contiguous fp32"] / ms["engine fp32"], 3),
                         "bf16 speed-up": rnd(ms["engine fp32"] / ms["engine bf16"], 3)})
    return rows


def round_variants(config: Mapping[str, Any], quick_config: Mapping[str, Any], budget: Budget,
                   device: torch.device, variants: tuple[str, str]) -> dict[str, Any]:
    """Whole run_federation runs under two values of config ``precision``, interleaved (2 repetitions)."""
    b = replace(budget, fed_rounds=3, fed_per_round=10)
    cfg = fed_config(config, "cifar10", "hasfl", b, device)
    n_test = min(budget.eval_n, 1024)
    setups = {f"cifar10-shaped hasfl, 10 x {b.fed_client_n} samples, test {n_test}":
              (synthetic_bundle("cifar10", 20 * b.fed_client_n, n_test, device),
               *synthetic_tables(20, b.fed_client_n, config, 42), cfg),
              "quick digits hasfl (real data)": quick_digits(quick_config, device, 10)}
    out = {}
    for name, (bundle, part, cl, rcfg) in setups.items():
        cfgs = {v: {**rcfg, "precision": v} for v in variants}
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for rep in range(2):
            for v in variants if rep == 0 else variants[::-1]:
                runs[v].append(instrumented_federation(bundle, part, cl, cfgs[v], device))
        finals = {v: run_federation(bundle, part, cl, cfgs[v]) for v in variants}
        row: dict[str, Any] = {}
        for k in ("round_s", "local_sgd_s", "evaluation_s"):
            a, b_ = (median([r["median_round"][k] for r in runs[v]]) for v in variants)
            row[k] = {variants[0]: rnd(a, 4), variants[1]: rnd(b_, 4), "speedup": rnd(a / b_, 3)}
        fa, fb = (finals[v].final_state for v in variants)
        row["max_abs_diff_final_state"] = rnd(max(float((fa[k].double() - fb[k].double()).abs().max()) for k in fa), 4)
        row["final_acc"] = {v: finals[v].summary["final_test_acc"] for v in variants}
        out[name] = row
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--which", default="eval,step,rounds", help="comma list of eval,step,rounds (default: all)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--quick", action="store_true", help="the bench's quick budget (smoke test)")
    ap.add_argument("--variants", default="fp32,bf16", help="rounds: two config precisions (default: fp32,bf16)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    budget = QUICK if args.quick else FULL
    config = {**load_config(PAPER_CONFIG), "precision": "fp32"}
    quick_config = load_config(REPO_ROOT / "presets" / "quick.yaml")
    dev = resolve_device(args.device)
    which = args.which.split(",")
    out: dict[str, Any] = {}
    if "eval" in which:
        out["eval"] = eval_variants(config, budget, dev)
    if "step" in which:
        out["step"] = step_variants_bench(config, budget, dev)
    if "rounds" in which:
        a, b = args.variants.split(",")
        out["rounds"] = round_variants(config, quick_config, budget, dev, (a, b))
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
