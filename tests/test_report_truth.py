"""What the report and the figures tell a reader: runs at the accuracy floor flagged everywhere
they appear, no test on quantities equal by construction, comparability said per paper table,
Proposition 3 shown for capped runs only, readable units, a caption for every figure, and no
tracker references in user-facing text. Hand-made frames and run folders; no training."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hasfl.analysis import floors, jobs, report
from hasfl.analysis.artifacts import FIGURES, METHOD_TABLES, TABLES, figure_caption, table_caption
from hasfl.analysis.figures import fig4_heterogeneity_allocation as F4
from hasfl.analysis.figures import fig6_frontier as F6
from hasfl.analysis.figures import reading as FR
from hasfl.analysis.figures import trajectories as FT
from hasfl.analysis.inputs import dataset_floors
from hasfl.analysis.labels import method_marker
from hasfl.analysis.specs import FLOOR_TOL_PCT, floor_tolerance_pct
from hasfl.analysis.tables import matched_budget as MB
from hasfl.analysis.tables import method_table as MT
from hasfl.analysis.tables import table4b_stale_coordinates as T4B
from hasfl.analysis.tables.base import display_parts, table_markdown
from hasfl.analysis.tables.comparison import comparison_overview
from hasfl.io import write_json, write_parquet

REPO = Path(__file__).resolve().parents[1]
SEEDS = [1, 2, 3]
MAJ, CHANCE, TEST_SIZE = 0.18, 0.01, 1000  # majority-class 18%, chance 1%, tolerance 0.5 points


# --- hand-made run folders ---------------------------------------------------------------------------


def write_manifest(root: Path, dataset: str, seed: int, majority: float | None = MAJ) -> str:
    summary = {"dataset": dataset, "task": "text", "classes": 100, "train_size": 5000, "test_size": TEST_SIZE,
               "input_shape": [20], "clients": 20}
    if majority is not None:
        summary.update(majority_rate=majority, chance_rate=CHANCE)
    path = root / "data" / dataset / f"seed{seed}" / "manifest.json"
    write_json(path, {"seed": seed, "files": {}, "summary": summary, "data_config": {}})
    return str(path)


def write_run(root: Path, dataset: str, method: str, seed: int, acc: list[float], avg_p: float = 0.5,
              status: str = "completed") -> list[str]:
    d = root / "runs" / dataset / method / f"seed{seed}"
    n = len(acc)
    write_parquet(pd.DataFrame({
        "round": np.arange(1, n + 1, dtype=np.int64), "test_acc": acc, "test_loss": np.linspace(3.0, 2.0, n),
        "avg_p": np.full(n, avg_p), "avg_p_trained": np.full(n, avg_p), "upload_mb": np.full(n, 0.07 * avg_p ** 2),
        "train_mmacs": np.full(n, 0.27 * avg_p ** 2), "mean_h_tilde": np.ones(n), "n_participants": np.full(n, 10),
        "train_loss": np.linspace(3.0, 2.0, n)}), d / "rounds.parquet")
    write_json(d / "run.json", {"dataset": dataset, "method": method, "seed": seed, "status": status,
                                "rounds_completed": n, "avg_p": avg_p, "avg_p_trained": avg_p,
                                "final_test_acc": acc[-1], "t0": 1})
    return [str(d / "rounds.parquet"), str(d / "run.json")]


#: fedavg learns (above the floor), scaffold never leaves the majority class, fedprox learns then
#: collapses back to it, hasfl stays 0.4 points above it (inside the tolerance: at the floor).
CURVES = {
    "fedavg": [0.10, 0.18, 0.22, 0.25],
    "scaffold": [0.05, 0.18, 0.18, 0.18],
    "fedprox": [0.10, 0.24, 0.20, 0.18],
    "hasfl": [0.10, 0.184, 0.184, 0.184],
}


@pytest.fixture()
def runs(tmp_path):
    files = []
    for method, acc in CURVES.items():
        for s in SEEDS:
            files += write_run(tmp_path, "shakespeare", method, s, acc, avg_p=1.0 if method != "hasfl" else 0.5)
    manifests = [write_manifest(tmp_path, "shakespeare", s) for s in SEEDS]
    return tmp_path, files, manifests


# --- the floor: both directions ------------------------------------------------------------------------


def test_floor_tolerance_is_half_a_point_or_one_test_example():
    assert floor_tolerance_pct(1000) == FLOOR_TOL_PCT == 0.5
    assert floor_tolerance_pct(100) == pytest.approx(1.0)  # one example of 100 is 1 point
    assert floor_tolerance_pct(None) == FLOOR_TOL_PCT


def test_add_floor_flags_both_directions():
    lv = floors.dataset_floors({"d": {"majority_rate": 0.18, "chance_rate": 0.01, "test_size": 1000}})
    assert lv["d"] == {"majority_pct": pytest.approx(18.0), "chance_pct": pytest.approx(1.0), "floor_tol_pct": 0.5}
    m = pd.DataFrame({"dataset": ["d"] * 5 + ["unknown"], "best_acc_pct": [18.0, 18.5, 18.51, 1.2, 30.0, 18.0],
                      "final_acc_pct": [18.0, 18.0, 18.2, 1.0, 18.3, 18.0]})
    f = floors.add_floor_flags(m, lv)
    # at the majority rate, at the edge of the tolerance -> flagged; 0.01 beyond it -> not
    assert list(f["at_floor"][:5]) == [True, True, False, True, False]
    assert list(f["at_chance"][:5]) == [False, False, False, True, False]
    assert list(f["final_at_floor"][:5]) == [True, True, True, True, True]  # 30% best, collapsed to 18.3
    assert f["at_floor"].isna().iloc[5]  # no manifest floors: unknown, not "fine"
    assert floors.floor_phrase(3, 3, 3) == "at floor: 3 of 3 seeds"
    assert floors.floor_phrase(0, 1, 3) == "ends at floor: 1 of 3 seeds"
    assert floors.floor_phrase(0, 0, 3) == ""
    assert floors.floor_phrase(pd.NA, pd.NA, 3) == "floor unknown"


def test_method_table_flags_the_floor_runs_and_only_them(runs, tmp_path):
    root, files, manifests = runs
    t = tmp_path / "tables"
    df = MT.job("table6_full_model", files, ["shakespeare"], list(CURVES), SEEDS,
                t / "table6_full_model.parquet", t / "s.parquet", t / "table6_full_model.md",
                manifests=manifests)
    by = df.set_index("method")
    assert by.loc["scaffold", "n_at_floor"] == 3 and by.loc["hasfl", "n_at_floor"] == 3
    assert by.loc["fedavg", "n_at_floor"] == 0 and by.loc["fedprox", "n_at_floor"] == 0
    assert by.loc["fedprox", "n_final_at_floor"] == 3 and by.loc["fedavg", "n_final_at_floor"] == 0
    assert by.loc["scaffold", "majority_pct"] == pytest.approx(18.0)
    seeds = pd.read_parquet(t / "s.parquet").set_index(["method", "seed"])
    assert bool(seeds.loc[("scaffold", 2), "at_floor"]) and not bool(seeds.loc[("fedavg", 2), "at_floor"])
    md = (t / "table6_full_model.md").read_text()
    rows = {line.split("|")[2].strip(): line for line in md.splitlines() if line.startswith("| Shakespeare")}
    assert "at floor: 3 of 3 seeds" in rows["SCAFFOLD"] and "at floor: 3 of 3 seeds" in rows["HAS-FL"]
    assert "at floor" not in rows["FedAvg"].replace("ends at floor", "")
    assert "ends at floor: 3 of 3 seeds" in rows["FedProx"]
    assert "majority class 18.00%" in md
    # without manifests the floor is unknown (and said so), never silently "fine"
    df2 = MT.job("table6_full_model", files, ["shakespeare"], list(CURVES), SEEDS,
                 t / "x.parquet", t / "xs.parquet", t / "x.md")
    assert df2["n_at_floor"].isna().all() and "floor unknown" in (t / "x.md").read_text()


# --- matched budget: no test on the matched widths ---------------------------------------------------


def test_matched_budget_tests_accuracy_but_not_the_matched_width(tmp_path):
    files = []
    for s, (a, b) in zip(SEEDS, ((0.30, 0.28), (0.40, 0.41), (0.35, 0.33)), strict=True):
        files += write_run(tmp_path, "shakespeare", "hasfl", s, [0.1, a], avg_p=0.5)
        # widths equal up to rounding noise, as random_budget's matching makes them
        files += write_run(tmp_path, "shakespeare", "random_budget", s, [0.1, b], avg_p=0.5 + 5.551e-17 * s)
    manifests = [write_manifest(tmp_path, "shakespeare", s) for s in SEEDS]
    t = tmp_path / "tables"
    df = MB.job(files, ["shakespeare"], ["hasfl", "random_budget"], SEEDS, 0.95,
                t / "mb.parquet", t / "mbs.parquet", t / "mb.md", manifests=manifests, tolerance=0.03)
    acc = df[df["metric"] == "final_acc_pct"].iloc[0]
    wid = df[df["metric"] == "avg_p"].iloc[0]
    assert acc["check"] == "paired t" and math.isfinite(acc["p_value"]) and math.isfinite(acc["ci_low"])
    assert wid["check"] == "matched by construction"
    for c in ("p_value", "t_stat", "ci_low", "ci_high"):
        assert math.isnan(wid[c]), c
    assert wid["tolerance"] == 0.03 and bool(wid["within_tolerance"]) and wid["max_abs_diff"] < 1e-15
    parts = dict(display_parts("matched_budget", df))
    width_part = next(v for k, v in parts.items() if "matched by construction" in k)
    assert not any("p" == c.split()[0] or "p (" in c or c == "t" for c in width_part.columns), list(width_part.columns)
    assert "Tolerance" in width_part.columns
    acc_part = next(v for k, v in parts.items() if "paired t" in k)
    assert "p (paired t)" in acc_part.columns
    md = (t / "mb.md").read_text()
    width_section = md.split("matched by construction (no test)")[1].split("##")[0]
    assert "p (paired t)" not in width_section and "0.2254" not in width_section


# --- comparison: comparable per paper table, no mixed headline ---------------------------------------


def test_comparison_overview_separates_model_costs_from_results():
    pub = pd.DataFrame({"table": [1, 1, 3, 7], "dataset": ["cifar10", "shakespeare", "cifar10", "shakespeare"],
                        "method": ["p=0.25", "p=0.25", "hasfl", "hasfl"], "metric": ["params_m"] * 2 + ["final_acc_pct"] * 2})
    comp = pd.DataFrame({"table": [1, 1, 7], "dataset": ["cifar10", "shakespeare", "shakespeare"],
                         "method": ["p=0.25", "p=0.25", "hasfl"], "metric": ["params_m", "params_m", "final_acc_pct"],
                         "status": ["compared", "compared", "not comparable"],
                         "reason": ["", "", "not the paper's configuration: federation.rounds=30 (paper 200)"],
                         "within": pd.array([True, True, None], dtype="boolean")})
    text = comparison_overview(comp, pub)
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if re.match(r"\| \d", line)}
    assert "at any preset" in lines["1"] and "2 of 2" in lines["1"]
    assert "| no;" in lines["3"] and "not run at this preset: CIFAR-10" in lines["3"]
    assert "Shakespeare run with another configuration (federation.rounds)" in lines["7"]
    assert "no result of the paper" in text and "36 of 36" not in text


# --- Proposition 3 and Table 4b: capped runs only ----------------------------------------------------


def test_prop3_and_table4b_show_only_capped_runs():
    p3 = pd.DataFrame({"dataset": ["d"] * 4, "method": ["uniform", "uniform", "hasfl", "fedavg"], "seed": [1, 2, 1, 1],
                       "status": ["completed"] * 4, "p_hi": [0.5, 0.5, 1.0, 1.0], "capped": [True, True, False, False],
                       "prop3_holds": [True] * 4})
    shown, line = display_parts("prop3_coverage", p3)
    assert list(shown[1]["seed"]) == [1, 2] and set(shown[1]["method"]) == {"uniform"}
    assert "2 of 4 runs are capped" in line[1] and "HAS-FL 1" in line[1] and "FedAvg 1" in line[1]
    t4b = p3.rename(columns={"capped": "capped_after_t0"})
    shown, line = display_parts("table4b_stale_coordinates", t4b)
    assert set(shown[1]["method"]) == {"uniform"} and "2 of 4" in line[1]
    md = table_markdown("prop3_coverage", p3)
    assert md.count("| d | HAS-FL") == 0 and md.count("| d | hasfl") == 0 and md.count("| d | uniform") == 2


# --- units ---------------------------------------------------------------------------------------------


def test_table1_small_models_are_not_printed_as_zero_millions():
    df = pd.DataFrame({"source": ["preset"] * 2 + ["paper"] * 2, "model": ["LSTM (preset)"] * 2 + ["CNN"] * 2,
                       "p": [0.25, 1.0, 0.25, 1.0], "params": [2784, 17760, 205018, 3249994],
                       "macs": [21248, 269312, 10011904, 154866688], "upload_mb": [0.011136, 0.07104, 0.82, 13.0]})
    out = display_parts("table1_cost", df)[0][1]
    assert list(out["Params"]) == ["2.78 k", "17.8 k", "0.205 M", "3.25 M"]
    assert list(out["MACs / sample"]) == ["21.2 k", "269.3 k", "10.0 M", "154.9 M"]
    assert list(out["Upload"]) == ["11.1 kB", "71.0 kB", "0.82 MB", "13.0 MB"]
    assert not any(v.startswith("0.00") for v in out["Params"])


# --- captions --------------------------------------------------------------------------------------------


def test_every_figure_has_a_caption_with_the_presets_numbers():
    ctx = {"n_seeds": 3, "p_min": 0.4, "gamma": 0.25, "warmup": 10, "t_adapt": 5, "t_norm": 20}
    for slug, spec in FIGURES.items():
        text = figure_caption(slug, ctx)
        assert len(text) > 150, slug
        assert "{" not in text and "}" not in text, slug  # every placeholder filled (and safe for Jinja)
        if spec.floors:
            assert "majority-class" in text, slug
    assert "3 seeds" in figure_caption("fig3_convergence_allocation", ctx)
    assert "t0 = 10" in figure_caption("fig4_heterogeneity_allocation", ctx)
    for slug in ("fig3_convergence_allocation", "fig7_convergence_full_model", "fig8_test_loss", "fig4_heterogeneity_allocation"):
        assert "shaded band" in figure_caption(slug, ctx), slug  # the bands are explained


def test_captions_render_as_snakemake_report_captions():
    """workflow/report/figure.rst is the Jinja template Snakemake renders with the job's params, then
    docutils turns into HTML: every caption must survive both."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    rst = (REPO / "workflow/report/figure.rst").read_text()
    assert "snakemake.params.caption" in rst
    smk = (REPO / "workflow/rules/analysis.smk").read_text()
    # one generated rule per artifact: its outputs flagged for the HTML report with the figure / table
    # template, its params.caption the artifact's caption (figure_caption / table_caption)
    loop = smk[smk.index("for art in ARTIFACTS.values():"):smk.index("rule analysis_findings:")]
    assert 'f"analysis_{art.name}"' in loop and "**artifact_outputs(art)" in loop
    assert "        caption=artifact_caption(art)" in loop
    outputs = smk[smk.index("def artifact_outputs(art):"):smk.index("def artifact_params(art):")]
    assert 'caption="../report/figure.rst"' in outputs and 'caption="../report/table.rst"' in outputs
    caption_of = smk[smk.index("def artifact_caption(art):"):smk.index("def analysis_outputs():")]
    assert "figure_caption(art.name, FIGURE_CONTEXT)" in caption_of and "table_caption(art.name)" in caption_of

    class Params:
        caption = ""

    class Smk:
        params = Params()

    captions = [figure_caption(slug, {"n_seeds": 3}) for slug in FIGURES]
    # every table marked for the HTML report has one too (title and note)
    assert (REPO / "workflow/report/table.rst").read_text() == rst
    for rule in re.findall(r"^rule (analysis_\w+):", smk, re.M):
        body = smk[smk.index(f"rule {rule}:"):]
        body = body[:body.find("\nrule ", 1) if "\nrule " in body[1:] else len(body)]
        if "report(" in body:
            assert "caption=" in body.split("report(", 1)[1].split(")", 1)[0], rule
            assert "        caption=" in body, rule  # the params.caption the template prints
    captions += [table_caption(n) for n in TABLES]
    for caption in captions:
        Smk.params.caption = caption
        text = Environment().from_string(rst).render(snakemake=Smk)
        html = publish_parts(text, writer="html", settings_overrides={"report_level": 2,
                                                                      "halt_level": 2})["body"]
        assert caption.split(".")[0][:30] in html.replace("\n", " "), caption


