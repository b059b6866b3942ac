"""Issue 26: identity in one place (hasfl.dag.identity). Each test reproduces one item of the issue's hostile
trial on a finished tiny DAG (digits, hasfl + random_budget + fedprox, seeds 42 and 43, 2 rounds) and
checks what happens now: the output is rerun, or a clear error names it, and no finished run is lost.

Each test failed on 7ac45b9 (the commit before issue 26) -- noted per test.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.dag

SEEDS = [42, 43]
METHODS = ["hasfl", "random_budget", "fedprox"]


def _hasfl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hasfl.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def _files(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (to show nothing was deleted or changed)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and ".hasfl.lock" not in p.name}


@pytest.fixture(scope="module")
def world(tiny_world) -> dict[str, Path]:
    """The module's copy of the shared finished world (conftest ``tiny_world``: digits x hasfl, random_budget,
    fedprox x seeds 42, 43; 2 rounds): its folder ``results/tiny``, its overlay and the stand-alone preset of the
    same config for the CLI. Snakemake runs there (fixture ``sm``), as it would from a clone."""
    overlay = yaml.safe_load((tiny_world / "tiny.yaml").read_text())
    assert (overlay["methods"], overlay["seeds"]) == (METHODS, SEEDS)  # this module's constants are the world's
    return {"tmp": tiny_world, "overlay": tiny_world / "tiny.yaml", "standalone": tiny_world / "tiny-standalone.yaml",
            "results": tiny_world / "results" / "tiny"}


@pytest.fixture()
def sm(snakemake, world):
    """``snakemake(*args)`` in the world's folder."""
    return lambda *args, **kw: snakemake(*args, cwd=world["tmp"], **kw)


def _copy(world: dict[str, Path], name: str, **changes) -> tuple[Path, Path]:
    """``cp -rL results/tiny results/<name>`` (the files the store links point to: the tests then write into the
    copy, which through ``cp -a``'s links would write into the run store the world links too) and an overlay naming
    it (plus ``changes``)."""
    dst = world["results"].parent / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(world["results"], dst)
    overlay = yaml.safe_load(world["overlay"].read_text())
    overlay["name"] = name
    for dotted, value in changes.items():
        node = overlay
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path = world["tmp"] / f"{name}.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return dst, path


def _plan(sm, job_counts, *configfiles: Path | str, extra: tuple[str, ...] = ()):
    res = sm("-n", "all", "--configfile", "presets/quick.yaml", *map(str, configfiles), *extra)
    return res, job_counts(res.stdout + res.stderr)


def test_nothing_to_do_after_the_run(world, walk) -> None:
    """The session's walk, in process (conftest ``walk``; tests/test_reruns.py checks Snakemake plans the same)."""
    found = walk(world["tmp"], world["overlay"]).status
    assert not (found.rerun or found.missing or found.in_store or found.foreign), found


# --- 3. cp -a results/quick results/quick-mu05, then another FedProx mu --------------------------
def test_3_a_copied_folder_is_rerun_where_the_new_config_differs(world, plan) -> None:
    """Before: "Nothing to be done", verify passed, the runs kept mu = 1.0. The session's decision in process (conftest
    ``plan``): a rerun token for each of the two FedProx runs and the analysis (another name: the report names its
    preset), nothing else made, rerun or linked."""
    copy, overlay = _copy(world, "tiny-mu05", method_params__fedprox__mu=0.5)
    res = plan(world["tmp"], "presets/quick.yaml", overlay, basedir=world["tmp"])
    assert res.code is None, res.stderr[-2000:]
    # the runs' evaluations with them (read from their manifests: their run is rerun)
    assert set(res.session.reruns) == {"runs/digits/fedprox/seed42", "runs/digits/fedprox/seed43", "analysis",
                                       "evals/digits/fedprox/seed42", "evals/digits/fedprox/seed43"}
    assert res.session.reruns["evals/digits/fedprox/seed42"][1].endswith("its run runs/digits/fedprox/seed42 is rerun")
    assert res.jobs("data", "runs") == {"rerun": ["runs/digits/fedprox/seed42", "runs/digits/fedprox/seed43"],
                                        "missing": [], "link": []}
    assert "runs/digits/fedprox/seed42: config (method_params.mu)" in res.stderr
    preset = yaml.safe_load(world["standalone"].read_text())
    preset["method_params"] = {"fedprox": {"mu": 0.5}}
    (world["tmp"] / "mu05-standalone.yaml").write_text(yaml.safe_dump(preset))
    cli = _hasfl("verify", copy, "--config", world["tmp"] / "mu05-standalone.yaml")
    assert cli.returncode == 2 and "method_params.mu" in cli.stderr and "Traceback" not in cli.stderr, cli.stderr
    assert _hasfl("verify", copy).returncode == 0  # without a preset: the chain itself is intact


