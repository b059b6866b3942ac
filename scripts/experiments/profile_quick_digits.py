#!/usr/bin/env python3
"""cProfile of a few rounds of the quick preset's digits hasfl job: where a small job's time goes.

Result on the 2-core Xeon (2026-11-30, 5 rounds, 1.06 s): autograd's backward 30 %, conv2d 20 %,
batch norm, ReLU and linear layers another 8 %, sub-model slicing (``region``) 2 %; the rest is
spread over many small calls of a model this small (8x8 images, 16-32 channels). Nothing was
changed because of it: no single engine function stood out.

Run: ``python scripts/experiments/profile_quick_digits.py [--rounds 5] [--top 15]``; prints JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from hasfl.bench.harness import rnd
from hasfl.bench.workload import quick_digits
from hasfl.config import REPO_ROOT, load_config
from hasfl.fl.engine import run_federation
from hasfl.fl.runtime import resolve_device


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--top", type=int, default=15, help="functions by own time (default: %(default)s)")
    ap.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    bundle, part, cl, cfg = quick_digits(load_config(REPO_ROOT / "presets" / "quick.yaml"),
                                         resolve_device(args.device), args.rounds)
    prof = cProfile.Profile()
    tic = time.perf_counter()
    prof.enable()
    run_federation(bundle, part, cl, cfg)
    prof.disable()
    wall = time.perf_counter() - tic
    rows = []
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    for (file, line, fn), (_, nc, tt, ct, _) in sorted(stats.items(), key=lambda kv: -kv[1][2])[:args.top]:
        rows.append({"function": f"{Path(file).name}:{line}({fn})" if line else fn, "calls": nc,
                     "tottime_s": rnd(tt, 4), "tottime_share": rnd(tt / wall), "cumtime_s": rnd(ct, 4)})
    json.dump({"rounds": args.rounds, "wall_s": rnd(wall, 3), "top_tottime": rows}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
