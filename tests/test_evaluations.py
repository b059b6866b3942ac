"""Run-level evaluations (issue 47, hasfl.analysis.evaluations): a table's per-run rows are computed by one job per
run into the run store (hasfl.dag.jobs.evaluate_run) and gathered by the table; both paths give the table's bytes,
the store key holds what the rows depend on and nothing else, and gc treats the entries as it treats runs.

One world in process (no Snakemake): a digits data stage and two runs (HeteroFL: static batch-norm rule, full-width
clients; Uniform: capped at width 0.5) trained by the store's own job functions into a results folder.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hasfl.analysis.artifacts import ARTIFACTS
from hasfl.analysis.evaluations import EVAL_FILE, PER_RUN_PARAMS, eval_dir, evaluate_runs, gather_rows
from hasfl.config import data_config
from hasfl.dag import gc, jobs, status, store
from hasfl.dag.outputs import evaluation_identity
from hasfl.dag.identity import data_code_digest, data_identity, evaluation_code_digest, run_slice
from hasfl.errors import HasflError
from hasfl.integrity import MANIFEST as MANIFEST_NAME
from hasfl.integrity import IntegrityError
from hasfl.registry import resolve

METHODS = ("heterofl", "uniform", "fedlps")  # fedlps: the one method with its own table (personal_accuracy)
PER_RUN = {n: a for n, a in ARTIFACTS.items() if a.per_run}
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory, _engine_base):
    """``<tmp>/results/ev`` with data/digits/seed42 and runs/digits/{heterofl,uniform,fedlps}/seed42 (3 rounds), linked
    from the store."""
    cfg = copy.deepcopy(_engine_base)
    cfg["federation"]["rounds"] = 3
    cfg["hasfl"]["warmup"] = 0
    cfg["methods"] = list(METHODS)
    root = tmp_path_factory.mktemp("evaluations")
    results = root / "results" / "ev"
    dcfg = data_config(cfg, "digits")
    stage = results / "data" / "digits" / "seed42"
    jobs.stage_data(dcfg, 42, stage, data_identity(dcfg, 42, data_code_digest()), results)
    for m in METHODS:
        jobs.train_run(run_slice(cfg, "digits", m, 42), dcfg, results / "runs" / "digits" / m / "seed42",
                        data_dir=stage, results=results)
    return {"cfg": cfg, "results": results, "stage": stage}


def _params(world, art) -> dict:
    cfg = world["cfg"]
    data = {"data_dir": cfg["data_dir"], "dataset_params": {"digits": cfg["dataset_params"]["digits"]}}
    values = {"models": {"digits": cfg["dataset_params"]["digits"]["model"]}, "data": data,
              "atol": cfg["analysis"].get("f5_atol", 0.0), "last_rounds": 2}
    return {k: values[k] for k in art.params if k in PER_RUN_PARAMS}


def _spec(world, name: str, method: str = "uniform", **params) -> dict:
    art = PER_RUN[name]
    return {"function": art.per_run, "code": evaluation_code_digest(art.per_run, REPO, method, "digits"),
            "run_files": list(art.run_files),
            "data_files": ["manifest.json"] + (["partition.parquet", "clients.parquet"] if art.data_tables else []),
            "params": {**_params(world, art), **params}}


def _methods(name: str) -> list[str]:
    art = PER_RUN[name]
    return [m for m in METHODS if art.all_methods or m in art.methods]


def _evaluate(world, results: Path, names=tuple(PER_RUN), **params) -> None:
    for m in METHODS:
        tables = {n: _spec(world, n, m, **params) for n in names if m in _methods(n)}
        jobs.evaluate_run(tables, run_dir=world["results"] / "runs" / "digits" / m / "seed42",
                           data_dir=world["stage"], out_dir=eval_dir(results, "digits", m, 42), results=results)


def _entries(world) -> set[str]:
    folder = world["results"].parent / ".store" / "evals"
    return {p.name for p in folder.iterdir() if p.is_dir() and "." not in p.name} if folder.is_dir() else set()


@pytest.fixture(scope="module")
def evaluated(world):
    _evaluate(world, world["results"])
    return world


@pytest.mark.parametrize("name", sorted(PER_RUN))
def test_the_gathered_rows_are_the_rows_of_the_in_process_job(evaluated, name, one_thread):
    """Each per-run table: the rows its evaluate jobs left in the store, gathered in run order, equal the rows its
    in-process job computes (values, order and dtypes of the table built from them)."""
    world = evaluated
    art = PER_RUN[name]
    methods = _methods(name)
    runs = world["results"] / "runs" / "digits"
    files = [str(runs / m / "seed42" / f) for m in methods for f in art.run_files]
    tables = [str(world["stage"] / n) for n in ("partition.parquet", "clients.parquet")] if art.data_tables else []
    want = evaluate_runs(resolve(art.per_run), files, [str(world["stage"] / "manifest.json")],
                         _params(world, art), tables)
    got = gather_rows([eval_dir(world["results"], "digits", m, 42) for m in reversed(methods)], name)
    assert len(got) == len(want) > 0
    assert pd.DataFrame.from_records(got).equals(pd.DataFrame.from_records(want))
    for m in methods:  # each evaluation is a store entry, linked
        link = Path(eval_dir(world["results"], "digits", m, 42)) / name / EVAL_FILE
        assert link.is_symlink() and link.resolve().parent.parent.name == "evals"


@pytest.mark.parametrize("name", ["submodel_accuracy", "table4b_stale_coordinates", "table4c_coverage_over_time"])
def test_the_table_from_the_store_is_byte_identical_to_the_in_process_table(evaluated, name, tmp_path, one_thread):
    """The DAG's compute (gathering the evaluations) and the table's job(...) write the same Parquet bytes."""
    world = evaluated
    art = PER_RUN[name]
    module = resolve(art.compute.replace(":compute", ":_finish"))
    rows_store = gather_rows([eval_dir(world["results"], "digits", m, 42) for m in _methods(name)], name)
    runs = world["results"] / "runs" / "digits"
    files = [str(runs / m / "seed42" / f) for m in _methods(name) for f in art.run_files]
    tables = [str(world["stage"] / n) for n in ("partition.parquet", "clients.parquet")] if art.data_tables else []
    rows_here = evaluate_runs(resolve(art.per_run), files, [str(world["stage"] / "manifest.json")],
                              _params(world, art), tables)
    out = {}
    for tag, rows in (("store", rows_store), ("here", rows_here)):
        (tmp_path / tag / "tables").mkdir(parents=True)
        pq, md = tmp_path / tag / "tables" / f"{name}.parquet", tmp_path / tag / "tables" / f"{name}.md"
        if name == "table4b_stale_coordinates":
            module(rows, [str(world["stage"] / "manifest.json")], pq, md, [])
        else:
            module(rows, pq, md, [])
        out[tag] = pq.read_bytes()
    assert out["store"] == out["here"]


def test_a_second_folder_links_every_evaluation_and_computes_none(evaluated, tmp_path, caplog):
    world = evaluated
    before = _entries(world)
    other = world["results"].parent / "ev-variant"
    with caplog.at_level(logging.INFO, logger="hasfl.store"):
        _evaluate(world, other)
    assert _entries(world) == before
    linked = [r for r in caplog.records if "is finished (every file checked); linked" in r.getMessage()]
    written = [r for r in caplog.records if r.getMessage().endswith("written")]
    assert len(linked) == sum(len(_methods(n)) for n in PER_RUN) and not written
    shutil.rmtree(other)


def test_a_config_value_of_the_evaluation_is_part_of_its_key(evaluated):
    """Another k for Table 4c (analysis.table4c_last_rounds) is another entry; the other tables' entries stay."""
    world = evaluated
    before = _entries(world)
    other = world["results"].parent / "ev-k1"
    _evaluate(world, other, names=("table4c_coverage_over_time",), last_rounds=1)
    new = _entries(world) - before
    assert len(new) == len(METHODS)
    rows = gather_rows([eval_dir(other, "digits", m, 42) for m in METHODS], "table4c_coverage_over_time")
    assert {r["k"] for r in rows} == {1}
    shutil.rmtree(other)


