"""Section 4.7 ("Who Inherits the Confound?"): Table 10 from fabricated data-stage and run clients tables in the
exact format the DAG writes, and F10a / F10b on it. A sub-model method whose E0 tracks capacity is supported, one
whose E0 tracks TV and not capacity is contradicted; an equal-width method uncoupled from capacity is F10b's
support, one coupled to it its contradiction."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from hasfl.analysis.findings import evaluate_findings
from hasfl.analysis.findings.f10_inheritance import F10A, F10B, T10
from hasfl.analysis.specs import resolve_thresholds
from hasfl.analysis.tables import table10_inheritance as T

SEEDS = (42, 43, 44, 45, 46)
PMAX = np.repeat([0.25, 0.5, 0.75, 1.0], [5, 10, 3, 2])  # the paper's tiers and counts, 20 clients


def _world(tmp_path, estimates):
    """Data stages and runs of the methods in ``estimates`` (method -> E0 from (pmax, tv, rng)); returns the
    table job's inputs."""
    root = tmp_path / "results" / "fab"
    data_files, run_files = [], []
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        tv = rng.uniform(0.2, 0.8, len(PMAX))
        # the data uncorrelated with capacity in every seed (as a design, not by chance): TV orthogonal to pmax
        centred = PMAX - PMAX.mean()
        tv = tv - centred * (tv @ centred) / (centred @ centred)
        stage = root / "data" / "fashion_mnist" / f"seed{seed}"
        stage.mkdir(parents=True)
        pd.DataFrame({"client_id": np.arange(len(PMAX)), "pmax": PMAX, "n_train": 100, "n_test": 0,
                      "tv": tv}).to_parquet(stage / "clients.parquet")
        data_files.append(str(stage / "clients.parquet"))
        for method, e0 in estimates.items():
            run = root / "runs" / "fashion_mnist" / method / f"seed{seed}"
            run.mkdir(parents=True)
            full = method in ("fedavg", "scaffold", "fedprox")
            pd.DataFrame({"client_id": np.arange(len(PMAX)), "pmax": PMAX,
                          "p_final": 1.0 if full else PMAX, "h_tilde_final": e0(PMAX, tv, rng)}
                         ).to_parquet(run / "clients.parquet")
            (run / "run.json").write_text(json.dumps({"status": "completed"}))
            run_files += [str(run / "clients.parquet"), str(run / "run.json")]
    return root, data_files, run_files


def _findings(tmp_path, estimates):
    root, data_files, run_files = _world(tmp_path, estimates)
    df = T.job(data_files, run_files, ["fashion_mnist"], list(estimates), SEEDS, root / "tables" / f"{T10}.parquet",
               root / "tables" / f"{T10}.md")
    empty = {}  # the other tables: no runs of their methods (their findings are not run)
    from hasfl.analysis.findings import REQUIRED_TABLES

    for name in REQUIRED_TABLES:
        empty[name] = pd.DataFrame(columns=["dataset", "method", "seed", "status"])
    found = evaluate_findings({**empty, T10: df}, datasets=["fashion_mnist"], thresholds=resolve_thresholds({}))
    return df, {f["id"]: f for f in found}


def capacity(pmax, tv, rng):
    return 2.0 - 1.5 * pmax + rng.normal(0, 0.1, len(pmax))  # smaller clients, larger divergence


def data_only(pmax, tv, rng):
    return 0.5 + 1.0 * tv + rng.normal(0, 0.01, len(pmax))  # tracks TV, blind to capacity


