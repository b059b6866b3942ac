"""The width ladder (hasfl.analysis.ladder): the capacity-confound estimands of folders that differ only in the
model's base width, beside the paper's published values, rendered from fabricated per-width findings."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from hasfl.analysis import ladder  # noqa: E402
from hasfl.analysis.published import load_published  # noqa: E402

SEEDS = (42, 43, 44, 45, 46)
SETTING = {"dataset_params.train_per_class": 200, "dataset_params.subsample_seed": 0,
           "dataset_params.optim": {"lr": 0.01}, "federation": {"rounds": 100}, "capacity": {"p_min": 0.25}}
# per width: F1a, F1c, F6, F4 estimates (distinct from every published value, so a mix-up shows)
ESTIMATES = {8: (-0.17, -0.09, 0.05, 27.4), 16: (-0.33, -0.21, 0.12, 19.0), 32: (-0.52, -0.33, 0.2, 12.5)}


def _unit(finding: str, estimate: float, two_sided: bool = True) -> dict:
    u = {"unit": "fashion_mnist", "estimand": "claim", "estimate": estimate, "low": estimate - 0.1,
         "high": estimate + 0.1, "interval_level": 0.9, "n": 5, "verdict": f"{finding}-verdict"}
    if two_sided:
        u |= {"two_sided_low": estimate - 0.2, "two_sided_high": estimate + 0.2, "two_sided_level": 0.95}
    return u


def _findings(width: int, skip: tuple[str, ...] = ()) -> dict:
    ids = ("F1a", "F1c", "F6", "F4")
    return {"findings": [{"id": f, "units": [] if f in skip else [_unit(f, v, f != "F4")], "verdict": "inconclusive",
                          "claim": f"claim of {f}", "statistic": "r", "n_per_unit": {"fashion_mnist": 5},
                          "margin": 0.0, "mde": {"fashion_mnist": 0.3}, "reason": "fashion_mnist: inconclusive",
                          "n_units": 1, "files": []}
                         for f, v in zip(ids, ESTIMATES[width], strict=True)]}


def _rung(width: int, **kw) -> ladder.Rung:
    return ladder.Rung(kw.pop("folder", f"w{width}"), width, kw.pop("findings", _findings(width)),
                       kw.pop("setting", SETTING), kw.pop("seeds", SEEDS))


def test_the_width_table_has_every_width_and_keeps_the_published_values_apart():
    frame = ladder.ladder_frame([_rung(32), _rung(8), _rung(16)], "fashion_mnist", load_published())
    measured = frame[frame["source"] == "measured"]
    for e, i in zip(ladder.ESTIMANDS, range(4), strict=True):
        rows = measured[measured["finding"] == e.finding]
        assert rows["position"].tolist() == [8, 16, 32]  # every width, in order
        assert rows["estimate"].tolist() == [ESTIMATES[w][i] for w in (8, 16, 32)]  # each folder's own unit
    published = frame[frame["source"] == "published"]
    assert set(published["position"]) == {64} and not set(published["folder"]) - {""}
    pub = load_published()
    r_pmax = pub[(pub["table"] == 5) & (pub["metric"] == "r_h_pmax")]
    got = published[published["finding"] == "F1a"].set_index("dataset")["estimate"]
    assert got.to_dict() == pytest.approx(r_pmax.set_index("dataset")["mean"].to_dict())
    gap = published[published["finding"] == "F4"].set_index("dataset")["estimate"]
    assert gap["cifar10"] == pytest.approx(88.2 - 74.5) and gap["emnist"] == pytest.approx(85.5 - 77.7)
    assert published[published["finding"] == "F6"]["note"].tolist() == ["not published by the paper"]
    # a published value is in no measured row, a measured one in no published row
    assert not set(measured["estimate"].round(6)) & set(published["estimate"].dropna().round(6))
    lines = ladder.table_lines(frame)
    f1a = [ln for ln in lines if ln.startswith("| F1a |")]
    assert [ln.split(" | ")[2] for ln in f1a] == ["8", "16", "32", "64", "64"]
    assert all("**published**" in ln for ln in f1a[3:]) and not any("published" in ln for ln in f1a[:3])
    assert "| -0.17 | [-0.37, 0.03] (95%) | 5 | F1a-verdict |" in f1a[0]
    assert all(ln.count(" | ") == 7 for ln in lines if ln.startswith("| F1c |"))  # the statistic's bar is escaped
    f4 = [ln for ln in lines if ln.startswith("| F4 |")]
    assert "[27.3, 27.5] (90%)" in f4[0]  # a unit without a two-sided interval shows its own, level given
    assert "no sd" in f4[-1]


def test_a_finding_a_width_did_not_run_is_a_row_that_says_so_not_a_missing_row():
    frame = ladder.ladder_frame([_rung(8), _rung(16, findings=_findings(16, skip=("F6",))), _rung(32)],
                                "fashion_mnist", load_published())
    f6 = frame[(frame["finding"] == "F6") & (frame["source"] == "measured")]
    assert f6["position"].tolist() == [8, 16, 32] and f6["verdict"].tolist()[1] == "not run"
    assert math.isnan(f6["estimate"].tolist()[1])
    assert any(ln.startswith("| F6 |") and "| 16 |" in ln and "| not run |" in ln for ln in ladder.table_lines(frame))


@pytest.mark.parametrize(("rungs", "message"), [
    ([_rung(8)], "a ladder over base width needs folders at two or more"),
    ([_rung(8), _rung(8, folder="again")], "two folders at base width 8"),
    ([_rung(8), _rung(16, setting={**SETTING, "dataset_params.train_per_class": 500})],
     "setting {'dataset_params.train_per_class': 500}"),
    ([_rung(8), _rung(16, seeds=(42, 43, 44))], "with seeds (42, 43, 44)"),
])
def test_folders_that_are_not_one_ladder_are_refused_naming_them(rungs, message):
    with pytest.raises(ladder.LadderError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ladder.ladder_frame(rungs, "fashion_mnist", load_published())


def test_the_reading_states_distances_from_the_numbers():
    frame = ladder.ladder_frame([_rung(8), _rung(16), _rung(32)], "fashion_mnist", load_published())
    text = "\n".join(ladder.reading_lines(frame))
    f1a = next(ln for ln in ladder.reading_lines(frame) if ln.startswith("- **F1a**"))
    # published F1a mean over CIFAR-10 and EMNIST: -0.76; distances 0.59, 0.43, 0.24 shrink
    assert "-0.17 at base width 8, -0.33 at base width 16, -0.52 at base width 32" in f1a
    assert "0.59, 0.43, 0.24 at base width 8, 16, 32, shrinks at every step up in base width" in f1a
    assert "publishes no value" in next(ln for ln in ladder.reading_lines(frame) if ln.startswith("- **F6**"))
    for word in ("supported", "contradicted", "replicat"):
        assert word not in text
    flat = pd.concat([frame[frame["finding"] != "F1a"], frame[frame["finding"] == "F1a"].assign(
        estimate=lambda d: d["estimate"].where(d["source"] == "published", [-0.3, -0.2, -0.4, math.nan, math.nan]
                                               [:len(d)]))])
    f1a = next(ln for ln in ladder.reading_lines(flat) if ln.startswith("- **F1a**"))
    assert "does not change in one direction" in f1a


def test_folder_rungs_read_each_runs_width_and_setting():
    def cfg(width, per_class=200):
        return {"dataset_params": {"model": {"channels": [width, width, 2 * width]}, "train_per_class": per_class,
                                   "subsample_seed": 0, "optim": {"lr": 0.01}},
                "federation": {"rounds": 100}, "capacity": {"p_min": 0.25}}

    runs = {f"runs/fashion_mnist/{m}/seed{s}": None for m in ("hasfl", "fedavg") for s in (42, 43)}
    lstm = {"runs/shakespeare/hasfl/seed42": {"dataset_params": {"model": {"arch": "lstm"}}}}
    folders = {"w8": (runs | dict.fromkeys(lstm), {}, {r: cfg(8) for r in runs} | lstm),
               "w16": (runs, {}, {r: cfg(16) for r in runs})}
    rungs = ladder.folder_rungs(folders)
    assert list(rungs) == ["fashion_mnist"]  # no width on the LSTM's dataset
    assert [(r.folder, r.width, r.seeds) for r in rungs["fashion_mnist"]] == [("w8", 8, (42, 43)),
                                                                              ("w16", 16, (42, 43))]
    mixed = {r: cfg(8 if "hasfl" in r else 16) for r in runs}
    with pytest.raises(ladder.LadderError, match="folder 'w8' runs fashion_mnist at base widths \\[8, 16\\]"):
        ladder.folder_rungs({"w8": (runs, {}, mixed)})


def test_the_figure_marks_the_published_values_as_published():
    frame = ladder.ladder_frame([_rung(8), _rung(16), _rung(32)], "fashion_mnist", load_published())
    fig = ladder.figure(frame)
    try:
        assert len(fig.axes) == len(ladder.ESTIMANDS)
        labels = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
        assert "published, cifar10 (paper)" in labels and "measured (interval)" in labels
        f6 = fig.axes[2].get_legend()
        assert [t.get_text() for t in f6.get_texts()] == ["measured (interval)"]  # nothing published for F6
    finally:
        plt.close(fig)


def _folder(root, name, files, findings):
    """A finished results folder of the presets ``files``: hasfl and fedavg runs whose manifests record the config
    slice the presets give (what the page reads each run's width from), findings.json and its analysis manifest."""
    import json

    from hasfl.analysis.manifest import write_analysis_manifest
    from hasfl.analysis.provenance import REPO, merged_config
    from hasfl.config import run_config
    from hasfl.integrity import write_run_manifest

    config = merged_config([REPO / f for f in files])
    folder = root / name
    (folder / "figures").mkdir(parents=True)
    (folder / "findings.json").write_text(json.dumps({"alpha": 0.05, "thresholds": {"ci_level": 0.95}, **findings}))
    verified = {}
    for method in config["methods"]:
        for seed in config["seeds"]:
            run = folder / "runs" / "fashion_mnist" / method / f"seed{seed}"
            run.mkdir(parents=True)
            (run / "run.json").write_text("{}")
            (run / "timings.json").write_text(json.dumps({"device": "cpu", "isa_env": {}, "total_s": 60.0}))
            write_run_manifest(run, ["run.json"], {"digest": f"{name}-{method}-{seed}",
                                                    "config": run_config(config, "fashion_mnist", method, seed)})
            verified[str(run)] = f"{name}-{method}-{seed}"
    listing = root / f"verified-{name}.json"
    listing.write_text(json.dumps(verified))
    write_analysis_manifest(folder, [str(folder / "findings.json")], listing, identity={"digest": f"{name}-id"})
    return folder


def test_the_headline_page_shows_the_ladder_of_its_width_overlays(hasfl_cli, tmp_path):
    """``hasfl results-page results/medium-headline ... --overlay results/medium-headline-w8
    results/medium-headline-w16``: a width-ladder section (its table, its figure beside the page, its reading) from
    the three folders' findings and each run's recorded width; an overlay at the page's own width adds no ladder."""
    base = ("presets/medium.yaml", "presets/medium-headline.yaml")
    root = tmp_path / "results"
    page_folder = _folder(root, "medium-headline", base, _findings(32))
    overlays = [_folder(root, f"medium-headline-w{w}", (*base, f"presets/medium-headline-w{w}.yaml"), _findings(w))
                for w in (8, 16)]
    out = tmp_path / "docs" / "medium-headline.md"
    res = hasfl_cli("results-page", page_folder, out, "--overlay", *overlays, "--configfile", *base)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    section = page.split("## Width ladder (fashion_mnist)", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| F1a |")]
    assert [ln.split(" | ")[2] for ln in rows] == ["8", "16", "32", "64", "64"]
    assert "measured (`medium-headline-w8`)" in rows[0] and "measured (`medium-headline`)" in rows[2]
    assert "![base width ladder](medium-headline/width_ladder_fashion_mnist.png)" in section
    assert (out.parent / "medium-headline" / "width_ladder_fashion_mnist.png").stat().st_size > 5000
    assert "- **F1a** (r(H~, pmax), hasfl): -0.17 at base width 8" in section
    # the protocol against the paper's, from the runs' config slices and config.yaml: 200 images a class over 20
    # clients at batch 64 is 2 local steps a round; the paper's CIFAR-10 clients take 40 a local epoch, 5 epochs
    assert "| base width | 8, 16, 32 | 64 | 64 |" in section
    assert "| train images per client | 100 | 2500 |" in section and "| local steps per round | 2 | 200 |" in section
    assert "| rounds | 100 | 200 | 200 |" in section
    # without the width overlays: no ladder
    res = hasfl_cli("results-page", page_folder, out, "--configfile", *base)
    assert res.returncode == 0, res.stderr
    assert "Width ladder" not in out.read_text()
    assert not (out.parent / "medium-headline" / "width_ladder_fashion_mnist.png").exists()


def _steps_rung(per_class: int, width: int = 32, folder: str | None = None) -> ladder.Rung:
    cfg = {"dataset_params": {"model": {"channels": [width]}, "train_per_class": per_class,
                              "optim": {"batch_size": 64, "local_epochs": 1}},
           "federation": {"clients": 20, "clients_per_round": 10, "rounds": 100}}
    setting = {**SETTING, "dataset_params.train_per_class": per_class}
    return ladder.Rung(folder or f"c{per_class}", width, _findings(8 if per_class == 200 else 32), setting, SEEDS, cfg)


def test_the_local_steps_axis_sets_one_width_at_two_image_counts_beside_the_papers_own_steps():
    """200 and 500 train images a class over 20 clients at batch 64: 2 and 4 local steps a round; the paper's runs at
    their own (config.yaml: CIFAR-10's 2,500 images a client over 5 epochs, 200; EMNIST's, 546)."""
    from hasfl.analysis.provenance import REPO
    from hasfl.config import load_config, run_config

    paper_cfg = load_config([REPO / "config.yaml"])
    paper = {d: run_config(paper_cfg, d, "hasfl", 42) for d in ladder.PAPER_DATASETS}
    at = ladder.paper_positions(paper, ladder.STEPS)
    assert at == {"cifar10": 200, "emnist": 546}
    frame = ladder.ladder_frame([_steps_rung(500), _steps_rung(200)], "fashion_mnist", load_published(),
                                axis=ladder.STEPS, paper_at=at)
    f1a = frame[frame["finding"] == "F1a"]
    assert f1a[f1a["source"] == "measured"]["position"].tolist() == [2, 4]
    assert dict(zip(f1a[f1a["source"] == "published"]["dataset"], f1a[f1a["source"] == "published"]["position"],
                    strict=True)) == at
    assert ladder.table_lines(frame)[0].startswith("| Finding | Statistic | Local steps per round |")
    reading = "\n".join(ladder.reading_lines(frame))
    assert "-0.17 at local steps per round 2, -0.52 at local steps per round 4" in reading
    assert "cifar10 at local steps per round 200" in reading
    # another width is not a step along this axis
    with pytest.raises(ladder.LadderError, match="base width"):
        ladder.ladder_frame([_steps_rung(200), _steps_rung(500, width=16)], "fashion_mnist", load_published(),
                            axis=ladder.STEPS)


def test_the_headline_page_shows_the_local_steps_ladder_of_its_image_overlay(hasfl_cli, tmp_path):
    """``--overlay results/medium-headline-data500``: the same width at 500 images a class, a local-steps section
    (2 and 4 steps a round) and no width ladder."""
    base = ("presets/medium.yaml", "presets/medium-headline.yaml")
    root = tmp_path / "results"
    page_folder = _folder(root, "medium-headline", base, _findings(8))
    overlay = _folder(root, "medium-headline-data500", (*base, "presets/medium-headline-data500.yaml"),
                      _findings(32))
    out = tmp_path / "docs" / "medium-headline.md"
    res = hasfl_cli("results-page", page_folder, out, "--overlay", overlay, "--configfile", *base)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "Width ladder" not in page
    section = page.split("## Local-steps ladder at base width 32 (fashion_mnist)", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| F1a |")]
    assert [ln.split(" | ")[2] for ln in rows] == ["2", "4", "200", "546"]
    assert "| local steps per round | 2, 4 | 200 | 546 |" in section
    assert (out.parent / "medium-headline" / "steps_ladder_fashion_mnist.png").stat().st_size > 5000
