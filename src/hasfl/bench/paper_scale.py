"""Paper-scale projection: seconds per round of every method x dataset of the paper preset on
this device, and the job-hours of the whole preset.

A round is modelled as participants x (train / N) x local epochs x t_m (the method's mean
per-sample training time, from the width-scaling measurement and the method step factors
measured here) + the test set x the evaluation time per sample + the server time measured in
short instrumented federations. Also reported: the evaluation's arithmetic floor (its share of a
round's multiply-accumulates), the MAC rates evaluation and training reach, and the device's
reference dense rate (one n x n x n matmul).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hasfl.fl.client import FedProx, FjordDistill, LocalSGD, ScaffoldClient
from hasfl.fl.runtime import Evaluator, Numerics
from hasfl.fl.server import ScaffoldServer
from hasfl.models.family import ModelFamily

from .harness import Budget, interleaved, median, rnd, sync
from .workload import (PAPER_DATA, ClientTimer, family_of, fed_config, instrumented_federation, optim_for,
                       synthetic_bundle, synthetic_tables)

__all__ = ["FULL_WIDTH_METHODS", "bench_eval_throughput", "bench_method_factors", "bench_paper_scale",
           "method_widths", "per_method", "reference_gemm"]

FULL_WIDTH_METHODS = ("fedavg", "scaffold", "fedprox")


def interp_time(family: ModelFamily, per_sample: Mapping[float, float], p: float) -> float:
    """Per-sample train time at width p: linear in MACs between the measured widths."""
    ws = sorted(per_sample)
    macs = [family.cost(w).macs for w in ws]
    m = family.cost(p).macs
    if m <= macs[0]:
        return per_sample[ws[0]] * m / macs[0]
    for w0, m0, w1, m1 in zip(ws, macs, ws[1:], macs[1:], strict=False):
        if m <= m1:
            return per_sample[w0] + (per_sample[w1] - per_sample[w0]) * (m - m0) / (m1 - m0)
    return per_sample[ws[-1]] * m / macs[-1]


def method_widths(config: Mapping[str, Any]) -> dict[str, Any]:
    """Per-client widths the projection assumes for each method."""
    cap, h = config["capacity"], config["hasfl"]
    pmax = np.repeat(np.asarray(cap["tiers"], float), np.asarray(cap["counts"]))
    hp = np.minimum(pmax, h["p_min"] + h["gamma"])  # Eq. 6 at H_i = H_bar
    hp_cov = hp.copy()
    top = pmax == pmax.max()
    hp_cov[top] = pmax[top]
    return {"pmax": pmax.tolist(), "hasfl_avg_p": float(hp_cov.mean()), "hasfl_nocov_avg_p": float(hp.mean()),
            "uniform": np.minimum(config["method_params"]["uniform"]["p"], pmax).tolist(), "tiers": list(cap["tiers"])}


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
    # Eq. 6 with the coverage guarantee fed by another estimate, and their matched controls: the
    # budget of hasfl is the best guess before a run (the E2 probes add well under 1% of a round)
    for m in ("hasfl_probe", "random_budget_probe", "hasfl_reported", "random_budget_reported"):
        out[m] = t(w["hasfl_avg_p"])
    return {m: out[m] for m in config["methods"]}


def bench_eval_throughput(config: Mapping[str, Any], budget: Budget, device: torch.device,
                          datasets: Sequence[str]) -> dict[str, float]:
    """Seconds per test sample of the engine's :class:`~hasfl.fl.runtime.Evaluator` at full width."""
    out = {}
    for ds in datasets:
        bundle = synthetic_bundle(ds, 8, budget.eval_n, device)
        family = family_of(config, ds, bundle)
        model = family.build(1.0).to(device)
        evaluator = Evaluator(family, Numerics.for_run(device, config["precision"], bundle.task == "image"),
                              "per_width")
        evaluator(model, bundle)  # warm-up

        def run(model: torch.nn.Module = model, bundle: Any = bundle, evaluator: Evaluator = evaluator) -> float:
            sync(device)
            tic = time.perf_counter()
            evaluator(model, bundle)
            sync(device)
            return time.perf_counter() - tic

        out[ds] = median(interleaved({"e": run}, min(budget.trials, 3))["e"]) / budget.eval_n
    return out


