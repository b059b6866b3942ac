"""The run store (hasfl.dag.store, issue 36): finished data stages and runs are kept once per identity key under
``<results_dir>/.store`` and every results folder links into it, so a variant trains only what differs and no folder's
deletion, retraining or in-place change can strand, break or silently reuse another's work.

One sequence of DAG runs on the tiny preset (digits, 2 rounds), each test a step on the folders the steps before left;
the fault each step fixed is named (issue 36's list, all failing on e80d763: there the variant folders linked into
the baseline through rules share_run / share_data_stage).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.dag

CLI = "import sys; from hasfl.cli import main; sys.exit(main(sys.argv[1:]))"
BASE = ["hasfl", "fedavg"]
QUICK = Path(__file__).resolve().parents[1] / "presets" / "quick.yaml"
MU = {"fedprox": {"mu": 0.5}}


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, cwd=cwd)


def _bytes(folder: Path) -> dict[str, str]:
    """sha256 of every result file under ``folder`` (through links), by relative path."""
    return {f.relative_to(folder).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("*")) if f.is_file() and f.name != ".hasfl.lock" and not {"logs", ".hasfl", ".snakemake"} & set(f.parts)
            and f.parts[-2] not in ("figures",)}


def _trained(results: Path, dataset: str = "digits", seed: int = 42, *, job: str = "train") -> dict[str, bool]:
    """Method -> whether its last ``job`` (``train``, ``evaluate``) computed (False: it linked finished store entries:
    a job of the link rule, ``logs/link/runs|evals``, or one of ``job`` that found its entries finished)."""
    linked, done = {"train": ("runs", "is finished (every file checked); linked"), "evaluate": ("evals", " written")}[job]
    out = {}
    for log in sorted((results / "logs" / "link" / linked / dataset).glob(f"*/seed{seed}.log")):
        assert "is finished (every file checked); linked" in log.read_text() and " written" not in log.read_text()
        out[log.parent.name] = False
    for log in sorted((results / "logs" / job / dataset).glob(f"*/seed{seed}.log")):
        text = log.read_text()
        out[log.parent.name] = (done not in text) if job == "train" else (done in text)
    return out


def _tree(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under ``root`` (links not followed): its kind, link target or sha256, mode and time."""
    out: dict[str, tuple[object, ...]] = {}
    for f in sorted(root.rglob("*")):
        st = f.lstat()
        what = (os.readlink(f) if f.is_symlink() else
                hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else "dir")
        out[f.relative_to(root).as_posix()] = (what, st.st_mode, st.st_mtime_ns)
    return out


def _entries(work: Path, kind: str = "runs") -> set[str]:
    store = work / "results" / ".store" / kind
    return {p.name for p in store.iterdir() if p.is_dir() and "." not in p.name} if store.is_dir() else set()