# --- figures mark the floor ---------------------------------------------------------------------------


def _legend_texts(fig) -> list[str]:
    texts = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    return texts + [t.get_text() for lg in fig.legends for t in lg.get_texts()]


def test_trajectory_figures_label_the_floor_runs_and_draw_the_floors(runs):
    root, files, manifests = runs
    from hasfl.analysis.runs import group_run_files, load_run_metrics

    grouped = group_run_files(files)
    traj = FT.trajectories({k: pd.read_parquet(f["rounds.parquet"]) for k, f in grouped.items()})
    lv = dataset_floors(manifests)
    flags = FR.floor_flags(floors.add_floor_flags(load_run_metrics(grouped), lv))
    assert flags[("shakespeare", "scaffold")] == (3, 3) and flags[("shakespeare", "fedavg")] == (0, 3)
    fig = FT.trajectory_figure(traj, {}, ["shakespeare"], list(CURVES), "test_acc_pct", "Test accuracy (%)", "t",
                               floors=lv, flags=flags, n_seeds=3)
    texts = _legend_texts(fig)
    assert "SCAFFOLD (at floor, 3 of 3 seeds)" in texts and "FedAvg" in texts
    assert any(t.startswith("majority-class rate (18.0%)") for t in texts)
    assert any(t.startswith("chance rate (1.0%") for t in texts)
    assert any("1 sample std over 3 seeds" in t for t in texts)
    ax = fig.axes[0]
    assert ax.get_legend().get_bbox_to_anchor().y0 < ax.get_window_extent().y0  # below the data, not on it
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines()}
    assert styles["SCAFFOLD (at floor, 3 of 3 seeds)"] == "--" and styles["FedAvg"] == "-"
    markers = {line.get_label(): (line.get_marker(), line.get_markevery()) for line in ax.get_lines()
               if not line.get_label().startswith("_")}
    assert markers["SCAFFOLD (at floor, 3 of 3 seeds)"] != markers["FedProx"]  # coinciding curves stay apart