def test_an_entry_holding_another_keys_content_is_refused(evaluated):
    """An evaluation entry copied under another key (its files match its own manifest) is never linked."""
    world = evaluated
    spec = _spec(world, "table4c_coverage_over_time", last_rounds=3)
    run_dir = world["results"] / "runs" / "digits" / "uniform" / "seed42"
    from hasfl.integrity import read_manifest
    from hasfl.dag.identity import digest

    identity = evaluation_identity("table4c_coverage_over_time", spec["code"], spec["params"],
                                         read_manifest(run_dir), spec["run_files"], read_manifest(world["stage"]),
                                         spec["data_files"])
    entries = world["results"].parent / ".store" / "evals"
    source = (Path(eval_dir(world["results"], "digits", "uniform", 42)) / "table4c_coverage_over_time"
              / EVAL_FILE).resolve().parent
    planted = entries / digest(identity)
    shutil.copytree(source, planted)
    try:
        with pytest.raises(IntegrityError, match="holds the content of another key"):
            jobs.evaluate_run({"table4c_coverage_over_time": spec}, run_dir=run_dir, data_dir=world["stage"],
                               out_dir=world["results"].parent / "ev-planted" / "evals/digits/uniform/seed42",
                               results=world["results"].parent / "ev-planted")
    finally:
        for f in planted.rglob("*"):
            f.chmod(0o644)
        shutil.rmtree(planted)


