"""The Flower comparison's report and its section of the performance page (hasfl.bench.flower, rendered by
hasfl.bench.report); the simulation itself needs Flower, which is never a dependency of the pipeline: its run is
marked slow and skipped where ``flwr`` is not installed."""

from __future__ import annotations

import json

import pytest

from pathlib import Path

from hasfl.bench.flower import KIND, section
from hasfl.bench.report import render_markdown

REPO = Path(__file__).resolve().parents[1]


def _report(ours_s=(40.0, 25.0), flower_s=(50.0, 30.0)) -> dict:
    curve = {"rounds": [1, 2, 3], "test_acc": [0.2, 0.6, 0.55]}
    return {"kind": KIND, "date": "2026-12-07", "figure": "docs/bench/flower.png", "machine": "a CPU", "cores": 2, "load": 0.1, "flwr": "1.42.0", "ray": "2.55.1",
            "clients": 20, "per_round": 10, "rounds": 3,
            "ours": [{"threads": n, "wall_s": s, **curve} for n, s in zip((1, 2), ours_s)],
            "flower": [{"cores": n, "wall_s": s, **curve} for n, s in zip((1, 2), flower_s)],
            "ratio": flower_s[-1] / ours_s[-1]}


def test_the_section_states_each_wall_and_the_ratio_on_as_many_cores():
    text = "\n".join(section(_report(), "docs/bench/flower.json"))
    rows = [line for line in text.splitlines() if line.startswith("| Flower")]
    assert [r.split(" | ")[3] for r in rows] == ["1.25", "1.20"]  # 50/40 and 30/25, each against ours on its cores
    assert "| 0.550 | 0.600 |" in text  # final and best accuracy, read from the curve
    assert "![Test accuracy per round, both engines](bench/flower.png)" in text  # relative to docs/
    assert text.startswith("## Against Flower's simulation") and "`docs/bench/flower.json`: measured" in text


def test_the_performance_page_renders_it_after_the_machines_reports():
    """The page's renderer takes a Flower report beside ``hasfl bench`` ones: their part unchanged, its section
    last."""
    cpu = json.loads((REPO / "docs/bench/cpu.json").read_text())
    alone = render_markdown([cpu], ["docs/bench/cpu.json"])
    both = render_markdown([cpu, _report()], ["docs/bench/cpu.json", "docs/bench/flower.json"])
    assert both.startswith(alone.rstrip("\n")) and both.rstrip("\n").endswith("both engines](bench/flower.png)")


@pytest.mark.slow
def test_the_same_federation_runs_in_flower(tmp_path):
    """Flower's side on the quick preset's data stage: it trains and learns (accuracy above chance)."""
    pytest.importorskip("flwr")
    from hasfl.bench import flower

    flower.make_data(tmp_path)
    out = flower.run_flower(tmp_path, cores=1)
    assert len(out["test_acc"]) == 30 and max(out["test_acc"]) > 0.5, json.dumps(out)[:500]