def test_every_figure_job_runs_with_the_floors(runs, tmp_path):
    root, files, manifests = runs
    params = {"datasets": ["shakespeare"], "methods": list(CURVES), "seeds": SEEDS, "p_min": 0.4, "gamma": 0.25,
              "warmup": 1, "t_adapt": 1, "t_norm": 2}
    t = tmp_path / "tables"
    for name in METHOD_TABLES:  # Figure 6 reads the method tables' per-seed rows (flags and floors included)
        MT.job(name, files, ["shakespeare"], list(CURVES), SEEDS, t / f"{name}.parquet",
               t / f"{name}_seeds.parquet", t / f"{name}.md", manifests=manifests)
    tabs = {name: t / f"{name}.parquet" for name in F6.TABLES}
    for slug in ("fig3_convergence_allocation", "fig6_frontier", "fig7_convergence_full_model", "fig8_test_loss"):
        sel = [f for f in files if any(f"/{m}/" in f for m in FIGURES[slug].methods)]
        png, pdf = tmp_path / f"{slug}.png", tmp_path / f"{slug}.pdf"
        jobs.job_figure(slug, sel, [], params, png, pdf, manifests=manifests,
                        tables=tabs if slug == "fig6_frontier" else None)
        assert png.stat().st_size > 5000
    # the frontier's rows, flags and floors are the tables' own: hasfl (in every table) appears once per seed
    rows = F6.frontier_runs({name: pd.read_parquet(path) for name, path in tabs.items()})
    assert len(rows) == len(CURVES) * len(SEEDS) and not rows.duplicated(["dataset", "method", "seed"]).any()
    assert FR.floor_flags(rows)[("shakespeare", "scaffold")] == (3, 3)
    assert F6.table_floors(rows)["shakespeare"] == dataset_floors(manifests)["shakespeare"]
    # two tables that disagree on a run they both list: the figure says which, it does not pick one
    t6 = pd.read_parquet(tabs["table6_full_model_seeds"])
    t6.loc[t6["method"] == "hasfl", "final_acc_pct"] += 1.0
    with pytest.raises(ValueError, match="disagree on 'final_acc_pct' of run shakespeare/hasfl/seed1"):
        F6.frontier_runs({**{n: pd.read_parquet(p) for n, p in tabs.items()}, "table6_full_model_seeds": t6})