def reference_gemm(device: torch.device, n: int = 2048, trials: int = 5,
                   max_s: float = 2.0) -> dict[str, dict[str, float | None]]:
    """GMAC/s of one n x n x n matmul per dtype: the device's attainable dense rate at this thread count.

    A dtype this device only emulates (bf16 on a CPU without bf16 instructions runs at well under
    1 GMAC/s) is measured at a smaller n, halved until one matmul is projected to take at most ``max_s``.
    """
    rate: dict[str, float | None] = {}
    size: dict[str, float | None] = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        g = torch.Generator(device=device).manual_seed(0)

        def timed(m: int) -> tuple[Tensor, Tensor, float]:
            a = torch.randn(m, m, device=device, generator=g).to(dtype)
            b = torch.randn(m, m, device=device, generator=g).to(dtype)
            sync(device)
            tic = time.perf_counter()
            a @ b
            sync(device)
            return a, b, time.perf_counter() - tic

        m = min(n, 256)
        timed(m)  # warm-up
        est = timed(m)[2] * (n / m) ** 3
        m = n
        while m > 256 and est > max_s:
            m, est = m // 2, est / 8
        a, b, _ = timed(m)  # warm-up at the measured size

        def run(a: Tensor = a, b: Tensor = b) -> float:
            sync(device)
            tic = time.perf_counter()
            a @ b
            sync(device)
            return time.perf_counter() - tic

        rate[name] = rnd(m**3 / median(interleaved({"m": run}, trials)["m"]) / 1e9, 1)
        size[name] = m
    return {"gmac_per_s": rate, "n": size}


def _method_clients(config: Mapping[str, Any], batch: int | None, n_batches: int,
                    device: torch.device) -> dict[str, ClientTimer]:
    """Full-width CIFAR CNN clients: plain, FedProx, SCAFFOLD and FjORD (train 1.0, distil 0.5)."""
    ds = "cifar10"
    optim = optim_for(config, ds, batch)
    bundle = synthetic_bundle(ds, n_batches * optim.batch_size, 8, device)
    family = family_of(config, ds, bundle)
    mp = config["method_params"]

    def client(trainer: LocalSGD | None = None, p_alloc: float | None = None) -> ClientTimer:
        return ClientTimer(family, 1.0, bundle, optim, device, trainer, p_alloc, precision=config["precision"])

    return {"plain": client(),
            "fedprox": client(FedProx(optim, bundle.inputs, mp["fedprox"])),
            "scaffold": client(ScaffoldClient(optim, bundle.inputs, ScaffoldServer(1), mp["scaffold"])),
            "fjord": client(FjordDistill(optim, bundle.inputs, family), p_alloc=0.5)}


def bench_method_factors(config: Mapping[str, Any], budget: Budget, device: torch.device,
                         per_sample: Mapping[float, float]) -> dict[str, Any]:
    """Step time of FedProx, SCAFFOLD and FjORD over a plain step (CIFAR CNN, p = 1), the factors the
    projection applies, and the aten operators / kernels one step of each dispatches (counted at batch 4:
    the count does not depend on the batch)."""
    batch = budget.factor_batch or budget.batch_size
    cases = _method_clients(config, batch, budget.max_steps, device)
    for c in cases.values():
        c.calibrate(budget.min_trial_s, budget.max_steps)
    times = interleaved({k: c.ours for k, c in cases.items()}, max(2, budget.trials - 2))
    step = {k: median(v) / cases[k].steps for k, v in times.items()}
    family = family_of(config, "cifar10", cases["plain"].bundle)
    t1, t05 = (interp_time(family, per_sample, p) for p in (1.0, 0.5))
    factors = {"fedprox": step["fedprox"] / step["plain"], "scaffold": step["scaffold"] / step["plain"],
               "fjord": step["fjord"] / (step["plain"] * (t1 + t05) / t1)}
    ops = {k: c.ops_per_step() for k, c in _method_clients(config, 4, 4, device).items()}
    return {"batch_size": cases["plain"].optim.batch_size, "step_ms": {k: rnd(v * 1e3, 2) for k, v in step.items()},
            "factors": {k: rnd(v) for k, v in factors.items()}, "ops_per_step": ops,
            "note": "fjord factor = measured FjordDistill step (train 1.0, distil 0.5) / the t(1) + t(0.5) model"}


