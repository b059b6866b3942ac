"""Analysis stage (hasfl.analysis): every table, figure and finding on tiny synthetic run files.

Expectations are computed by hand in the comments; no training is run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.analysis import confound, coverage, findings, jobs, published, stats
from hasfl.analysis.artifacts import METHOD_TABLES, TABLES, table_datasets
from hasfl.analysis.runs import group_run_files, load_run_metrics, run_metrics
from hasfl.analysis.specs import DEFAULT_THRESHOLDS, resolve_thresholds
from hasfl.analysis.tables import comparison as CMP
from hasfl.analysis.tables import matched_budget as MB
from hasfl.analysis.tables import method_table as MT
from hasfl.analysis.tables import prop3_coverage as P3
from hasfl.analysis.tables import table1_cost as T1
from hasfl.analysis.tables import table2_datasets as T2
from hasfl.analysis.tables import table4b_stale_coordinates as T4B
from hasfl.analysis.tables import table5_confound as T5
from hasfl.io import write_json, write_parquet
from hasfl.models import coverage_mask, family_from_config

STALE_TABLE = "table4b_stale_coordinates"
STALE_RUN_FILES = TABLES[STALE_TABLE].run_files

TINY_MODEL = {"arch": "cnn", "channels": [4, 4], "pool_after": [0], "pool_out": 1, "hidden": 8}
TINY_SHAPE, TINY_CLASSES = [1, 4, 4], 3
PMAX = np.array([0.25] * 5 + [0.5] * 10 + [0.75] * 3 + [1.0] * 2)


def tiny_family():
    """The family the analysis builds from the config block TINY_MODEL and the manifest's shapes."""
    return family_from_config(TINY_MODEL, TINY_SHAPE, TINY_CLASSES)


# --- synthetic run files -------------------------------------------------------------


def write_data(root: Path, dataset: str, seed: int, tv: np.ndarray) -> None:
    d = root / "data" / dataset / f"seed{seed}"
    clients = pd.DataFrame({"client_id": np.arange(20, dtype=np.int64), "pmax": PMAX, "n_train": np.full(20, 10),
                            "n_test": np.zeros(20, dtype=np.int64), "tv": tv})
    write_parquet(clients, d / "clients.parquet")
    write_parquet(pd.DataFrame({"client_id": [0], "split": ["train"], "sample_index": [0]}), d / "partition.parquet")
    write_json(d / "manifest.json", {"seed": seed, "files": {}, "summary": {
        "dataset": dataset, "task": "image", "classes": TINY_CLASSES, "train_size": 200, "test_size": 50,
        "input_shape": TINY_SHAPE, "clients": 20}, "data_config": {}})


def write_run(root: Path, dataset: str, method: str, seed: int, acc: list[float], avg_p: float, *,
              h: np.ndarray | None = None, p_final: np.ndarray | None = None, p_hi: float = 1.0,
              status: str = "completed", touch_uncovered: bool = False, avg_p_trained: float | None = None,
              contract: bool = True) -> None:
    """A run folder; ``contract`` adds what the engine contract of issue 14 adds (warmup.pt, the
    p_max_trained_after_warmup column, avg_p_trained / upload_mb / train_mmacs, t0)."""
    d = root / "runs" / dataset / method / f"seed{seed}"
    n = len(acc)
    p_trained = avg_p if avg_p_trained is None else avg_p_trained
    rounds = {
        "round": np.arange(1, n + 1, dtype=np.int64), "test_acc": acc, "test_loss": np.linspace(2.0, 1.0, n),
        "avg_p": np.full(n, avg_p), "mean_h_tilde": np.linspace(1.0, 1.5, n), "n_participants": np.full(n, 10),
        "train_loss": np.linspace(2.0, 1.0, n)}
    if contract:
        rounds.update(avg_p_trained=np.full(n, p_trained), upload_mb=np.full(n, 0.4 * p_trained ** 2),
                      train_mmacs=np.full(n, 2.0 * p_trained ** 2))
    write_parquet(pd.DataFrame(rounds), d / "rounds.parquet")
    p = np.minimum(PMAX, p_hi) if p_final is None else p_final
    clients = {
        "client_id": np.arange(20, dtype=np.int64), "pmax": PMAX, "p_final": p,
        "h_tilde_final": np.ones(20) if h is None else h, "times_sampled": np.full(20, 5), "mean_p": p,
        "p_max_allocated": p, "p_max_trained": np.minimum(PMAX, p_hi)}
    if contract:
        clients["p_max_trained_after_warmup"] = np.minimum(PMAX, p_hi)
    write_parquet(pd.DataFrame(clients), d / "clients.parquet")
    fam = tiny_family()
    torch.manual_seed(seed)
    init = fam.build(1.0).state_dict()
    mask = coverage_mask(init, fam.slice_rules(p_hi))
    final = {k: (v + mask[k].to(v.dtype)) if v.is_floating_point() else v.clone() for k, v in init.items()}
    warmup = {k: (v + 0.5 * mask[k].to(v.dtype)) if v.is_floating_point() else v.clone() for k, v in init.items()}
    if touch_uncovered:
        final["fc1.weight"][-1, -1] += 1.0  # a coordinate outside every width-p_hi < 1 mask
    states = [("init.pt", init), ("final.pt", final)] + ([("warmup.pt", warmup)] if contract else [])
    for name, state in states:
        torch.save(state, d / name)
    summary = {"dataset": dataset, "method": method, "seed": seed, "status": status,
               "diverged_round": n if status == "diverged" else None, "rounds_completed": n,
               "avg_p": avg_p, "final_test_acc": acc[-1], "target_avg_p": None}
    if contract:
        summary.update(avg_p_trained=p_trained, t0=1)
    write_json(d / "run.json", summary)
    write_json(d / "timings.json", {})