def test_fig6_hollow_markers_for_floor_methods_and_dodged_points():
    rows = []
    for m, acc in (("fedavg", 24.0), ("scaffold", 18.0), ("fedprox", 18.0)):
        for s in SEEDS:
            rows.append({"dataset": "shakespeare", "method": m, "seed": s, "status": "completed", "final_acc_pct": acc,
                         "avg_p": 1.0, "avg_p_trained": 1.0, "upload_mb": 0.07})
    lv = {"shakespeare": {"majority_pct": 18.0, "chance_pct": 1.0, "floor_tol_pct": 0.5}}
    # every SCAFFOLD seed at the floor, two of three FedProx seeds, no FedAvg seed
    flags = {("shakespeare", "scaffold"): (3, 3), ("shakespeare", "fedprox"): (2, 3), ("shakespeare", "fedavg"): (0, 3)}
    fig = F6.figure(pd.DataFrame(rows), ["shakespeare"], ["fedavg", "scaffold", "fedprox"], floors=lv, flags=flags,
                    n_seeds=3)
    top = fig.axes[0]
    mk = {m: method_marker(m) for m in ("fedavg", "scaffold", "fedprox")}
    pts = {line.get_marker(): (float(line.get_xdata()[0]), line.get_markerfacecolor(), line.get_fillstyle())
           for line in top.get_lines() if line.get_marker() in mk.values() and len(line.get_xdata()) == 1}
    assert len({round(x, 4) for x, _, _ in pts.values()}) == 3  # the three points at p = 1 no longer coincide
    assert pts[mk["scaffold"]][1] == "white"  # hollow: every seed at the floor
    assert pts[mk["fedprox"]][2] == "left"  # half-filled: some seeds
    assert pts[mk["fedavg"]][1] != "white" and pts[mk["fedavg"]][2] == "full"
    texts = _legend_texts(fig)
    assert any("hollow: every seed at the majority-class floor" in t for t in texts)
    assert any("half-filled: some seeds" in t for t in texts)