def test_an_edited_run_file_is_refused_before_anything_is_evaluated(evaluated, tmp_path):
    """The key holds the run files' sha256 from the run's manifest: a run file that no longer matches stops the job."""
    world = evaluated
    run = tmp_path / "results" / "x" / "runs" / "digits" / "uniform" / "seed42"
    shutil.copytree(world["results"] / "runs" / "digits" / "uniform" / "seed42", run, symlinks=False)
    (run / "participation.parquet").chmod(0o644)
    (run / "participation.parquet").write_bytes(b"not the ledger")
    with pytest.raises(IntegrityError, match="participation.parquet"):
        jobs.evaluate_run({"table4c_coverage_over_time": _spec(world, "table4c_coverage_over_time")},
                           run_dir=run, data_dir=world["stage"], out_dir=tmp_path / "results/x/evals/digits/uniform/seed42",
                           results=tmp_path / "results" / "x")
    assert not (tmp_path / "results" / ".store" / "evals").exists() or not any(
        (tmp_path / "results" / ".store" / "evals").iterdir())


def test_gc_keeps_linked_evaluations_and_lists_them_once_no_folder_links_them(evaluated):
    world = evaluated
    other = world["results"].parent / "ev-gc"
    _evaluate(world, other, names=("table4c_coverage_over_time",), last_rounds=2 + 7)
    mine = {(Path(eval_dir(other, "digits", m, 42)) / "table4c_coverage_over_time" / EVAL_FILE).resolve().parent
            for m in METHODS}
    found = gc.collect(world["results"].parent)
    assert not mine & set(found.unreferenced)
    shutil.rmtree(other)
    found = gc.collect(world["results"].parent)
    assert mine <= set(found.unreferenced)
    gc.collect(world["results"].parent, delete=True)
    assert not any(p.exists() for p in mine)
    assert _entries(world)  # the results folder's own evaluations are kept


#: A statement appended to a module: a change of what its code is (a comment is not, :func:`code_text`)
EDIT = "\n_AN_EDIT = 1\n"


def test_only_code_an_evaluation_imports_is_part_of_its_digest(tmp_path):
    """Table 4c's evaluation imports the coverage replay and the models, not the findings: an edit of a finding
    keeps its digest (nothing re-evaluates), an edit of the slicing code moves it."""
    shutil.copytree(REPO / "src" / "hasfl", tmp_path / "src" / "hasfl", ignore=shutil.ignore_patterns("__pycache__"))
    fn = PER_RUN["table4c_coverage_over_time"].per_run
    before = evaluation_code_digest(fn, tmp_path, "uniform", "digits")
    assert before == evaluation_code_digest(fn, REPO, "uniform", "digits")
    kernel = tmp_path / "src" / "hasfl" / "analysis" / "findings" / "kernel.py"
    kernel.write_text(kernel.read_text() + EDIT)
    assert evaluation_code_digest(fn, tmp_path, "uniform", "digits") == before
    slicing = tmp_path / "src" / "hasfl" / "models" / "slicing.py"
    slicing.write_text(slicing.read_text() + EDIT)
    assert evaluation_code_digest(fn, tmp_path, "uniform", "digits") != before
    with pytest.raises(HasflError, match="no source file"):
        evaluation_code_digest("hasfl.analysis.no_such_module:f", tmp_path, "uniform", "digits")
    with pytest.raises(HasflError, match="unknown method 'nope'"):
        evaluation_code_digest(fn, tmp_path, "nope", "digits")