def test_3_a_copied_folder_reruns_its_analysis_for_an_analysis_key(world, walk) -> None:
    """The same for the analysis: a copied folder and another `analysis.ci_level` rerun the analysis, not
    a single training job (the analysis manifest records the analysis's config and code). Decided in process (the
    session's walk); the test above checks end to end that Snakemake plans a walk's reruns."""
    _copy_, overlay = _copy(world, "tiny-ci90", analysis__ci_level=0.9)
    found = walk(world["tmp"], overlay).status
    # the name is in no analysis identity (fault 18): the one reason is the key
    assert found.rerun == {"analysis": "config (analysis.ci_level)"}, found.rerun
    assert not (found.missing or found.in_store or found.foreign), found


# --- 2. a data stage of another config copied under finished runs ---------------------------------
def test_2_a_swapped_data_stage_is_found_and_rerun(world, walk) -> None:
    """Before: the runs trained on the copied partition, `hasfl verify` said unchanged, `hasfl data --out` overwrote."""
    other = world["tmp"] / "alpha100"
    preset = yaml.safe_load(world["standalone"].read_text())
    preset["partition"] = {"alpha": 100.0}
    (world["tmp"] / "alpha100.yaml").write_text(yaml.safe_dump(preset))
    made = _hasfl("data", "--config", world["tmp"] / "alpha100.yaml", "--dataset", "digits", "--seed", "42",
                  "--out", other)
    assert made.returncode == 0, made.stderr
    copy, overlay = _copy(world, "tiny-swapped-data")
    target = copy / "data/digits/seed42"
    for f in other.iterdir():
        shutil.copy2(f, target / f.name)
    cli = _hasfl("verify", copy)
    assert cli.returncode == 2 and "data-stage files" in cli.stderr and "runs/digits/hasfl/seed42" in cli.stderr
    walked = walk(world["tmp"], overlay)  # the session's walk, in process
    assert walked.status.rerun.get("data/digits/seed42") == "config (partition.alpha)", walked.status.rerun
    # seed 42's data stage and its runs
    assert walked.reruns("data") == ["data/digits/seed42"]
    assert walked.reruns("runs") == [f"runs/digits/{m}/seed42" for m in sorted(METHODS)], walked.status.rerun
    # the CLI never writes into a results folder, nor over a data stage of another identity
    before = _files(world["results"])
    into = _hasfl("data", "--config", world["standalone"], "--dataset", "digits", "--seed", "42", "--out",
                  world["results"] / "data/digits/seed42")
    assert into.returncode == 2 and "inside the results folder" in into.stderr, into.stderr
    over = _hasfl("data", "--config", world["standalone"], "--dataset", "digits", "--seed", "42", "--out", other)
    assert over.returncode == 2 and "another identity" in over.stderr and "config" in over.stderr, over.stderr
    assert _files(world["results"]) == before


# --- 4. a budget run or a data stage of another seed given to `hasfl train` -----------------------
def test_4_hasfl_train_refuses_another_seeds_inputs(world, tmp_path) -> None:
    """Before: both exited 0."""
    r = world["results"]
    budget = _hasfl("train", "--config", world["standalone"], "--dataset", "digits", "--method", "random_budget",
                    "--seed", "43", "--data", r / "data/digits/seed43", "--hasfl-run",
                    r / "runs/digits/hasfl/seed42/run.json", "--out", tmp_path / "rb43")
    assert budget.returncode == 2 and "seed 42" in budget.stderr and "Traceback" not in budget.stderr, budget.stderr
    data = _hasfl("train", "--config", world["standalone"], "--dataset", "digits", "--method", "fedprox",
                  "--seed", "43", "--data", r / "data/digits/seed42", "--out", tmp_path / "fp43")
    assert data.returncode == 2 and "seed 42" in data.stderr, data.stderr
    assert not (tmp_path / "rb43" / "manifest.json").exists() and not (tmp_path / "fp43" / "manifest.json").exists()