def test_fig6_draws_each_run_where_the_findings_read_it(tmp_path, monkeypatch):
    """A run trained under per-width statistics whose method is evaluated with test-batch statistics (uniform_rolling:
    its curve at the floor, 22.6% under its declared rule) is drawn at its declared-rule accuracy and filled, as the
    findings call it learned; the run whose final model stays at the floor under the rule too is the hollow one."""
    rows, sens = [], []
    for s, (logged, best, declared) in zip(SEEDS, ((10.0, 10.1, 22.6), (10.0, 10.1, 10.0), (10.0, 10.1, 24.0)),
                                           strict=True):
        rows.append({"dataset": "fashion_mnist", "method": "uniform_rolling", "seed": s, "status": "completed",
                     "final_acc_pct": logged, "best_acc_pct": best, "avg_p": 0.44, "avg_p_trained": 0.44,
                     "upload_mb": 0.04, "majority_pct": 10.0, "chance_pct": 10.0, "floor_tol_pct": 0.5,
                     "at_floor": True})
        for mode, acc in (("per_width", logged), ("batch", declared)):
            sens.append({"dataset": "fashion_mnist", "method": "uniform_rolling", "seed": s, "status": "completed",
                         "run_mode": "per_width", "mode": mode, "final_acc_pct": acc, "logged_final_acc_pct": logged})
    t = tmp_path / "tables"
    t.mkdir()
    inputs = {}
    for name in F6.TABLES:
        frame = pd.DataFrame(rows if name == "table4_coverage_seeds" else [], columns=list(rows[0]))
        write_parquet(frame.astype({"at_floor": "boolean"}), t / f"{name}.parquet")
        inputs[name] = [str(t / f"{name}.parquet")]
    write_parquet(pd.DataFrame(sens), t / "bn_sensitivity.parquet")
    drawn: dict = {}
    monkeypatch.setattr(F6, "save_figure", lambda fig, png, pdf: drawn.__setitem__("fig", fig))
    params = {"datasets": ["fashion_mnist"], "methods": ["uniform_rolling"], "seeds": SEEDS}
    mk = method_marker("uniform_rolling")

    def point(given):
        F6.compute(given, {"png": "x.png", "pdf": "x.pdf"}, params)
        line = next(ln for ln in drawn["fig"].axes[0].get_lines() if ln.get_marker() == mk and len(ln.get_ydata()))
        return float(line.get_ydata()[0]), line.get_markerfacecolor(), line.get_fillstyle(), _legend_texts(drawn["fig"])

    y, face, fill, texts = point({**inputs, F6.RULE_TABLE: [str(t / "bn_sensitivity.parquet")]})
    assert y == pytest.approx((22.6 + 10.0 + 24.0) / 3)  # the declared rule's accuracies, as the findings read them
    assert fill == "left" and face != "white"  # one seed of three failed to train: half-filled, not hollow
    assert any("declared batch-norm rule" in x for x in texts)
    y, face, fill, texts = point(inputs)  # without the sensitivity: the logged accuracy, every seed at the floor
    assert y == pytest.approx(10.0) and face == "white"
    assert not any("declared batch-norm rule" in x for x in texts)
    assert F6.RULE_TABLE in FIGURES["fig6_frontier"].tables  # the workflow hands the figure the sensitivity


