"""Table 8, the matched budget of the estimator methods, findings F7 / F8 and Figure 9 (the
capacity-separable estimators E0-E3 of the paper's Section 5 question).

Hand-made run folders and tables; no training. Numbers in comments are computed by hand: 3 seeds
x 20 clients give a pooled Fisher-z standard error of 1/sqrt(3 * 16) = 0.1443 for a partial
correlation; one-sided 95% bounds are z +- 1.645 se = z +- 0.2374; t_{0.95, 2} = 2.920.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hasfl.analysis import diagnose as D
from hasfl.analysis import estimators as E
from hasfl.analysis import findings as F
from hasfl.analysis import jobs, report, stats
from hasfl.analysis.artifacts import FIGURES, figure_caption
from hasfl.analysis.confound import confound_row
from hasfl.analysis.specs import ESTIMATORS, TABLE8_METHODS, resolve_thresholds
from hasfl.analysis.tables import table8_estimators as T8
from hasfl.io import write_json, write_parquet

sys.path.insert(0, str(Path(__file__).parent))
from test_findings import base_tables  # noqa: E402

SEEDS = [1, 2, 3]
S, C, I = F.SUPPORTED, F.CONTRADICTED, F.INCONCLUSIVE
PMAX = np.array([0.25] * 6 + [0.5] * 6 + [0.75] * 4 + [1.0] * 4)
MAJ = 0.18  # majority-class rate of the hand-made test set (tolerance 0.5 points)
TABLE8 = "table8_estimators"
ESTIMATOR_FIGURE = "fig9_estimators"


# --- hand-made run folders ------------------------------------------------------------------------


def write_data(root: Path, dataset: str, seed: int, tv: np.ndarray) -> list[str]:
    d = root / "data" / dataset / f"seed{seed}"
    write_parquet(pd.DataFrame({"client_id": np.arange(20, dtype=np.int64), "pmax": PMAX,
                                "n_train": np.full(20, 10), "n_test": np.zeros(20, dtype=np.int64), "tv": tv}),
                  d / "clients.parquet")
    write_json(d / "manifest.json", {"seed": seed, "files": {}, "data_config": {}, "summary": {
        "dataset": dataset, "task": "image", "classes": 10, "train_size": 500, "test_size": 1000,
        "input_shape": [1, 8, 8], "clients": 20, "majority_rate": MAJ, "chance_rate": 0.1}})
    return [str(d / "clients.parquet"), str(d / "manifest.json")]


def within_tier(h: np.ndarray) -> np.ndarray:
    """E1 as the engine computes it (hasfl.fl.estimator.within_tier; the analysis may not import it)."""
    logs, out = np.log(h), np.zeros(len(h))
    for t in np.unique(PMAX):
        m = PMAX == t
        out[m] = (logs[m] - logs[m].mean()) / logs[m].std(ddof=1)
    return out


def write_run(root: Path, dataset: str, method: str, seed: int, tv: np.ndarray, rng: np.random.Generator, *,
              acc: list[float] | None = None, drop: tuple[str, ...] = (), status: str = "completed") -> list[str]:
    """E0 follows capacity (an order of magnitude per tier, weak noise), E2 follows TV, E3 = TV."""
    d = root / "runs" / dataset / method / f"seed{seed}"
    acc = acc or [0.3, 0.6, 0.8]
    h = np.exp(-4.0 * PMAX + rng.normal(0, 0.2, 20))
    clients = pd.DataFrame({"client_id": np.arange(20, dtype=np.int64), "pmax": PMAX, "p_final": PMAX,
                            "h_tilde_final": h, "est_within_tier_final": within_tier(h),
                            "est_probe_final": 0.5 + tv + rng.normal(0, 0.05, 20), "est_reported": tv.copy()})
    write_parquet(clients.drop(columns=list(drop)), d / "clients.parquet")
    n = len(acc)
    write_parquet(pd.DataFrame({"round": np.arange(1, n + 1, dtype=np.int64), "test_acc": acc,
                                "test_loss": np.linspace(2, 1, n), "avg_p": np.full(n, 0.5)}), d / "rounds.parquet")
    write_json(d / "run.json", {"dataset": dataset, "method": method, "seed": seed, "status": status,
                                "rounds_completed": n, "avg_p": 0.5, "final_test_acc": acc[-1]})
    return [str(d / f) for f in ("clients.parquet", "rounds.parquet", "run.json")]


@pytest.fixture()
def results(tmp_path):
    """digits: hasfl (seed 3 at the accuracy floor) and fedavg, 3 seeds; nothing else."""
    rng = np.random.default_rng(11)
    data, runs, man = [], [], []
    for s in SEEDS:
        tv = rng.uniform(0.1, 0.9, 20)
        c, m = write_data(tmp_path, "digits", s, tv)
        data.append(c)
        man.append(m)
        runs += write_run(tmp_path, "digits", "hasfl", s, tv, rng, acc=[0.1, 0.18, 0.182] if s == 3 else None)
        runs += write_run(tmp_path, "digits", "fedavg", s, tv, rng)
    return tmp_path, data, runs, man


def table8_of(root, data, runs, man, methods=("hasfl", "fedavg")):
    t = root / "tables"
    pooled = T8.job(data, runs, ["digits"], list(methods), SEEDS, 0.95, 199, 0, t / f"{TABLE8}.parquet",
                    t / f"{TABLE8}_seeds.parquet", t / f"{TABLE8}.md", manifests=man[:1])
    return pooled, pd.read_parquet(t / f"{TABLE8}_seeds.parquet")


# --- Table 8 ----------------------------------------------------------------------------------------


def test_table8_rows_are_hasfl_diagnose_and_agree_with_table5(results):
    root, data, runs, man = results
    pooled, per_seed = table8_of(root, data, runs, man)
    # every row is diagnose() on the run's clients: one implementation with `hasfl diagnose`
    dc = pd.read_parquet(data[0])
    rc = pd.read_parquet(root / "runs/digits/hasfl/seed1/clients.parquet")
    frame = pd.DataFrame({"pmax": dc["pmax"], "tv": dc["tv"], "E2": rc["est_probe_final"]})
    g = D.diagnose(frame, "E2", "pmax", "tv", alpha=0.05, permutations=199, seed=0)
    row = per_seed.set_index(["method", "seed", "estimator"]).loc[("hasfl", 1, "E2")]
    for col, val in (("r_e_tv", g.r_truth), ("r_e_pmax", g.r_capacity), ("pr_e_tv_pmax", g.partial_r_truth),
                     ("adj_r2_tier", g.adj_r2_capacity), ("adj_r2_tv", g.adj_r2_truth), ("within_r", g.within_r),
                     ("permutation_p", g.permutation_p)):
        assert row[col] == pytest.approx(val), col
    assert row["verdict"] == g.verdict == "data signal"
    # E0 of a hasfl run: the same r(H~, TV), r(H~, pmax), r(H~, TV | pmax) as Table 5
    t5 = confound_row(dc, rc)
    e0 = per_seed.set_index(["method", "seed", "estimator"]).loc[("hasfl", 1, "E0")]
    assert e0["r_e_tv"] == pytest.approx(t5["r_h_tv"]) and e0["r_e_pmax"] == pytest.approx(t5["r_h_pmax"])
    assert e0["pr_e_tv_pmax"] == pytest.approx(t5["pr_h_tv_pmax"])
    assert e0["verdict"] == "confounded" and e0["r_e_pmax"] < -0.9
    # E3 = TV exactly: r = 1; E1 is centred per tier: no correlation with pmax
    e3 = per_seed[(per_seed["estimator"] == "E3") & (per_seed["method"] == "hasfl")]
    assert (e3["r_e_tv"] > 0.999).all()
    assert per_seed.loc[per_seed["estimator"] == "E1", "r_e_pmax"].abs().max() < 1e-9
    # methods the preset does not run: one "not run" row per estimate and seed
    nr = per_seed[per_seed["method"] == "hasfl_probe"]
    assert len(nr) == 4 * len(SEEDS) and set(nr["status"]) == {"not run"}
    assert list(pooled["method"].unique()) == list(TABLE8_METHODS)
    assert set(pooled.loc[pooled["method"].isin(["hasfl_probe", "hasfl_reported"]), "status"]) == {"not run"}


def test_table8_pools_over_seeds_in_fisher_z(results):
    root, data, runs, man = results
    pooled, per_seed = table8_of(root, data, runs, man)
    rows = per_seed[(per_seed["method"] == "hasfl") & (per_seed["estimator"] == "E2")]
    p = pooled.set_index(["method", "estimator"]).loc[("hasfl", "E2")]
    ref = stats.fisher_pool(rows["pr_e_tv_pmax"], rows["n_clients"], 1)
    assert p["pr_e_tv_pmax"] == pytest.approx(ref.r)
    assert (p["pr_e_tv_pmax_low"], p["pr_e_tv_pmax_high"]) == pytest.approx(ref.interval(0.95))
    # the within-tier r pooled over seeds = every tier of every seed pooled at once
    tiers_r, tiers_n = [], []
    for s in SEEDS:
        dc = pd.read_parquet(root / f"data/digits/seed{s}/clients.parquet")
        rc = pd.read_parquet(root / f"runs/digits/hasfl/seed{s}/clients.parquet")
        for t in np.unique(PMAX):
            m = (dc["pmax"] == t).to_numpy()
            tiers_r.append(stats.pearson(rc["est_probe_final"][m], dc["tv"][m]))
            tiers_n.append(int(m.sum()))
    assert p["within_r"] == pytest.approx(stats.fisher_pool(tiers_r, tiers_n).r)
    assert p["n_runs"] == 3 and p["verdicts"] == "data signal 3"
    assert pooled.set_index(["method", "estimator"]).loc[("hasfl", "E0"), "verdicts"] == "confounded 3"
    # seed 3 of hasfl never rose above the majority-class rate (18.2% <= 18% + 0.5)
    assert p["n_at_floor"] == 1 and pooled.set_index(["method", "estimator"]).loc[("fedavg", "E0"), "n_at_floor"] == 0
    md = (root / "tables" / f"{TABLE8}.md").read_text()
    assert "at floor: 1 of 3 runs" in md and "Per run" in md and "not run" in md


def test_table8_names_the_missing_estimator_column(results):
    root, data, runs, man = results
    rng = np.random.default_rng(0)
    tv = pd.read_parquet(data[0])["tv"].to_numpy()
    write_run(root, "digits", "hasfl", 1, tv, rng, drop=("est_probe_final",))
    with pytest.raises(ValueError, match=r"runs/digits/hasfl/seed1/clients.parquet lacks the column\(s\) "
                                         r"est_probe_final"):
        table8_of(root, data, runs, man)


def test_table8_keeps_a_diverged_run_with_undefined_statistics(results):
    root, data, runs, man = results
    rc = pd.read_parquet(root / "runs/digits/hasfl/seed2/clients.parquet")
    rc["h_tilde_final"] = np.nan
    write_parquet(rc, root / "runs/digits/hasfl/seed2/clients.parquet")
    run = json.loads((root / "runs/digits/hasfl/seed2/run.json").read_text())
    write_json(root / "runs/digits/hasfl/seed2/run.json", {**run, "status": "diverged"})
    pooled, per_seed = table8_of(root, data, runs, man)
    row = per_seed.set_index(["method", "seed", "estimator"]).loc[("hasfl", 2, "E0")]
    assert row["status"] == "diverged" and math.isnan(row["r_e_tv"]) and "NaN" in row["reason"]
    p = pooled.set_index(["method", "estimator"]).loc[("hasfl", "E0")]
    assert p["n_runs"] == 2 and "not completed" in p["status"]


# --- the matched budget of the estimator methods -------------------------------------------------


def metric_rows(method: str, finals: list[float], avg_p: float = 0.5) -> list[dict]:
    return [{"dataset": "digits", "method": method, "seed": s, "status": "completed", "best_acc_pct": f + 1,
             "final_acc_pct": f, "delta_pct": -1.0, "avg_p": avg_p, "rounds_completed": 30}
            for s, f in zip(SEEDS, finals, strict=True)]


def test_matched_budget_pairs_names_alloc_and_control_and_marks_pairs_not_run():
    m = pd.DataFrame(metric_rows("hasfl_probe", [80, 82, 81]) + metric_rows("random_budget_probe", [78, 79, 80],
                                                                               0.51))
    methods = ["hasfl", "hasfl_probe", "random_budget_probe"]
    summary, per_seed = E.matched_budget_pairs(m, ["digits"], methods, SEEDS, 0.95,
                                               {"random_budget_probe": 0.03})
    acc = summary[summary["metric"] == "final_acc_pct"].set_index("pair")
    assert acc.loc["probe", "status"] == "completed" and acc.loc["probe", "mean_diff"] == pytest.approx(2.0)
    assert acc.loc["probe", "alloc_method"] == "hasfl_probe" and acc.loc["probe", "control_mean"] == 79.0
    assert acc.loc["reported", "status"] == "not run"
    width = summary[summary["metric"] == "avg_p"].set_index("pair")
    assert width.loc["probe", "max_abs_diff"] == pytest.approx(0.01) and bool(width.loc["probe", "within_tolerance"])
    assert list(per_seed["diff_final_acc_pct"]) == [2.0, 3.0, 1.0] and set(per_seed["pair"]) == {"probe"}
    assert {"alloc_final_acc_pct", "control_final_acc_pct", "alloc_at_floor"} <= set(per_seed.columns)


# --- F7 and F8 on hand-made tables ---------------------------------------------------------------


def t8_rows(method: str, estimator: str, prs: list[float], dataset: str = "digits") -> list[dict]:
    return [{"dataset": dataset, "method": method, "seed": s, "estimator": estimator, "status": "completed",
             "n_clients": 100, "pr_e_tv_pmax": pr} for s, pr in zip(SEEDS, prs, strict=True)]


def mbe_rows(pair: str, diffs: list[float], dataset: str = "digits", floor: bool = False) -> list[dict]:
    return [{"pair": pair, "dataset": dataset, "seed": s, "paired": True, "diff_final_acc_pct": d,
             "alloc_at_floor": floor, "control_at_floor": False} for s, d in zip(SEEDS, diffs, strict=True)]


def evaluate(t8: list[dict], mbe: list[dict], **overrides) -> dict[str, dict]:
    tables = {**base_tables(), F.T8S: pd.DataFrame.from_records(t8), F.MBES: pd.DataFrame.from_records(mbe)}
    th = resolve_thresholds(overrides)
    return {f["id"]: f for f in F.evaluate_findings(tables, datasets=["digits"], thresholds=th)}


@pytest.mark.parametrize(("prs", "verdict", "why"), [
    ([0.5] * 3, S, "lower bound 0.36 > 0"),                     # z 0.549 - t_.95,2 0.0589 -> r 0.36
    ([0.0] * 3, C, "upper bound 0.17 < margin 0.36"),           # z +- 2.92 x 0.0589 -> [-0.17, 0.17]
    ([-0.3] * 3, C, "no usable data signal"),                  # an estimate that falls with TV
    ([0.0, 0.4, 0.2], I, "contains 0 and the margin"),          # the seeds disagree: [-0.147, 0.512]
])
def test_f7_three_verdicts(prs, verdict, why):
    res = evaluate(t8_rows("hasfl", "E2", prs) + t8_rows("fedavg", "E2", [0.6] * 3), [])
    f = res["F7-E2"]
    assert f["verdict"] == verdict and why in f["reason"], f["reason"]
    u = f["units"][0]
    assert u["unit"] == "digits" and u["n"] == 3 and u["in_scope"] and f["extension"]
    assert u["fixed_effect"]["se_z"] == pytest.approx(1 / math.sqrt(288))
    if len(set(prs)) == 1:  # equal seeds: no between-seed variance, the se is the fixed effect's, t on 2 df
        assert u["se_z"] == pytest.approx(1 / math.sqrt(288))
        # MDE: the true r the test detects as > 0 with 80% power, (t_.95,2 + t_.8,2) se
        assert u["mde"] == pytest.approx(math.tanh((2.9200 + 1.0607) / math.sqrt(288)), abs=1e-3)
    assert u["control_fedavg"]["estimate"] == pytest.approx(0.6)  # the equal-width control, beside it
    assert "hasfl" in f["statistic"] and "fedavg" in f["statistic"]


def test_f7_support_takes_precedence_and_says_weak():
    res = evaluate(t8_rows("hasfl", "E0", [0.25] * 3), [], f7_min_pr_e_tv=0.5)  # [0.083, 0.40]: both hold
    f = res["F7-E0"]
    assert f["verdict"] == S and "weak" in f["reason"]


def test_f7_is_per_estimator_and_inconclusive_when_not_run():
    res = evaluate(t8_rows("hasfl", "E0", [-0.1, 0.0, 0.05]) + t8_rows("hasfl", "E3", [0.99] * 3)
                   + t8_rows("fedavg", "E1", [0.5] * 3) + t8_rows("fedavg", "E0", [0.6] * 3), [])
    assert res["F7-E0"]["verdict"] == C and res["F7-E3"]["verdict"] == S
    # E1 has only fedavg rows: F7 is about the hasfl runs, so nothing was measured
    assert res["F7-E1"]["verdict"] == F.NOT_RUN and res["F7-E1"]["reason"].startswith("not run")
    assert "within-tier" in res["F7-E1"]["statistic"]
    assert [k for k in res if k.startswith("F7")] == list(F.F7_IDS)


@pytest.mark.parametrize(("diffs", "verdict", "why"), [
    ([3.0, 4.0, 5.0], S, "beats its control"),                     # 4 +- 1.686
    ([0.1, -0.1, 0.0], C, "equivalent to its control"),            # 0 +- 0.169, inside +-2
    ([-5.0, -4.0, -6.0], C, "worse than its control"),             # -5 +- 1.686
    ([1.0, -3.0, 6.0], I, "contains 0 and is not inside"),         # 1.33 +- 7.6
    ([0.5, 0.6, 0.7], S, "beats its control"),                     # 0.6 +- 0.169: beats, though inside +-2
])
def test_f8_three_verdicts(diffs, verdict, why):
    res = evaluate([], mbe_rows("probe", diffs))
    f = res["F8-probe"]
    assert f["verdict"] == verdict and why in f["reason"], f["reason"]
    u = f["units"][0]
    assert u["margin"] == 2.0 and f["margin_key"] == "analysis.f3_equiv_margin_pct"
    assert u["mde"] == pytest.approx(stats.t_mde(3, float(np.std(diffs, ddof=1)), 0.05, 0.8))
    # the pair the preset did not run
    assert res["F8-reported"]["verdict"] == F.NOT_RUN
    assert res["F8-reported"]["reason"] == "not run: hasfl_reported or random_budget_reported not run in this preset"


def test_f8_names_runs_at_the_floor_and_unpaired_seeds():
    rows = mbe_rows("reported", [3.0, 4.0, 5.0], floor=True)
    rows[2]["paired"] = False
    res = evaluate([], rows)
    u = res["F8-reported"]["units"][0]
    assert u["n"] == 2 and "seeds left out (not completed or NaN): 3" in u["reason"]
    assert "hasfl_reported 2 of 2" in u["floor_note"]


@pytest.mark.parametrize(("side", "floor", "gain", "verdict"), [
    (None, False, None, S), ("control", False, 2.0, S), ("alloc", False, 0.3, S), ("alloc", True, None, I)])
def test_f8_is_withheld_only_for_a_run_that_failed_to_train(side, floor, gain, verdict):
    """F8 compares final accuracies at the rung's horizon (issue 45): a run at the floor failed to train and
    withholds the unit, named so; a run still rising at its last evaluation (2 points above the one before: the
    old gate) is decided as the interval says."""
    rows = mbe_rows("probe", [3.0, 4.0, 5.0])
    if side is not None:
        rows[1][f"{side}_at_floor"] = floor
        if gain is not None:
            rows[1].update({f"{side}_delta_pct": 0.0, f"{side}_last_gain_pct": gain})
    u = evaluate([], rows)["F8-probe"]["units"][0]
    assert u["verdict"] == verdict, u["reason"]
    if verdict == I:
        method = {"alloc": "hasfl_probe", "control": "random_budget_probe"}[side]
        assert f"{method} seed {SEEDS[1]} (at the majority-class floor)" in u["gate"] \
            and "(the test alone: supported" in u["reason"] and u["gate_kind"] == "failed_to_train"


def test_estimator_findings_need_both_tables_and_are_optional_together():
    res = F.evaluate_findings(base_tables(), datasets=["digits"], thresholds=resolve_thresholds())
    assert [f["id"] for f in res] == list(F.FINDING_IDS)
    with pytest.raises(ValueError, match=F.MBES):
        F.evaluate_findings({**base_tables(), F.T8S: pd.DataFrame()}, datasets=["digits"],
                            thresholds=resolve_thresholds())
    res = evaluate([], [])
    assert list(res) == list(F.ALL_FINDING_IDS) and all(res[k]["verdict"] == F.NOT_RUN for k in F.ESTIMATOR_FINDING_IDS)
    json.dumps(list(res.values()), allow_nan=False)


# --- Figure 9 and the report ----------------------------------------------------------------------


def test_figure9_titles_are_table8s_numbers_and_missing_estimates_are_said(results):
    from hasfl.analysis.figures import fig9_estimators as F9

    root, data, runs, man = results
    pooled, _ = table8_of(root, data, runs, man)
    assert F9.TABLES == FIGURES[ESTIMATOR_FIGURE].tables == (TABLE8,)
    t8 = {TABLE8: root / "tables" / f"{TABLE8}.parquet"}  # the figure quotes Table 8, it does not recompute it
    hasfl = [r for r in runs if "/hasfl/" in r and r.endswith(("clients.parquet", "run.json"))]
    png, pdf = root / "fig9.png", root / "fig9.pdf"
    jobs.job_figure(ESTIMATOR_FIGURE, hasfl, [d for d in data if d.endswith("clients.parquet")],
                    {"datasets": ["digits", "cifar10"], "seeds": SEEDS, "ci_level": 0.95}, png, pdf, tables=t8)
    assert png.stat().st_size > 20000 and pdf.read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match=TABLE8):  # without Table 8 the figure says what it lacks
        jobs.job_figure(ESTIMATOR_FIGURE, hasfl, [d for d in data if d.endswith("clients.parquet")],
                        {"datasets": ["digits"], "seeds": SEEDS}, png, pdf)
    # the same pooled numbers as Table 8, in the panel titles
    captured = {}
    real = F9.figure

    def spy(points, datasets, stats_=None, **kw):
        fig = real(points, datasets, stats_, **kw)
        captured["titles"] = [ax.get_title() for ax in fig.axes]
        captured["texts"] = [t.get_text() for ax in fig.axes for t in ax.texts]
        return fig

    F9.figure = spy
    try:
        jobs.job_figure(ESTIMATOR_FIGURE, hasfl, [d for d in data if d.endswith("clients.parquet")],
                        {"datasets": ["digits", "cifar10"], "seeds": SEEDS}, png, pdf, tables=t8)
    finally:
        F9.figure = real
    p = pooled.set_index(["method", "estimator"]).loc[("hasfl", "E0")]
    assert f"r(E, pmax) {p['r_e_pmax']:+.2f} [{p['r_e_pmax_low']:+.2f}, {p['r_e_pmax_high']:+.2f}]" \
        in captured["titles"][0]
    assert len(captured["titles"]) == 8 and "not run" in captured["texts"]  # cifar10: no runs
    # runs without the estimator columns: the panel says which column is missing
    for s in SEEDS:
        f = root / f"runs/digits/hasfl/seed{s}/clients.parquet"
        write_parquet(pd.read_parquet(f).drop(columns=["est_probe_final"]), f)
    fig = F9.figure(E.figure_points({(d, s): pd.read_parquet(root / f"data/{d}/seed{s}/clients.parquet")
                                     for d, s in [("digits", s) for s in SEEDS]},
                                    {("digits", s): pd.read_parquet(root / f"runs/digits/hasfl/seed{s}/"
                                                                           "clients.parquet")
                                     for s in SEEDS}), ["digits"])
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("est_probe_final" in t for t in texts)


def test_figure9_caption_and_report_section(results):
    spec = FIGURES[ESTIMATOR_FIGURE]
    text = figure_caption(ESTIMATOR_FIGURE, {"n_seeds": 3, "ci_level": 0.9})
    assert "{" not in text and "3 seeds" in text and "90% intervals" in text and spec.paper_figure == 9
    assert "horizontal bands" in text and "within each capacity tier" in text
    root, data, runs, man = results
    pooled, _ = table8_of(root, data, runs, man)
    res = evaluate(t8_rows("hasfl", "E2", [0.5] * 3), mbe_rows("probe", [3.0, 4.0, 5.0]))
    findings = {"findings": list(res.values()), "thresholds": resolve_thresholds(), "alpha": 0.05,
                "verdicts": list(F.VERDICTS)}
    comparison = pd.DataFrame(columns=["table", "dataset", "method", "metric", "status", "reason", "published_mean",
                                       "published_std", "ours_mean", "ours_std", "ours_n", "within", "criterion"])
    md = report.report_markdown(name="syn", config_summary={"preset": "syn", "datasets": ["digits"], "seeds": SEEDS},
                                tables={TABLE8: pooled, "comparison": comparison}, findings=findings,
                                figures=list(FIGURES))
    sec = md.split("## Capacity-separable estimators")[1].split("\n## ")[0]
    for e in ESTIMATORS:
        assert f"**{e.id} {e.name}** (`{e.column}`)" in sec
    assert "| F7-E2 | digits |" in sec and "| F8-probe | digits |" in sec and "MDE" in sec
    assert "Not run in this preset: HAS-FL (probe), HAS-FL (reported)" in sec
    assert "Digits, E0 update: r(E, pmax) " in sec and "check per run: confounded 3" in sec
    assert "*Figure 9.* " in md and "figures/fig9_estimators.png" in md
    assert "### Table 8" in md
    assert not re.search(r"\bissues? ?#?\d", md, re.I)


# --- the DAG ----------------------------------------------------------------------------------------------


def _job_inputs(out: str, rule: str) -> list[str]:
    block = out[out.index(f"rule {rule}:"):]
    line = next(x for x in block.splitlines() if x.strip().startswith("input:"))
    return [p.strip() for p in line.split("input:", 1)[1].split(",")]


def test_dag_reads_exactly_the_estimator_runs_with_and_without_the_estimator_methods(snakemake, quick_dry_run, repo,
                                                                                     tmp_path, monkeypatch):
    monkeypatch.setenv("HASFL_CONSOLE_WIDTH", "0")  # the job blocks' input lines whole (the console cuts them)
    for presets, methods in ((["presets/quick.yaml"], ("hasfl", "fedavg")),
                             (["presets/quick.yaml", "presets/quick-estimators.yaml"], TABLE8_METHODS)):
        if len(presets) == 1:  # the session's one dry run of the quick preset (conftest; its lines whole too)
            res = quick_dry_run
        else:
            res = snakemake("-n", "all", "-s", str(repo / "Snakefile"), "--directory", str(tmp_path),
                            "--configfile", *[str(repo / p) for p in presets], "--config", f"results_dir={tmp_path}")
        out = res.stdout + res.stderr
        assert res.returncode == 0, out[-3000:]
        for rule in ("analysis_table8_estimators", "analysis_matched_budget_estimators",
                     "analysis_fig9_estimators"):
            assert re.search(rf"^{rule}\s+1$", out, re.M), rule
        inputs = _job_inputs(out, "analysis_table8_estimators")
        runs = {re.search(r"runs/[^/]+/([^/]+)/", p)[1] for p in inputs if "/runs/" in p and "verified" not in p}
        assert runs == set(methods)
        assert any(p.endswith("runs/verified.json") for p in inputs)
        assert sum(p.endswith("/clients.parquet") and "/runs/" in p for p in inputs) == 2 * 3 * len(methods)
        fig_inputs = _job_inputs(out, "analysis_fig9_estimators")
        assert {re.search(r"runs/[^/]+/([^/]+)/", p)[1] for p in fig_inputs if "/runs/" in p
                and "verified" not in p} == {"hasfl"}
        mbe = _job_inputs(out, "analysis_matched_budget_estimators")
        mbe_runs = {re.search(r"runs/[^/]+/([^/]+)/", p)[1] for p in mbe if "/runs/" in p and "verified" not in p}
        assert mbe_runs == (set() if len(presets) == 1 else
                            {"hasfl_probe", "random_budget_probe", "hasfl_reported", "random_budget_reported"})
        findings = _job_inputs(out, "analysis_findings")
        assert any(p.endswith("table8_estimators_seeds.parquet") for p in findings)
        assert any(p.endswith("matched_budget_estimators_seeds.parquet") for p in findings)


def test_finding_kinds_say_what_a_verdict_can_mean():
    """issue 25, point 7: paper claims, extensions, pipeline checks (F5; E3 when it equals TV on every run)
    and the oracle (F8-reported when E3 equals TV); a noisy E3 is an extension again."""
    exact = evaluate(t8_rows("hasfl", "E3", [1.0] * 3), mbe_rows("reported", [0.5, -0.2, 0.1]))
    assert exact["F1a"]["kind"] == F.PAPER_CLAIM and exact["F1b"]["kind"] == F.EXTENSION
    assert exact["F5"]["kind"] == F.PIPELINE_CHECK and exact["F6"]["kind"] == F.EXTENSION
    assert exact["F7-E3"]["kind"] == F.PIPELINE_CHECK and exact["F8-reported"]["kind"] == F.ORACLE
    assert "by construction" in exact["F7-E3"]["statistic"]
    assert "consistent data signal" not in exact["F7-E3"]["reason"], exact["F7-E3"]["reason"]
    noisy = evaluate(t8_rows("hasfl", "E3", [0.8] * 3), mbe_rows("reported", [0.5, -0.2, 0.1]))
    assert noisy["F7-E3"]["kind"] == F.EXTENSION and noisy["F8-reported"]["kind"] == F.EXTENSION
    assert "consistent data signal" in noisy["F7-E3"]["reason"]
    assert all(f["kind"] in F.KINDS for f in exact.values())


@pytest.mark.parametrize(("estimator", "control", "f6", "verdict"), [
    ("E0", None, [0.6] * 3, C),    # F6 (after Holm) sees the data: no signal in the hasfl runs is about capacity
    ("E0", None, [0.0, 0.1, 0.2], C),  # F6 inconclusive: no veto, reported beside
    ("E0", None, [-0.5] * 3, I),   # F6 contradicted: the estimate is shown blind at equal widths
    ("E0", None, None, C),         # no fedavg run: the control is said to be missing, no veto
    ("E1", [0.0] * 3, None, C),    # E1's own fedavg control inconclusive: reported beside
    ("E1", [-0.5] * 3, None, I),   # E1's own control shown blind
    ("E2", [-0.5] * 3, None, C),   # the probe is width-separable by construction: no confound claim, no control
])
def test_f7_no_signal_on_the_update_divergence_is_read_beside_its_positive_control(estimator, control, f6, verdict):
    """Before, a control that was not supported withheld the claim; now it is reported beside it and withholds only
    when shown blind (contradicted). E0's control is F6's unit after Holm (its estimate is F6's)."""
    rows = t8_rows("hasfl", estimator, [0.0] * 3) + (t8_rows("fedavg", estimator, control) if control else [])
    tables = {**base_tables(), F.T8S: pd.DataFrame.from_records(rows), F.MBES: pd.DataFrame.from_records([])}
    if f6 is not None:
        t5 = tables[F.T5]
        extra = t5[t5["method"] == "fedavg"].assign(dataset="digits", r_h_tv=f6)
        tables[F.T5] = pd.concat([t5, extra], ignore_index=True)
    res = {f["id"]: f for f in F.evaluate_findings(tables, datasets=["digits"], thresholds=resolve_thresholds({}))}
    u = res[f"F7-{estimator}"]["units"][0]
    assert u["verdict"] == verdict, u["reason"]
    if verdict == I:
        assert "the test alone: contradicted" in u["reason"] and "shown blind" in u["reason"]
    if estimator != "E2":
        assert "positive control" in u["reason"]
    if estimator == "E0" and f6 is not None:
        assert u["control"]["verdict"] == {0.6: S, 0.0: I, -0.5: C}[f6[0]]


def test_f7_e0_is_f1c_statistic_and_counted_once_in_the_report():
    res = evaluate(t8_rows("hasfl", "E0", [0.0] * 3) + t8_rows("fedavg", "E0", [0.6] * 3), [])
    assert res["F7-E0"]["same_statistic_as"] == "F1c" and "same_statistic_as" not in res["F7-E2"]


def test_f8_seeds_are_priced_for_its_two_methods():
    """The seeds an inconclusive F8 unit needs are priced for the allocating method and its control."""
    tables = {**base_tables(), F.T8S: pd.DataFrame.from_records(t8_rows("hasfl", "E2", [0.2] * 3)),
              F.MBES: pd.DataFrame.from_records(mbe_rows("probe", [0.5, -1.5, 2.0]))}
    hours = {"digits": {"hasfl_probe": 0.5, "random_budget_probe": 0.25}}
    res = {f["id"]: f for f in F.evaluate_findings(tables, datasets=["digits"], thresholds=resolve_thresholds({}),
                                                   seed_hours=hours)}
    u = res["F8-probe"]["units"][0]
    assert u["verdict"] == I and u["seeds_needed"] > 3
    assert u["extra_job_hours"] == pytest.approx(u["extra_seeds"] * 0.75)