# --- 5. a YAML key given twice ------------------------------------------------------------------------
def test_5_a_duplicate_key_is_refused(world, plan, tmp_path) -> None:
    """Before: the first `federation:` block was dropped silently (200 rounds)."""
    bad = tmp_path / "dup.yaml"
    bad.write_text(world["overlay"].read_text() + "federation:\n  clients_per_round: 5\n")
    cli = _hasfl("config", "--config", bad)
    assert cli.returncode == 2 and "'federation' is given twice" in cli.stderr, cli.stderr
    res = plan(world["tmp"], "presets/quick.yaml", bad, basedir=world["tmp"])  # the Snakefile's session
    assert res.code == 1 and "'federation' is given twice" in res.stderr and "Traceback" not in res.stderr


# --- 7. `hasfl results-page` pointed into a results folder ---------------------------------------------
def test_7_results_page_never_writes_into_a_results_folder(world) -> None:
    """Before: the run file (or the figures) was overwritten."""
    r = world["results"]
    before = _files(r)
    for out in (r / "runs/digits/hasfl/seed42/run.json", r / "page.md", r / "figures" / "x.md"):
        cli = _hasfl("results-page", r, out)
        assert cli.returncode == 2 and "Traceback" not in cli.stderr, (out, cli.stderr)
        assert "results folder" in cli.stderr or "ending in .md" in cli.stderr, cli.stderr
    assert _files(r) == before


# --- 8. two seeds' run folders swapped -------------------------------------------------------------------
def test_8_swapped_run_folders_are_refused_and_nothing_is_deleted(world, sm, walk) -> None:
    """Before: the correct random-budget run was deleted and retrained against the wrong budget. The walk names both
    folders (in process); a build refuses, end to end."""
    copy, overlay = _copy(world, "tiny-swapped-runs")
    runs = copy / "runs/digits/hasfl"
    (runs / "seed42").rename(runs / "tmp")
    (runs / "seed43").rename(runs / "seed42")
    (runs / "tmp").rename(runs / "seed43")
    before = _files(copy)
    found = walk(world["tmp"], overlay).status
    assert [f.split(" ", 1)[0] for f in found.foreign] == ["runs/digits/hasfl/seed42", "runs/digits/hasfl/seed43"]
    assert found.foreign[0].startswith("runs/digits/hasfl/seed42 holds the run of digits / hasfl / seed 43")
    res = sm("--cores", "1", "all", "--configfile", "presets/quick.yaml", overlay)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "runs/digits/hasfl/seed42 holds the run of digits / hasfl / seed 43" in res.stderr
    assert "nothing was deleted" in res.stderr and "Traceback" not in res.stderr
    assert _files(copy) == before


# --- 9 and 10. another spelling of data_dir, another key order, touch ------------------------------------
def test_9_10_equal_configs_and_touch_rerun_nothing(world, sm, job_counts, walk, tmp_path) -> None:
    """Before: `data_dir: ./data` and a reordered config reran all training; touch on a data-stage
    Parquet retrained. Another spelling of data_dir: in process (the walk, and the params the rules hand the jobs,
    which Snakemake's params trigger compares); a reordered config after a touch of every result file and every
    source file of the library: end to end (Snakemake merges the config files and compares the params, file times and
    code itself: its rerun triggers go by content, not by file time)."""
    spelled = yaml.safe_load(world["overlay"].read_text())
    spelled["data_dir"] = "./data"
    (tmp_path / "spelled.yaml").write_text(yaml.safe_dump(spelled))
    base, walked = walk(world["tmp"], world["overlay"]), walk(world["tmp"], tmp_path / "spelled.yaml")
    assert walked.config["data_dir"] != base.config["data_dir"]  # spelled otherwise
    assert not (walked.status.rerun or walked.status.missing) and walked.params() == base.params()

    full = _hasfl("config", "--config", world["standalone"], "--yaml")
    assert full.returncode == 0, full.stderr

    def reverse(value):
        return {k: reverse(value[k]) for k in reversed(list(value))} if isinstance(value, dict) else value

    (tmp_path / "reordered.yaml").write_text(yaml.safe_dump(reverse(yaml.safe_load(full.stdout)), sort_keys=False))
    for f in [*world["results"].glob("data/*/*/*.parquet"), *world["results"].glob("runs/*/*/*/*"),
              *(world["tmp"] / "src" / "hasfl").rglob("*.py")]:
        f.touch()
    res, jobs = _plan(sm, job_counts, tmp_path / "reordered.yaml")
    assert res.returncode == 0 and jobs == {}, (jobs, res.stderr[-2000:])