def test_fig4_has_the_capacity_line_and_marks_warmup_and_adaptation_rounds():
    assert FIGURES["fig4_heterogeneity_allocation"].data_clients  # the mean capacity comes from the data stage
    traj = pd.DataFrame({"dataset": "d", "method": "hasfl", "seed": 1, "round": np.arange(1, 31),
                         "test_acc": 0.5, "test_loss": 1.0, "avg_p": 0.5, "mean_h_tilde": 1.0, "test_acc_pct": 50.0})
    fig = F4.figure(traj, {"d": 0.525}, ["d"], warmup=10, t_adapt=5, t_norm=20, n_seeds=1)
    texts = _legend_texts(fig)
    assert any(t.startswith("mean capacity pmax over all clients (0.525)") for t in texts)
    assert any(t.startswith("warm-up (rounds 1-10)") for t in texts)
    assert any("every 5 rounds" in t for t in texts) and any("every 20 rounds" in t for t in texts)
    top = fig.axes[0]
    # engine rounds t = 10, 15, 25 (update) and t = 20 (rescale) are rounds 11, 16, 26 and 21 of the record
    vlines = sorted(int(line.get_xdata()[0]) for line in top.get_lines() if len(set(line.get_xdata())) == 1
                    and line.get_xdata()[0] > 1)
    assert vlines == [11, 16, 21, 26]
    assert len(fig.axes) == 2  # two stacked panels, no twin y axis