def test_comments_and_other_methods_entries_keep_an_evaluations_key(tmp_path):
    """A comment (a reworded one, a tracker number removed) in any module an evaluation runs, and a new or edited entry
    of another method in the registry, keep its key; a change of its own method's entry moves it, and only its."""
    package = tmp_path / "src" / "hasfl"
    shutil.copytree(REPO / "src" / "hasfl", package, ignore=shutil.ignore_patterns("__pycache__"))
    fn = PER_RUN["table4c_coverage_over_time"].per_run
    module = package / "models" / "slicing.py"
    registry = package / "registry.py"
    before = {m: evaluation_code_digest(fn, tmp_path, m, "digits") for m in ("uniform", "fedrolex")}
    text = module.read_text()
    anchor = "from __future__ import annotations\n"
    assert anchor in text
    module.write_text("# a new first comment\n" + text.replace(anchor, anchor.strip() + "  # a trailing one\n\n")
                      + "\n\n# the end\n")
    source = registry.read_text()
    new_entry = ('    "some_new_method": MethodInfo(f"{_M}.uniform:uniform", "New", "fixed", '
                 'color="#000000", marker="x"),  # issue 99\n')
    table = "METHODS: dict[str, MethodInfo] = {\n"
    assert table in source
    registry.write_text(source.replace(table, table + new_entry))
    assert {m: evaluation_code_digest(fn, tmp_path, m, "digits") for m in before} == before
    module.write_text(text + EDIT)
    assert all(evaluation_code_digest(fn, tmp_path, m, "digits") != before[m] for m in before)
    module.write_text(text)

    # the registry's entries come from the imported registry (as the training digest's facts do)
    from hasfl import registry as reg

    changed = dataclasses.replace(reg.METHODS["fedrolex"], nested=not reg.METHODS["fedrolex"].nested)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(reg.METHODS, "fedrolex", changed)
        assert evaluation_code_digest(fn, tmp_path, "fedrolex", "digits") != before["fedrolex"]
        assert evaluation_code_digest(fn, tmp_path, "uniform", "digits") == before["uniform"]


def test_code_text_drops_comments_and_nothing_else(tmp_path):
    """What is left after the comments is the code: a ``#`` inside a string stays, a changed string moves it."""
    from hasfl.dag.identity import code_text

    f = tmp_path / "m.py"
    f.write_text('x = "a # not a comment"  # a comment\n\n# only a comment\ny = 2\n')
    assert code_text(f) == b'x = "a # not a comment"\ny = 2'
    f.write_text('x = "a # not a comment!"\ny = 2\n')
    assert code_text(f) == b'x = "a # not a comment!"\ny = 2'


#: Analysis code no evaluation runs: verdict rules, the report, the page notes and titles of the artifact entries, the
#: tables' gather steps, the margins (issue 47: each was in the key of every batch-norm and sub-model evaluation)
NOT_EVALUATION_CODE = ("analysis/findings/kernel.py", "analysis/report.py", "analysis/artifacts/table_entries.py",
                       "analysis/artifacts/figure_entries.py", "analysis/specs.py", "analysis/bn_sensitivity.py",
                       "analysis/evaluations.py", "analysis/tables/base.py", "analysis/tables/bn_sensitivity.py",
                       "analysis/tables/submodel_accuracy.py", "analysis/tables/table4b_stale_coordinates.py",
                       "analysis/tables/table4c_coverage_over_time.py", "analysis/inputs.py", "analysis/runs.py",
                       "analysis/results_page.py")


