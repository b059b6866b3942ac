#!/usr/bin/env python3
"""Convert ``hasfl bench`` reports of the first format (``bench_version`` 1) to the current one, once.

The first format carried sections that are now experiments (A/B proposals, cProfile, CUDA-graph
step, concurrent jobs and their packings) and lacked a few derived fields on older runs. This
keeps only the sections ``hasfl bench`` still measures, renames ``device_hours`` to ``job_hours``,
moves the method step factors into the paper-scale section, fills fields that are pure arithmetic
on the stored numbers and the current config (the evaluation's share of a round's MACs, GMAC/s)
and recomputes the targets. Numbers that were never measured stay absent (``null``).

Used on 2026-12-01 for docs/bench/cpu.json, cpu-bf16.json and h200.json (measured 2026-11-30);
``section`` extracted the experiment sections into ``scripts/experiments/results/``.

Run: ``python scripts/experiments/convert_reports.py report OLD.json NEW.json --label ... --note ...``
or ``python scripts/experiments/convert_reports.py section OLD.json concurrency OUT.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.bench.paper_scale import per_method
from hasfl.bench.report import BENCH_VERSION, summarize_targets
from hasfl.bench.workload import family_of, synthetic_bundle
from hasfl.config import PAPER_CONFIG, load_config

KEEP = ("client_vs_bare", "width_scaling", "server_share", "paper_scale", "quick_preset")


def _paper_scale(old: Mapping[str, Any], method_factors: Mapping[str, Any] | None,
                 config: Mapping[str, Any], batch: int) -> dict[str, Any]:
    import torch

    fed = config["federation"]
    datasets = {}
    for ds, v in old["datasets"].items():
        family = family_of(config, ds, synthetic_bundle(ds, 1, 1, torch.device("cpu")))
        samples = fed["clients_per_round"] * v["paper"]["client_mean_n"] * v["paper"]["local_epochs"]
        step_macs = per_method(config, lambda p, f=family: float(f.cost(p).macs), {})
        eval_macs = v["paper"]["test"] * family.cost(1.0).macs
        rows = [{**r, "eval_mac_share": r.get("eval_mac_share",
                                              round(eval_macs / (eval_macs + 3 * samples * step_macs[r["method"]]), 4))}
                for r in v["methods"]]
        macs1 = family.cost(1.0).macs
        ms = v["per_sample_train_ms"]
        gmac = v.get("gmac_per_s") or {"eval_p1": round(macs1 / (v["eval_ms_per_sample"] / 1e3) / 1e9, 2),
                                       "train_p1": round(3 * macs1 / (ms["1.0"] / 1e3) / 1e9, 2),
                                       "train_p025": round(3 * family.cost(0.25).macs / (ms["0.25"] / 1e3) / 1e9, 2)}
        new = {k: val for k, val in v.items() if k != "device_hours"}
        datasets[ds] = {**new, "methods": rows, "gmac_per_s": gmac, "job_hours": v["device_hours"]}
    gemm = old.get("reference_gemm_gmac_per_s")
    mf = None
    if method_factors is not None:
        mf = {"batch_size": batch, **{k: method_factors.get(k) for k in ("step_ms", "factors", "ops_per_step", "note")}}
    return {"datasets": datasets, "job_hours_total": old["device_hours_total"], "jobs": old["jobs"],
            "rounds": old["rounds"], "estimation_rounds_per_run": old["estimation_rounds_per_run"],
            "method_factors": mf, "factors_applied": old.get("factors_applied", {}), "model": old["model"],
            "reference_gemm": {"gmac_per_s": gemm, "n": {k: 2048 for k in gemm}} if gemm else None}


def convert(old: Mapping[str, Any], label: str, note: str) -> dict[str, Any]:
    """The current format of a first-format report (kept sections only)."""
    if old.get("bench_version") != 1:
        raise ValueError(f"expected bench_version 1, got {old.get('bench_version')!r}")
    config = load_config(PAPER_CONFIG)
    batch = old["budget"].get("batch_size") or int(config["dataset_params"]["cifar10"]["optim"]["batch_size"])
    new: dict[str, Any] = {"bench_version": BENCH_VERSION, "mode": old["mode"], "label": label,
                           "precision": old.get("precision") or "pytorch-defaults", "note": note,
                           "machine": old["machine"], "budget": old["budget"]}
    for key in KEEP:
        if key not in old:
            continue
        sec = {k: v for k, v in old[key].items() if k not in ("target", "met", "definition", "packed")}
        if key == "server_share":
            sec["runs"] = [{k: v for k, v in r.items() if k != "engine_timings"}
                           | {"engine_total_s": r.get("engine_timings", {}).get("total_s")} for r in sec["runs"]]
        if key == "paper_scale":
            sec = _paper_scale(old[key], old.get("method_factors"), config, batch)
        new[key] = sec
    new["targets"] = summarize_targets(new)
    new["elapsed_s"] = old.get("elapsed_s")
    return new


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="convert one report")
    r.add_argument("old", type=Path)
    r.add_argument("new", type=Path)
    r.add_argument("--label", default="", help="the page title (machine class)")
    r.add_argument("--note", default="", help="a sentence on the page: when and on what it was measured")
    s = sub.add_parser("section", help="extract one section of a first-format report (experiment data)")
    s.add_argument("old", type=Path)
    s.add_argument("key")
    s.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    old = json.loads(args.old.read_text())
    if args.cmd == "report":
        out, path = convert(old, args.label, args.note), args.new
    else:
        if args.key not in old:
            ap.error(f"{args.old} has no section {args.key!r} (it has {sorted(old)})")
        out = {**old[args.key], "machine": old["machine"],
               "source": f"{args.old.name} (measured {old['machine']['date']})"}
        path = args.out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
