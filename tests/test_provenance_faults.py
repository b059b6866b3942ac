"""Issue 46 faults 8, 9, 15 and point 6 (dirty tree): the RO-Crate and the results page name the code and config
the runs were made with, not the exporting checkout's.

* fault 8: a run's manifest records its training-code digest (``identity.code``, no commit): a crate whose workflow
  is not that code is refused (``allow_other_code`` ships it marked as not theirs), and the page says which code made
  the runs and when this checkout's differs;
* fault 9: the config files given are checked against each run's recorded config slice (``identity.config`` vs
  :func:`hasfl.config.run_config` of the merged files), refused naming the first differing key;
* fault 15: each file is hashed as it is copied into the crate and compared with its manifest;
* point 6: a crate exported from a dirty checkout warns, naming the modified and untracked files, and ships them.

The folders are fabricated as the DAG leaves them (run files linked into a run-store entry, manifests, findings.json,
the analysis manifest), with identities that record a config slice and code digests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hasfl.analysis.manifest import verify_analysis
from hasfl.config import canonical_numbers, deep_merge, read_yaml, run_config, validate_config
from hasfl.integrity import training_code_digest, verify_results

#: this checkout is dirty while people work in it: the warning is tested on a checkout of its own
pytestmark = pytest.mark.filterwarnings("ignore::hasfl.crate.CrateWarning")

REPO = Path(__file__).resolve().parents[1]
QUICK = REPO / "presets" / "quick.yaml"
METHODS = ("hasfl", "fedavg")
FINDINGS = {"findings": [{"id": "F1c", "claim": "c", "verdict": "supported", "reason": "r",
                          "units": [{"unit": "digits", "verdict": "supported"}]}]}


def _merged(*files: Path) -> dict:
    """config.yaml with ``files`` merged over it, as the DAG reads them."""
    config = read_yaml(REPO / "config.yaml")
    for f in files:
        config = deep_merge(config, read_yaml(f))
    validate_config(config)
    return canonical_numbers(config)


def _slice(config: dict, dataset: str, method: str, seed: int) -> dict:
    return json.loads(json.dumps(run_config(config, dataset, method, seed), sort_keys=True))


def _analysis_code(repo: Path = REPO) -> str:
    from hasfl.dag.identity import analysis_code_digest

    return analysis_code_digest(repo)


def _make_results(write, tmp_path: Path, *, name: str = "quick", rounds: int | None = None, seed: int = 42,
                 code: dict[str, str] | None = None, repo: Path = REPO) -> Path:
    """``results/<name>``: digits x hasfl, fedavg x ``seed``, each run's files links into its store entry, the
    manifests recording the quick preset's config slice (``rounds`` overriding federation.rounds) and the training
    code of ``repo`` (``code``: method -> a digest recorded instead); findings.json, a table and the analysis
    manifest (its identity records the analysis code of ``repo``)."""
    config = _merged(QUICK)
    runs = {}
    for method in METHODS:
        cfg = _slice(config, "digits", method, seed)
        if rounds is not None:
            cfg["federation"]["rounds"] = rounds
        recorded = (code or {}).get(method) or training_code_digest(method, "digits", repo / "src" / "hasfl")
        runs[method] = {"digest": f"digest-{method}", "config": cfg, "code": recorded}
    return write(tmp_path, name, runs, FINDINGS,
                                {"digest": "analysis-digest", "code": _analysis_code(repo)}, seed=seed)


@pytest.fixture
def make_results(linked_results):
    """``make_results(tmp_path, *, name, rounds, seed, code, repo)``: :func:`_make_results` over the shared
    ``linked_results`` writer."""
    return lambda tmp_path, **kw: _make_results(linked_results, tmp_path, **kw)


def _overlay(tmp_path: Path, **keys: object) -> Path:
    """presets/quick.yaml with ``keys`` merged over it, in a file of its own (the name stays quick)."""
    path = tmp_path / "quick-overlay.yaml"
    path.write_text(yaml.safe_dump(deep_merge(read_yaml(QUICK), keys)))
    return path


# ---------------------------------------------------------------------------------------- fault 8: code
def test_the_crate_refuses_workflow_code_that_is_not_the_runs_own(tmp_path, make_results) -> None:
    """A run trained by other training code than this checkout's (its manifest records another code digest): the
    crate would ship this checkout's code as the runs' own; refused naming the run and both digests, nothing left.
    ``allow_other_code`` ships it, the metadata saying whose code it is not."""
    from rocrate.rocrate import ROCrate

    from hasfl.crate import CrateError, export_rocrate

    results = make_results(tmp_path, code={"fedavg": "0" * 64})
    out = tmp_path / "crate"
    with pytest.raises(CrateError) as err:
        export_rocrate(results, out)
    msg = str(err.value)
    assert "runs/digits/fedavg/seed42" in msg and "training code" in msg and "recorded 000000000000" in msg
    assert training_code_digest("fedavg", "digits")[:12] in msg and "hasfl/seed42" not in msg
    assert "--allow-other-code" in msg
    assert not out.exists() and not list(tmp_path.glob(".crate*"))
    export_rocrate(results, out, allow_other_code=True)
    crate = ROCrate(out)
    version = crate.mainEntity["version"]
    assert "not the code that made these results" in version, version
    (action,) = [e for e in crate.get_entities() if e.type == "CreateAction"]
    assert "runs/digits/fedavg/seed42" in action["description"] and "000000000000" in action["description"]


def test_the_crate_names_the_code_the_runs_record(tmp_path, make_results) -> None:
    """Runs trained by this checkout's code: the crate says so (each run's training-code digest, in its entity and
    in the run's description)."""
    from rocrate.rocrate import ROCrate

    from hasfl.crate import export_rocrate

    results = make_results(tmp_path)
    out = tmp_path / "crate"
    export_rocrate(results, out)
    crate = ROCrate(out)
    (action,) = [e for e in crate.get_entities() if e.type == "CreateAction"]
    assert "training code recorded by the 2 runs is the shipped workflow's" in action["description"]
    run = crate.get("runs/digits/hasfl/seed42/")
    assert run["description"] == f"training code {training_code_digest('hasfl', 'digits')}"


