#!/usr/bin/env python3
"""Several one-thread training jobs sharing one device, and the paper preset's device-hours when
each dataset's jobs run that many at a time ("packing").

What it measures (``run``): K one-thread processes, each training the paper model of a dataset at
p = 0.5 (about HAS-FL's average width) with ``LocalSGD`` (or, with ``--graph``, replaying its step
as a CUDA graph, see ``cuda_graph_step.py``), started together; steps/s summed over the K jobs,
and the speed-up over one job alone. This is what Snakemake does with ``--cores K`` and several
train jobs on one GPU. ``pack`` turns such runs into device-hours: the serial job-hours of a
``hasfl bench`` report's paper-scale section x (steps/s of one job alone in the first run) /
(aggregate steps/s of the best K in each run).

Result on one H200 (2026-11-30, PyTorch defaults, i.e. TF32 convolutions; serial projection
95.8 device-hours): without MPS 16 jobs give 1.8-2.3x one job (43.6 h); with CUDA MPS
(``nvidia-cuda-mps-control -d``) 8-16 jobs give 4.3-7.3x (**15.1 h**); MPS with CUDA-graph steps
14.5 h. The 8-hour goal was not met. *Not adopted into the bench*: it is a way to run the
preset (docs/guide/gpu.md, "One GPU or several, one machine": start MPS, then
``snakemake --cores 16 all``), not an engine change.
The runs are in ``scripts/experiments/results/h200-*.json``.

Run on a GPU: ``python scripts/experiments/concurrency.py run --jobs 1,4,8,16 --seconds 4 --label "no MPS" > k.json``;
then ``python scripts/experiments/concurrency.py pack docs/bench/h200.json k.json [mps.json ...]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def worker(dataset: str, p: float, seconds: float, device: str, precision: str) -> None:
    """One job replaying its local step as a CUDA graph (``cuda_graph_step.py``); otherwise the library's
    worker (:func:`hasfl.bench.packing.worker`) is used. Same protocol: ``ready``, a line on stdin, steps."""
    import torch

    from hasfl.bench.harness import sync
    from hasfl.config import PAPER_CONFIG, load_config
    from hasfl.fl.runtime import Numerics, resolve_device

    sys.path.insert(0, str(HERE))
    from cuda_graph_step import GraphStep

    torch.set_num_threads(1)
    dev = resolve_device(device)
    per_call = 32
    with Numerics.for_run(dev, precision, image=True).backend_flags():  # also for the CUDA-graph capture
        st = GraphStep(load_config(PAPER_CONFIG), dataset, p, dev, per_call)
        st.capture()

        def run() -> None:
            for b in st.batches:
                st.replay(b)
            sync(dev)

        run()  # warm-up
        print("ready", flush=True)
        sys.stdin.readline()
        steps, tic = 0, time.perf_counter()
        while time.perf_counter() - tic < seconds:
            run()
            steps += per_call
    print(json.dumps({"steps": steps, "elapsed_s": time.perf_counter() - tic}), flush=True)


def measure(jobs: Sequence[int], datasets: Sequence[str], p: float, seconds: float, device: str, graph: bool,
            precision: str, label: str) -> dict[str, Any]:
    """Aggregate steps/s of K concurrent worker processes per dataset and K (hasfl.bench.packing.measure)."""
    from hasfl.bench.packing import measure as measure_k

    rows = []
    for ds in datasets:
        cmd = ([sys.executable, str(Path(__file__).resolve()), "worker", "--dataset", ds, "--p", str(p),
                "--seconds", str(seconds), "--device", device, "--precision", precision] if graph else None)
        for r in measure_k(jobs, seconds, device, precision, dataset=ds, p=p, cmd=cmd):
            rows.append({"dataset": ds, "p": p, **r})
    return {"label": label, "seconds_per_trial": seconds, "cuda_graph_steps": graph, "precision": precision,
            "rows": rows}


def packed_hours(paper: Mapping[str, Any], run: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """Device-hours of ``paper`` (a bench report's paper-scale section) with each dataset's jobs packed at
    the best K of ``run``, relative to the one-job rate of ``base``."""
    out: dict[str, Any] = {}
    total = 0.0
    for ds, v in paper["datasets"].items():
        rows = [r for r in run["rows"] if r["dataset"] == ds]
        one = [r for r in base["rows"] if r["dataset"] == ds and r["jobs"] == 1]
        if not rows or not one:
            continue
        best = max(rows, key=lambda r: r["steps_per_s_total"])
        speedup = float(best["steps_per_s_total"]) / float(one[0]["steps_per_s_total"])
        hours = float(v["job_hours"]) / speedup
        total += hours
        out[ds] = {"jobs_at_once": best["jobs"], "speedup_vs_one_job_alone": round(speedup, 3),
                   "device_hours": round(hours, 2)}
    return {"label": run.get("label", ""), "datasets": out, "device_hours_total": round(total, 2)}


def pack(report: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every run packed against the first run's one-job rates (e.g. no MPS, then MPS on)."""
    return [packed_hours(report["paper_scale"], r, runs[0]) for r in runs]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure K concurrent jobs per dataset (JSON on stdout)")
    r.add_argument("--jobs", default="1,4,8,16")
    r.add_argument("--datasets", default="cifar10,emnist,shakespeare")
    r.add_argument("--p", type=float, default=0.5)
    r.add_argument("--seconds", type=float, default=5.0)
    r.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    r.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "bf16"))
    r.add_argument("--graph", action="store_true", help="each job replays its step as a CUDA graph (fp32/tf32)")
    r.add_argument("--label", default="")
    w = sub.add_parser("worker", help="(internal) one CUDA-graph job")
    w.add_argument("--dataset", required=True)
    w.add_argument("--p", type=float, required=True)
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("--device", default="auto")
    w.add_argument("--precision", default="fp32")
    k = sub.add_parser("pack", help="device-hours of a bench report's paper scale packed by concurrency runs")
    k.add_argument("report", type=Path, help="a `hasfl bench` JSON report with a paper-scale section")
    k.add_argument("runs", type=Path, nargs="+", help="JSON of `run` (the first gives the one-job rates)")
    args = ap.parse_args(argv)
    if args.cmd == "worker":
        worker(args.dataset, args.p, args.seconds, args.device, args.precision)
        return 0
    if args.cmd == "run":
        if args.graph and args.precision == "bf16":
            ap.error("the CUDA-graph step has no bf16 variant; use fp32 or tf32")
        out: Any = measure([int(j) for j in args.jobs.split(",")], args.datasets.split(","), args.p, args.seconds,
                           args.device, args.graph, args.precision, args.label)
    else:
        out = pack(json.loads(args.report.read_text()), [json.loads(p.read_text()) for p in args.runs])
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
