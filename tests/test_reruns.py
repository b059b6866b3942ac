"""After a complete run, only what a change invalidates reruns (issue 5, section 2).

A tiny preset is run for real in a copy of the workflow (the shared world, conftest ``tiny_world``); then sources
and config in the copy are changed and the session's status walk says, in process, what a build would rerun and
make (conftest ``walk``); a dry run checks end to end that Snakemake plans the same for a code edit's reruns
(tests/test_identity.py's checks that a touch of every source and result file plans nothing). Jobs import the installed package, which has the same content as the copy at
the time of the real run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.dag

UPSTREAM = {"fetch_shakespeare", "fetch_cifar10", "fetch_emnist", "data_stage", "train"}
TARGETS = {"all", "data", "runs"}


@pytest.fixture(scope="module")
def planned(snakemake):
    """``planned(workdir, *overlays)``: rule -> jobs `snakemake -n all` plans in ``workdir``."""

    def plan(workdir: Path, *extra: str) -> dict[str, int]:
        res = snakemake("-n", "all", "--configfile", "presets/quick.yaml", "tiny.yaml", *extra, cwd=workdir)
        assert res.returncode == 0, res.stderr[-3000:]
        return snakemake.job_counts(res.stdout + res.stderr)

    return plan


@pytest.fixture(scope="module")
def finished(tiny_world) -> Path:
    """The module's copy of the shared finished world (conftest ``tiny_world``: a workflow copy where digits x
    hasfl, random_budget, fedprox x seeds 42, 43 ran for 2 rounds)."""
    return tiny_world


def _after_edit(decide, target: Path):
    """What ``decide()`` gives after a content change to ``target`` (restored afterwards)."""
    original = target.read_text()
    target.write_text(original + "\n# content change\n")
    try:
        return decide()
    finally:
        target.write_text(original)


def test_nothing_to_do_after_complete_run(finished, walk):
    """The session's walk (in process, as every decision below; the end-to-end dry runs are the next tests): every
    output of the finished world is current."""
    found = walk(finished, "tiny.yaml").status
    assert not (found.rerun or found.missing or found.in_store or found.foreign), found
    assert "analysis" in found.current


def test_analysis_change_reruns_only_analysis(finished, walk):
    modules = sorted((finished / "src/hasfl/analysis").glob("*.py"))
    target = next(m for m in modules if m.name != "__init__.py")
    found = _after_edit(lambda: walk(finished, "tiny.yaml").status, target)
    assert list(found.rerun) == ["analysis"] and found.rerun["analysis"] == "analysis code", found.rerun
    assert not found.missing, found.missing


def test_aggregation_change_reruns_training_not_data(finished, planned, walk):
    """Decided in process, and end to end: Snakemake plans exactly the walk's reruns (their rerun tokens)."""
    target = finished / "src/hasfl/fl/aggregation.py"
    walked = _after_edit(lambda: walk(finished, "tiny.yaml"), target)
    assert len(walked.reruns("runs")) == 6 and not walked.reruns("data"), walked.status.rerun
    plan = _after_edit(lambda: planned(finished), target)
    assert plan.get("train") == 6 and "data_stage" not in plan, plan


def test_partition_change_reruns_from_data_stage(finished, walk):
    walked = _after_edit(lambda: walk(finished, "tiny.yaml"), finished / "src/hasfl/data/partition.py")
    assert len(walked.reruns("data")) == 2 and len(walked.reruns("runs")) == 6, walked.status.rerun


def _with_overlay(workdir: Path, name: str, overlay: dict) -> str:
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return path.name


def _evaluating(config: dict, tables: set[str]) -> tuple[list[str], int, int]:
    """The evaluate jobs' folders (``evals/<d>/<m>/seed<s>``) of the preset's runs whose evaluations include one of
    ``tables``, how many of ``tables`` they evaluate, and how many tables in all."""
    from hasfl.analysis.evaluations import evaluation_specs
    from hasfl.dag.outputs import preset_jobs

    specs = {f"evals/{d}/{m}/seed{s}": set(evaluation_specs(config, d, m, lambda f, *_: f))
             for d, m, s in preset_jobs(config)[1]}
    jobs = {j: t for j, t in specs.items() if t & tables}
    return sorted(jobs), sum(len(t & tables) for t in jobs.values()), sum(len(t) for t in jobs.values())


