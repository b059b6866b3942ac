#!/usr/bin/env python3
"""Per-job process start-up: what one quick-preset training job pays before the engine starts, and
several jobs in one process instead of one process each.

What it measures:

* ``start``: wall seconds of ``python -c`` with nothing, ``import torch``, ``import hasfl.fl.train``,
  ``import snakemake.script`` + the engine, and the imports + loading the quick preset's data.
  Result on the 2-core Xeon (2026-11-30): 0.01 / 2.11 / 2.50 / 2.52 / 3.35 s (digits).
* ``batch``: quick-preset digits jobs (hasfl, fedavg, fjord; seed 42), one ``hasfl train`` process
  per job (as the train rule ran them) vs all of them in one process. Result: 22.5 s vs 17.5 s wall
  for the same 15.2 s of engine time, 2.45 s vs 0.74 s outside the engine per job, byte-identical
  ``rounds.parquet``. *Not adopted as such*: batching jobs into one process would break the DAG's
  one-job-per-run contract; the warm worker (``hasfl.dag.worker``, docs/decisions.md "Job start-up")
  keeps one job per run and cut the train-job overhead from 5.5 s to 0.55 s instead.

Run: ``python scripts/experiments/process_batching.py [--which start,batch]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hasfl.config import REPO_ROOT


def job_start(repeats: int = 3) -> dict[str, float]:
    """Median wall seconds of a fresh Python process per import set."""
    prelude = ("import hasfl.fl.train; from hasfl.config import load_config; from hasfl.data import load_dataset; "
               f"c = load_config({str(REPO_ROOT / 'presets' / 'quick.yaml')!r}); d = {str(REPO_ROOT)!r} + '/' + "
               "c['data_dir'] if not c['data_dir'].startswith('/') else c['data_dir']; ")
    cmds = {"python": "pass", "import torch": "import torch", "import hasfl.fl.train": "import hasfl.fl.train",
            "import snakemake.script + hasfl.fl.train": "import snakemake.script; import hasfl.fl.train",
            "imports + load quick digits": prelude + "load_dataset('digits', d, c['dataset_params']['digits'])"}
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(repeats):
        for k, code in cmds.items():
            tic = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
            times[k].append(time.perf_counter() - tic)
    return {k: round(statistics.median(v), 3) for k, v in times.items()}


def process_batching(methods: Sequence[str] = ("hasfl", "fedavg", "fjord"), seed: int = 42) -> dict[str, Any]:
    """Quick-preset digits jobs: one process per job vs all jobs in one process."""
    tmp = Path(tempfile.mkdtemp(prefix="hasfl-exp-jobs-"))
    preset = str(REPO_ROOT / "presets" / "quick.yaml")
    try:
        tic = time.perf_counter()
        for m in methods:
            subprocess.run([sys.executable, "-m", "hasfl.cli", "train", "--config", preset, "--dataset", "digits",
                            "--method", m, "--seed", str(seed), "--out", str(tmp / "A" / m), "--threads", "1"],
                           cwd=REPO_ROOT, check=True, capture_output=True)
        wall_a = time.perf_counter() - tic
        code = ("import sys; from pathlib import Path; from hasfl.config import load_config, data_config, run_config; "
                "from hasfl.dag.outputs import train_job; c = load_config(sys.argv[1]); c['threads_per_job'] = 1; "
                "[train_job(run_config(c, 'digits', m, int(sys.argv[3])), data_config(c, 'digits'), "
                "Path(sys.argv[2]) / m) for m in sys.argv[4:]]")
        tic = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, preset, str(tmp / "B"), str(seed), *methods],
                       cwd=REPO_ROOT, check=True, capture_output=True)
        wall_b = time.perf_counter() - tic
        out: dict[str, Any] = {"methods": list(methods)}
        for v, wall in (("A", wall_a), ("B", wall_b)):
            engine = sum(json.loads((tmp / v / m / "timings.json").read_text())["total_s"] for m in methods)
            out["one_process_per_job" if v == "A" else "one_process_all_jobs"] = {
                "wall_s": round(wall, 2), "engine_s": round(engine, 2),
                "outside_s_per_job": round((wall - engine) / len(methods), 3),
                "outside_share": round(1 - engine / wall, 4)}
        out["identical_rounds_parquet"] = all(
            (tmp / "A" / m / "rounds.parquet").read_bytes() == (tmp / "B" / m / "rounds.parquet").read_bytes()
            for m in methods)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--which", default="start,batch", help="comma list of start,batch (default: both)")
    ap.add_argument("--repeats", type=int, default=3, help="start: repetitions (median)")
    args = ap.parse_args(argv)
    which = args.which.split(",")
    out: dict[str, Any] = {}
    if "start" in which:
        out["job_start_s"] = job_start(args.repeats)
    if "batch" in which:
        out["process_batching"] = process_batching()
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