# --- the report -------------------------------------------------------------------------------------------


def test_report_has_a_floor_section_and_captions_and_no_issue_numbers(runs, tmp_path):
    root, files, manifests = runs
    t = tmp_path / "tables"
    paths = {}
    for name in METHOD_TABLES:
        if name in ("table6_full_model",):
            MT.job(name, files, ["shakespeare"], list(CURVES), SEEDS, t / f"{name}.parquet",
                   t / f"{name}_seeds.parquet", t / f"{name}.md", manifests=manifests)
            paths[name] = t / f"{name}.parquet"
    comparison = pd.DataFrame(columns=["table", "dataset", "method", "metric", "status", "reason", "published_mean",
                                       "published_std", "ours_mean", "ours_std", "ours_n", "within", "criterion"])
    unit = {"unit": "shakespeare", "in_scope": False, "n": 3, "estimate": 5.0, "low": 4.0, "high": 6.0, "mde": 1.0,
            "verdict": "supported", "reason": "r"}
    f4 = {"id": "F4", "verdict": "inconclusive", "claim": "c", "source": "s", "scope": "image", "test": "t",
          "margin": 0.0, "margin_key": "f4_min_gap_pct", "n_units": 1, "units": [unit]}
    findings = {"findings": [f4], "thresholds": {"power": 0.8}, "alpha": 0.05, "verdicts": ["inconclusive"]}
    text = report.report_markdown(name="syn", config_summary={"preset": "syn", "datasets": ["shakespeare"],
                                                              "seeds": SEEDS},
                                  tables={**{k: pd.read_parquet(v) for k, v in paths.items()},
                                          "comparison": comparison},
                                  findings=findings, figures=list(FIGURES),
                                  figure_context={"warmup": 10, "t_adapt": 5, "t_norm": 20})
    floor = text.split("## Runs at the floor")[1].split("\n## ")[0]
    assert "| Shakespeare | SCAFFOLD | **3 of 3 seeds**" in floor and "| Shakespeare | HAS-FL | **3 of 3 seeds**" in floor
    assert "FedAvg" not in floor and "| Shakespeare | FedProx | 0 | 3 of 3 seeds" in floor
    assert text.index("## Runs at the floor") < text.index("## Findings")
    # the F4 unit compares FedAvg (above the floor) with HAS-FL (at the floor): the verdict row says so
    f4_row = next(line for line in text.splitlines() if line.startswith("| F4 | shakespeare"))
    assert "at floor: HAS-FL 3 of 3" in f4_row and "FedAvg" not in f4_row
    for slug, spec in FIGURES.items():
        assert f"*Figure {spec.paper_figure}.* " in text, slug
    assert not re.search(r"\bissues? ?#?\d", text, re.I)
    for md in t.glob("*.md"):
        assert not re.search(r"\bissues? ?#?\d", md.read_text(), re.I), md


