"""Issue 26, item 1: a run that never trained a round after the warm-up round t0 (``federation.rounds``
<= ``hasfl.warmup`` + 1), or that diverged, cannot show Proposition 3. It is left out of the Proposition 3
table, of Table 4b and of F5, counted and named; with every run left out F5 is inconclusive, and a NaN
is never a moved coordinate.

Run folders as in test_findings_runs.py (tiny CNN on sklearn's digits, t0 = 2, 4 rounds).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import torch
from test_findings import base_tables, evaluate
from test_findings_runs import MODEL, STALE_TABLE, files, run_table4b, write_manifest, write_run

from hasfl.analysis import findings as F
from hasfl.analysis.specs import resolve_thresholds
from hasfl.analysis.tables import prop3_coverage as P3
from hasfl.analysis.tables import table4b_stale_coordinates as T4B
from hasfl.analysis.tables.base import display_parts
from hasfl.io import write_parquet

P3_FILES = ("clients.parquet", "init.pt", "final.pt", "run.json")
EMPTY = pd.DataFrame(columns=["dataset", "method", "seed", "status"])


def run_dir(root, method):
    return root / "runs" / "digits" / method / "seed1"


def patch_summary(root, method, **fields):
    p = run_dir(root, method) / "run.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), **fields}))


def never_past_t0(root, method="fedavg", rounds=2):
    """What the engine writes for ``federation.rounds = rounds <= t0 + 1``: no round after t0 = 2 (the
    largest width trained after it is 0 for every client) and warmup.pt is final.pt."""
    write_run(root, method, p_all=1.0, p_after=1.0)
    d = run_dir(root, method)
    torch.save(torch.load(d / "warmup.pt", weights_only=True), d / "final.pt")
    clients = pd.read_parquet(d / "clients.parquet")
    write_parquet(clients.assign(p_max_trained_after_warmup=0.0), d / "clients.parquet")
    patch_summary(root, method, rounds_completed=rounds)


def diverged_in_round_1(root, method="hasfl_nocov"):
    """A capped run whose loss became NaN in round 1: every float of final.pt is NaN."""
    write_run(root, method, p_all=1.0, p_after=0.5)
    d = run_dir(root, method)
    final = torch.load(d / "final.pt", weights_only=True)
    torch.save({k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in final.items()},
               d / "final.pt")
    patch_summary(root, method, status="diverged", diverged_round=1, rounds_completed=1, final_test_acc=None)


def tables(root, methods):
    """Proposition 3 and Table 4b of ``methods``' runs under ``root``, with the other findings' tables empty."""
    out = root / "tables"
    p3 = P3.job(files(root, methods, P3_FILES), write_manifest(root), {"digits": MODEL}, 0.0,
                out / "prop3_coverage.parquet", out / "prop3_coverage.md")
    t4b = run_table4b(root, methods)
    return {F.T5: pd.DataFrame(columns=["dataset", "seed", "method", "status", "n_clients"]), F.T3S: EMPTY,
            F.T4S: EMPTY, F.T6S: EMPTY, F.T7S: EMPTY,
            F.MBS: pd.DataFrame(columns=["dataset", "seed", "paired", "diff_final_acc_pct"]), F.P3: p3,
            F.T4B: t4b}


def f5(t):
    res = {f["id"]: f for f in F.evaluate_findings(t, datasets=["digits"], thresholds=resolve_thresholds())}
    json.dumps(list(res.values()), allow_nan=False)
    return res[F.F5]


def test_a_run_that_never_passed_t0_is_no_100_percent_stale_capped_run(tmp_path):
    """``federation.rounds = 2`` with t0 = 2: before the fix FedAvg was a "capped run, stale coordinates
    100%" and F5 supported by it."""
    never_past_t0(tmp_path)
    t = tables(tmp_path, ["fedavg"])
    f = f5(t)
    assert f["verdict"] == F.INCONCLUSIVE and f["n_units"] == 0
    row = t[F.T4B].iloc[0]
    assert row["status"] == "never passed t0 = 2 (2 rounds)" and np.isnan(row["acc_full_pct"])  # not evaluated
    assert t[F.P3].iloc[0]["status"] == row["status"]
    assert f["reason"].startswith("every run is left out")
    assert "digits/fedavg/seed1: never passed t0 = 2" in f["reason"]
    assert f["left_out"] == [{"unit": "digits/fedavg/seed1", "reason": "never passed t0 = 2 (2 rounds)"}]
    md = (tmp_path / "tables" / f"{STALE_TABLE}.md").read_text()
    assert "1 of 1 runs left out" in md and "FedAvg seed 1: never passed t0 = 2 (2 rounds)" in md
    assert "runs are capped" not in md  # no row shown as a capped run
    assert "never passed t0 = 2" in T4B.stale_summary(t[F.T4B])
    assert "1 of 1 runs left out" in (tmp_path / "tables" / "prop3_coverage.md").read_text()