@pytest.mark.parametrize("name", sorted(PER_RUN))
def test_an_evaluations_key_moves_only_with_the_code_it_runs(name, tmp_path):
    """Every per-run evaluation: an edit of analysis code it does not run (:data:`NOT_EVALUATION_CODE`) keeps its
    digest, an edit of its own module or of the evaluate job's (hasfl.analysis.per_run.base) moves it; its module
    imports no table, finding, report or artifact entry."""
    from hasfl.dag.identity import EVALUATION_JOB, module_closure

    package = tmp_path / "src" / "hasfl"
    shutil.copytree(REPO / "src" / "hasfl", package, ignore=shutil.ignore_patterns("__pycache__"))
    fn = PER_RUN[name].per_run
    module = fn.partition(":")[0]
    closure = {f.relative_to(package).as_posix() for f in [*module_closure(module, package),
                                                           *module_closure(EVALUATION_JOB, package)]}
    assert not closure & set(NOT_EVALUATION_CODE), sorted(closure & set(NOT_EVALUATION_CODE))
    assert not [f for f in closure if f.startswith(("analysis/tables/", "analysis/findings/", "analysis/artifacts/",
                                                    "analysis/figures/", "fl/"))], sorted(closure)
    before = evaluation_code_digest(fn, tmp_path, "uniform", "digits")
    for rel in NOT_EVALUATION_CODE:
        (package / rel).write_text((package / rel).read_text() + EDIT)
    assert evaluation_code_digest(fn, tmp_path, "uniform", "digits") == before
    for rel in (module.replace("hasfl.", "", 1).replace(".", "/") + ".py", "analysis/per_run/base.py"):
        edited = (package / rel).read_text()
        (package / rel).write_text(edited + EDIT)
        assert evaluation_code_digest(fn, tmp_path, "uniform", "digits") != before, rel
        (package / rel).write_text(edited)


def test_table4b_reads_the_run_files_its_entry_lists():
    from hasfl.analysis.per_run.stale_coordinates import RUN_FILES

    assert RUN_FILES == PER_RUN["table4b_stale_coordinates"].run_files


def test_gather_refuses_two_folders_of_one_run_and_a_path_that_is_no_run_folder(tmp_path):
    with pytest.raises(ValueError, match="two evaluations folders of run digits/uniform/42"):
        gather_rows([tmp_path / "a/evals/digits/uniform/seed42", tmp_path / "b/evals/digits/uniform/seed42"], "t")
    with pytest.raises(ValueError, match="is not a run's evaluations folder"):
        gather_rows([tmp_path / "runs/digits/uniform/seed42"], "t")


def test_hasfl_verify_checks_every_evaluation_folder(evaluated):
    """An evaluation is a finished folder like a run's: verify_results counts it and names one whose file changed."""
    from hasfl.integrity import verify_results

    world = evaluated
    counts = verify_results(world["results"])
    assert counts["evals"] == sum(len(_methods(n)) for n in PER_RUN) and counts["unfinished"] == 0
    rows = Path(eval_dir(world["results"], "digits", "uniform", 42)) / "table4c_coverage_over_time" / EVAL_FILE
    entry_file = rows.resolve()
    saved = entry_file.read_bytes()
    entry_file.chmod(0o644)
    entry_file.write_bytes(saved + b"x")
    try:
        with pytest.raises(IntegrityError, match="table4c_coverage_over_time"):
            verify_results(world["results"])
    finally:
        entry_file.write_bytes(saved)
        entry_file.chmod(0o444)


def test_a_model_of_the_same_content_is_evaluated_once_per_test_set_and_batch(digits_family, digits):
    """One run's tables evaluate some models alike (the full model under the run's rule in the batch-norm sensitivity
    and Table 4b): the second is read from the first's count; any change of a weight, a buffer, the batch-norm setting
    or the batch size is evaluated again."""
    import torch

    from hasfl.analysis import stale
    from hasfl.models.bn import batch_statistics

    family = digits_family
    model = family.build(1.0)
    forwards = {"n": 0}
    model.register_forward_hook(lambda *_: forwards.__setitem__("n", forwards["n"] + 1))
    first = stale.evaluate_accuracy(model, digits.bundle, 512)
    n = forwards["n"]
    assert n > 0
    twin = family.build(1.0)
    twin.load_state_dict(model.state_dict())
    twin.register_forward_hook(lambda *_: forwards.__setitem__("n", forwards["n"] + 1))
    assert stale.evaluate_accuracy(twin, digits.bundle, 512) == first and forwards["n"] == n
    stale.evaluate_accuracy(twin, digits.bundle, 256)
    assert forwards["n"] > n
    n = forwards["n"]
    with torch.no_grad():
        next(twin.parameters()).view(-1)[0] += 1e-3
    stale.evaluate_accuracy(twin, digits.bundle, 512)
    assert forwards["n"] > n
    n = forwards["n"]
    stale.evaluate_accuracy(batch_statistics(model), digits.bundle, 512)
    assert forwards["n"] > n


