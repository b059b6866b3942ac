"""``hasfl compare A B C --metric final_acc_pct``: N results folders as the points of a sweep (hasfl.analysis.sweep),
from fabricated folders in the DAG's layout: the swept key read from the runs' recorded config slices, the metric per
point as mean +- sd over seeds, the verdicts that moved, and the plot of the metric against the swept value."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from hasfl.analysis import sweep

SEEDS = (42, 43, 44)


def _folder(root, name, mu, accs, verdict):
    folder = root / name
    for method in ("fedprox", "fedavg"):
        for seed in SEEDS:
            run = folder / "runs" / "digits" / method / f"seed{seed}"
            run.mkdir(parents=True)
            cfg = {"dataset": "digits", "method": method, "seed": seed, "federation": {"rounds": 6},
                   "method_params": {"mu": mu} if method == "fedprox" else {}}
            (run / "manifest.json").write_text(json.dumps({"identity": {"config": cfg}, "files": {}}))
    rows = [{"dataset": "digits", "method": m, "seed": s, "status": "completed",
             "final_acc_pct": (acc if m == "fedprox" else 80.0) + i}
            for m in ("fedprox", "fedavg") for i, s in enumerate(SEEDS) for acc in [accs]]
    (folder / "tables").mkdir()
    pd.DataFrame(rows).to_parquet(folder / "tables" / "table6_full_model_seeds.parquet")
    (folder / "findings.json").write_text(json.dumps({"findings": [{"id": "F4", "verdict": verdict},
                                                                   {"id": "F6", "verdict": "supported"}]}))
    return folder


def test_three_folders_are_a_sweep_over_the_key_their_runs_differ_in(tmp_path, hasfl_cli):
    folders = [_folder(tmp_path, f"quick-mu{mu}", mu, acc, v)
               for mu, acc, v in ((0.01, 70.0, "supported"), (0.1, 72.0, "supported"), (1.0, 60.0, "inconclusive"))]
    result = sweep.sweep(folders, "final_acc_pct")
    assert result["keys"] == ["method_params.mu"]  # from the runs' config slices, not the folder names
    assert [p["method_params.mu"] for p in result["points"]] == [0.01, 0.1, 1.0]
    fedprox = [next(r for r in result["rows"][str(f)] if r["method"] == "fedprox") for f in folders]
    assert [r["mean"] for r in fedprox] == [71.0, 73.0, 61.0] and [r["n"] for r in fedprox] == [3, 3, 3]
    assert fedprox[0]["sd"] == pytest.approx(1.0)
    assert result["verdicts"] == {"F4": ["supported", "supported", "inconclusive"]}  # F6 did not move
    text = sweep.render(result)
    assert "| `" + str(folders[2]) + "` | 1.0 | 81 +- 1 (3) | 61 +- 1 (3) |" in text
    assert "- F4: supported -> supported -> inconclusive" in text and "F6" not in text
    png = tmp_path / "sweep.png"
    assert sweep.plot(result, png) == ["digits / fedavg", "digits / fedprox"] and png.stat().st_size > 5000
    res = hasfl_cli("compare", *folders, "--plot", tmp_path / "cli.png")
    assert res.returncode == 0, res.stderr
    assert "# Sweep over `method_params.mu`" in res.stdout and (tmp_path / "cli.png").is_file()


def test_a_sweep_metric_no_table_has_is_named(tmp_path):
    folders = [_folder(tmp_path, f"p{i}", mu, 70.0, "supported") for i, mu in enumerate((0.1, 1.0))]
    with pytest.raises(sweep.CompareError, match="has the column 'no_such_metric'"):
        sweep.sweep(folders, "no_such_metric")
