"""The pieces of the one prepared device check (scripts/gpu-check.sh) and their report section.

* :func:`determinism` -- a short training job (quick preset, digits) run twice and once SIGKILLed after a
  checkpoint and resumed, by the real ``hasfl train``; every run file's sha256 compared (``timings.json``
  holds wall times and is left out) and the determinism flags the runs report;
* :func:`assemble` -- the check's JSON files (determinism, the packing calibration, the packed quick preset,
  the batched client step alone and packed) as the ``gpu_check`` section of a ``hasfl bench`` report, which
  ``hasfl bench --from-json`` renders into docs/performance-gpu.md (:mod:`hasfl.bench.report`).

``python -m hasfl.bench.gpu_check determinism --device cuda --out F`` and ``... assemble DIR --into REPORT``.
On a CPU the determinism check runs the same way (tests/test_gpu_packing.py runs it there).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from hasfl.bench.report import summarize_targets
from hasfl.config import REPO_ROOT, deep_merge

__all__ = ["assemble", "determinism"]

#: The check's files in its output folder, by section key.
FILES = {"determinism": "determinism.json", "packing": "packing.json", "quick_preset_packed": "quick-packed.json",
         "batched": "batched.json", "batched_packed": "batched-packed.json"}


def _digests(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())
            if f.is_file() and f.name != "timings.json"}


def _train(preset: Path, out: Path, method: str) -> list[str]:
    return [sys.executable, "-m", "hasfl.cli", "train", "--config", str(preset), "--dataset", "digits", "--method",
            method, "--seed", "42", "--out", str(out), "--threads", "1"]


def determinism(workdir: Path, device: str, rounds: int = 8, method: str = "hasfl",
                timeout_s: float = 300) -> dict[str, Any]:
    """Two runs of one job and a SIGKILLed-then-resumed third: are their run files byte-identical?"""
    workdir.mkdir(parents=True, exist_ok=True)
    quick = yaml.safe_load((REPO_ROOT / "presets" / "quick.yaml").read_text())
    preset = deep_merge(quick, {"name": "gpu-check", "device": device, "execution": {"checkpoint_every": 2}, "datasets": ["digits"],
                           "federation": {"rounds": rounds}, "hasfl": {"warmup": 2, "t_adapt": 2}})
    path = workdir / "preset.yaml"
    path.write_text(yaml.safe_dump(preset))
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    runs = {name: workdir / name for name in ("a", "b", "resumed")}
    tic = time.perf_counter()
    for name in ("a", "b"):
        subprocess.run(_train(path, runs[name], method), env=env, check=True, capture_output=True, timeout=timeout_s)
    proc = subprocess.Popen(_train(path, runs["resumed"], method), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout_s
    killed = False
    while proc.poll() is None and time.time() < deadline:
        if (runs["resumed"] / "checkpoint.pt").exists():
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.01)
    proc.wait()
    subprocess.run(_train(path, runs["resumed"], method), env=env, check=True, capture_output=True, timeout=timeout_s)
    a, b, r = (_digests(runs[n]) for n in ("a", "b", "resumed"))
    flags = json.loads((runs["a"] / "timings.json").read_text())
    return {"device": device, "run_device": flags.get("device"), "method": method, "rounds": rounds,
            "files_compared": len(a), "twice_identical": a == b, "resumed_identical": a == r,
            "killed_mid_run": killed, "differing_twice": sorted(k for k in a if a[k] != b.get(k)),
            "differing_resumed": sorted(k for k in a if a[k] != r.get(k)), "determinism": flags.get("determinism"),
            "wall_s": round(time.perf_counter() - tic, 1)}


def assemble(folder: Path) -> dict[str, Any]:
    """The ``gpu_check`` section from the check's files in ``folder`` (absent ones: not measured)."""
    out: dict[str, Any] = {}
    for key, name in FILES.items():
        f = folder / name
        try:
            out[key] = json.loads(f.read_text())
        except (OSError, ValueError):
            out[key] = None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hasfl.bench.gpu_check", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("determinism", help="a job twice and once killed + resumed; JSON to --out")
    d.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    d.add_argument("--rounds", type=int, default=8)
    d.add_argument("--workdir", type=Path, default=Path("/tmp/hasfl-gpu-check-determinism"))
    d.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("assemble", help="add the check's files as section gpu_check of a bench report")
    a.add_argument("folder", type=Path)
    a.add_argument("--into", type=Path, required=True, help="a `hasfl bench` JSON report, rewritten in place")
    args = ap.parse_args(argv)
    if args.cmd == "determinism":
        result = determinism(args.workdir, args.device, args.rounds)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps({k: result[k] for k in ("twice_identical", "resumed_identical", "files_compared")}))
        return 0 if result["twice_identical"] and result["resumed_identical"] else 1
    report = json.loads(args.into.read_text())
    report["gpu_check"] = assemble(args.folder)
    report["targets"] = summarize_targets(report)  # the packed paper hours need the check's calibration
    tmp = args.into.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, args.into)
    return 0


if __name__ == "__main__":
    sys.exit(main())