def run_paths(root: Path, dataset: str, methods, seeds, files=("rounds.parquet", "run.json")) -> list[str]:
    return [str(root / "runs" / dataset / m / f"seed{s}" / f) for m in methods for s in seeds for f in files]


# --- statistics (hand-computed) -------------------------------------------------------


def test_mean_std_is_sample_std():
    assert stats.mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0, 3)  # sum sq dev 2 / (3 - 1)
    mean, std, n = stats.mean_std([5.0, float("nan")])
    assert (mean, n) == (5.0, 1) and math.isnan(std)


def test_partial_corr_hand_example_and_closed_form():
    # x = z + e1, y = z + e2 with e1, e2 orthogonal to (1, z): residuals are e1, e2,
    # r(e1, e2) = (e1 . e2) / (|e1| |e2|) = -2 / (2 * 2) = -0.5.
    z = np.arange(1.0, 7.0)
    e1 = np.array([1.0, -1.0, -1.0, 1.0, 0.0, 0.0])
    e2 = np.array([0.0, 0.0, 1.0, -1.0, -1.0, 1.0])
    assert stats.partial_corr(z + e1, z + e2, z) == pytest.approx(-0.5, abs=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(20):
        z = rng.normal(size=20)
        x, y = z + rng.normal(size=20), -0.5 * z + rng.normal(size=20)
        closed = stats.partial_corr_closed_form(stats.pearson(x, y), stats.pearson(x, z), stats.pearson(y, z))
        assert stats.partial_corr(x, y, z) == pytest.approx(closed, abs=1e-10)
    assert math.isnan(stats.partial_corr(np.ones(6), z[:6], z[:6] + 1))  # constant variable


def test_variance_decomposition_hand_example():
    # log H~ fully determined by the tier; TV orthogonal to it.
    tier = [0.25, 0.25, 0.5, 0.5, 1.0, 1.0]
    log_h = [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    tv = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    d = stats.variance_decomposition(log_h, tier, tv)
    assert d["r2_tier"] == pytest.approx(1.0) and d["adj_r2_tier"] == pytest.approx(1.0)
    assert d["r2_tv"] == pytest.approx(0.0, abs=1e-12)
    assert d["adj_r2_tv"] == pytest.approx(-0.25)  # 1 - (1 - 0) * (6 - 1) / (6 - 2)
    assert d["r2_joint"] == pytest.approx(1.0)
    assert d["r2_tv_given_tier"] == pytest.approx(0.0, abs=1e-12)
    assert all(math.isnan(v) for v in stats.variance_decomposition([1.0] * 6, tier, tv).values())


def test_paired_ci_hand_example():
    # d = [2, 3, 4]: mean 3, sd 1, t_{0.975, 2} = 4.302653, half width 4.302653 / sqrt(3) = 2.484138,
    # t = 3 / (1 / sqrt 3) = 5.196152, two-sided p = 0.035099.
    ci = stats.paired_ci([3.0, 5.0, 7.0], [1.0, 2.0, 3.0], 0.95)
    assert (ci.n, ci.mean_diff, ci.sd_diff) == (3, 3.0, 1.0)
    assert ci.ci_low == pytest.approx(3 - 2.484138, abs=1e-6) and ci.ci_high == pytest.approx(3 + 2.484138, abs=1e-6)
    assert ci.t_stat == pytest.approx(5.196152, abs=1e-6) and ci.p_value == pytest.approx(0.035099, abs=1e-6)
    assert ci.covers(0.0) is False
    assert stats.paired_ci([1.0], [0.0]).covers(0.0) is None


def test_thresholds_defaults_and_overrides():
    assert resolve_thresholds(None) == DEFAULT_THRESHOLDS
    assert resolve_thresholds({"f1_max_r_h_pmax": -0.7})["f1_max_r_h_pmax"] == -0.7
    with pytest.raises(ValueError, match="analysis.nope"):
        resolve_thresholds({"nope": 1})
    with pytest.raises(ValueError, match="ci_level"):
        resolve_thresholds({"ci_level": 1.5})
    with pytest.raises(ValueError, match="analysis.f3_equiv_margin_pct.*finite"):
        resolve_thresholds({"f3_equiv_margin_pct": float("nan")})
    with pytest.raises(ValueError, match="analysis.f1d_equiv_pr_p_tv"):
        resolve_thresholds({"f1d_equiv_pr_p_tv": 0.0})  # an equivalence margin of 0 can never be met


# --- per-run metrics and the method tables ----------------------------------------------


def test_run_metrics_completed_and_diverged():
    r = pd.DataFrame({"round": [1, 2, 3], "test_acc": [0.2, 0.6, 0.5]})
    m = run_metrics(r, {"status": "completed", "avg_p": 0.5, "rounds_completed": 3})
    assert (m["best_acc_pct"], m["final_acc_pct"], m["avg_p"]) == (60.0, 50.0, 0.5)
    assert m["delta_pct"] == pytest.approx(-10.0)
    r = pd.DataFrame({"round": [1, 2], "test_acc": [0.4, float("nan")]})
    m = run_metrics(r, {"status": "diverged", "avg_p": 0.5, "rounds_completed": 2})
    assert m["status"] == "diverged" and m["best_acc_pct"] == 40.0 and math.isnan(m["final_acc_pct"])


def test_run_metrics_lowest_training_loss():
    """min_train_loss (F9's "never learned" gate, issue 37): the lowest finite round-mean training loss of
    rounds.parquet; NaN when the run logged none (an older run without the column, or only NaN)."""
    r = pd.DataFrame({"round": [1, 2, 3], "test_acc": [0.2, 0.6, 0.5], "train_loss": [2.30, float("nan"), 1.7]})
    assert run_metrics(r, {"status": "completed"})["min_train_loss"] == pytest.approx(1.7)
    assert math.isnan(run_metrics(r.drop(columns="train_loss"), {"status": "completed"})["min_train_loss"])
    r["train_loss"] = float("nan")
    assert math.isnan(run_metrics(r, {"status": "completed"})["min_train_loss"])


def test_method_table_means_std_not_run_and_diverged(tmp_path):
    # hasfl: final 70/80/90 -> 80 +- 10; best 75/85/95 -> 85 +- 10; delta -5 +- 0; avg p .50/.52/.54 -> .52 +- .02
    for s, (f, p) in zip((1, 2, 3), ((0.70, 0.50), (0.80, 0.52), (0.90, 0.54)), strict=True):
        write_run(tmp_path, "digits", "hasfl", s, [0.1, f + 0.05, f], p)
    write_run(tmp_path, "digits", "fjord", 1, [0.1, 0.4], 0.4)
    write_run(tmp_path, "digits", "fjord", 2, [0.1, 0.6], 0.4)
    write_run(tmp_path, "digits", "fjord", 3, [0.3, float("nan")], 0.4, status="diverged")
    files = run_paths(tmp_path, "digits", ["hasfl", "fjord"], [1, 2, 3])
    out = tmp_path / "results" / "tables"
    df = MT.job("table3_allocation", files, ["digits"], ["hasfl", "fjord"], [1, 2, 3],
                out / "t3.parquet", out / "t3_seeds.parquet", out / "t3.md")
    h = df[df["method"] == "hasfl"].iloc[0]
    assert h["status"] == "completed" and h["n_completed"] == 3
    assert h["final_acc_pct_mean"] == pytest.approx(80.0) and h["final_acc_pct_std"] == pytest.approx(10.0)
    assert h["best_acc_pct_mean"] == pytest.approx(85.0) and h["best_acc_pct_std"] == pytest.approx(10.0)
    assert h["delta_pct_mean"] == pytest.approx(-5.0) and h["delta_pct_std"] == pytest.approx(0.0, abs=1e-9)
    assert h["avg_p_mean"] == pytest.approx(0.52) and h["avg_p_std"] == pytest.approx(0.02)
    f = df[df["method"] == "fjord"].iloc[0]
    assert f["status"] == "diverged (1 of 3 seeds)" and f["diverged_seeds"] == "3" and f["n_completed"] == 2
    assert f["final_acc_pct_mean"] == pytest.approx(50.0)  # completed seeds only
    u = df[df["method"] == "uniform"].iloc[0]
    assert u["status"] == "not run" and math.isnan(u["final_acc_pct_mean"])
    assert list(df["method"]) == ["hasfl", "fjord", "uniform"]
    per_seed = pd.read_parquet(out / "t3_seeds.parquet")
    assert len(per_seed) == 6
    assert per_seed["min_train_loss"].tolist() == pytest.approx([1.0] * 6)  # write_run's train_loss 2.0 -> 1.0
    assert "80.0 ± 10.0" in (out / "t3.md").read_text()


def test_table_specs_cover_the_paper():
    assert METHOD_TABLES["table3_allocation"].methods == ("hasfl", "fjord", "uniform")
    assert METHOD_TABLES["table4_coverage"].methods == ("hasfl", "hasfl_nocov", "heterofl")
    assert METHOD_TABLES["table6_full_model"].methods == ("fedavg", "scaffold", "fedprox", "hasfl", "random_budget")
    assert table_datasets(METHOD_TABLES["table7_shakespeare"], ["digits", "shakespeare"]) == ["shakespeare"]
    assert table_datasets(METHOD_TABLES["table3_allocation"], ["digits", "shakespeare"]) == ["digits"]


def test_table1_reproduces_paper_and_costs_preset_model(tmp_path):
    write_data(tmp_path, "digits", 1, np.zeros(20))
    df = T1.job([str(tmp_path / "data/digits/seed1/manifest.json")], {"digits": TINY_MODEL},
                tmp_path / "tables/t1.parquet", tmp_path / "tables/t1.md")
    paper = df[df["source"] == "paper"]
    assert len(paper) == 12 and set(paper["dataset"]) == {"cifar10", "emnist", "shakespeare"}
    comp = published.comparison(published.load_published(), published.ours_long({"table1_cost": df}), [], {})
    t1 = comp[comp["table"] == 1]
    assert len(t1) == 36 and (t1["status"] == "compared").all() and t1["within"].all()
    preset = df[df["source"] == "preset"]
    assert list(preset["p"]) == [0.25, 0.5, 0.75, 1.0]
    assert preset["params"].iloc[-1] == tiny_family().cost(1.0).params


def test_table2_from_manifests(tmp_path):
    for s in (1, 2):
        write_data(tmp_path, "digits", s, np.zeros(20))
    paths = [str(tmp_path / f"data/digits/seed{s}/manifest.json") for s in (1, 2)]
    df = T2.job(paths, tmp_path / "t2.parquet", tmp_path / "t2.md")
    # the floors (majority_pct, chance_pct) are NaN: these manifests predate them
    assert df.drop(columns=["majority_pct", "chance_pct"]).to_dict("records") == [{
        "dataset": "digits", "task": "image", "classes": 3, "train_size": 200,
        "test_size": 50, "input_shape": "1 x 4 x 4", "clients": 20}]
    bad = json.loads(Path(paths[1]).read_text())
    bad["summary"]["classes"] = 4
    Path(paths[1]).write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="classes"):
        T2.job(paths, tmp_path / "t2.parquet", tmp_path / "t2.md")


# --- Table 5 ------------------------------------------------------------------------------


def test_table5_statistics_and_fedavg_control(tmp_path):
    rng = np.random.default_rng(1)
    tv = rng.uniform(0.2, 0.8, 20)
    h_cap = np.exp(-2.0 * PMAX)              # hasfl: H~ a function of the capacity only
    h_data = np.exp(tv)                      # fedavg: H~ a function of the data only
    write_data(tmp_path, "digits", 1, tv)
    write_run(tmp_path, "digits", "hasfl", 1, [0.5], 0.5, h=h_cap, p_final=PMAX.copy())
    write_run(tmp_path, "digits", "fedavg", 1, [0.8], 1.0, h=h_data, p_final=np.ones(20))
    df = T5.job([str(tmp_path / "data/digits/seed1/clients.parquet")],
                run_paths(tmp_path, "digits", ["hasfl", "fedavg"], [1], ("clients.parquet", "run.json")),
                ["digits"], ["hasfl", "fedavg"], [1], tmp_path / "t5.parquet", tmp_path / "t5.md")
    h = df[df["method"] == "hasfl"].iloc[0]
    assert h["r_h_pmax"] == pytest.approx(stats.pearson(h_cap, PMAX))
    assert h["r_h_pmax"] < -0.9
    assert h["r2_tier"] == pytest.approx(1.0) and h["adj_r2_tier"] > h["adj_r2_tv"]
    # H~ is a non-linear function of pmax: the linear partial r need not vanish, but the
    # categorical tier explains everything, so TV adds nothing beyond it.
    assert h["r2_tv_given_tier"] == pytest.approx(0.0, abs=1e-9)
    closed = stats.partial_corr_closed_form(stats.pearson(h_cap, tv), stats.pearson(h_cap, PMAX), stats.pearson(tv, PMAX))
    assert h["pr_h_tv_pmax"] == pytest.approx(closed, abs=1e-6)
    f = df[df["method"] == "fedavg"].iloc[0]
    assert f["r_h_tv"] > 0.95 and math.isnan(f["pr_p_tv_pmax"])  # p constant under fedavg
    assert f["r2_tv"] > f["r2_tier"]


def test_table5_rejects_mismatched_pmax():
    d = pd.DataFrame({"client_id": [0, 1, 2, 3], "pmax": [0.25, 0.5, 0.75, 1.0], "tv": [0.1, 0.2, 0.3, 0.4]})
    r = pd.DataFrame({"client_id": [0, 1, 2, 3], "pmax": [0.5, 0.5, 0.75, 1.0], "p_final": [0.2] * 4,
                      "h_tilde_final": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match="pmax"):
        confound.confound_row(d, r)


# --- matched budget -----------------------------------------------------------------------------


def test_matched_budget_paired_ci(tmp_path):
    # final acc hasfl 30/50/70 vs random_budget 10/20/30 -> differences 20/30/40 points:
    # mean 30, sd 10, CI 30 +- 4.302653 * 10 / sqrt(3) = [5.1586, 54.8414]
    for s, (a, b) in zip((1, 2, 3), ((0.3, 0.1), (0.5, 0.2), (0.7, 0.3)), strict=True):
        write_run(tmp_path, "digits", "hasfl", s, [a], 0.52)
        write_run(tmp_path, "digits", "random_budget", s, [b], 0.50)
    files = run_paths(tmp_path, "digits", ["hasfl", "random_budget"], [1, 2, 3])
    out = tmp_path / "tables"
    df = MB.job(files, ["digits"], ["hasfl", "random_budget"], [1, 2, 3], 0.95,
                out / "mb.parquet", out / "mb_seeds.parquet", out / "mb.md")
    acc = df[df["metric"] == "final_acc_pct"].iloc[0]
    assert acc["n_pairs"] == 3 and acc["mean_diff"] == pytest.approx(30.0) and acc["sd_diff"] == pytest.approx(10.0)
    assert acc["ci_low"] == pytest.approx(5.1586, abs=1e-3) and acc["ci_high"] == pytest.approx(54.8414, abs=1e-3)
    assert not acc["ci_covers_zero"]
    p = df[df["metric"] == "avg_p"].iloc[0]
    assert p["mean_diff"] == pytest.approx(0.02) and p["sd_diff"] == pytest.approx(0.0, abs=1e-12)
    seeds = pd.read_parquet(out / "mb_seeds.parquet")
    assert list(seeds["diff_final_acc_pct"].round(6)) == [20.0, 30.0, 40.0]
    nr, _ = MB.matched_budget(load_run_metrics(group_run_files(files)), ["digits"], ["hasfl"], [1, 2, 3])
    assert set(nr["status"]) == {"not run"}


# --- Proposition 3 -----------------------------------------------------------------------------


def test_prop3_detects_frozen_and_moved_uncovered_coordinates(tmp_path):
    write_data(tmp_path, "digits", 1, np.zeros(20))
    write_run(tmp_path, "digits", "uniform", 1, [0.5], 0.44, p_hi=0.5)
    write_run(tmp_path, "digits", "hasfl_nocov", 1, [0.5], 0.44, p_hi=0.5, touch_uncovered=True)
    write_run(tmp_path, "digits", "hasfl", 1, [0.5], 0.5, p_hi=1.0)
    files = run_paths(tmp_path, "digits", ["uniform", "hasfl_nocov", "hasfl"], [1],
                      ("clients.parquet", "init.pt", "final.pt", "run.json"))
    df = P3.job(files, [str(tmp_path / "data/digits/seed1/manifest.json")], {"digits": TINY_MODEL}, 0.0,
                tmp_path / "tables/p3.parquet", tmp_path / "tables/p3.md").set_index("method")
    fam = tiny_family()
    state = fam.build(1.0).state_dict()
    mask = coverage_mask(state, fam.slice_rules(0.5))
    n_float = sum(v.numel() for v in state.values() if v.is_floating_point())
    n_never = sum(int((~mask[k]).sum()) for k, v in state.items() if v.is_floating_point())
    u = df.loc["uniform"]
    assert u["capped"] and u["p_hi"] == 0.5 and u["n_coords"] == n_float and u["n_never_covered"] == n_never > 0
    assert u["prop3_holds"] and u["n_never_covered_changed"] == 0 and u["max_abs_change_never_covered"] == 0.0
    assert u["n_covered_changed"] == n_float - n_never  # write_run moved every covered coordinate
    nc = df.loc["hasfl_nocov"]
    assert not nc["prop3_holds"] and nc["n_never_covered_changed"] == 1 and nc["max_abs_change_never_covered"] == 1.0
    h = df.loc["hasfl"]
    assert not h["capped"] and h["n_never_covered"] == 0 and h["prop3_holds"]


def test_prop3_rejects_a_run_of_another_model(tmp_path):
    write_data(tmp_path, "digits", 1, np.zeros(20))
    write_run(tmp_path, "digits", "uniform", 1, [0.5], 0.44, p_hi=0.5)
    files = run_paths(tmp_path, "digits", ["uniform"], [1], ("clients.parquet", "init.pt", "final.pt", "run.json"))
    other = dict(TINY_MODEL, channels=[8, 8])
    with pytest.raises(ValueError, match="does not match the configured model"):
        P3.job(files, [str(tmp_path / "data/digits/seed1/manifest.json")], {"digits": other}, 0.0,
               tmp_path / "p3.parquet", tmp_path / "p3.md")


def test_prop3_needs_the_trained_width_column():
    with pytest.raises(ValueError, match="p_max_trained"):
        coverage.max_trained_width(pd.DataFrame({"client_id": [0], "p_final": [0.5]}))
    assert coverage.max_trained_width(pd.DataFrame({"p_max_allocated": [0.3, 0.6]})) == 0.6


# --- published values and the comparison --------------------------------------------------------


def test_published_values_loaded():
    pub = published.load_published()
    assert set(pub["table"]) == {1, 3, 4, 5, 6, 7}
    row = pub[(pub["table"] == 3) & (pub["dataset"] == "emnist") & (pub["method"] == "uniform")
              & (pub["metric"] == "final_acc_pct")].iloc[0]
    assert (row["mean"], row["std"]) == (9.4, 3.8)
    # Table 5 cifar10 r(H~, pmax) = -0.72, -0.72, -0.84: mean -0.76, sample std 0.069282
    t5 = pub[(pub["table"] == 5) & (pub["dataset"] == "cifar10") & (pub["metric"] == "r_h_pmax")].iloc[0]
    assert t5["mean"] == pytest.approx(-0.76) and t5["std"] == pytest.approx(0.0692820, abs=1e-6) and t5["derived"]
    assert pub[(pub["table"] == 4) & (pub["metric"] == "delta_pct")]["std"].isna().all()


def test_comparability_against_the_paper_config(paper_config, quick_config):
    assert published.comparability(paper_config, paper_config, "cifar10", "hasfl") == (True, "paper configuration")
    ok, reason = published.comparability(quick_config, paper_config, "shakespeare", "hasfl")
    assert not ok and "federation.rounds=30 (paper 200)" in reason
    assert "dataset_params.shakespeare.max_chars_per_role" in reason
    import copy
    cfg = copy.deepcopy(paper_config)
    cfg["method_params"]["fedprox"]["mu"] = 0.1
    assert published.comparability(cfg, paper_config, "cifar10", "fedprox")[0] is False
    assert published.comparability(cfg, paper_config, "cifar10", "hasfl")[0] is True
    cfg = copy.deepcopy(paper_config)
    cfg["partition"]["alpha"] = 1.0  # no Dirichlet partition on the natural-partition dataset
    assert published.comparability(cfg, paper_config, "shakespeare", "hasfl")[0] is True
    assert published.comparability(cfg, paper_config, "cifar10", "hasfl")[0] is False


def test_comparison_within_and_never_compares_reduced_scale():
    ours = pd.DataFrame.from_records([
        {"table": 3, "dataset": "cifar10", "method": "hasfl", "metric": "final_acc_pct", "mean": 80.0, "std": 1.0,
         "n": 3, "status": "completed"},   # published 74.5 +- 5.6 -> [63.3, 85.7]: within
        {"table": 3, "dataset": "cifar10", "method": "uniform", "metric": "final_acc_pct", "mean": 70.0, "std": 1.0,
         "n": 3, "status": "completed"},   # published 54.5 +- 2.3 -> [49.9, 59.1]: outside
        {"table": 3, "dataset": "cifar10", "method": "hasfl", "metric": "avg_p", "mean": 0.5, "std": 0.0,
         "n": 3, "status": "completed"},   # published without std
        {"table": 7, "dataset": "shakespeare", "method": "hasfl", "metric": "final_acc_pct", "mean": 25.5,
         "std": 0.8, "n": 3, "status": "completed"},
    ])
    comp = {("cifar10", "hasfl"): (True, "paper configuration"), ("cifar10", "uniform"): (True, "paper configuration"),
            ("cifar10", "fjord"): (True, "paper configuration"),
            ("shakespeare", "hasfl"): (False, "not the paper's configuration: federation.rounds=30 (paper 200)")}
    df = published.comparison(published.load_published(), ours, ["cifar10", "shakespeare"], comp, 2.0)
    assert "emnist" not in set(df.loc[df["table"] != 1, "dataset"])  # only datasets the preset ran (Table 1: always)
    get = lambda t, d, m, k: df[(df["table"] == t) & (df["dataset"] == d) & (df["method"] == m)  # noqa: E731
                                & (df["metric"] == k)].iloc[0]
    r = get(3, "cifar10", "hasfl", "final_acc_pct")
    assert r["status"] == "compared" and bool(r["within"]) and r["lower"] == pytest.approx(63.3)
    assert not bool(get(3, "cifar10", "uniform", "final_acc_pct")["within"])
    assert get(3, "cifar10", "hasfl", "avg_p")["within"] is pd.NA
    assert get(3, "cifar10", "fjord", "final_acc_pct")["status"] == "not run"
    s = get(7, "shakespeare", "hasfl", "final_acc_pct")
    assert s["status"] == "not comparable" and "federation.rounds" in s["reason"]
    assert math.isnan(s["ours_mean"]) and s["within"] is pd.NA  # never compared


# --- findings: tests/test_findings.py -------------------------------------------------------------


# --- figures, the full chain of jobs, and the DAG ------------------------------------------------


@pytest.fixture()
def synthetic_results(tmp_path):
    """results/<name> with 2 seeds x every method on one dataset (cheap, tiny model)."""
    root = tmp_path / "results" / "syn"
    seeds = [1, 2]
    rng = np.random.default_rng(3)
    for s in seeds:
        tv = rng.uniform(0.2, 0.8, 20)
        write_data(root, "digits", s, tv)
        for i, m in enumerate(("hasfl", "hasfl_nocov", "heterofl", "fjord", "uniform", "random_budget", "fedavg",
                               "scaffold", "fedprox")):
            acc = list(np.clip(np.linspace(0.1, 0.6 + 0.03 * i, 6) + rng.normal(0, 0.01, 6), 0, 1))
            p_hi = 0.5 if m == "uniform" else 1.0
            status = "diverged" if (m == "scaffold" and s == 2) else "completed"
            if status == "diverged":
                acc[-1] = float("nan")
            write_run(root, "digits", m, s, acc, 1.0 if m in ("fedavg", "scaffold", "fedprox") else 0.5,
                      h=np.exp(-PMAX + rng.normal(0, 0.1, 20)), p_hi=p_hi, status=status)
    return root, seeds


def test_figures_are_written_and_deterministic(synthetic_results):
    from hasfl.analysis.artifacts import FIGURES
    from hasfl.analysis.estimators import POOLED_COLUMNS

    root, seeds = synthetic_results
    ran = [m for m in FIGURES["fig6_frontier"].methods if (root / "runs" / "digits" / m).is_dir()]  # the preset's
    params = {"datasets": ["digits"], "methods": ran, "seeds": seeds, "p_min": 0.4, "gamma": 0.25}
    data_clients = [str(root / f"data/digits/seed{s}/clients.parquet") for s in seeds]
    # the tables Figures 6 and 9 quote: the method tables' per-seed rows, and a Table 8 without rows
    # (these runs predate the estimators E1-E3, so their panels say "not recorded")
    t = root / "tables"
    all_runs = run_paths(root, "digits", ran, seeds)
    for name in METHOD_TABLES:
        MT.job(name, all_runs, ["digits"], params["methods"], seeds, t / f"{name}.parquet",
               t / f"{name}_seeds.parquet", t / f"{name}.md")
    write_parquet(pd.DataFrame(columns=POOLED_COLUMNS), t / "table8_estimators.parquet")
    # the batch-norm sensitivity Figure 6 reads its accuracies through: no run re-evaluated (each as trained)
    from hasfl.analysis.per_run.bn_sensitivity import COLUMNS as BN_COLUMNS

    write_parquet(pd.DataFrame(columns=BN_COLUMNS), t / "bn_sensitivity.parquet")
    # Table 10 (Figure 10): E0 of every run against capacity and TV, from the same runs
    from hasfl.analysis.tables import table10_inheritance as T10

    T10.job(data_clients, run_paths(root, "digits", ran, seeds, ("clients.parquet", "run.json")), ["digits"], ran,
            seeds, t / "table10_inheritance.parquet", t / "table10_inheritance.md")
    for slug, spec in FIGURES.items():
        tabs = {name: t / f"{name}.parquet" for name in spec.tables}  # the tables its registry entry names
        runs = (run_paths(root, "digits", [m for m in spec.methods if m in ran], seeds, spec.run_files)
                if spec.run_files else [])
        png, pdf = root / "figures" / f"{slug}.png", root / "figures" / f"{slug}.pdf"
        jobs.job_figure(slug, runs, data_clients if spec.data_clients else [], params, png, pdf, tables=tabs)
        assert png.stat().st_size > 5000 and pdf.read_bytes()[:5] == b"%PDF-"
        if slug in ("fig2_allocation_rule", "fig6_frontier"):
            first = (png.read_bytes(), pdf.read_bytes())
            jobs.job_figure(slug, [], [], params, png, pdf, tables=tabs)  # neither reads a run file
            assert (png.read_bytes(), pdf.read_bytes()) == first
    # a dataset without runs gives a "not run" panel instead of an error
    jobs.job_figure("fig3_convergence_allocation", [], [], dict(params, datasets=["digits", "cifar10"]),
                    root / "x.png", root / "x.pdf")
    assert (root / "x.png").stat().st_size > 0


def test_full_chain_of_jobs(synthetic_results, paper_config):
    root, seeds = synthetic_results
    ds, methods = ["digits"], list(paper_config["methods"])[:9]  # the fixture's runs: the paper's nine methods
    t = root / "tables"
    man = [str(root / f"data/digits/seed{s}/manifest.json") for s in seeds]
    T1.job(man[:1], {"digits": TINY_MODEL}, t / "table1_cost.parquet", t / "table1_cost.md")
    T2.job(man, t / "table2_datasets.parquet", t / "table2_datasets.md")
    for name, spec in METHOD_TABLES.items():
        files = [f for d in table_datasets(spec, ds) for f in run_paths(root, d, spec.methods, seeds)]
        MT.job(name, files, ds, methods, seeds, t / f"{name}.parquet", t / f"{name}_seeds.parquet", t / f"{name}.md")
    T5.job([str(root / f"data/digits/seed{s}/clients.parquet") for s in seeds],
           run_paths(root, "digits", ["hasfl", "fedavg"], seeds, ("clients.parquet", "run.json")), ds,
           methods, seeds, t / "table5_confound.parquet", t / "table5_confound.md")
    MB.job(run_paths(root, "digits", ["hasfl", "random_budget"], seeds), ds, methods, seeds, 0.95,
           t / "matched_budget.parquet", t / "matched_budget_seeds.parquet", t / "matched_budget.md")
    P3.job(run_paths(root, "digits", methods, seeds, ("clients.parquet", "init.pt", "final.pt", "run.json")),
           man[:1], {"digits": TINY_MODEL}, 0.0, t / "prop3_coverage.parquet", t / "prop3_coverage.md")
    T4B.job(run_paths(root, "digits", methods, seeds, STALE_RUN_FILES), man[:1], {"digits": TINY_MODEL},
            root / "raw", {"digits": {"test_fraction": 0.2, "split_seed": 0}}, 0.0,
            t / f"{STALE_TABLE}.parquet", t / f"{STALE_TABLE}.md")
    names = ["table1_cost", "table2_datasets", *METHOD_TABLES, "table5_confound", "matched_budget", "prop3_coverage",
             STALE_TABLE]
    paths = {n: t / f"{n}.parquet" for n in names}
    comp = published.comparability_map({**paper_config, "datasets": ds}, paper_config)
    CMP.job({k: v for k, v in paths.items() if k not in ("table2_datasets", "matched_budget",
                                                          "prop3_coverage", STALE_TABLE)},
            published.PUBLISHED_PATH, ds, comp, 2.0, root / "comparison.parquet", root / "comparison.md")
    finding_paths = {**paths, **{f"{n}_seeds": t / f"{n}_seeds.parquet" for n in (*METHOD_TABLES, "matched_budget")}}
    doc = jobs.job_findings({k: v for k, v in finding_paths.items() if k not in ("table1_cost", "table2_datasets")},
                            ds, {}, root / "findings.json")
    assert [f["id"] for f in doc["findings"]] == list(findings.FINDING_IDS)
    assert {f["verdict"] for f in doc["findings"]} <= set(findings.VERDICTS)
    assert json.loads((root / "findings.json").read_text())["thresholds"] == DEFAULT_THRESHOLDS
    f5 = next(f for f in doc["findings"] if f["id"] == "F5")
    assert f5["verdict"] == "supported" and f5["n_units"] == 2  # the two capped uniform runs
    assert all(len(u["checks"]) == 2 for u in f5["units"])  # from init and from t0
    t4b = pd.read_parquet(t / f"{STALE_TABLE}.parquet").set_index("method")
    assert t4b.loc["uniform", "capped_after_t0"].all() and not t4b.loc["hasfl", "capped_after_t0"].any()
    assert t4b.loc["uniform", "acc_full_pct"].notna().all() and t4b.loc["hasfl", "acc_full_pct"].isna().all()
    t3 = pd.read_parquet(t / "table3_allocation.parquet")
    assert {"avg_p_trained_mean", "upload_mb_mean", "train_mmacs_mean"} <= set(t3.columns)
    t6 = pd.read_parquet(t / "table6_full_model.parquet").set_index("method")
    assert t6.loc["scaffold", "status"] == "diverged (1 of 2 seeds)"  # marked, not crashed
    # the comparison is one of the report's tables (key "comparison")
    text = jobs.job_report("syn", {"preset": "syn"}, {**paths, "comparison": root / "comparison.parquet"},
                           root / "findings.json", ["fig2_allocation_rule"], root / "report.md")
    for needle in ("## Findings", "Table 5", "Proposition 3", "comparison.parquet", "figures/fig2_allocation_rule.png",
                   "F6", "F2a-spread", "Table 4b", "MDE"):
        assert needle in text
    comp_df = pd.read_parquet(root / "comparison.parquet")
    assert set(comp_df["table"]) == {1}  # digits is not in the paper: only Table 1 is compared


def test_snakemake_dry_run_lists_analysis_jobs(quick_dry_run):
    res = quick_dry_run
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    from hasfl.analysis.artifacts import ARTIFACTS, FIGURES

    # one generated rule per artifact of the registry (the four method tables and the figures included),
    # each run once, plus findings.json, report.md and the analysis manifest
    assert {*METHOD_TABLES, *FIGURES} <= set(ARTIFACTS) and len(METHOD_TABLES) == 4 and len(FIGURES) == 9
    expected = {**{f"analysis_{name}": 1 for name in ARTIFACTS}, "analysis_findings": 1, "analysis_report": 1,
                "analysis_manifest": 1}
    counts = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith("analysis_") and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    assert counts == expected, out[-3000:]


def test_prior_weight_of_eq5_at_the_presets_schedules():
    """Issue 25 (attenuation): the mean weight of H~'s prior value 1 after the adaptation rounds a client took
    part in, (1 - q + q beta)^A: quick 4 adaptation rounds (t = 10, 15, 20, 25), medium 18, the paper 38."""
    assert confound.prior_weight(0.9, 30, 10, 5, 20, 10) == pytest.approx(0.95 ** 4)      # 81%
    assert confound.prior_weight(0.9, 100, 10, 5, 20, 10) == pytest.approx(0.95 ** 18)    # 40%
    assert confound.prior_weight(0.9, 200, 10, 5, 20, 10) == pytest.approx(0.95 ** 38)    # 14%
    assert confound.prior_weight(0.9, 30, 10, 5, 20, 20) == pytest.approx(0.9 ** 4)       # everyone sampled
    assert confound.prior_weight(0.5, 10, 10, 5, 20, 10) == 1.0                          # no adaptation round
    from hasfl.analysis.tables import table5_confound as T5

    df = pd.DataFrame({"prior_weight": [0.8145]})
    assert "81% of its prior value 1" in T5.preamble(df) and T5.preamble(df.iloc[0:0]) == ""