def _server_seconds(config: Mapping[str, Any], budget: Budget, device: torch.device, dataset: str,
                    est_rounds: int) -> dict[str, Any]:
    """Instrumented rounds of fedavg (full width) and hasfl on synthetic clients; the server seconds
    of a paper round (participants scaled, estimation weighted by the adaptation rounds)."""
    fed = config["federation"]
    n, per_round, rounds = fed["clients"], fed["clients_per_round"], fed["rounds"]
    spec = PAPER_DATA[dataset]
    epochs = int(config["dataset_params"][dataset]["optim"]["local_epochs"])
    bundle = synthetic_bundle(dataset, n * budget.fed_client_n, budget.fed_test_n, device)
    part, cl = synthetic_tables(n, budget.fed_client_n, config, 42)
    measured = {}
    for method in ("fedavg", "hasfl"):
        cfg = fed_config(config, dataset, method, budget, device)
        med = instrumented_federation(bundle, part, cl, cfg, device)["median_round"]
        k = cfg["federation"]["clients_per_round"]
        train_scale = per_round * spec["train"] / n * epochs / (k * budget.fed_client_n)
        server = ((med["server_excl_eval_s"] - med["estimation_s"]) * per_round / k
                  + med["estimation_s"] * per_round / k * est_rounds / rounds)
        measured[method] = {"bench_round": med, "participants": k, "client_n": budget.fed_client_n,
                            "train_scale": rnd(train_scale, 2),
                            "scaled_local_sgd_s": rnd(med["local_sgd_s"] * train_scale, 2),
                            "paper_server_excl_eval_s": rnd(server, 4)}
    return measured