def _store_lines(results: Path) -> tuple[int, int]:
    """How many evaluation entries the evaluate jobs' logs say were written, and how many only linked."""
    text = "".join(p.read_text() for p in (results / "logs" / "evaluate").rglob("*.log"))
    return text.count("store: evals entry") - text.count("linked, not recomputed"), text.count("linked, not recomputed")


def test_evaluations_are_recomputed_from_their_identity_without_snakemakes_metadata(finished, walk, snakemake):
    """A clone without ``.snakemake`` (the metadata cleared): an edit of one per-run evaluation's code reruns the
    evaluate jobs of exactly the runs that evaluate it, and each computes only that table (the others are relinked
    from the store). Then a copied folder whose config changes a value only that evaluation reads
    (``analysis.table4c_last_rounds``): the same evaluations, and no run, are recomputed there."""
    shutil.rmtree(finished / ".snakemake")
    from hasfl.analysis.artifacts import ARTIFACTS
    from hasfl.dag.identity import evaluation_code_digest

    per_run = {n: a.per_run for n, a in ARTIFACTS.items() if a.per_run}
    before = {n: evaluation_code_digest(f, finished, "uniform", "digits") for n, f in per_run.items()}
    base = walk(finished, "tiny.yaml")
    assert not base.status.rerun
    target = finished / "src/hasfl/analysis/per_run/coverage_over_time.py"
    target.write_text(target.read_text() + "\n_CONTENT_CHANGE = 1\n")  # a comment would not be one
    changed = {n for n, f in per_run.items() if evaluation_code_digest(f, finished, "uniform", "digits") != before[n]}
    jobs, computed, tables = _evaluating(base.config, changed)
    assert "table4c_coverage_over_time" in changed and len(changed) < len(per_run) and jobs
    walked = walk(finished, "tiny.yaml")
    assert walked.reruns("evals") == jobs and not walked.reruns("runs") and not walked.reruns("data")
    assert all(set(walked.status.rerun[j].split("; ")) <= {f"{n}: evaluation code" for n in changed} for j in jobs)
    results = finished / "results" / "tiny"
    shutil.rmtree(results / "logs" / "evaluate")
    cmd = ("--cores", "2", "all", "--configfile", "presets/quick.yaml", "tiny.yaml")
    res = snakemake(*cmd, cwd=finished, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    counts = snakemake.job_counts(res.stdout + res.stderr)
    assert counts.get("evaluate") == len(jobs) and "train" not in counts and "data_stage" not in counts, counts
    assert _store_lines(results) == (computed, tables - computed)
    assert not walk(finished, "tiny.yaml").status.rerun

    copy = finished / "results" / "tiny-k"
    shutil.copytree(results, copy, symlinks=True, ignore=shutil.ignore_patterns("logs", ".hasfl*"))
    overlay = _with_overlay(finished, "k", {"name": "tiny-k", "analysis": {"table4c_last_rounds": 1}})
    jobs, computed, tables = _evaluating(base.config, {"table4c_coverage_over_time"})
    walked = walk(finished, "tiny.yaml", overlay)
    assert walked.reruns("evals") == jobs and not walked.reruns("runs") and not walked.status.missing
    assert {walked.status.rerun[j] for j in jobs} == {"table4c_coverage_over_time: config (last_rounds)"}
    res = snakemake(*cmd, overlay, cwd=finished, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    counts = snakemake.job_counts(res.stdout + res.stderr)
    assert counts.get("evaluate") == len(jobs) and "train" not in counts, counts
    assert _store_lines(copy) == (computed, tables - computed)


def test_method_hyperparameter_reruns_only_that_method(finished, walk):
    base = walk(finished, "tiny.yaml")
    walked = walk(finished, "tiny.yaml", _with_overlay(finished, "mu", {"method_params": {"fedprox": {"mu": 0.5}}}))
    assert walked.reruns("runs") == ["runs/digits/fedprox/seed42", "runs/digits/fedprox/seed43"]
    assert not walked.reruns("data") and not walked.status.missing
    assert {f for f, v in walked.params().items() if v != base.params()[f]} == set(walked.reruns("runs"))
    # a HAS-FL hyperparameter changes hasfl and random_budget (which reads hasfl's run)
    walked = walk(finished, "tiny.yaml", _with_overlay(finished, "gamma", {"hasfl": {"gamma": 0.3}}))
    assert [f.split("/")[2] for f in walked.reruns("runs")] == ["hasfl", "hasfl", "random_budget", "random_budget"]
    assert not walked.reruns("data")


def test_adding_methods_reruns_no_finished_run(finished, walk):
    """What the estimator overlays rely on: a longer method list trains only the new methods' jobs
    (a run's identity is its own slice, not the list); the analysis reruns on the larger set."""
    base = walk(finished, "tiny.yaml")
    more = _with_overlay(finished, "more", {"methods": ["hasfl", "random_budget", "fedprox", "uniform"]})
    walked = walk(finished, "tiny.yaml", more)
    assert walked.missing("runs") == ["runs/digits/uniform/seed42", "runs/digits/uniform/seed43"]
    assert walked.reruns("runs") == [] and walked.reruns("analysis") == ["analysis"], walked.status.rerun
    params = walked.params()
    assert {f: params[f] for f in base.params()} == base.params()  # no finished job's params moved


def test_checkpoint_interval_reruns_nothing(finished, walk):
    """execution.checkpoint_every changes no byte of a run (tests/test_resume.py), so no finished job reruns: not in
    the walk, not in the slices the jobs receive."""
    base = walk(finished, "tiny.yaml")
    walked = walk(finished, "tiny.yaml", _with_overlay(finished, "ckpt", {"execution": {"checkpoint_every": 3}}))
    assert not (walked.status.rerun or walked.status.missing), walked.status
    assert walked.params() == base.params()


def test_a_job_depends_only_on_its_config_slice(finished, snakemake, tmp_path):
    """The job contract: a key outside the hasfl job's slice (FedProx's mu) leaves that job's params,
    inputs and outputs unchanged -- Snakemake does not plan it, and after the DAG reruns what the change
    invalidates, hasfl's run files are the same bytes (not rewritten) while fedprox's are new. The job
    receives exactly the rule's params.run_cfg: the run's manifest records that slice."""
    import json

    from hasfl.config import load_config, run_config

    work = tmp_path / "work"
    shutil.copytree(finished, work, symlinks=True)
    base = load_config(work / "presets/quick.yaml", base=work / "config.yaml")
    tiny = yaml.safe_load((work / "tiny.yaml").read_text())
    extra = _with_overlay(work, "mu", {"method_params": {"fedprox": {"mu": 0.5}}})
    changed = yaml.safe_load((work / extra).read_text())

    def slices(overlay: dict) -> dict:
        from hasfl.config import deep_merge

        cfg = deep_merge(deep_merge(base, tiny), overlay)
        return {m: run_config(cfg, "digits", m, 42) for m in ("hasfl", "fedprox")}

    before, after = slices({}), slices(changed)
    assert before["hasfl"] == after["hasfl"] and before["fedprox"] != after["fedprox"]
    hasfl_dir = work / tiny.get("results_dir", "results") / tiny["name"] / "runs" / "digits" / "hasfl" / "seed42"
    manifest = json.loads((hasfl_dir / "manifest.json").read_text())
    assert manifest["identity"]["config"] == json.loads(json.dumps(before["hasfl"]))

    def snapshot(folder: Path) -> dict:
        return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}

    hasfl_before = snapshot(hasfl_dir)
    fedprox_dir = hasfl_dir.parent.parent / "fedprox" / "seed42"
    fedprox_final = (fedprox_dir / "final.pt").read_bytes()
    res = snakemake("--cores", "2", "all", "--configfile", "presets/quick.yaml", "tiny.yaml", extra, cwd=work,
                    timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert snakemake.job_counts(res.stdout + res.stderr).get("train") == 2  # fedprox x 2 seeds
    assert snapshot(hasfl_dir) == hasfl_before  # same bytes, not even rewritten
    assert (fedprox_dir / "final.pt").read_bytes() != fedprox_final


def test_the_cli_reproduces_the_dag_job_byte_for_byte(finished, tmp_path):
    """`hasfl train` with its defaults (the config's thread count) writes the DAG job's bytes."""
    import subprocess
    import sys

    from hasfl.config import deep_merge

    quick = yaml.safe_load((finished / "presets/quick.yaml").read_text())
    tiny = yaml.safe_load((finished / "tiny.yaml").read_text())
    preset = tmp_path / "standalone.yaml"
    preset.write_text(yaml.safe_dump(deep_merge(quick, tiny)))
    results = finished / tiny.get("results_dir", "results") / tiny["name"]
    out = tmp_path / "cli"
    res = subprocess.run([sys.executable, "-m", "hasfl.cli", "train", "--config", str(preset), "--base",
                          str(finished / "config.yaml"), "--dataset", "digits", "--method", "hasfl", "--seed", "42",
                          "--data", str(results / "data/digits/seed42"), "--out", str(out)],
                         capture_output=True, text=True, cwd=finished, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    dag = results / "runs/digits/hasfl/seed42"
    from hasfl.registry import RUN_FILES

    for name in (f for f in RUN_FILES if f != "timings.json"):
        assert (out / name).read_bytes() == (dag / name).read_bytes(), name


def test_the_finished_analysis_is_verified_and_an_edit_never_reaches_a_page(finished, tmp_path):
    """The DAG's last rule writes analysis.manifest.json; `hasfl verify` and `hasfl results-page`
    check the analysis outputs and the runs they read against it."""
    import subprocess
    import sys

    tiny = yaml.safe_load((finished / "tiny.yaml").read_text())
    results = finished / tiny.get("results_dir", "results") / tiny["name"]
    manifest = json.loads((results / "analysis.manifest.json").read_text())
    assert "findings.json" in manifest["files"] and "report.md" in manifest["files"]
    assert len(manifest["runs"]) == 6  # digits x (hasfl, random_budget, fedprox) x seeds 42, 43
    # the command that made it, from the config files the session passes to the report job (not a param)
    assert "--configfile presets/quick.yaml tiny.yaml" in (results / "report.md").read_text()

    def hasfl(*args):
        return subprocess.run([sys.executable, "-m", "hasfl.cli", *map(str, args)], capture_output=True, text=True,
                              cwd=finished, timeout=300)

    res = hasfl("verify", results)
    assert res.returncode == 0 and f"{len(manifest['files'])} analysis files match" in res.stdout, res.stderr
    res = hasfl("results-page", results, tmp_path / "page.md")
    assert res.returncode == 0, res.stderr
    assert "(6 training runs" in (tmp_path / "page.md").read_text()
    copy = tmp_path / "edited" / results.name
    shutil.copytree(results, copy)
    table = copy / "tables" / "matched_budget.md"
    table.write_text(table.read_text().replace("|", "| ", 1))
    for cmd in (("verify", copy), ("results-page", copy, tmp_path / "edited.md")):
        res = hasfl(*cmd)
        assert res.returncode == 2 and f"analysis file '{table}' was modified" in res.stderr, res.stderr
    assert not (tmp_path / "edited.md").exists()


_TOY_METHOD = '''"""A toy method (tests): every client at min(0.75, pmax)."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import UniformPolicy


def toy(ctx: MethodContext) -> Method:
    return Method(UniformPolicy(ctx.pmax, 0.75), local_sgd(ctx))
'''
_TOY_ENTRY = ('\nMETHODS["toy"] = MethodInfo("hasfl.fl.methods.toy:toy", "Toy method", "capacity", color="#000000", '
              'marker="*", shown_in=("table3_allocation", "table6_full_model", "fig6_frontier"))\n')
_TOY_TABLE = '''"""A toy table (tests): how many rows Table 3 has per method."""

from __future__ import annotations

from hasfl.analysis.markdown import write_text
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet


def compute(inputs, outputs, params):
    import pandas as pd

    t3 = pd.read_parquet(inputs["table3_allocation"][0])
    df = t3.groupby("method", sort=False).size().rename("rows").reset_index()
    write_parquet(df, outputs["parquet"])
    write_text(outputs["md"], table_markdown("toy_rows", df))
'''
_TOY_TABLE_ENTRY = ('    table_entry("toy_rows", "hasfl.analysis.tables.toy_rows:compute", title="Toy -- rows of Table 3 per '
                    'method", note="A test table.", tables=("table3_allocation",), label="Toy"),\n')


_TOY_PER_RUN = '''"""A toy per-run evaluation (tests): the rounds a run completed, from its run.json."""

from __future__ import annotations

import json


def evaluate_run(run):
    run.require("toy_rounds", ["run.json"])
    done = json.loads(run.files["run.json"].read_text())["rounds_completed"]
    return [{"dataset": run.dataset, "method": run.method, "seed": run.seed, "rounds": int(done)}]
'''
_TOY_ROUNDS_TABLE = '''"""A toy table (tests): each run's toy evaluation, gathered."""

from __future__ import annotations

from hasfl.analysis.evaluations import gather_rows
from hasfl.analysis.markdown import write_text
from hasfl.analysis.tables.base import table_markdown
from hasfl.io import write_parquet


def compute(inputs, outputs, params):
    import pandas as pd

    df = pd.DataFrame.from_records(gather_rows(inputs["evals"], "toy_rounds"))
    write_parquet(df, outputs["parquet"])
    write_text(outputs["md"], table_markdown("toy_rounds", df))
'''
_TOY_ROUNDS_ENTRY = ('    table_entry("toy_rounds", "hasfl.analysis.tables.toy_rounds:compute", '
                     'title="Toy -- rounds per run", note="A test table.", all_methods=True, run_files=("run.json",), '
                     'params=("models",), label="Toy rounds", '
                     'per_run="hasfl.analysis.per_run.toy_rounds:evaluate_run"),\n')
_TOY_FINDING = '''"""A toy finding (tests): every run completed at least one round (Table toy_rounds)."""

from __future__ import annotations

from hasfl.analysis.findings.kernel import ALL, CONTRADICTED, PIPELINE_CHECK, SUPPORTED, FindingSpec, finding

TOY = "F-toy"


def evaluate(t, datasets, st):
    units = [{"unit": f"{r['dataset']}/{r['method']}/seed{r['seed']}", "n": 1, "mde": None,
              "estimate": int(r["rounds"]), "verdict": SUPPORTED if int(r["rounds"]) > 0 else CONTRADICTED, "reason": f"{r['rounds']} rounds"}
             for r in t["toy_rounds"].to_dict("records")]
    return [finding(TOY, claim="Every run completes a round", source="tests", scope=ALL, statistic="rounds per run",
                    test="exact", margin_key=None, st=st, units=units, files=["tables/toy_rounds.parquet"],
                    mde_meaning="none", not_run="no run", kind=PIPELINE_CHECK, conjunction=True)]


SPEC = FindingSpec(ids=(TOY,), tables=("toy_rounds",), methods={}, margins=(), evaluate=evaluate)
'''


def test_a_method_and_a_table_are_added_in_one_module_and_one_entry_each(finished, snakemake, tmp_path, monkeypatch):
    """ARCHITECTURE.md's recipes, followed in a copy: a new method (one module under hasfl.fl.methods + one
    registry entry) trains only its own runs -- no finished run of another method is scheduled -- and appears in
    the tables and figure its entry names; a new table (one module under hasfl.analysis.tables + one artifact entry)
    gets its own rule, file and report section; a new per-run table (its per-run module too) is evaluated in every
    run's evaluate job and gathered; a new finding (one module + its line in FINDINGS) reads that table into
    findings.json. The copy's package is the one imported (PYTHONPATH)."""

    work = tmp_path / "work"
    shutil.copytree(finished, work, symlinks=True)
    src = work / "src" / "hasfl"
    (src / "fl" / "methods" / "toy.py").write_text(_TOY_METHOD)
    registry = src / "registry.py"
    registry.write_text(registry.read_text() + _TOY_ENTRY)
    (src / "analysis" / "tables" / "toy_rows.py").write_text(_TOY_TABLE)
    artifacts = src / "analysis" / "artifacts" / "table_entries.py"
    marker = "TABLE_ENTRIES: tuple[Artifact, ...] = (\n"
    entries = artifacts.read_text().replace(marker, marker + _TOY_TABLE_ENTRY + _TOY_ROUNDS_ENTRY, 1)
    # the finding reads a table no finding read before: its name joins FINDING_TABLES (what the DAG gives findings.json)
    entries = entries.replace('FINDING_TABLES = ("table5_confound",', 'FINDING_TABLES = ("toy_rounds", "table5_confound",', 1)
    artifacts.write_text(entries)
    (src / "analysis" / "per_run" / "toy_rounds.py").write_text(_TOY_PER_RUN)
    (src / "analysis" / "tables" / "toy_rounds.py").write_text(_TOY_ROUNDS_TABLE)
    (src / "analysis" / "findings" / "toy.py").write_text(_TOY_FINDING)
    findings = src / "analysis" / "findings" / "__init__.py"
    text = findings.read_text().replace("    f9_rolling.SPEC,\n", "    f9_rolling.SPEC,\n    toy.SPEC,\n", 1)
    findings.write_text(text.replace("\nfrom hasfl.analysis.findings.f1_confound import",
                                     "\nfrom hasfl.analysis.findings import toy\nfrom hasfl.analysis.findings.f1_confound import", 1))
    extra = _with_overlay(work, "toy", {"methods": ["hasfl", "random_budget", "fedprox", "toy"]})
    env = {"PYTHONPATH": str(work / "src")}
    old_env = snakemake.env
    snakemake.env = staticmethod(lambda: {**old_env(), **env})  # type: ignore[method-assign]
    try:
        res = snakemake("--cores", "2", "all", "--configfile", "presets/quick.yaml", "tiny.yaml", extra, cwd=work,
                        timeout=1200)
        assert res.returncode == 0, res.stderr[-3000:]
        plan = snakemake.job_counts(res.stdout + res.stderr)  # the job table the build printed before its jobs
        assert plan.get("train") == 2 and "data_stage" not in plan, plan  # only digits/toy/seed42 and seed43
        assert "runs/digits/toy/seed42" in res.stdout + res.stderr
        assert plan.get("analysis_toy_rows") == 1 and plan.get("analysis_toy_rounds") == 1, plan
        assert plan.get("evaluate") == 8, plan  # every run's evaluate job: each gains the per-run table
        assert "hasfl: done; the report is" in res.stderr  # the pointer to report.md at the end of a run
    finally:
        snakemake.env = old_env  # type: ignore[method-assign]
    tiny = yaml.safe_load((work / "tiny.yaml").read_text())
    results = work / tiny.get("results_dir", "results") / tiny["name"]
    import pandas as pd

    for table in ("table3_allocation", "table6_full_model"):
        df = pd.read_parquet(results / "tables" / f"{table}.parquet")
        row = df[df["method"] == "toy"]
        assert len(row) == 1 and row["status"].iloc[0] == "completed", (table, df[["method", "status"]])
        assert "Toy method" in (results / "tables" / f"{table}.md").read_text()
    assert "toy" not in set(pd.read_parquet(results / "tables" / "table4_coverage.parquet")["method"])
    rows = pd.read_parquet(results / "tables" / "toy_rows.parquet")
    assert dict(zip(rows["method"], rows["rows"], strict=True))["toy"] == 1
    rounds = pd.read_parquet(results / "tables" / "toy_rounds.parquet")
    runs = sorted(results.glob("runs/digits/*/seed*/run.json"))
    assert len(rounds) == len(runs) == 8
    done = {(r.parent.parent.name, int(r.parent.name[4:])): json.loads(r.read_text())["rounds_completed"] for r in runs}
    assert {(m, int(s)): int(n) for m, s, n in zip(rounds["method"], rounds["seed"], rounds["rounds"], strict=True)} == done
    toy = next(f for f in json.loads((results / "findings.json").read_text())["findings"] if f["id"] == "F-toy")
    assert toy["n_units"] == 8 and toy["verdict"] == "supported", toy
    text = (results / "report.md").read_text()
    assert "### Toy -- rows of Table 3 per method" in text and "A test table." in text
    assert "Toy method" in text
    # Figure 6 (drawn from the method tables it quotes) shows the toy in its legend
    import matplotlib.pyplot as plt

    from hasfl import registry
    from hasfl.analysis import jobs
    from hasfl.analysis.artifacts import FIGURES
    from hasfl.analysis.figures import fig6_frontier

    entry = _TOY_ENTRY.split(" = ", 1)[1].strip()
    monkeypatch.setitem(registry.METHODS, "toy", eval(entry, {"MethodInfo": registry.MethodInfo}))  # noqa: S307
    drawn: dict = {}
    monkeypatch.setattr(fig6_frontier, "save_figure", lambda fig, png, pdf: drawn.setdefault("fig", fig))
    tables = {n: [str(results / "tables" / f"{n}.parquet")] for n in FIGURES["fig6_frontier"].tables}
    jobs.run_artifact("fig6_frontier", tables, {"png": str(tmp_path / "f6.png"), "pdf": str(tmp_path / "f6.pdf")},
                      {"datasets": ["digits"], "methods": ["hasfl", "random_budget", "fedprox", "toy"], "seeds": [42, 43]})
    fig = drawn["fig"]
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    labels = [t.get_text() for lg in legends for t in lg.get_texts()]
    plt.close(fig)
    assert "Toy method" in labels, labels



def test_more_seeds_run_only_the_new_seeds_jobs(finished, walk, repo, plan):
    """Issue 25: the seeds an inconclusive finding needs are added by an overlay (presets/*-seeds.yaml) and
    only the new seeds' data-stage and training jobs are scheduled; the analysis reruns on all of them."""
    walked = walk(finished, "tiny.yaml", _with_overlay(finished, "seeds", {"seeds": [42, 43, 44]}))
    assert walked.missing("data") == ["data/digits/seed44"]  # digits seed 44 x 3 methods
    assert walked.missing("runs") == [f"runs/digits/{m}/seed44" for m in ("fedprox", "hasfl", "random_budget")]
    assert not walked.reruns("runs") and walked.reruns("analysis") == ["analysis"]
    # the same seeds on the command line, as Snakemake's own parser reads `--config seeds=[42,43,44]` (the list's
    # items as strings; typed as in a preset), to the session in process: only the new seed's jobs, priced alone
    from snakemake.cli import parse_config

    typed = parse_config(["seeds=[42,43,44]"])
    assert typed == {"seeds": ["42", "43", "44"]}
    cli = plan(finished, "presets/quick.yaml", "tiny.yaml", config=typed, basedir=finished)
    assert cli.code is None, cli.stderr[-2000:]
    assert cli.jobs("data", "runs") == {"rerun": [], "link": [], "missing": [
        "data/digits/seed44", *(f"runs/digits/{m}/seed44" for m in ("fedprox", "hasfl", "random_budget"))]}
    assert "jobs: 1 data stage, 3 training" in cli.stderr
    assert "6 finished runs and 2 data-stage folders reused, not priced" in cli.stderr
    from hasfl.config import load_config

    for preset in ("quick", "medium"):
        base = load_config(repo / "presets" / f"{preset}.yaml")["seeds"]
        seeds = yaml.safe_load((repo / "presets" / f"{preset}-seeds.yaml").read_text())
        assert set(seeds) == {"seeds"} and seeds["seeds"][:len(base)] == base


def test_section_47_is_computed_from_the_finished_runs_without_a_training_job(finished, planned):
    """F10a / F10b read Table 10, which reads the finished runs' clients tables: with the table gone (a checkout that
    adds it to a finished folder) the dry run plans the table and the analysis after it, and no data-stage, training,
    link or evaluation job."""
    tables = finished / "results" / "tiny" / "tables"
    saved = {}
    for name in ("table10_inheritance.parquet", "table10_inheritance.md"):
        saved[name] = tables.parent / f".kept-{name}"
        shutil.copy2(tables / name, saved[name])
        (tables / name).unlink()
    try:
        jobs = planned(finished)
    finally:
        for name, kept in saved.items():
            shutil.copy2(kept, tables / name)
            kept.unlink()
    assert jobs.get("analysis_table10_inheritance") == 1 and jobs.get("analysis_findings") == 1, jobs
    assert jobs.get("analysis_fig10_inheritance") == 1, jobs
    assert not {r for r in jobs if r in UPSTREAM or r in ("evaluate", "link_run", "link_data", "verify_runs")}, jobs