# --- issue 46 point 3: one walk gives every output's status ---------------------------------------------------
def test_one_walk_gives_every_outputs_status(world, repo, tmp_path) -> None:
    """hasfl.dag.status.status on the finished world: every folder current; in a new folder of the same preset plus a
    seed, every finished folder is in the store, the new seed's folders are missing; a run of another method's folder
    is foreign; another mu is a rerun with its reason. The same walk the session and ``hasfl verify --config`` read."""
    from hasfl.config import load_config
    from hasfl.dag.identity import Checkout
    from hasfl.dag.status import preset_folders, status

    kw = {"code": Checkout(repo), "device_class": "cpu"}
    config = load_config(world["standalone"])
    found = status(config, world["results"], **kw)
    assert sorted(found.current) == sorted([*preset_folders(config), "analysis"])
    assert not (found.rerun or found.foreign or found.in_store or found.missing), found
    more = {**config, "name": "tiny-more", "seeds": [*SEEDS, 44]}
    found = status(more, world["results"].parent / "tiny-more", **kw)
    evals = sorted(f for f in found.in_store if f.startswith("evals/"))
    assert sorted(set(found.in_store) - set(evals)) == preset_folders(config) and not found.current
    # the finished run evaluations too (evals/<d>/<m>/seed<s>/<kind>), of finished runs only
    assert evals and {f.rsplit("/", 1)[0].replace("evals/", "runs/", 1) for f in evals} <= set(preset_folders(config))
    assert found.counts()["evaluations in store"] == len(evals)
    assert sorted(found.missing) == [f for f in preset_folders(more) if f.endswith("seed44")], found.missing
    assert found.counts()["in store"] == len(preset_folders(config)) and found.counts()["missing"] == 4
    copy, _ = _copy(world, "tiny-walk")
    (copy / "runs/digits/fedprox/seed42").rename(copy / "runs/digits/fedprox/gone")
    shutil.copytree(copy / "runs/digits/hasfl/seed42", copy / "runs/digits/fedprox/seed42", symlinks=True)
    mu = {**config, "name": "tiny-walk", "method_params": {**config["method_params"], "fedprox": {"mu": 0.5}}}
    found = status(mu, copy, **kw)
    assert found.foreign and found.foreign[0].startswith("runs/digits/fedprox/seed42 holds the run of digits / hasfl")
    assert {k: v for k, v in found.rerun.items() if not k.startswith("evals/")} == {
        "runs/digits/fedprox/seed43": "config (method_params.mu)", "analysis": "config (method_params.fedprox.mu)"}
    assert [k for k in found.rerun if k.startswith("evals/")] == ["evals/digits/fedprox/seed43"], found.rerun



def test_the_walk_reads_each_manifest_once(world, repo, monkeypatch) -> None:
    """The status walk is one pass: every manifest it reads (a folder's, its store entry's through the folder's link,
    a run's data stage for the run's key, a run's and data stage's for its evaluations) is read once, on the finished
    world and on a new folder whose outputs are all in the store."""
    from collections import Counter

    from hasfl import integrity
    from hasfl.config import load_config
    from hasfl.dag import outputs, store
    from hasfl.dag.identity import Checkout
    from hasfl.dag.status import preset_folders, status

    reads: Counter = Counter()
    real = integrity.read_manifest

    def counted(folder):
        reads[(Path(folder) / "manifest.json").resolve()] += 1
        return real(folder)

    for module in (integrity, outputs, store):
        monkeypatch.setattr(module, "read_manifest", counted)
    config = load_config(world["standalone"])
    code = Checkout(repo)
    for cfg, folder in ((config, world["results"]), ({**config, "name": "tiny-once"},
                                                     world["results"].parent / "tiny-once")):
        reads.clear()
        found = status(cfg, folder, code, device_class="cpu")
        assert found.current or found.in_store
        assert reads and max(reads.values()) == 1, [str(p) for p, n in reads.items() if n > 1][:5]
        assert len(reads) >= len(preset_folders(cfg)) + len(found.evaluated or [f for f in found.in_store
                                                                               if f.startswith("evals/")])