def bench_paper_scale(config: Mapping[str, Any], budget: Budget, device: torch.device,
                      width: Mapping[str, Any], eval_s: Mapping[str, float],
                      method_factors: Mapping[str, Any] | None) -> dict[str, Any]:
    """Seconds per round per dataset x method at paper scale and the preset's job-hours."""
    fed, h = config["federation"], config["hasfl"]
    n, per_round, rounds = fed["clients"], fed["clients_per_round"], fed["rounds"]
    est_rounds = sum(1 for t in range(rounds) if t >= h["warmup"] and t % h["t_adapt"] == 0)
    factors = {k: float(v) for k, v in (method_factors or {}).get("factors", {}).items()}
    datasets: dict[str, Any] = {}
    total_h = 0.0
    for ds in config["datasets"]:
        spec = PAPER_DATA[ds]
        epochs = int(config["dataset_params"][ds]["optim"]["local_epochs"])
        client_mean = spec["train"] / n
        samples = per_round * client_mean * epochs  # local sample-steps of a round
        per_sample = {float(p): v for p, v in width["per_sample_s"][ds].items()}
        family = family_of(config, ds, synthetic_bundle(ds, 1, 1, torch.device("cpu")))
        measured = _server_seconds(config, budget, device, ds, est_rounds)
        per_step = per_method(config, lambda p: interp_time(family, per_sample, p), factors)
        eval_round = spec["test"] * eval_s[ds]
        # Arithmetic floor of the evaluation share: evaluation MACs (test set, full width, forward)
        # over those of the round, a local sample-step counted as 3 forward passes (forward +
        # backward); method step factors and the server are left out. A device that runs
        # evaluation and training at the same MAC rate cannot show a smaller evaluation share.
        step_macs = per_method(config, lambda p: float(family.cost(p).macs), {})
        eval_macs = spec["test"] * family.cost(1.0).macs
        round_s, rows = {}, []
        for m, ts in per_step.items():
            train = samples * ts
            server = measured["fedavg" if m in FULL_WIDTH_METHODS else "hasfl"]["paper_server_excl_eval_s"]
            total = train + eval_round + server
            round_s[m] = total
            rows.append({"method": m, "train_s": rnd(train, 2), "eval_s": rnd(eval_round, 2),
                         "server_s": rnd(server, 3),
                         "round_s": rnd(total, 2), "eval_share": rnd(eval_round / total),
                         "eval_mac_share": rnd(eval_macs / (eval_macs + 3 * samples * step_macs[m])),
                         "server_share_excl_eval": rnd(server / total), "run_h": rnd(total * rounds / 3600, 2)})
        predicted = measured["fedavg"]["participants"] * budget.fed_client_n * per_sample[1.0]
        ds_hours = sum(round_s.values()) * rounds * len(config["seeds"]) / 3600
        total_h += ds_hours
        datasets[ds] = {
            "paper": {"train": spec["train"], "test": spec["test"], "shape": list(spec["shape"]),
                      "classes": spec["classes"], "client_mean_n": client_mean, "local_epochs": epochs},
            "per_sample_train_ms": {str(p): rnd(v * 1e3, 4) for p, v in per_sample.items()},
            "eval_ms_per_sample": rnd(eval_s[ds] * 1e3, 4),
            "gmac_per_s": {"eval_p1": rnd(family.cost(1.0).macs / eval_s[ds] / 1e9, 2),
                           "train_p1": rnd(3 * family.cost(1.0).macs / per_sample[1.0] / 1e9, 2),
                           "train_p025": rnd(3 * family.cost(0.25).macs / per_sample[0.25] / 1e9, 2)},
            "measured": measured,
            "model_check_fedavg_measured_over_predicted":
                rnd(measured["fedavg"]["bench_round"]["local_sgd_s"] / predicted),
            "methods": rows,
            "round_s": {m: rnd(v, 2) for m, v in round_s.items()},
            "job_hours": rnd(ds_hours, 1),
        }
    w = method_widths(config)
    return {
        "datasets": datasets,
        "job_hours_total": rnd(total_h, 1),
        "jobs": len(config["datasets"]) * len(config["methods"]) * len(config["seeds"]),
        "rounds": rounds,
        "estimation_rounds_per_run": est_rounds,
        "method_factors": method_factors,
        "factors_applied": {k: rnd(v) for k, v in factors.items()},
        "model": (
            "round_s = participants x (train/N) x local_epochs x t_m + test_n x t_eval + server. "
            "t(p): measured seconds per sample-step of LocalSGD at p in {0.25, 0.5, 0.75, 1} (the preset's batch "
            "size), linear in MACs in between. t_m: fedavg t(1); fedprox and scaffold t(1) x their measured step "
            "factor; heterofl mean t(pmax); uniform mean t(min(0.5, pmax)); hasfl and random_budget "
            f"t({w['hasfl_avg_p']:.4f}), hasfl_nocov t({w['hasfl_nocov_avg_p']:.4f}) (Eq. 6 at H_i = H_bar with / "
            "without coverage: the average width); fjord mean over clients of t(pmax) + mean over tiers <= pmax of "
            "t(tier) (the student's forward/backward, 0 when tier = pmax), x its measured factor. t_eval: "
            "the engine's Evaluator at p = 1. server: measured per-round slicing + aggregation + deltas + rest "
            f"(full-width run for the full-model methods, hasfl run otherwise) scaled to {per_round} participants, "
            f"with estimation weighted by the {est_rounds}/{rounds} adaptation rounds."),
    }