def test_a_run_diverged_in_round_1_does_not_contradict_f5(tmp_path):
    """Before the fix its NaN coordinates counted as moved: F5 contradicted for the whole preset."""
    diverged_in_round_1(tmp_path)
    write_run(tmp_path, "uniform", p_all=0.5, p_after=0.5)  # a good capped run beside it
    t = tables(tmp_path, ["hasfl_nocov", "uniform"])
    f = f5(t)
    assert f["verdict"] == F.SUPPORTED and [u["unit"] for u in f["units"]] == ["digits/uniform/seed1"]
    t4b = t[F.T4B].set_index("method")
    assert t4b.loc["hasfl_nocov", "status"] == "diverged in round 1 (non-finite values in final.pt)"
    assert t4b.loc["uniform", "status"] == "completed"
    assert "1 run(s) left out" in f["reason"] and "digits/hasfl_nocov/seed1: diverged in round 1" in f["reason"]
    shown = display_parts(STALE_TABLE, t[F.T4B])
    assert list(shown[0][1]["method"]) == ["uniform"] and shown[1][1] == "All 1 runs are capped."
    assert "1 of 2 runs left out" in shown[2][1] and "HAS-FL (no coverage) seed 1: diverged in round 1" in shown[2][1]
    # both runs left out: inconclusive, never supported or contradicted
    never_past_t0(tmp_path, "uniform")
    f = f5(tables(tmp_path, ["hasfl_nocov", "uniform"]))
    assert f["verdict"] == F.INCONCLUSIVE and f["reason"].startswith("every run is left out")
    assert [u["unit"] for u in f["left_out"]] == ["digits/hasfl_nocov/seed1", "digits/uniform/seed1"]


def test_f5_counts_no_nan_as_moved_and_reads_the_status():
    t = dict(base_tables())
    t4b = t[F.T4B].copy()
    t4b.loc[t4b["method"] == "hasfl_nocov", ["n_stale_changed", "max_abs_change_stale"]] = [40, float("nan")]
    t[F.T4B] = t4b
    f = evaluate(t)[F.F5]
    assert f["verdict"] == F.SUPPORTED and [u["unit"] for u in f["units"]] == ["cifar10/uniform/seed42"]
    assert f["left_out"] == [{"unit": "cifar10/hasfl_nocov/seed42",
                              "reason": "non-finite values (untrained after t0 = 10)"}]
    # a diverged run, whatever its counts: left out; every run left out: inconclusive with that reason
    t = dict(base_tables())
    t[F.P3], t[F.T4B] = t[F.P3].assign(status="diverged"), t[F.T4B].assign(status="diverged")
    f = evaluate(t)[F.F5]
    assert f["verdict"] == F.INCONCLUSIVE and f["n_units"] == 0 and len(f["left_out"]) == 3
    assert f["reason"].startswith("every run is left out") and "cifar10/uniform/seed42: diverged" in f["reason"]
    # a table written before the status said so: nobody trained after t0 is a run that never passed it
    t = dict(base_tables())
    t[F.T4B] = t[F.T4B].assign(p_hi_after_t0=0.0, capped_after_t0=True)  # before the fix: 100% stale, supported
    f = evaluate(t)[F.F5]
    assert f["verdict"] == F.INCONCLUSIVE and f["n_units"] == 0
    assert {u["reason"] for u in f["left_out"]} == {"never passed t0 = 10 (no client trained after it)"}


def test_a_run_whose_server_noise_moves_every_coordinate_is_left_out_of_f5(tmp_path):
    """FedLPS's server adds 0.001 x N(0, 1) to every coordinate each round (method_params.fedlps.noise): its
    untrained coordinates move by construction. Before the fix F5 counted them as moved and read its units
    contradicted; now the Proposition 3 table names the noise and F5 leaves the run out. Without the noise (scale 0
    or a method without any) the same moved coordinates still contradict F5."""
    write_run(tmp_path, "fedlps", p_all=0.5, p_after=0.5)
    d = run_dir(tmp_path, "fedlps")
    final = torch.load(d / "final.pt", weights_only=True)
    torch.save({k: v + 1e-3 if v.is_floating_point() else v for k, v in final.items()}, d / "final.pt")
    out = tmp_path / "tables"
    base = tables(tmp_path, ["fedlps"])
    assert f5(base)["verdict"] == F.CONTRADICTED  # no noise: a moved coordinate is a fault
    p3 = P3.job(files(tmp_path, ["fedlps"], P3_FILES), write_manifest(tmp_path), {"digits": MODEL}, 0.0,
                out / "prop3_coverage.parquet", out / "prop3_coverage.md", {"fedlps": 0.001})
    reason = "its server adds noise to every coordinate each round (method_params.fedlps.noise = 0.001)"
    assert p3.iloc[0]["status"].startswith(reason)
    f = f5({**base, F.P3: p3})
    assert f["verdict"] == F.INCONCLUSIVE and f["n_units"] == 0
    assert f["left_out"][0]["unit"] == "digits/fedlps/seed1" and f["left_out"][0]["reason"].startswith(reason)
    assert "1 of 1 runs left out" in (out / "prop3_coverage.md").read_text()


def test_the_noise_of_a_preset_is_its_methods_positive_scales():
    from hasfl.config import load_config, server_noise

    cfg = load_config()
    cfg["methods"] = ["fedlps", "heterofl"]
    assert server_noise(cfg) == {"fedlps": cfg["method_params"]["fedlps"]["noise"]} and cfg["method_params"]["fedlps"]["noise"] > 0
    cfg["method_params"]["fedlps"]["noise"] = 0.0
    assert server_noise(cfg) == {}
    cfg["method_params"]["fedlps"]["noise"] = 0.001
    cfg["methods"] = ["heterofl"]
    assert server_noise(cfg) == {}
