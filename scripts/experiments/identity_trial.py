"""(check) Issue 26's hostile items against a finished results folder: does any of them lose a run?

For a finished preset (e.g. ``results/quick`` from ``snakemake --cores 2 all --configfile
presets/quick.yaml``), each item is applied to the folder itself where it must change nothing
(``results-page`` aimed at a run file, ``touch``, another key order, ``data_dir: ./data``, a duplicate
key, ``hasfl train`` with another seed's inputs) or to a ``cp -a`` copy where it changes files
(swapped seed folders, another FedProx mu, another seed's data stage), with ``snakemake -n`` (never a
real run). Every file of the original folder is hashed before and after; the copies are deleted.

    python scripts/experiments/identity_trial.py results/quick --preset presets/quick.yaml

Prints JSON: per item what happened (exit code, planned jobs, the message) and whether every file of
the original folder is unchanged. Result (2026-12-01, quick preset, 54 runs): see the issue 26 note.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".hasfl.lock"}


def snakemake(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900)


def hasfl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hasfl.cli", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=900)


def planned(res: subprocess.CompletedProcess[str]) -> dict[str, int]:
    jobs = {}
    for line in (res.stdout + res.stderr).splitlines():
        m = re.match(r"^([a-z_0-9]+)\s+(\d+)$", line.strip())
        if m and m.group(1) not in ("total", "job", "count"):
            jobs[m.group(1)] = int(m.group(2))
    return jobs


def last_message(res: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("hasfl") or "holds" in ln or ": config" in ln]
    return " | ".join(lines[-3:])[:400]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a finished preset's results folder, e.g. results/quick")
    ap.add_argument("--preset", type=Path, required=True, help="its preset file, e.g. presets/quick.yaml")
    args = ap.parse_args(argv)
    results = args.results.resolve()
    preset = yaml.safe_load(args.preset.read_text())
    before = files(results)
    out: dict[str, dict] = {}
    work = Path(tempfile.mkdtemp(prefix="identity-trial-"))
    try:
        merged = hasfl("config", "--config", args.preset)
        full = json.loads(merged.stdout)
        runs = sorted(results.glob("runs/*/*/seed*/run.json"))
        ds, method = runs[0].parts[-4], runs[0].parts[-3]
        seeds = sorted({int(p.parts[-2].removeprefix("seed")) for p in runs})

        def overlay(file: str, **extra) -> Path:
            path = work / f"{file}.yaml"
            # the results folder spelled as given (Snakemake's metadata is keyed by the path's spelling)
            path.write_text(yaml.safe_dump({**preset, "results_dir": str(args.results.parent), **extra}))
            return path

        same = overlay("same", name=results.name)
        res = snakemake("-n", "all", "--configfile", str(args.preset), str(same))
        out["0 nothing changed"] = {"rc": res.returncode, "jobs": planned(res)}

        for label, target in (("a run file", runs[0]), ("a page inside the results folder", results / "page.md")):
            res = hasfl("results-page", results, target)
            out[f"7 results-page onto {label}"] = {"rc": res.returncode, "msg": res.stderr.strip()[:300]}

        for f in results.glob("data/*/*/*.parquet"):
            f.touch()
        for f in results.glob("runs/*/*/*/*"):
            f.touch()
        res = snakemake("-n", "all", "--configfile", str(args.preset), str(same))
        out["10 touch on every data-stage and run file"] = {"rc": res.returncode, "jobs": planned(res)}

        def reverse(v):
            return {k: reverse(v[k]) for k in reversed(list(v))} if isinstance(v, dict) else v

        reordered = work / "reordered.yaml"
        reordered.write_text(yaml.safe_dump(reverse({**full, "results_dir": str(args.results.parent)}),
                                            sort_keys=False))
        res = snakemake("-n", "all", "--configfile", str(reordered))
        out["10 the same config in another key order"] = {"rc": res.returncode, "jobs": planned(res)}

        res = snakemake("-n", "all", "--configfile", str(args.preset),
                        str(overlay("dotdata", name=results.name, data_dir="./" + full["data_dir"])))
        out["9 data_dir spelled ./data"] = {"rc": res.returncode, "jobs": planned(res)}

        dup = work / "dup.yaml"
        dup.write_text(same.read_text() + "federation:\n  rounds: 2\n")
        res = snakemake("-n", "all", "--configfile", str(args.preset), str(dup))
        out["5 a duplicate key"] = {"rc": res.returncode, "msg": last_message(res)}

        if len(seeds) > 1:
            res = hasfl("train", "--config", args.preset, "--dataset", ds, "--method", method, "--seed", seeds[1],
                        "--data", results / f"data/{ds}/seed{seeds[0]}", "--out", work / "x")
            out["4 hasfl train with another seed's data stage"] = {"rc": res.returncode,
                                                                   "msg": res.stderr.strip()[:300]}
            swapped = results.parent / f"{results.name}-trial-swapped"
            shutil.copytree(results, swapped, symlinks=True)
            a, b = swapped / f"runs/{ds}/{method}/seed{seeds[0]}", swapped / f"runs/{ds}/{method}/seed{seeds[1]}"
            a.rename(a.with_name("tmp"))
            b.rename(a)
            a.with_name("tmp").rename(b)
            copy_before = files(swapped)
            res = snakemake("-n", "all", "--configfile", str(args.preset),
                            str(overlay("swapped", name=swapped.name)))
            out["8 two seeds' run folders swapped"] = {"rc": res.returncode, "msg": last_message(res),
                                                       "copy unchanged": files(swapped) == copy_before}
            shutil.rmtree(swapped)

        if "fedprox" in full["methods"]:
            mu = results.parent / f"{results.name}-trial-mu"
            shutil.copytree(results, mu, symlinks=True)
            res = snakemake("-n", "all", "--configfile", str(args.preset),
                            str(overlay("mu", name=mu.name, method_params={"fedprox": {"mu": 0.5}})))
            out["3 cp -a and another FedProx mu"] = {"rc": res.returncode, "jobs": planned(res)}
            shutil.rmtree(mu)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    after = files(results)
    report = {"results": str(args.results), "files": len(before), "runs": len(runs),
              "every file unchanged": before == after, "items": out}
    print(json.dumps(report, indent=2))
    return 0 if before == after else 1


if __name__ == "__main__":
    sys.exit(main())
