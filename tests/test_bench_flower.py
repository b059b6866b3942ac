"""The Flower comparison's report and its docs section (hasfl.bench.flower); the simulation itself needs Flower, which
is never a dependency of the pipeline: its run is marked slow and skipped where ``flwr`` is not installed."""

from __future__ import annotations

import json

import pytest

from hasfl.bench.flower import DOC_END, DOC_START, render_markdown, write_doc


def _report(ours_s=(40.0, 25.0), flower_s=(50.0, 30.0)) -> dict:
    curve = {"rounds": [1, 2, 3], "test_acc": [0.2, 0.6, 0.55]}
    return {"date": "2026-12-07", "machine": "a CPU", "cores": 2, "load": 0.1, "flwr": "1.42.0", "ray": "2.55.1",
            "clients": 20, "per_round": 10, "rounds": 3,
            "ours": [{"threads": n, "wall_s": s, **curve} for n, s in zip((1, 2), ours_s)],
            "flower": [{"cores": n, "wall_s": s, **curve} for n, s in zip((1, 2), flower_s)],
            "ratio": flower_s[-1] / ours_s[-1]}


def test_the_section_states_each_wall_and_the_ratio_on_as_many_cores():
    text = render_markdown(_report(), "figures/flower.png")
    assert text.startswith(DOC_START) and text.endswith(DOC_END)
    rows = [line for line in text.splitlines() if line.startswith("| Flower")]
    assert [r.split(" | ")[3] for r in rows] == ["1.25", "1.20"]  # 50/40 and 30/25, each against ours on its cores
    assert "| 0.550 | 0.600 |" in text  # final and best accuracy, read from the curve
    assert "![Test accuracy per round, both engines](figures/flower.png)" in text


def test_the_section_replaces_its_own_and_nothing_else(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\nbefore\n")
    write_doc(doc, render_markdown(_report()))
    write_doc(doc, render_markdown(_report(flower_s=(80.0, 50.0))))
    text = doc.read_text()
    assert text.count(DOC_START) == 1 and text.startswith("# Performance\n\nbefore\n")
    assert "| 2.00 |" in text and "| 1.20 |" not in text


@pytest.mark.slow
def test_the_same_federation_runs_in_flower(tmp_path):
    """Flower's side on the quick preset's data stage: it trains and learns (accuracy above chance)."""
    pytest.importorskip("flwr")
    from hasfl.bench import flower

    flower._hasfl("data", "--config", str(flower.PRESET), "--dataset", "digits", "--seed", "42", "--out",
                  str(tmp_path / "data"), threads=1)
    out = flower.run_flower(tmp_path, cores=1)
    assert len(out["test_acc"]) == 30 and max(out["test_acc"]) > 0.5, json.dumps(out)[:500]
