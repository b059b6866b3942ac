"""The driver: run the chosen sections under one config ``precision`` and assemble the report."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from hasfl.config import PAPER_CONFIG, REPO_ROOT, load_config
from hasfl.fl.runtime import Numerics, resolve_device

from .client import bench_client_vs_bare
from .harness import FULL, Budget, loadavg, machine_info, rnd
from .paper_scale import bench_eval_throughput, bench_method_factors, bench_paper_scale, reference_gemm
from .quick_preset import quick_preset_report, run_quick_preset
from .report import BENCH_VERSION, summarize_targets
from .server import bench_server_share
from .width import bench_width_scaling

__all__ = ["SECTIONS", "run_bench"]

# section name (command line) -> report key
SECTIONS = {"client": "client_vs_bare", "width": "width_scaling", "server": "server_share",
            "paper-scale": "paper_scale", "quick-preset": "quick_preset"}


def run_bench(budget: Budget = FULL, *, device: str = "auto", threads: int = 1,
              sections: Sequence[str] = tuple(SECTIONS), precision: str = "fp32", run_quick: bool = False,
              quick_wall_s: float | None = None, quick_results: Path | None = None,
              quick_log_dir: Path | None = None, cores: int = 2, label: str = "",
              log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``sections`` (names of :data:`SECTIONS`) under config ``precision``; returns the JSON-ready report.

    The paper-scale projection needs the per-width times, so it runs the width section too.
    """
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown bench section(s) {unknown}; choose from {list(SECTIONS)}")
    say = log or (lambda s: None)
    t_start = time.perf_counter()
    torch.set_num_threads(int(threads))
    config = {**load_config(PAPER_CONFIG), "precision": precision}
    quick_config = {**load_config(REPO_ROOT / "presets" / "quick.yaml"), "precision": precision}
    dev = resolve_device(device)
    numerics = Numerics.for_run(dev, precision, image=True)  # a precision this device cannot run fails here
    report: dict[str, Any] = {"bench_version": BENCH_VERSION, "mode": budget.name, "label": label,
                              "precision": precision, "note": None, "machine": machine_info(dev),
                              "budget": asdict(budget)}
    if "client" in sections:
        say("client update vs a bare PyTorch loop")
        report["client_vs_bare"] = bench_client_vs_bare(config, budget, dev,
                                                         quick_config if budget.quick_models else None)
    if "width" in sections or "paper-scale" in sections:
        say("local step time by width")
        report["width_scaling"] = bench_width_scaling(config, budget, dev)
    if "server" in sections:
        say("server share of a round")
        report["server_share"] = bench_server_share(config, quick_config, budget, dev)
    if "paper-scale" in sections:
        width = report["width_scaling"]
        say("paper scale: evaluation throughput and method step factors")
        eval_s = bench_eval_throughput(config, budget, dev, config["datasets"])
        factors = bench_method_factors(config, budget, dev,
                                       {float(k): v for k, v in width["per_sample_s"]["cifar10"].items()})
        say("paper scale: instrumented rounds")
        paper = bench_paper_scale(config, budget, dev, width, eval_s, factors)
        with numerics.backend_flags():
            paper["reference_gemm"] = reference_gemm(dev, budget.gemm_n, min(budget.trials, 5))
        report["paper_scale"] = paper
    if "quick-preset" in sections:
        say("quick preset" + (" (running it)" if run_quick else ""))
        if run_quick:
            report["quick_preset"] = run_quick_preset(cores)
        else:
            results = quick_results or (REPO_ROOT / quick_config["results_dir"] / quick_config["name"])
            report["quick_preset"] = quick_preset_report(results, cores, wall_s=quick_wall_s,
                                                         log_dir=quick_log_dir or (REPO_ROOT / ".snakemake" / "log"))
    report["targets"] = summarize_targets(report)
    report["machine"]["loadavg_end"] = loadavg()
    report["elapsed_s"] = rnd(time.perf_counter() - t_start, 1)
    return report