# --- issue 46 fault 19: cuda_deterministic on a CPU machine -------------------------------------------------
def test_19_cuda_deterministic_on_a_cpu_machine_reruns_nothing(world, walk, tmp_path) -> None:
    """Before: with ``device: auto`` on a machine without a GPU, ``cuda_deterministic: false`` retrained every run
    (byte-identical: CUDA's algorithms never touch a CPU run) and reran the analysis; now the slice the jobs receive,
    the store keys, the gate and the analysis identity are keyed on the device class, and nothing is planned."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a GPU machine device: auto trains on CUDA, where the value changes the bytes")
    overlay = yaml.safe_load(world["overlay"].read_text())
    assert overlay.get("device", "auto") == "auto"
    overlay["cuda_deterministic"] = False
    (tmp_path / "nondeterministic.yaml").write_text(yaml.safe_dump(overlay))
    from hasfl.dag import preflight

    base, walked = walk(world["tmp"], world["overlay"]), walk(world["tmp"], tmp_path / "nondeterministic.yaml")
    # the session keys a local build on the CPU class where the device it picks is the CPU (hasfl.dag.session)
    assert preflight.device_of(walked.config, preflight.hardware()) == "cpu"
    assert not (walked.status.rerun or walked.status.missing), walked.status
    assert walked.params() == base.params()  # the slices the jobs receive: keyed on the CPU class
    standalone = yaml.safe_load(world["standalone"].read_text()) | {"cuda_deterministic": False}
    (tmp_path / "nondeterministic-standalone.yaml").write_text(yaml.safe_dump(standalone))
    cli = _hasfl("verify", world["results"], "--config", tmp_path / "nondeterministic-standalone.yaml")
    assert cli.returncode == 0 and "identities consistent" in cli.stdout, cli.stderr[-2000:]
    # the same value forced to the GPU rule (device: cuda) is another run: refused here for want of a GPU, so the
    # difference is checked on the record itself (tests/test_outputs.py)


# --- 12 (and 1's config rule). named before the pre-flight, never a traceback ------------------------------
@pytest.mark.parametrize(("change", "message"), [
    ({"seeds": [2**63]}, "config key 'seeds[0]': must be <= 4294967295"),
    ({"dataset_params": {"digits": {"model": {"pool_after": [0, 1, 2, 3]}}}},
     "4 2x2 max-pools shrink digits's 8x8 input to nothing"),
    ({"datasets": ["shakespeare"], "dataset_params": {"shakespeare": {"seq_len": 500}}},
     "config key 'dataset_params.shakespeare.seq_len': 500-character windows do not fit"),
    ({"federation": {"rounds": 10}, "hasfl": {"warmup": 10}}, "config key 'hasfl.warmup'"),
    ({"federation": {"rounds": 10}, "hasfl": {"warmup": 9}}, "leaves no round after t0"),
])
def test_12_bad_presets_are_named_before_the_preflight(world, tmp_path, change, message) -> None:
    """Before: each ran (or failed with a traceback after the pre-flight, some after all training). The refusal is
    decided in process by what the Snakefile's session runs on the config files (``hasfl.config.validate_config`` over
    config.yaml, presets/quick.yaml and the overlay, merged as presets are); that the Snakefile's session prints it and
    stops before the pre-flight is the next test."""
    from hasfl.config import ConfigError, deep_merge, read_yaml, validate_config

    overlay = deep_merge(yaml.safe_load(world["overlay"].read_text()), change)
    merged = read_yaml(world["tmp"] / "config.yaml")
    for layer in (read_yaml(world["tmp"] / "presets/quick.yaml"), overlay):
        merged = deep_merge(merged, layer)
    with pytest.raises(ConfigError) as refused:
        validate_config(merged)
    assert message in str(refused.value)


def test_12_a_bad_preset_stops_snakemake_before_the_preflight(world, plan, tmp_path) -> None:
    """The Snakefile's half of the test above, for one of its presets, in process (conftest ``plan``; the exit code
    Snakemake gives a session's stop, end to end: test_12_no_gpu_and_an_unwritable_results_folder_stop_before_any_job
    and test_8): exit 1, the message, no pre-flight, no traceback."""
    from hasfl.config import deep_merge

    overlay = deep_merge(yaml.safe_load(world["overlay"].read_text()), {"seeds": [2**63]})
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(overlay))
    res = plan(world["tmp"], "presets/quick.yaml", tmp_path / "bad.yaml", basedir=world["tmp"])
    assert res.code == 1 and "config key 'seeds[0]': must be <= 4294967295" in res.stderr, res.stderr[-2000:]
    assert "pre-flight" not in res.stderr and "Traceback" not in res.stderr


def test_12_no_gpu_and_an_unwritable_results_folder_stop_before_any_job(world, sm, tmp_path) -> None:
    """Before: `device: cuda` without a GPU started the run (the pre-flight only noticed); a results folder
    that cannot be written ended in a traceback."""
    cuda = yaml.safe_load(world["overlay"].read_text()) | {"device": "cuda", "name": "tiny-cuda",
                                                          "precision": "fp32"}
    (tmp_path / "cuda.yaml").write_text(yaml.safe_dump(cuda))
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    res = sm("--cores", "1", "all", "--configfile", "presets/quick.yaml", tmp_path / "cuda.yaml")
    assert res.returncode == 1 and "'device' is 'cuda' but this machine has no GPU" in res.stderr, res.stderr[-2000:]
    assert not (world["results"].parent / "tiny-cuda" / "logs").exists()  # no job started

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    unwritable = yaml.safe_load(world["overlay"].read_text()) | {"results_dir": str(blocker)}
    (tmp_path / "unwritable.yaml").write_text(yaml.safe_dump(unwritable))
    res = sm("--cores", "1", "all", "--configfile", "presets/quick.yaml", tmp_path / "unwritable.yaml")
    assert res.returncode == 1 and "cannot be written" in res.stderr and "is a file" in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr


def test_the_chain_audit_names_a_run_in_the_wrong_folder(world, tmp_path) -> None:
    """hasfl.dag.identity.audit without a preset: a run moved into another method's folder is named."""
    from hasfl.dag.outputs import audit

    copy = tmp_path / "moved"
    shutil.copytree(world["results"], copy)
    shutil.rmtree(copy / "runs/digits/fedprox/seed42")
    shutil.copytree(copy / "runs/digits/hasfl/seed42", copy / "runs/digits/fedprox/seed42")
    found = audit(None, copy)
    assert len(found.errors) == 1
    assert found.errors[0].startswith("runs/digits/fedprox/seed42 holds the run of digits / hasfl / seed 42; move it")
    assert json.loads((copy / "runs/digits/fedprox/seed42/run.json").read_text())["method"] == "hasfl"


def test_the_results_page_renderer_is_no_analysis_code(repo, tmp_path) -> None:
    """`hasfl results-page` (the CLI only) renders a finished folder; no DAG job runs it, so an edit of it reruns no
    analysis (it did: every folder's analysis, bn_sensitivity 28 min on the coverage rung, for a page change).
    Every other file under ANALYSIS_CODE still counts."""
    from hasfl.dag.identity import ANALYSIS_CODE, NOT_ANALYSIS_CODE, analysis_code_digest

    for rel in ANALYSIS_CODE:
        src, dst = Path(repo) / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    before = analysis_code_digest(tmp_path)
    page = tmp_path / NOT_ANALYSIS_CODE[0]
    page.write_text(page.read_text() + "\n# an edit of the page renderer\n")
    assert analysis_code_digest(tmp_path) == before
    stats = tmp_path / "src/hasfl/analysis/stats.py"
    stats.write_text(stats.read_text() + "\n# an edit of the statistics\n")
    assert analysis_code_digest(tmp_path) != before