def test_the_crate_refuses_an_analysis_of_other_code(tmp_path, make_results) -> None:
    from hasfl.crate import CrateError, export_rocrate

    results = make_results(tmp_path)
    manifest = json.loads((results / "analysis.manifest.json").read_text())
    manifest["identity"]["code"] = "f" * 64
    (results / "analysis.manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CrateError, match=r"analysis.manifest.json analysis code: recorded ffffffffffff"):
        export_rocrate(results, tmp_path / "crate")


def _page(results: Path, out: Path, *configfiles: Path) -> str:
    from hasfl.analysis.results_page import write_results_page

    write_results_page(results, out, configfiles=list(configfiles) or None)
    return out.read_text()


def test_the_page_says_which_code_made_the_runs(tmp_path, make_results) -> None:
    """The page named the exporting commit as the runs' own: it now says whether the runs' recorded training code is
    this checkout's, and names the runs whose code differs with both digests."""
    same = _page(make_results(tmp_path / "a"), tmp_path / "a.md")
    assert "The runs' training code (the digests their manifests record) is this checkout's." in same
    assert "| training code (runs' manifests) | 2 runs, 2 digests, each this checkout's |" in same
    other = _page(make_results(tmp_path / "b", code={"fedavg": "0" * 64}), tmp_path / "b.md")
    assert "**The runs were not all trained by this checkout's code**: 1 of 2 runs record" in other
    assert ("runs/digits/fedavg/seed42: recorded `000000000000`, this checkout "
            f"`{training_code_digest('fedavg', 'digits')[:12]}`") in other
    assert "| training code (runs' manifests) | 2 runs, 2 digests; 1 of 2 runs differ from this checkout's |" in other


# ---------------------------------------------------------------------------------------- fault 9: config
def test_the_crate_refuses_config_files_that_do_not_make_the_runs(tmp_path, make_results) -> None:
    """A 12-round folder "made by" the 30-round quick preset: refused naming the first differing key; the overlay
    that sets 12 rounds is accepted."""
    from hasfl.crate import CrateError, export_rocrate

    results = make_results(tmp_path, rounds=12)
    with pytest.raises(CrateError, match=r"runs/digits/fedavg/seed42: federation.rounds: runs 12, config files 30"):
        export_rocrate(results, tmp_path / "crate")
    assert not (tmp_path / "crate").exists()
    assert export_rocrate(results, tmp_path / "crate", [_overlay(tmp_path, federation={"rounds": 12})]).runs == 2


def test_the_crate_refuses_config_files_without_the_runs_seed(tmp_path, make_results) -> None:
    from hasfl.crate import CrateError, export_rocrate

    results = make_results(tmp_path, seed=7)
    with pytest.raises(CrateError, match=r"runs/digits/fedavg/seed7: seed 7 is not in the config files' seeds"):
        export_rocrate(results, tmp_path / "crate")


def test_the_page_refuses_config_files_that_do_not_make_the_runs(tmp_path, make_results) -> None:
    from hasfl.analysis.results_page import ResultsPageError

    results = make_results(tmp_path, rounds=12)
    with pytest.raises(ResultsPageError, match=r"federation.rounds: runs 12, config files 30"):
        _page(results, tmp_path / "p.md", QUICK)
    assert not (tmp_path / "p.md").exists()
    page = _page(results, tmp_path / "p.md", _overlay(tmp_path, federation={"rounds": 12}))
    assert "quick-overlay.yaml" in page


# ---------------------------------------------------------------------------------------- fault 15: copy
def test_a_file_changed_between_the_check_and_the_copy_is_refused(tmp_path, make_results) -> None:
    """The check (verify_results, verify_analysis) passes, then a writer that does not take this folder's lock (a
    DAG of another results folder sharing the store entry) changes a run file: the copy hashes the bytes it writes
    and refuses, naming the file."""
    from hasfl.crate import CrateError, _build

    results = make_results(tmp_path)
    verify_results(results)
    analysis = verify_analysis(results)
    (results / "runs" / "digits" / "hasfl" / "seed42" / "run.json").resolve().write_text('{"method": "edited"}')
    staging = tmp_path / "staging"
    staging.mkdir()
    with pytest.raises(CrateError, match=r"runs/digits/hasfl/seed42/run.json' changed while it was copied"):
        _build(staging, results, [QUICK], analysis)


def test_an_analysis_file_changed_after_the_check_is_refused(tmp_path, make_results) -> None:
    from hasfl.crate import CrateError, _build

    results = make_results(tmp_path)
    verify_results(results)
    analysis = verify_analysis(results)
    (results / "findings.json").write_text(json.dumps({"findings": []}))
    staging = tmp_path / "staging"
    staging.mkdir()
    with pytest.raises(CrateError, match=r"findings.json' changed while it was copied .*analysis.manifest.json"):
        _build(staging, results, [QUICK], analysis)


# ---------------------------------------------------------------------------------------- point 6: dirty tree
def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def _checkout(tmp_path: Path) -> Path:
    """A committed git checkout of the workflow (Snakefile, config.yaml, pyproject.toml, presets/quick.yaml,
    src/, workflow/)."""
    repo = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for rel in ("src", "workflow"):
        shutil.copytree(REPO / rel, repo / rel, ignore=ignore)
    for rel in ("Snakefile", "config.yaml", "pyproject.toml", "presets/quick.yaml"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, repo / rel)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo


def test_a_dirty_checkout_warns_naming_its_files_and_ships_them(tmp_path, make_results) -> None:
    """A modified tracked file and an uncommitted new module: the crate warns naming both, its workflow holds the
    new module (so it imports) and its metadata lists them; a clean checkout exports without a warning."""
    import warnings

    from rocrate.rocrate import ROCrate

    from hasfl.crate import CrateWarning, export_rocrate

    repo = _checkout(tmp_path)
    results = make_results(tmp_path, repo=repo)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CrateWarning)
        export_rocrate(results, tmp_path / "clean", repo=repo)
    rule = repo / "workflow" / "rules" / "common.smk"
    rule.write_text(rule.read_text() + "\n# edited\n")
    (repo / "src" / "hasfl" / "newmod.py").write_text('"""A module not committed yet."""\n')
    with pytest.warns(CrateWarning) as caught:
        export_rocrate(results, tmp_path / "dirty", repo=repo)
    msg = str(caught[0].message)
    assert "modified: workflow/rules/common.smk" in msg and "untracked: src/hasfl/newmod.py" in msg
    assert (tmp_path / "dirty" / "workflow" / "src" / "hasfl" / "newmod.py").is_file()
    assert (tmp_path / "dirty" / "workflow" / "workflow" / "rules" / "common.smk").read_text().endswith("# edited\n")
    wf = ROCrate(tmp_path / "dirty").mainEntity
    assert "(dirty)" in wf["version"] and "src/hasfl/newmod.py" in wf["description"]


def test_the_command_line_refuses_other_code_and_allow_other_code_ships_it(hasfl_cli, tmp_path, make_results) -> None:
    """``hasfl export rocrate`` exits 2 naming the run whose code differs; ``--allow-other-code`` writes the crate."""
    results = make_results(tmp_path, code={"hasfl": "0" * 64})
    out = tmp_path / "crate"
    res = hasfl_cli("export", "rocrate", results, "--out", out)
    assert res.returncode == 2 and "runs/digits/hasfl/seed42 training code: recorded 000000000000" in res.stderr
    assert "Traceback" not in res.stderr and not out.exists()
    res = hasfl_cli("export", "rocrate", results, "--out", out, "--allow-other-code")
    assert res.returncode == 0, res.stderr
    assert "hasfl export: RO-Crate" in res.stdout and (out / "ro-crate-metadata.json").is_file()