def test_each_evaluation_keeps_its_own_seconds_and_the_summary_gives_the_analysis_share(evaluated):
    """Each entry holds its measured seconds (timings.json, not part of the result); the pages' summary adds them up
    beside the training's job-hours."""
    from hasfl.analysis.provenance import evaluation_cpu_hours, summary_block

    world = evaluated
    hours, n = evaluation_cpu_hours(world["results"])
    assert n == sum(len(_methods(t)) for t in PER_RUN) and hours is not None and 0 < hours < 1
    for folder in Path(world["results"], "evals").glob("*/*/seed*/*"):
        assert (folder / "timings.json").is_file() and "timings.json" not in json.loads(
            (folder / "manifest.json").read_text())["files"]
    text = "\n".join(summary_block([], "snakemake all", 2, 1.0, evaluations=(0.25, 10)))
    assert "1 CPU job-hours of training measured" in text
    assert "(one per run and table that evaluates a model or replays a run: 10) took 0.25 CPU job-hours, 20% of the two" in text
    assert "evaluations" not in "\n".join(summary_block([], "snakemake all", 2, 1.0))


def test_a_folder_whose_evaluation_entry_is_gone_is_evaluated_again(evaluated):
    """A store entry removed while a folder links it (gc --delete, by hand): the run's whole evaluations folder (the
    evaluate job's one output) goes, so the job runs again; the other tables' links were only links."""
    world = evaluated
    other = world["results"].parent / "ev-gone"
    _evaluate(world, other, names=("table4c_coverage_over_time", "bn_sensitivity"), last_rounds=4)
    run_evals = Path(eval_dir(other, "digits", "uniform", 42))
    (run_evals / ".snakemake_timestamp").write_text("")
    entry = (run_evals / "table4c_coverage_over_time" / EVAL_FILE).resolve().parent
    for f in entry.rglob("*"):
        f.chmod(0o644)
    shutil.rmtree(entry)
    plan = store.repair_links(other, apply=False)
    assert "evals/digits/uniform/seed42/table4c_coverage_over_time" in plan.dropped and run_evals.is_dir()
    store.repair_links(other, apply=True)
    assert not run_evals.exists() and Path(eval_dir(other, "digits", "heterofl", 42)).is_dir()
    shutil.rmtree(other)


# --- issue 47 point 2: where an evaluate job computes ------------------------------------------------------------
def test_an_evaluation_on_a_gpu_is_keyed_by_its_device_class_and_a_cpu_ones_key_is_as_before(evaluated):
    """A CPU evaluation's identity has no device key (every CPU entry keeps its key); a GPU's names its device class,
    so a CPU count and a GPU count of the same run never share an entry. The job on this CPU machine placed its entry
    under the CPU key (the session's prediction computes the same)."""
    from hasfl.dag.identity import digest
    from hasfl.integrity import read_manifest

    world = evaluated
    spec = _spec(world, "table4c_coverage_over_time")  # as the fixture evaluated it
    run_dir = world["results"] / "runs" / "digits" / "uniform" / "seed42"
    args = ("table4c_coverage_over_time", spec["code"], spec["params"], read_manifest(run_dir), spec["run_files"],
            read_manifest(world["stage"]), spec["data_files"])
    cpu, default = evaluation_identity(*args, "cpu"), evaluation_identity(*args)
    gpu = evaluation_identity(*args, "cuda:NVIDIA H200")
    assert cpu == default and "device_class" not in cpu
    assert gpu == {**cpu, "device_class": "cuda:NVIDIA H200"} and digest(gpu) != digest(cpu)
    linked = (Path(eval_dir(world["results"], "digits", "uniform", 42)) / "table4c_coverage_over_time" / EVAL_FILE)
    assert linked.resolve().parent.name == digest(cpu)


