"""Issue 23's identity check: two results folders of one preset (before / after the per-width BN
statistics) have bit-identical parameters in every final.pt, and identical files for every run of a
full-width method (FedAvg, FedProx, SCAFFOLD) and of a model without batch norm (Shakespeare).

    python scripts/experiments/bn_identity.py results/quick /path/to/old/results/quick

Prints the counts as JSON; exits 1 on any difference.

Result (2026-12-01, quick preset, this commit's results/quick against 61e6740's, both from empty
folders on the same 2-core machine): 54 final.pt compared, 837 parameter tensors bit-identical; 36
runs of full-width methods or without batch norm, 216 files identical by sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

FULL_WIDTH = ("fedavg", "fedprox", "scaffold")
BYTE_FILES = ("rounds.parquet", "clients.parquet", "init.pt", "warmup.pt", "final.pt", "run.json")


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new", help="results folder of the new code, e.g. results/quick")
    ap.add_argument("old", help="results folder of the old code (the same preset)")
    args = ap.parse_args(argv)
    new_runs, old_runs = Path(args.new) / "runs", Path(args.old) / "runs"
    bad: list[str] = []
    n_final = n_tensors = n_byte_runs = n_byte_files = 0
    for final in sorted(new_runs.glob("*/*/seed*/final.pt")):
        rel = final.relative_to(new_runs)
        dataset, method = rel.parts[0], rel.parts[1]
        ref = old_runs / rel
        if not ref.exists():
            bad.append(f"{rel}: missing in {args.old}")
            continue
        a = torch.load(final, weights_only=True)
        b = torch.load(ref, weights_only=True)
        skip = (".running_mean", ".running_var", ".num_batches_tracked")
        keys = [k for k in b if not k.endswith(skip)]
        for k in keys:
            n_tensors += 1
            if k not in a or not torch.equal(a[k], b[k]):
                bad.append(f"{rel}: parameter {k} differs")
        n_final += 1
        if method in FULL_WIDTH or dataset == "shakespeare":
            n_byte_runs += 1
            for name in BYTE_FILES:
                n_byte_files += 1
                if _sha(final.parent / name) != _sha(ref.parent / name):
                    bad.append(f"{rel.parent}/{name}: bytes differ")
    print(json.dumps({"final_pt_compared": n_final, "parameter_tensors_compared": n_tensors,
                      "byte_runs": n_byte_runs, "byte_files_compared": n_byte_files, "differences": bad}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