@pytest.fixture(scope="module")
def work(snakemake, tiny_preset, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("store")
    base = tiny_preset(work, "base", methods=BASE, rounds=2)
    res = snakemake.dag(base, workdir=work)
    assert res.returncode == 0, res.stderr[-4000:]
    return work


def test_a_finished_run_is_a_store_entry_that_its_folder_links(work):
    run = work / "results/tiny/runs/digits/hasfl/seed42"
    for name in ("final.pt", "rounds.parquet", "manifest.json"):
        assert (run / name).is_symlink()
        assert (run / name).resolve().parent.parent == (work / "results/.store/runs").resolve()
    assert len(_entries(work)) == 2 and len(_entries(work, "data")) == 1
    entry = (run / "final.pt").resolve().parent
    assert not os.access(entry / "final.pt", os.W_OK) or os.geteuid() == 0  # read-only (root writes anyway)
    assert not (entry / "final.pt").stat().st_mode & 0o222


def test_a_variant_links_what_the_store_holds_and_trains_the_rest(snakemake, plan, tiny_preset, work):
    before = _bytes(work / "results/tiny")
    times = {f: f.lstat().st_mtime_ns for f in (work / "results/tiny").rglob("*") if f.is_symlink()}
    variant = tiny_preset(work, "variant", methods=[*BASE, "fedprox"], rounds=2, name="tiny-v", method_params=MU)
    tree = _tree(work / "results")
    whole = snakemake.dag(variant, workdir=work, extra=("-n",))
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert ("hasfl store: 2 runs, 1 data stages and 7 run evaluations of this preset are finished in the run store"
            in whole.stderr), whole.stderr[-2000:]  # the evaluations: hasfl 4 tables, fedavg 3 (not in submodel_accuracy)
    # issue 46: the job table says what will happen (what the store holds is linked by jobs of their own rules)...
    counts = snakemake.job_counts(whole.stdout + whole.stderr)
    assert {r: counts.get(r) for r in ("link_data", "link_run", "train", "link_evaluation", "evaluate", "data_stage")} \
        == {"link_data": 1, "link_run": 2, "train": 1, "link_evaluation": 2, "evaluate": 1, "data_stage": None}, counts
    # ... and a dry run changes no byte, link, mode or time under the results root (the store included)
    assert _tree(work / "results") == tree
    res = snakemake.dag(variant, workdir=work, target="runs")
    assert res.returncode == 0, res.stderr[-4000:]
    assert _trained(work / "results/tiny-v") == {"fedavg": False, "fedprox": True, "hasfl": False}
    for m in BASE:
        assert ((work / f"results/tiny-v/runs/digits/{m}/seed42/final.pt").resolve()
                == (work / f"results/tiny/runs/digits/{m}/seed42/final.pt").resolve())
    assert _bytes(work / "results/tiny") == before  # the baseline: same bytes, same link times
    assert {f: f.lstat().st_mtime_ns for f in (work / "results/tiny").rglob("*") if f.is_symlink()} == times
    for preset in (variant, work / "base.yaml"):  # the session's walk (in process): nothing left to a job
        assert plan(work, QUICK, preset).plans_nothing()


def test_a_variant_evaluates_only_its_new_run_and_links_the_shared_runs_evaluations(snakemake, work):
    """Issue 47: the per-run evaluations of the runs a variant shares are store entries the baseline's analysis
    wrote; the variant's evaluate jobs link them, and only its new run is evaluated."""
    res = snakemake.dag(work / "variant.yaml", workdir=work)
    assert res.returncode == 0, res.stderr[-4000:]
    assert _trained(work / "results/tiny-v", job="evaluate") == {"fedavg": False, "fedprox": True, "hasfl": False}
    for m in BASE:
        for table in ("bn_sensitivity", "table4c_coverage_over_time"):
            rows = f"evals/digits/{m}/seed42/{table}/rows.parquet"
            assert (work / "results/tiny-v" / rows).resolve() == (work / "results/tiny" / rows).resolve()


def test_a_variant_of_a_variant_links_everything_and_then_plans_nothing(snakemake, plan, tiny_preset, work):
    """Fault 4b: a variant sharing from a variant reran its share jobs and analysis on every build."""
    v2 = tiny_preset(work, "variant2", methods=[*BASE, "fedprox"], rounds=2, name="tiny-v2", method_params=MU)
    res = snakemake.dag(v2, workdir=work, target="runs")
    assert res.returncode == 0, res.stderr[-4000:]
    assert _trained(work / "results/tiny-v2") == {"fedavg": False, "fedprox": False, "hasfl": False}
    for preset in (v2, work / "variant.yaml"):
        assert plan(work, QUICK, preset).plans_nothing()


def test_a_baseline_that_gains_a_method_a_variant_trained_survives_the_variants_deletion(snakemake, plan,
                                                                                       tiny_preset, work):
    """Fault 2: the baseline linked into the variant's folder; deleting the scratch variant broke it."""
    base = tiny_preset(work, "base", methods=[*BASE, "fedprox"], rounds=2, method_params=MU)
    res = snakemake.dag(base, workdir=work, target="runs")
    assert res.returncode == 0, res.stderr[-4000:]
    assert _trained(work / "results/tiny")["fedprox"] is False  # linked the entry tiny-v trained
    shutil.rmtree(work / "results/tiny-v")
    shutil.rmtree(work / "results/tiny-v2")
    verify = _cli("verify", str(work / "results/tiny"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert plan(work, QUICK, base).plans_nothing()


def test_a_deleted_folder_is_rebuilt_from_the_store_without_training(snakemake, work):
    """Fault 3: a deleted baseline could not be rebuilt while a variant linked to it (FileNotFoundError)."""
    before = _bytes(work / "results/tiny/runs/digits")
    shutil.rmtree(work / "results/tiny")
    res = snakemake.dag(work / "base.yaml", workdir=work, target="runs")
    assert res.returncode == 0, res.stderr[-4000:]
    assert _trained(work / "results/tiny") == {"fedavg": False, "fedprox": False, "hasfl": False}
    assert _bytes(work / "results/tiny/runs/digits") == before


def test_a_key_changed_in_place_reruns_from_the_data_stage_through_the_analysis(snakemake, tiny_preset, work):
    """Fault 1a: alpha changed in a folder of shared runs was announced as rerun, but the analysis was built on the
    old data stage while analysis.manifest.json recorded the new alpha, and `hasfl verify` exited 0."""
    old_data = (work / "results/tiny/data/digits/seed42/manifest.json").resolve()
    base = tiny_preset(work, "base", methods=[*BASE, "fedprox"], rounds=2, method_params=MU,
                       partition={"alpha": 0.7})
    res = snakemake.dag(base, workdir=work)
    assert res.returncode == 0, res.stderr[-4000:]
    results = work / "results/tiny"
    data = json.loads((results / "data/digits/seed42/manifest.json").read_text())
    assert (results / "data/digits/seed42/manifest.json").resolve() != old_data
    assert data["identity"]["config"]["partition"]["alpha"] == 0.7
    tables = {n: f["sha256"] for n, f in data["files"].items()}
    analysis = json.loads((results / "analysis.manifest.json").read_text())
    for m in (*BASE, "fedprox"):
        identity = json.loads((results / f"runs/digits/{m}/seed42/manifest.json").read_text())["identity"]
        assert identity["inputs"] == {n: tables[n] for n in identity["inputs"]}  # trained on the new tables
        assert analysis["runs"][f"runs/digits/{m}/seed42"] == identity["digest"]
    assert _trained(results) == {"fedavg": True, "fedprox": True, "hasfl": True}
    verify = _cli("verify", str(results), "--config", str(work / "base.yaml"))
    assert verify.returncode != 0 or "identities consistent" in verify.stdout, verify.stderr


def test_a_run_slice_key_changed_in_place_retrains_instead_of_getting_stuck(snakemake, tiny_preset, work):
    """Fault 1b: with a run-slice key changed in a folder of shared runs, the gate said 'written by hasfl train
    --out' and --forcerun train could not help (the outputs belonged to share_run)."""
    base = tiny_preset(work, "base", methods=[*BASE, "fedprox"], rounds=3, method_params=MU,
                       partition={"alpha": 0.7})
    res = snakemake.dag(base, workdir=work)
    assert res.returncode == 0, res.stderr[-4000:]
    for m in (*BASE, "fedprox"):
        run = json.loads((work / f"results/tiny/runs/digits/{m}/seed42/run.json").read_text())
        assert run["rounds"] == 3 if "rounds" in run else True
        ident = json.loads((work / f"results/tiny/runs/digits/{m}/seed42/manifest.json").read_text())["identity"]
        assert ident["config"]["federation"]["rounds"] == 3


def test_gc_lists_then_removes_only_entries_no_folder_links(work):
    results_dir = work / "results"
    before = _bytes(results_dir / "tiny")
    n_runs = len(_entries(work))
    dry = _cli("gc", str(results_dir))
    assert dry.returncode == 0, dry.stderr
    assert "would remove" in dry.stdout and "--delete removes them" in dry.stdout
    assert len(_entries(work)) == n_runs  # a dry run by default
    listed = [line for line in dry.stdout.splitlines() if line.startswith("  .store/")]
    assert listed, dry.stdout
    res = _cli("gc", str(results_dir), "--delete")
    assert res.returncode == 0, res.stderr
    assert len(_entries(work)) == 3 and len(_entries(work, "data")) == 1  # what tiny links now
    assert _bytes(results_dir / "tiny") == before
    assert _cli("verify", str(results_dir / "tiny")).returncode == 0


def test_a_link_whose_entry_was_removed_is_trained_again_never_stuck(snakemake, work):
    run = work / "results/tiny/runs/digits/fedavg/seed42"
    entry = (run / "final.pt").resolve().parent
    shutil.rmtree(entry)
    res = snakemake.dag(work / "base.yaml", workdir=work, target="runs")
    assert res.returncode == 0, res.stderr[-4000:]
    assert (run / "final.pt").resolve().parent == entry and (entry / "manifest.json").is_file()
    assert _trained(work / "results/tiny")["fedavg"] is True


def test_a_link_pointed_at_a_missing_entry_is_relinked_and_a_dry_run_changes_nothing(snakemake, plan, work):
    """Issue 46's fault found while measuring, end to end: one run file's link points at a store entry that is gone.
    `snakemake -n` changes no byte or link under the results root and says what a run will do (it stops: Snakemake
    cannot plan over a dangling link); the build points the link at the
    entry that holds the file (nothing trains), exit 0, `hasfl verify` clean. Before: the session printed "made
    again", the dry run deleted the link, and every later run refused with "delete the folder"."""
    import os

    results = work / "results/tiny"
    run = results / "runs/digits/hasfl/seed42"
    good = os.readlink(run / "clients.parquet")
    (run / "clients.parquet").unlink()
    os.symlink("../../../../../.store/runs/missing/clients.parquet", run / "clients.parquet")

    def state() -> dict[str, str]:
        root = work / "results"
        return {p.relative_to(root).as_posix(): (os.readlink(p) if p.is_symlink() else
                                                 hashlib.sha256(p.read_bytes()).hexdigest())
                for p in sorted(root.rglob("*")) if (p.is_symlink() or p.is_file()) and ".snakemake" not in p.parts
                and "logs" not in p.parts and p.name != ".hasfl.lock"}
    before = state()
    dry = plan(work, QUICK, work / "base.yaml", argv=("-n", "runs"))  # the session's decision, in process
    # Snakemake cannot read a dangling link's time: the dry run refuses, names what a run will do, changes nothing
    assert dry.code == 1 and "would be pointed again at the store entry" in dry.stderr
    assert "without -n" in dry.stderr and state() == before
    res = snakemake.dag(work / "base.yaml", workdir=work, target="runs")
    assert res.returncode == 0, res.stderr[-4000:]
    assert os.readlink(run / "clients.parquet") == good and "train" not in snakemake.job_counts(res.stdout)
    assert _cli("verify", str(results)).returncode == 0


def test_a_link_missing_after_a_kill_lets_unlock_and_a_dry_run_go_on(plan, work):
    """A job killed while it linked its finished entry into the folder leaves some of the entry's files unlinked (no
    dangling link: missing ones). `snakemake --unlock` (the step after a SIGKILL) and `snakemake -n` go on: Snakemake
    plans over a missing output; they say what a run will do and change nothing. Before: both stopped with "cannot
    plan over links whose target is gone", so the unlock a killed build needs failed (tests/test_interrupt.py, seen
    once in CI)."""
    import os

    results = work / "results/tiny"
    run = results / "runs/digits/hasfl/seed42"
    target = os.readlink(run / "rounds.parquet")
    (run / "rounds.parquet").unlink()
    def links() -> list[tuple[str, str]]:
        return sorted((p.relative_to(results).as_posix(), os.readlink(p)) for p in results.rglob("*") if p.is_symlink())

    try:
        before = links()
        for argv in (("--unlock",), ("-n", "runs")):
            res = plan(work, QUICK, work / "base.yaml", argv=argv)  # the session's decision, in process
            assert res.code is None, (argv, res.stderr[-2000:])
            assert "runs/digits/hasfl/seed42" in res.stderr and "would be pointed again at the store entry" in res.stderr
            assert "cannot plan over links" not in res.stderr and "Traceback" not in res.stderr
            assert links() == before and not (run / "rounds.parquet").exists()
    finally:
        os.symlink(target, run / "rounds.parquet")


def _written_before_the_store(work: Path) -> Path:
    """Turn ``results/tiny`` back into a folder of files with their links' times (as written before the store) and
    delete the store."""
    results = work / "results/tiny"
    for link in [f for f in results.rglob("*") if f.is_symlink()]:
        when = link.lstat().st_mtime_ns
        target = link.resolve()
        link.unlink()
        shutil.copyfile(target, link)
        os.utime(link, ns=(when, when))
    shutil.rmtree(work / "results/.store")
    return results


def test_a_folder_written_before_the_store_is_adopted_and_nothing_reruns(snakemake, plan, work):
    """A results folder of files (as before the store): `hasfl adopt` moves them into the store, each link keeping
    its file's time, so Snakemake plans nothing; the bytes stay the same."""
    before = _bytes(work / "results/tiny")
    results = _written_before_the_store(work)
    before_adopt = plan(work, QUICK, work / "base.yaml")  # a folder of files: every one current
    assert before_adopt.plans_nothing() and "analysis" in before_adopt.session.status.current
    res = _cli("adopt", str(results))
    assert res.returncode == 0, res.stderr
    assert f"1 data stages and {len(list(results.glob('runs/*/*/seed*')))} runs moved" in res.stdout
    assert (results / "runs/digits/hasfl/seed42/final.pt").is_symlink()
    assert _bytes(results) == before
    dry = snakemake.dag(work / "base.yaml", workdir=work, extra=("-n",))  # the links keep their files' times
    assert snakemake.job_counts(dry.stdout + dry.stderr) == {}, dry.stdout[-2000:]


def test_a_run_with_nothing_to_do_adopts_a_folder_written_before_the_store(snakemake, plan, work):
    """Found while measuring issue 36's adoption: Snakemake calls ``onstart`` only when a job runs, so a finished
    folder of files stayed outside the store through every `snakemake all` ("Nothing to be done"), and a variant
    retrained what it held. The build adopts it now (a dry run still writes nothing)."""
    before = _bytes(work / "results/tiny")
    results = _written_before_the_store(work)
    dry = plan(work, QUICK, work / "base.yaml")
    assert dry.code is None and not (results / "runs/digits/hasfl/seed42/final.pt").is_symlink()
    res = snakemake.dag(work / "base.yaml", workdir=work)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "Nothing to be done" in res.stdout + res.stderr
    n_runs = len(list(results.glob("runs/*/*/seed*")))
    assert f"1 data stages and {n_runs} runs of" in res.stderr, res.stderr[-3000:]
    assert "moved into the run store" in res.stderr
    assert (results / "runs/digits/hasfl/seed42/final.pt").is_symlink()
    assert len(_entries(work)) == n_runs and _bytes(results) == before


def test_a_folder_packed_with_tar_dereference_verifies_on_arrival(work, tmp_path):
    with tarfile.open(tmp_path / "tiny.tar", "w", dereference=True) as tar:
        tar.add(work / "results/tiny", arcname="tiny")
    with tarfile.open(tmp_path / "tiny.tar") as tar:
        tar.extractall(tmp_path / "arrived", filter="data")
    arrived = tmp_path / "arrived/tiny"
    assert not any(f.is_symlink() for f in arrived.rglob("*"))
    res = _cli("verify", str(arrived))
    assert res.returncode == 0, res.stdout + res.stderr


def test_share_runs_is_refused_with_what_replaced_it(plan, tiny_preset, tmp_path):
    """Fault 4a: share_runs: false in a folder that shared retrained everything it shared."""
    preset = tiny_preset(tmp_path, "old", share_runs=False)
    res = plan(tmp_path, QUICK, preset)
    assert res.code == 1
    assert "config key 'share_runs' was removed" in res.stderr and "run store" in res.stderr
    assert "unknown config key" not in res.stderr


def test_a_training_code_edit_retrains_that_method_into_a_new_entry(work, repo, tiny_preset, tmp_path):
    """Fault 1b (code): every code commit left every variant folder stuck ('written by hasfl train --out')."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for item in ("Snakefile", "config.yaml", "presets", "workflow", "src"):
        (shutil.copytree if (repo / item).is_dir() else shutil.copy2)(repo / item, checkout / item)
    method = checkout / "src/hasfl/fl/methods/fedavg.py"
    method.write_text(method.read_text() + "\n# an edit that changes the training code's digest\n")
    entries = _entries(work)
    linked = {m: (work / f"results/tiny/runs/digits/{m}/seed42/final.pt").resolve().parent for m in BASE}
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(checkout / "src"))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "runs", "--configfile",
                          str(checkout / "presets/quick.yaml"), str(work / "base.yaml"), "-s",
                          str(checkout / "Snakefile"), "--directory", str(work)],
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "runs/digits/fedavg/seed42: training code" in res.stderr
    assert "runs/digits/hasfl/seed42: training code" not in res.stderr
    assert _trained(work / "results/tiny")["fedavg"] is True
    now = {m: (work / f"results/tiny/runs/digits/{m}/seed42/final.pt").resolve().parent for m in BASE}
    assert now["hasfl"] == linked["hasfl"] and now["fedavg"] != linked["fedavg"]
    assert _entries(work) - entries == {now["fedavg"].name}  # one new entry; the old one stays for other folders
    assert linked["fedavg"].is_dir()