def test_a_sub_model_method_whose_estimate_tracks_capacity_inherits_and_one_tracking_only_the_data_does_not(tmp_path):
    df, found = _findings(tmp_path, {"fedrolex": capacity, "heterofl": data_only, "fedavg": data_only})
    assert set(df["population"]) == {T.SUB_MODEL, T.EQUAL_WIDTHS}
    assert df.groupby("method").size().to_dict() == {"fedavg": 5, "fedrolex": 5, "heterofl": 5}
    units = {u["unit"]: u for u in found[F10A]["units"]}
    assert sorted(units) == ["fashion_mnist/fedrolex", "fashion_mnist/heterofl"]
    assert units["fashion_mnist/fedrolex"]["verdict"] == "supported"
    assert units["fashion_mnist/fedrolex"]["estimate"] < -0.8
    assert units["fashion_mnist/heterofl"]["verdict"] == "contradicted", units["fashion_mnist/heterofl"]["reason"]
    assert "shown uncoupled" in units["fashion_mnist/heterofl"]["reason"]
    # the data signal once capacity is held fixed, reported beside (it decides nothing)
    assert units["fashion_mnist/heterofl"]["data_signal"]["estimate"] > 0.9
    assert found[F10A]["verdict"] == "mixed"  # one method inherits, one does not
    # the equal-width method blind to capacity: F10b supported
    (fedavg,) = found[F10B]["units"]
    assert fedavg["unit"] == "fashion_mnist/fedavg" and fedavg["verdict"] == "supported"


def test_an_equal_width_estimate_coupled_to_capacity_contradicts_f10b(tmp_path):
    _, found = _findings(tmp_path, {"fedavg": capacity, "uniform": capacity})
    assert found[F10B]["verdict"] == "contradicted" and found[F10A]["verdict"] == "supported"


def test_without_the_table_both_findings_are_not_run(tmp_path):
    from hasfl.analysis.findings import REQUIRED_TABLES

    tables = {n: pd.DataFrame(columns=["dataset", "method", "seed", "status"]) for n in REQUIRED_TABLES}
    found = {f["id"]: f for f in evaluate_findings(tables, datasets=["fashion_mnist"],
                                                   thresholds=resolve_thresholds({}))}
    assert found[F10A]["verdict"] == found[F10B]["verdict"] == "not run"


def test_the_population_is_read_from_the_runs_widths():
    """Equal widths: every client's final width 1 (FedAvg); FIARSE's masks of the allocated share are sub-models
    although it trains the whole model (its registry cost rule is the full model's)."""
    assert T.population(pd.DataFrame({"p_final": [1.0, 1.0]})) == T.EQUAL_WIDTHS
    assert T.population(pd.DataFrame({"p_final": [1.0, 0.5]})) == T.SUB_MODEL


def test_figure_10_draws_one_row_per_method_coloured_by_population(tmp_path):
    from hasfl.analysis.figures import fig10_inheritance as F10

    root, data_files, run_files = _world(tmp_path, {"fedrolex": capacity, "heterofl": data_only, "fedavg": data_only})
    t = root / "tables" / f"{T10}.parquet"
    T.job(data_files, run_files, ["fashion_mnist"], ["fedrolex", "heterofl", "fedavg"], SEEDS, t, t.with_suffix(".md"))
    png, pdf = tmp_path / "f.png", tmp_path / "f.pdf"
    F10.compute({T10: [str(t)]}, {"png": str(png), "pdf": str(pdf)},
                {"datasets": ["fashion_mnist"], "thresholds": {"f10_equiv_r_e_pmax": 0.36}})
    assert png.stat().st_size > 5000 and pdf.read_bytes()[:5] == b"%PDF-"
    fig = F10.figure(pd.read_parquet(t), ["fashion_mnist"], 0.36)
    left = fig.axes[0]
    assert [x.get_text() for x in left.get_yticklabels()] == ["FedAvg", "FedRolex", "HeteroFL"]  # by population
    means = {round(float(ln.get_ydata()[0])): float(ln.get_xdata()[0]) for ln in left.get_lines()
             if ln.get_marker() == "D"}
    assert means[1] < -0.8 and abs(means[2]) < 0.2  # FedRolex coupled, HeteroFL not
    labels = [x.get_text() for x in fig.legends[0].get_texts()]
    assert "sub-model" in labels and "equal widths" in labels and "+-0.36: uncoupled (F10a / F10b)" in labels
