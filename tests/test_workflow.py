"""The workflow: one thin script per rule (workflow/scripts), and the DAG run for real by Snakemake
on the quick preset (issue 2 section 6, issue 3)."""

from __future__ import annotations

import ast
import inspect
import json
import re

import pandas as pd
import pytest
import yaml

from hasfl.io import sha256_file
from hasfl.registry import resolve


def _overlay(tmp_path, **extra) -> str:
    cfg = {"results_dir": str(tmp_path / "results"), "data_dir": str(tmp_path / "data"), **extra}
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def _worker_call(script) -> tuple[str, list[str]]:
    """(target, keyword names) of the script's one ``call("module:function", {...}, log)``."""
    calls = [n for n in ast.walk(ast.parse(script.read_text())) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "call"]
    assert len(calls) == 1, f"{script.name}: expected one hasfl.dag.worker.call, found {len(calls)}"
    target, kwargs = calls[0].args[:2]
    assert isinstance(target, ast.Constant) and isinstance(kwargs, ast.Dict), script.name
    return target.value, [k.value for k in kwargs.keys]


def test_one_script_per_rule_each_calling_its_job_through_the_worker(repo) -> None:
    """Every rule with a script has its own; each script hands one job function, importable, exactly
    the keyword arguments it takes (every required one) through hasfl.dag.worker.call."""
    rules = "\n".join(p.read_text() for p in sorted((repo / "workflow" / "rules").glob("*.smk")))
    used = re.findall(r'script:\s*\n\s*"\.\./scripts/(\w+\.py)"', rules)
    assert len(used) == len(set(used)) == rules.count("script:"), used
    scripts = sorted(p.name for p in (repo / "workflow" / "scripts").glob("*.py"))
    assert sorted(used) == scripts
    for name in scripts:
        script = repo / "workflow" / "scripts" / name
        assert "from hasfl.dag.worker import call" in script.read_text(), name
        target, keys = _worker_call(script)
        fn = resolve(target)
        params = inspect.signature(fn).parameters
        assert set(keys) <= set(params), (name, target, set(keys) - set(params))
        required = {p for p, v in params.items() if v.default is inspect.Parameter.empty
                    and v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)}
        assert required <= set(keys), (name, target, required - set(keys))
    # the train rule's random-budget input is the run its registry entry names (budget_of)
    assert '"budget_run"' in (repo / "workflow" / "rules" / "train.smk").read_text()
    assert 'sm.input.get("budget_run")' in (repo / "workflow" / "scripts" / "train.py").read_text()


@pytest.mark.dag
def test_quick_data_stage_end_to_end(snakemake, plan, repo, tmp_path):
    overlay = _overlay(tmp_path)
    res = snakemake.dag(overlay, workdir=tmp_path, target="data", timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    root = tmp_path / "results" / "quick" / "data"
    for ds in ("digits", "shakespeare"):
        for seed in (42, 43, 44):
            d = root / ds / f"seed{seed}"
            manifest = json.loads((d / "manifest.json").read_text())
            for name in ("partition.parquet", "clients.parquet"):
                assert manifest["files"][name]["sha256"] == sha256_file(d / name)
            clients = pd.read_parquet(d / "clients.parquet")
            partition = pd.read_parquet(d / "partition.parquet")
            assert len(clients) == 20
            assert clients["n_train"].sum() == (partition["split"] == "train").sum()
            assert sorted(clients["pmax"]) == sorted([0.25] * 5 + [0.5] * 10 + [0.75] * 3 + [1.0] * 2)
            assert clients["tv"].between(0, 1).all()
            assert manifest["summary"]["clients"] == 20
        if ds == "shakespeare":
            assert clients.loc[0, "play"] == "hamlet" and clients.loc[0, "role"] == "HAM"
    digits = [pd.read_parquet(root / "digits" / f"seed{s}" / "partition.parquet") for s in (42, 43)]
    assert not digits[0].equals(digits[1])  # seeds redraw the partition
    # a second run has nothing to do (the session's walk, in process; Snakemake's own "Nothing to be done" after a
    # finished build: tests/test_store.py, tests/test_reruns.py)
    again = plan(tmp_path, repo / "presets/quick.yaml", overlay, argv=("-n", "data"))
    assert again.plans_nothing("data") and len(again.session.status.current) == 6, again.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.dag
def test_quick_preset_all(snakemake, tmp_path):
    """The whole quick preset through Snakemake (minutes)."""
    overlay = _overlay(tmp_path)
    res = snakemake.dag(overlay, workdir=tmp_path, timeout=3600)
    assert res.returncode == 0, res.stderr[-4000:]
    runs = tmp_path / "results" / "quick" / "runs"
    assert len(list(runs.glob("*/*/seed*/run.json"))) == 54
