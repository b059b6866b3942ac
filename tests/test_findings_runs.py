"""Table 4b and F5 on fabricated run folders (issue 14), and the clear errors on runs that predate
the engine contract (no warmup.pt, no p_max_trained_after_warmup, no avg_p_trained / upload_mb /
train_mmacs, no t0).

A tiny CNN on sklearn's digits (8x8, 10 classes; ships with scikit-learn, loads in < 1 s).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.analysis import findings as F
from hasfl.analysis import jobs, stale
from hasfl.analysis.artifacts import TABLES
from hasfl.analysis.figures import fig6_frontier as F6
from hasfl.analysis.specs import resolve_thresholds
from hasfl.analysis.tables import method_table as MT
from hasfl.analysis.tables import table4b_stale_coordinates as T4B
from hasfl.data import load_dataset
from hasfl.data.base import DatasetBundle
from hasfl.io import write_json, write_parquet
from hasfl.models import build_family, coverage_mask

MODEL = {"arch": "cnn", "channels": [4, 8], "pool_after": [0], "pool_out": 2, "hidden": 8}
SHAPE, CLASSES = [1, 8, 8], 10
DIGITS = {"test_fraction": 0.2, "split_seed": 0}
PMAX = np.array([0.25] * 5 + [0.5] * 10 + [0.75] * 3 + [1.0] * 2)
STALE_TABLE = "table4b_stale_coordinates"
STALE_RUN_FILES = TABLES[STALE_TABLE].run_files


def family():
    cfg = dict(MODEL)
    return build_family(cfg.pop("arch"), in_shape=tuple(SHAPE), num_classes=CLASSES, **cfg)


def write_manifest(root):
    write_json(root / "data/digits/seed1/manifest.json", {"seed": 1, "files": {}, "data_config": {}, "summary": {
        "dataset": "digits", "task": "image", "classes": CLASSES, "train_size": 1437, "test_size": 360,
        "input_shape": SHAPE, "clients": 20}})
    return [str(root / "data/digits/seed1/manifest.json")]


def write_run(root, method: str, *, p_all: float, p_after: float, move_stale: bool = False, contract: bool = True,
              drop: tuple[str, ...] = ()) -> None:
    """A run that trained up to width ``p_all`` in the warm-up and ``p_after`` after it (t0 = 2).

    init -> warmup moves every coordinate of the width-``p_all`` mask; warmup -> final only
    those of the width-``p_after`` mask (plus one stale coordinate when ``move_stale``).
    """
    d = root / "runs" / "digits" / method / "seed1"
    fam = family()
    torch.manual_seed(7)
    init = fam.build(1.0).state_dict()
    m_all, m_after = coverage_mask(init, fam.slice_rules(p_all)), coverage_mask(init, fam.slice_rules(p_after))
    gen = torch.Generator().manual_seed(3)
    warmup = {k: v + 0.3 * m_all[k] * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v.clone()
              for k, v in init.items()}
    final = {k: v + 0.3 * m_after[k] * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v.clone()
             for k, v in warmup.items()}
    if move_stale:
        final["fc1.weight"][-1, -1] += 1.0  # outside every width < 1 mask
    states = {"init.pt": init, "final.pt": final}
    if contract:
        states["warmup.pt"] = warmup
    for name, st in states.items():
        if name not in drop:
            d.mkdir(parents=True, exist_ok=True)
            torch.save(st, d / name)
    clients = {"client_id": np.arange(20, dtype=np.int64), "pmax": PMAX, "p_final": np.minimum(PMAX, p_after),
               "h_tilde_final": np.ones(20), "times_sampled": np.full(20, 5), "mean_p": np.minimum(PMAX, p_after),
               "p_max_allocated": np.minimum(PMAX, p_all), "p_max_trained": np.minimum(PMAX, p_all)}
    if contract:
        clients["p_max_trained_after_warmup"] = np.minimum(PMAX, p_after)
    write_parquet(pd.DataFrame(clients), d / "clients.parquet")
    rounds = {"round": np.arange(1, 5, dtype=np.int64), "test_acc": [0.1, 0.2, 0.3, 0.25],
              "test_loss": [2.0, 1.9, 1.8, 1.85], "avg_p": [0.5] * 4, "mean_h_tilde": [1.0] * 4,
              "n_participants": [10] * 4, "train_loss": [2.0] * 4}
    if contract:
        rounds.update(avg_p_trained=[0.5] * 4, upload_mb=[0.01] * 4, train_mmacs=[0.1] * 4)
    write_parquet(pd.DataFrame(rounds), d / "rounds.parquet")
    summary = {"dataset": "digits", "method": method, "seed": 1, "status": "completed", "rounds_completed": 4,
               "avg_p": 0.5, "final_test_acc": 0.25}
    if contract and "t0" not in drop:
        summary.update(avg_p_trained=0.5, t0=2)
    write_json(d / "run.json", summary)


def files(root, methods, names=STALE_RUN_FILES):
    return [str(root / "runs/digits" / m / "seed1" / n) for m in methods for n in names
            if (root / "runs/digits" / m / "seed1" / n).exists()]


def run_table4b(root, methods):
    out = root / "tables"
    return T4B.job(files(root, methods), write_manifest(root), {"digits": MODEL}, root / "raw",
                   {"digits": DIGITS}, 0.0, out / f"{STALE_TABLE}.parquet", out / f"{STALE_TABLE}.md")


def test_table4b_evaluates_capped_runs_and_checks_them_from_t0(tmp_path):
    write_run(tmp_path, "hasfl_nocov", p_all=1.0, p_after=0.5)   # trained the outer half, then abandoned it
    write_run(tmp_path, "uniform", p_all=0.5, p_after=0.5)       # never trained the outer half
    write_run(tmp_path, "hasfl", p_all=1.0, p_after=1.0)         # covered throughout
    df = run_table4b(tmp_path, ["hasfl_nocov", "uniform", "hasfl"]).set_index("method")
    nc, u, h = df.loc["hasfl_nocov"], df.loc["uniform"], df.loc["hasfl"]
    assert nc["capped_after_t0"] and nc["frozen_since_t0"] and nc["t0"] == 2 and nc["p_hi_after_t0"] == 0.5
    assert nc["frac_stale_trained_before_t0"] > 0.99  # stale, not "at their random initialization"
    assert u["frac_stale_trained_before_t0"] == 0.0 and u["acc_reset_pct"] == u["acc_full_pct"]  # uniform: at init
    assert not h["capped_after_t0"] and np.isnan(h["acc_full_pct"]) and h["n_stale"] == 0
    # the three accuracies, recomputed by hand
    fam = family()
    bundle = load_dataset("digits", tmp_path, DIGITS)
    d = tmp_path / "runs/digits/hasfl_nocov/seed1"
    init, final = (torch.load(d / n, weights_only=True) for n in ("init.pt", "final.pt"))
    masks = stale.stale_masks(init, fam, 0.5)

    def acc(p, state):
        model = fam.build(p)
        model.load_state_dict(state)
        model.eval()
        with torch.no_grad():
            pred = model(bundle.inputs(bundle.test_x)).argmax(1)
        return 100.0 * float((pred == bundle.test_y).double().mean())

    reset = {k: torch.where(masks[k], init[k], v) if k in masks else v for k, v in final.items()}
    assert nc["acc_full_pct"] == pytest.approx(acc(1.0, final))
    assert nc["acc_reset_pct"] == pytest.approx(acc(1.0, reset))
    assert nc["acc_sub_pct"] == pytest.approx(acc(0.5, fam.extract(final, 0.5)))
    assert nc["acc_logged_pct"] == pytest.approx(25.0)
    assert (tmp_path / "tables" / f"{STALE_TABLE}.md").read_text().startswith("# Table 4b")


def f5_of(tmp_path, t4b: pd.DataFrame) -> dict:
    p3 = pd.DataFrame(columns=["dataset", "method", "seed", "capped", "p_hi", "n_never_covered",
                               "n_never_covered_changed", "max_abs_change_never_covered"]).astype({"capped": bool})
    empty = pd.DataFrame(columns=["dataset", "method", "seed", "status"])
    tables = {F.T5: pd.DataFrame(columns=["dataset", "seed", "method", "status", "n_clients"]), F.T3S: empty,
              F.T4S: empty, F.T6S: empty, F.T7S: empty,
              F.MBS: pd.DataFrame(columns=["dataset", "seed", "paired", "diff_final_acc_pct"]), F.P3: p3,
              STALE_TABLE: t4b}
    res = {f["id"]: f for f in F.evaluate_findings(tables, datasets=["digits"], thresholds=resolve_thresholds())}
    json.dumps(list(res.values()), allow_nan=False)
    return res[F.F5]


def test_f5_on_hasfl_nocov_supported_and_contradicted(tmp_path):
    write_run(tmp_path / "a", "hasfl_nocov", p_all=1.0, p_after=0.5)
    f5 = f5_of(tmp_path, run_table4b(tmp_path / "a", ["hasfl_nocov"]))
    assert f5["verdict"] == F.SUPPORTED and [u["unit"] for u in f5["units"]] == ["digits/hasfl_nocov/seed1"]
    write_run(tmp_path / "b", "hasfl_nocov", p_all=1.0, p_after=0.5, move_stale=True)
    f5 = f5_of(tmp_path, run_table4b(tmp_path / "b", ["hasfl_nocov"]))
    assert f5["verdict"] == F.CONTRADICTED and "1 of" in f5["units"][0]["reason"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"contract": False}, "warmup.pt"),
    ({"drop": ("t0",)}, "'t0'"),
])
def test_table4b_names_what_an_old_run_lacks(tmp_path, kwargs, message):
    write_run(tmp_path, "hasfl_nocov", p_all=1.0, p_after=0.5, **kwargs)
    with pytest.raises(ValueError, match=message):
        run_table4b(tmp_path, ["hasfl_nocov"])


def test_table4b_names_the_missing_clients_column(tmp_path):
    write_run(tmp_path, "hasfl_nocov", p_all=1.0, p_after=0.5)
    p = tmp_path / "runs/digits/hasfl_nocov/seed1/clients.parquet"
    write_parquet(pd.read_parquet(p).drop(columns=["p_max_trained_after_warmup"]), p)
    with pytest.raises(ValueError, match="p_max_trained_after_warmup.*clients.parquet|clients.parquet.*"
                                         "p_max_trained_after_warmup"):
        run_table4b(tmp_path, ["hasfl_nocov"])


def test_method_tables_and_fig6_name_the_missing_cost_columns(tmp_path):
    write_run(tmp_path, "fjord", p_all=1.0, p_after=1.0, contract=False)
    runs = files(tmp_path, ["fjord"], ("rounds.parquet", "run.json"))
    with pytest.raises(ValueError, match="avg_p_trained"):
        MT.job("table3_allocation", runs, ["digits"], ["fjord"], [1], tmp_path / "t.parquet",
               tmp_path / "s.parquet", tmp_path / "t.md")
    # Figure 6 reads the method tables' per-seed rows: one written before the costs as paid is named
    old = tmp_path / "old_seeds.parquet"
    write_parquet(pd.DataFrame({"dataset": ["digits"], "method": ["fjord"], "seed": [1], "status": ["completed"],
                                "final_acc_pct": [50.0], "avg_p": [0.5]}), old)
    with pytest.raises(ValueError, match="avg_p_trained"):
        jobs.job_figure("fig6_frontier", [], [], {"datasets": ["digits"], "methods": ["fjord"], "seeds": [1]},
                        tmp_path / "f.png", tmp_path / "f.pdf", tables={name: old for name in F6.TABLES})
    write_run(tmp_path, "fjord", p_all=1.0, p_after=1.0)
    p = tmp_path / "runs/digits/fjord/seed1/rounds.parquet"
    write_parquet(pd.read_parquet(p).drop(columns=["train_mmacs"]), p)
    with pytest.raises(ValueError, match="train_mmacs"):
        MT.job("table3_allocation", runs, ["digits"], ["fjord"], [1], tmp_path / "t.parquet",
               tmp_path / "s.parquet", tmp_path / "t.md")


def test_method_table_reports_the_width_trained_next_to_the_allocated_one(tmp_path):
    write_run(tmp_path, "fjord", p_all=1.0, p_after=1.0)
    p = tmp_path / "runs/digits/fjord/seed1/run.json"
    j = json.loads(p.read_text())
    j.update(avg_p=0.39, avg_p_trained=0.525)  # FjORD samples 0.39 but trains and uploads at pmax
    p.write_text(json.dumps(j))
    runs = files(tmp_path, ["fjord"], ("rounds.parquet", "run.json"))
    df = MT.job("table3_allocation", runs, ["digits"], ["fjord"], [1], tmp_path / "t.parquet",
                tmp_path / "s.parquet", tmp_path / "t.md")
    row = df[df["method"] == "fjord"].iloc[0]
    assert (row["avg_p_mean"], row["avg_p_trained_mean"], row["upload_mb_mean"]) == (0.39, 0.525, 0.01)
    md = (tmp_path / "t.md").read_text()
    assert "Avg p (allocated)" in md and "Avg p (trained)" in md and "0.53" in md


def test_evaluate_accuracy_hand_example():
    class Constant(torch.nn.Module):  # always predicts class 1
        def forward(self, x):
            return torch.tensor([[0.0, 1.0, 0.0]]).repeat(len(x), 1)

    y = torch.tensor([1, 0, 1, 2, 1], dtype=torch.int64)
    bundle = DatasetBundle("t", "image", torch.zeros(5, 1, 2, 2, dtype=torch.uint8), y,
                           torch.zeros(5, 1, 2, 2, dtype=torch.uint8), y, 3, (1, 2, 2))
    assert stale.evaluate_accuracy(Constant(), bundle, batch_size=2) == pytest.approx(3 / 5)


def test_report_states_what_table4b_implies():
    from hasfl.analysis.tables.table4b_stale_coordinates import stale_summary

    row = {"dataset": "digits", "seed": 42, "status": "completed", "capped_after_t0": True, "frac_stale": 0.4,
           "frozen_since_t0": True}
    nocov = dict(row, method="hasfl_nocov", frac_stale_trained_before_t0=0.98, acc_full_pct=19.8, acc_reset_pct=72.7,
                 acc_sub_pct=86.9)  # the numbers issue 14 measured on the quick preset
    uniform = dict(row, method="uniform", frac_stale_trained_before_t0=0.0, acc_full_pct=74.0, acc_reset_pct=74.0,
                   acc_sub_pct=88.0)
    text = stale_summary(pd.DataFrame([nocov, uniform]))
    assert "+52.9 points" in text and "+67.1 points" in text  # reset and sub-model vs full, stale runs only
    assert "frozen at their warm-up values" in text and "do not" in text
    text = stale_summary(pd.DataFrame([uniform]))
    assert "at their random initialization, as Section 4.3 says" in text and "+14.0 points" in text
    assert "No completed run" in stale_summary(pd.DataFrame([dict(uniform, capped_after_t0=False)]))
