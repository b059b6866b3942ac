"""scripts/experiments/analysis_cost.py (issue 47, point 4) at a tiny size: it measures, writes its JSON and
renders the page from that JSON (the JSON's numbers are on the page; a saved JSON renders the same page)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys


def _script(repo):
    spec = importlib.util.spec_from_file_location("analysis_cost", repo / "scripts/experiments/analysis_cost.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_page_is_rendered_from_the_json(repo, tmp_path):
    out, page = tmp_path / "cost.json", tmp_path / "cost.md"
    cmd = [sys.executable, str(repo / "scripts/experiments/analysis_cost.py"), "--datasets", "cifar10",
           "--test-samples", "16", "--repeats", "1", "--rounds", "12", "--json", str(out), "--doc", str(page)]
    res = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    data, text = json.loads(out.read_text()), page.read_text()
    mod = _script(repo)
    cifar = data["datasets"]["cifar10"]
    # every kind of per-run cost is measured and scaled up from the fraction
    assert 0 < cifar["f"] < 0.01 and cifar["test_measured"] == 16
    for mode, t in cifar["bn_sensitivity"]["modes"].items():
        assert t["full_s"] > t["measured_s"] > 0, mode
        assert mod._s(t["full_s"]) in text
    assert mod._s(cifar["bn_sensitivity"]["per_run_s"]) in text
    assert set(cifar["submodel_accuracy"]) == {"hasfl", "hasfl_nocov", "heterofl", "uniform"}
    for m, t in cifar["submodel_accuracy"].items():
        assert mod._s(t["per_run_s"]) in text, m
    assert set(cifar["table4b_stale_coordinates"]["capped"]) == {"hasfl_nocov", "uniform"}
    assert cifar["table4c_coverage_over_time"]["sub-width"]["full_s"] > 0
    # the extrapolation and the training estimate on the page are the JSON's
    ex, tr = data["extrapolation"], data["training"]
    assert ex["tables"]["bn_sensitivity"]["datasets"]["cifar10"]["runs"] == 39
    assert not ex["complete"]  # emnist and shakespeare were not measured
    assert f"{mod._h(ex['seconds'])} CPU hours" in text
    assert f"{tr['train_job_hours']:,.0f} job-hours" in text
    assert data["machine"]["aten_cpu_capability"] in text and data["machine"]["torch"] in text
    # a saved JSON renders the same page without measuring
    again = tmp_path / "again.md"
    res = subprocess.run([sys.executable, str(repo / "scripts/experiments/analysis_cost.py"), "--from-json", str(out),
                          "--doc", str(again)], cwd=repo, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert again.read_text() == text