def test_the_evaluation_device_is_the_one_a_training_job_would_use(monkeypatch):
    """``device`` resolved as a training job resolves it: ``cpu`` stays on the CPU, ``auto`` takes a GPU torch can use
    (strict fp32 there: no TF32, cuDNN deterministic, no benchmark), ``cuda`` without one is refused naming the key."""
    import torch

    from hasfl.analysis.per_run.base import evaluation_device
    from hasfl.device import DeviceError

    knobs = (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
    saved = ([k.fp32_precision for k in knobs], torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert evaluation_device("cpu") == ("cpu", "cpu") and evaluation_device("auto") == ("cpu", "cpu")
    with pytest.raises(DeviceError, match="config key 'device' is 'cuda'"):
        evaluation_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what a GPU machine's torch answers
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert evaluation_device("cpu") == ("cpu", "cpu")
    try:
        for k in knobs:
            k.fp32_precision = "tf32"
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, True
        assert evaluation_device("auto") == ("cuda", "cuda:NVIDIA H200")
        assert [k.fp32_precision for k in knobs] == ["ieee"] * 3
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    finally:
        for k, v in zip(knobs, saved[0], strict=True):
            k.fp32_precision = v
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[1], saved[2]


def test_a_cpu_evaluation_counts_in_the_cpu_batches_on_the_cpu(world):
    """The CPU path is the one every CPU entry was made by: ``device="cpu"`` and the default give the same count, in
    batches of 512 (the count cache keys the batch and the device)."""
    import torch

    from hasfl.analysis import stale
    from hasfl.data import load_dataset
    from hasfl.models import family_from_config

    cfg = world["cfg"]
    bundle = load_dataset("digits", cfg["data_dir"], cfg["dataset_params"]["digits"])
    fam = family_from_config(cfg["dataset_params"]["digits"]["model"], bundle.input_shape, bundle.num_classes)
    torch.manual_seed(0)
    model = fam.build(1.0)
    default = stale.evaluate_accuracy(model, bundle)
    assert stale.evaluate_accuracy(model, bundle, device="cpu") == default
    assert stale.evaluate_accuracy(model, bundle, stale.CPU_EVAL_BATCH, "cpu") == default
    assert stale.CPU_EVAL_BATCH == 512 and stale.GPU_EVAL_BATCH > stale.CPU_EVAL_BATCH
    held = stale._COUNTS[id(bundle)][1]
    assert {(k[1], k[2]) for k in held} == {(512, "cpu")}


# --- evaluations audited like runs: read from the files, without Snakemake's metadata ------------------------------
def _code_of(function: str, method: str, dataset: str) -> str:
    return evaluation_code_digest(function, REPO, method, dataset)


@pytest.fixture()
def audited(world, tmp_path):
    """A second results folder beside the world's (its data stage and runs linked from the same store, no Snakemake
    metadata anywhere) whose runs are evaluated as the DAG's evaluate rule does (``evaluation_specs`` of the config):
    ``(config, folder)``."""
    from hasfl.analysis.evaluations import evaluation_specs

    cfg = {**copy.deepcopy(world["cfg"]), "datasets": ["digits"], "seeds": [42]}
    other = world["results"].parent / f"ev-audit-{tmp_path.name}"
    for part in ("data", "runs"):
        shutil.copytree(world["results"] / part, other / part, symlinks=True)
    for m in METHODS:
        jobs.evaluate_run(evaluation_specs(cfg, "digits", m, _code_of),
                           run_dir=other / "runs" / "digits" / m / "seed42", data_dir=other / "data/digits/seed42",
                           out_dir=eval_dir(other, "digits", m, 42), results=other)
    yield cfg, other
    shutil.rmtree(other)


def _eval_reruns(cfg, folder, code_of=_code_of):
    from hasfl.dag.outputs import audit

    found = audit(cfg, folder, data_code=data_code_digest(), eval_code=code_of)
    assert not [k for k in found.rerun if not k.startswith("evals/")], found.rerun
    return {k: v for k, v in found.rerun.items() if k.startswith("evals/")}, found.errors


def test_a_finished_evaluation_is_current_when_its_code_config_and_run_are(audited):
    cfg, folder = audited
    assert _eval_reruns(cfg, folder) == ({}, [])
    assert status.link_problems(folder) == []


def test_the_audit_names_the_evaluations_finished_by_this_code(audited):
    """The audit's ``evaluated`` (the status walk's, what the pre-flight does not price again): every run evaluation
    of the preset whose identity is this checkout's; under another evaluation code digest (an edit the evaluation
    imports) none, and every run's evaluate job reruns."""
    from hasfl.dag.outputs import audit

    cfg, folder = audited
    found = audit(cfg, folder, data_code=data_code_digest(), eval_code=_code_of)
    assert sorted(found.evaluated) == sorted(f"evals/digits/{m}/seed42/{n}" for n in PER_RUN for m in _methods(n))
    other = audit(cfg, folder, data_code=data_code_digest(), eval_code=lambda f, m, d: "another")
    assert other.evaluated == []
    assert sorted(k for k in other.rerun if k.startswith("evals/")) == sorted(
        {f"evals/digits/{m}/seed42" for n in PER_RUN for m in _methods(n)})


def test_an_edit_of_an_evaluations_code_reruns_the_runs_that_evaluate_it(audited):
    """Decided from the manifests (a second clone, a copied folder, a cleared .snakemake decide the same): each run
    whose evaluations include the edited function's table is rerun, naming the table and the code."""
    cfg, folder = audited
    edited = PER_RUN["table4c_coverage_over_time"].per_run
    reruns, _ = _eval_reruns(cfg, folder, lambda f, m, d: "edited" if f == edited else _code_of(f, m, d))
    assert sorted(reruns) == sorted(f"evals/digits/{m}/seed42" for m in _methods("table4c_coverage_over_time"))
    assert all(why == "table4c_coverage_over_time: evaluation code" for why in reruns.values()), reruns


def test_a_config_value_only_an_evaluation_reads_reruns_it(audited):
    """The copied-folder variant with another ``analysis.table4c_last_rounds``: its evaluations are rerun."""
    cfg, folder = audited
    cfg = {**cfg, "analysis": {**cfg.get("analysis", {}), "table4c_last_rounds": 7}}
    reruns, _ = _eval_reruns(cfg, folder)
    assert sorted(reruns) == sorted(f"evals/digits/{m}/seed42" for m in _methods("table4c_coverage_over_time"))
    assert all(why == "table4c_coverage_over_time: config (last_rounds)" for why in reruns.values()), reruns


def test_another_runs_evaluation_under_a_run_is_rerun_and_another_tables_is_an_error(audited):
    cfg, folder = audited
    here = Path(eval_dir(folder, "digits", "uniform", 42))
    there = Path(eval_dir(folder, "digits", "heterofl", 42))
    shutil.rmtree(here / "bn_sensitivity")
    shutil.copytree(there / "bn_sensitivity", here / "bn_sensitivity", symlinks=True)
    reruns, errors = _eval_reruns(cfg, folder)
    assert list(reruns) == ["evals/digits/uniform/seed42"] and not errors
    # heterofl's evaluation: its code (its own registry entry, hasfl.dag.identity.registry_facts) and its run differ
    assert reruns["evals/digits/uniform/seed42"].startswith("bn_sensitivity: evaluation code; run files"), reruns
    shutil.rmtree(there / "bn_sensitivity")
    shutil.copytree(there / "table4c_coverage_over_time", there / "bn_sensitivity", symlinks=True)
    _, errors = _eval_reruns(cfg, folder)
    assert errors == ["evals/digits/heterofl/seed42/bn_sensitivity holds the rows of table "
                      "'table4c_coverage_over_time'; delete the folder"]


def test_a_link_to_an_entry_holding_another_keys_content_is_named_by_verify(audited, hasfl_cli):
    """An entry renamed after a folder linked it (its files match its own manifest): ``link_problems`` and ``hasfl
    verify`` name the folder, which ``verify_results`` alone passes."""
    from hasfl.integrity import verify_results

    cfg, folder = audited
    table = Path(eval_dir(folder, "digits", "uniform", 42)) / "bn_sensitivity"
    entry = (table / MANIFEST_NAME).resolve().parent
    planted = entry.with_name("0" * 64)
    shutil.copytree(entry, planted)
    try:
        for f in table.iterdir():
            target = Path(os.readlink(f))
            f.unlink()
            f.symlink_to(target.parent.with_name(planted.name) / target.name)
        verify_results(folder)
        problems = status.link_problems(folder)
        assert len(problems) == 1 and problems[0].startswith(
            "evals/digits/uniform/seed42/bn_sensitivity links store entry evals/0000000000000000, whose manifest is "
            "another key's content"), problems
        res = hasfl_cli("verify", folder)
        assert res.returncode != 0 and "evals/digits/uniform/seed42/bn_sensitivity links store entry" in res.stderr
    finally:
        for f in planted.rglob("*"):
            f.chmod(0o644)
        shutil.rmtree(planted)