def test_no_issue_numbers_in_user_facing_analysis_text():
    """report.md, the table .md files and the figures are built from these sources; rule docstrings
    are what `snakemake --list` and the HTML report show."""
    # every module of the analysis package: the tables, figures and findings modules included
    paths = [*sorted((REPO / "src/hasfl/analysis").rglob("*.py")), REPO / "workflow/rules/analysis.smk",
             *sorted((REPO / "workflow/report").glob("*.rst"))]
    for p in paths:
        hits = re.findall(r".{0,30}\bissues? ?#?\d+.{0,10}", p.read_text(), re.I)
        assert not hits, (p.name, hits)
    for spec in FIGURES.values():
        assert "issue" not in (spec.title + spec.caption).lower()


def test_table4b_summary_does_not_generalise_from_half_the_runs_and_names_floor_runs():
    row = {"dataset": "digits", "status": "completed", "capped_after_t0": True, "frac_stale": 0.5,
           "frozen_since_t0": True, "method": "hasfl_nocov", "frac_stale_trained_before_t0": 1.0}
    runs = [dict(row, seed=1, acc_full_pct=20.0, acc_reset_pct=70.0, acc_sub_pct=75.0, final_at_floor=False),
            dict(row, seed=2, acc_full_pct=55.0, acc_reset_pct=50.0, acc_sub_pct=60.0, final_at_floor=False),
            dict(row, seed=3, acc_full_pct=18.0, acc_reset_pct=18.0, acc_sub_pct=18.0, final_at_floor=True)]
    text = T4B.stale_summary(pd.DataFrame(runs))
    assert "only in 1 of 3 runs" in text and "is mixed" in text
    assert "frozen at their warm-up values." not in text  # no general conclusion from 1 of 3
    assert "1 of these runs ended at the majority-class floor (Digits / HAS-FL (no coverage) seed 3)" in text
    runs[1]["acc_reset_pct"] = 60.0  # now 2 of 3: the conclusion follows the majority of runs
    assert "it is caused by coordinates frozen at their warm-up values" in T4B.stale_summary(pd.DataFrame(runs))
