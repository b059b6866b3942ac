"""How many training jobs should share one device: the calibration behind config ``gpu.jobs_per_gpu: auto``.

K one-thread processes, each running the engine's local SGD (:class:`hasfl.fl.client.LocalSGD`, through
:class:`hasfl.bench.workload.ClientTimer`) on the paper's CIFAR-10 CNN at p = 0.5 (about HAS-FL's average
width), start together and step for ``seconds``; their steps per second, summed, against one job alone, for
each K of ``ks``. The chosen K is the smallest whose aggregate rate is within :data:`TOLERANCE` of the best
(more jobs than that cost memory and gain nothing). With an MPS directory the same levels run again under a
CUDA MPS daemon started there for the measurement (:class:`hasfl.dag.gpu.MPS`), so the plan can use the better
of the two. A paper-model step is launch-bound on a GPU (about the same time at every width,
docs/performance-gpu.md), so one model stands for all; the calibration is cached per device
(:func:`hasfl.dag.gpu.plan`).

``python -m hasfl.bench.packing calibrate --device cuda [--mps-dir DIR]`` prints the JSON; ``worker`` is one
job (internal). On a CPU it measures the same (tests/test_gpu_packing.py runs it there: jobs share cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TOLERANCE", "calibrate_packing", "choose", "measure"]

#: The chosen K is the smallest within this fraction of the best aggregate rate.
TOLERANCE = 0.05
DEFAULT_KS = (1, 2, 4, 8, 16)


def worker(dataset: str, p: float, seconds: float, device: str, precision: str, deterministic: bool) -> None:
    """One job: warm up, print ``ready``, wait for a line on stdin, step for ``seconds``, print its steps."""
    import torch

    from hasfl.bench.harness import FULL
    from hasfl.bench.workload import ClientTimer, family_of, optim_for, synthetic_bundle
    from hasfl.config import PAPER_CONFIG, load_config
    from hasfl.fl.runtime import Numerics, resolve_device

    torch.set_num_threads(1)
    dev = resolve_device(device)
    config = load_config(PAPER_CONFIG)
    per_call = 16
    optim = optim_for(config, dataset, FULL.batch_size)
    bundle = synthetic_bundle(dataset, per_call * optim.batch_size, 8, dev)
    numerics = Numerics.for_run(dev, precision, bundle.task == "image", deterministic=deterministic)
    client = ClientTimer(family_of(config, dataset, bundle), p, bundle, optim, dev, numerics=numerics)
    client.steps = per_call
    client.ours()  # warm-up: kernels, allocator (ClientTimer synchronises the device)
    print("ready", flush=True)
    sys.stdin.readline()
    steps, tic = 0, time.perf_counter()
    while time.perf_counter() - tic < seconds:
        client.ours()
        steps += per_call
    print(json.dumps({"steps": steps, "elapsed_s": time.perf_counter() - tic}), flush=True)


def measure(ks: Sequence[int], seconds: float, device: str, precision: str = "fp32", deterministic: bool = True,
            dataset: str = "cifar10", p: float = 0.5, env: Mapping[str, str] | None = None,
            cmd: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Aggregate steps/s of K concurrent one-thread jobs for each K (``cmd``: another worker command line)."""
    rows: list[dict[str, Any]] = []
    child_env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1"}
    base = None
    for k in ks:
        argv = list(cmd or [sys.executable, "-m", "hasfl.bench.packing", "worker", "--dataset", dataset, "--p", str(p),
                            "--seconds", str(seconds), "--device", device, "--precision", precision,
                            *([] if deterministic else ["--no-deterministic"])])
        procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env)
                 for _ in range(k)]
        try:
            for w in procs:
                line = w.stdout.readline().strip() if w.stdout else ""
                if line != "ready":
                    raise RuntimeError(f"a packing worker did not start (it said {line!r})")
            for w in procs:
                assert w.stdin is not None
                w.stdin.write("go\n")
                w.stdin.flush()
            outs = [json.loads(w.communicate(timeout=seconds * 10 + 120)[0].strip().splitlines()[-1]) for w in procs]
        finally:
            for w in procs:
                if w.poll() is None:
                    w.kill()
        rate = sum(o["steps"] / o["elapsed_s"] for o in outs)
        base = rate if base is None else base
        rows.append({"jobs": k, "steps_per_s_total": round(rate, 2), "steps_per_s_per_job": round(rate / k, 2),
                     "speedup_vs_one_job": round(rate / base, 3)})
    return rows


def choose(rows: Sequence[Mapping[str, Any]], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """The smallest K whose aggregate rate is within ``tolerance`` of the best, and its speed-up over one job."""
    best = max(float(r["steps_per_s_total"]) for r in rows)
    pick = min((r for r in rows if float(r["steps_per_s_total"]) >= (1 - tolerance) * best), key=lambda r: r["jobs"])
    return {"k": int(pick["jobs"]), "speedup": float(pick["speedup_vs_one_job"]), "rows": list(rows)}


def calibrate_packing(device: str, ks: Sequence[int] = DEFAULT_KS, seconds: float = 3.0, precision: str = "fp32",
                      deterministic: bool = True, mps_dir: str | None = None) -> dict[str, Any]:
    """K without MPS and, with ``mps_dir``, K under an MPS daemon started there for the measurement."""
    from hasfl.dag.gpu import MPS

    out: dict[str, Any] = {"device": device, "ks": list(ks), "seconds": seconds, "precision": precision,
                           "deterministic": deterministic, "measured": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           "plain": choose(measure(ks, seconds, device, precision, deterministic)), "mps": None,
                           "mps_reason": "not asked for"}
    if mps_dir:
        daemon = MPS(mps_dir)
        why = daemon.start()
        out["mps_reason"] = why
        if why is None:
            try:
                out["mps"] = choose(measure(ks, seconds, device, precision, deterministic, env=daemon.env))
            finally:
                daemon.stop()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hasfl.bench.packing", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("calibrate", help="measure K jobs at once for each K; JSON on stdout")
    w = sub.add_parser("worker", help="(internal) one job")
    for p in (c, w):
        p.add_argument("--device", default="cuda", choices=("auto", "cpu", "cuda"))
        p.add_argument("--precision", default="fp32", choices=("fp32", "tf32", "bf16"))
        p.add_argument("--no-deterministic", dest="deterministic", action="store_false")
    c.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)))
    c.add_argument("--seconds", type=float, default=3.0)
    c.add_argument("--mps-dir", default=None, help="also measure under an MPS daemon started in this directory")
    w.add_argument("--dataset", default="cifar10")
    w.add_argument("--p", type=float, default=0.5)
    w.add_argument("--seconds", type=float, required=True)
    args = ap.parse_args(argv)
    if args.cmd == "worker":
        worker(args.dataset, args.p, args.seconds, args.device, args.precision, args.deterministic)
        return 0
    out = calibrate_packing(args.device, [int(k) for k in args.ks.split(",")], args.seconds, args.precision,
                            args.deterministic, args.mps_dir)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
