"""`hasfl export rocrate` (issue 38, optional point): a finished results folder as a Workflow Run RO-Crate that
ro-crate-py reads back, holding real bytes checked against their manifests, and refusing a modified folder."""

from __future__ import annotations

import json

import pytest

from hasfl.analysis.manifest import verify_analysis
from hasfl.crate import METADATA, CrateError, export_rocrate
from hasfl.integrity import IntegrityError, ResultsLock, verify_results

FINDINGS = {"findings": [
    {"id": "F1c", "verdict": "supported", "units": [{"unit": "digits", "verdict": "supported"}]},
    {"id": "F9b", "verdict": "inconclusive", "reason": "not run: uniform_rolling not run in this preset",
     "units": []}]}


@pytest.fixture
def results(tmp_path, linked_results):
    """results/quick: two runs whose files are links into a store entry (as the DAG leaves them), findings.json,
    a table, and the analysis manifest over them."""
    root = linked_results(tmp_path, "quick", {m: {"digest": f"digest-{m}"} for m in ("hasfl", "fedavg")}, FINDINGS,
                          {"digest": "analysis-digest"})
    (root / ".hasfl.lock").write_text("")  # the DAG's lock file: a results folder, left out of the crate
    return root


def test_the_crate_holds_real_checked_bytes_and_metadata_ro_crate_py_reads(results, tmp_path) -> None:
    from rocrate.rocrate import ROCrate

    out = tmp_path / "crate"
    summary = export_rocrate(results, out)
    assert summary.runs == 2 and summary.workflow_files > 10
    run = out / "runs" / "digits" / "hasfl" / "seed42"
    assert not any(p.is_symlink() for p in out.rglob("*")), "the crate holds real files, not links into the store"
    assert (run / "run.json").read_text() == json.dumps({"method": "hasfl"})
    assert not (out / ".hasfl.lock").exists()
    # on arrival it is checked like any results folder
    assert verify_results(out)["runs"] == 2 and verify_analysis(out)["identity"]["digest"] == "analysis-digest"

    crate = ROCrate(out)
    wf = crate.mainEntity
    assert wf.id == "workflow/Snakefile" and "ComputationalWorkflow" in wf.type
    assert (out / "workflow" / "Snakefile").is_file() and (out / "workflow" / "src" / "hasfl" / "integrity.py").is_file()
    assert wf["programmingLanguage"]["name"] == "Snakemake"
    profiles = {p.id for p in crate.root_dataset["conformsTo"]}
    assert {"https://w3id.org/ro/wfrun/process/0.5", "https://w3id.org/ro/wfrun/workflow/0.5"} <= profiles
    (action,) = [e for e in crate.get_entities() if e.type == "CreateAction"]
    assert action["instrument"].id == wf.id
    assert [o.id for o in action["object"]] == ["workflow/presets/quick.yaml"]
    assert (out / "workflow" / "presets" / "quick.yaml").is_file()
    result_ids = {r.id for r in action["result"]}
    assert {"runs/", "findings.json", "analysis.manifest.json", "tables/"} <= result_ids
    runs = crate.get("runs/")
    assert {p.id: p["identifier"] for p in runs["hasPart"]} == {"runs/digits/fedavg/seed42/": "digest-fedavg",
                                                                 "runs/digits/hasfl/seed42/": "digest-hasfl"}
    assert crate.get("analysis.manifest.json")["identifier"] == "analysis-digest"
    # the verdicts as the pages show them: a finding the preset does not run is "not run"
    assert "F1c: supported, F9b: not run" in crate.get("findings.json")["description"]
    # every file or folder the metadata names is in the crate
    for e in crate.data_entities:
        assert (out / e.id).exists(), e.id


def test_a_modified_run_is_refused_and_nothing_is_left(results, tmp_path) -> None:
    target = results / "runs" / "digits" / "hasfl" / "seed42" / "run.json"
    entry = target.resolve()
    entry.write_text(json.dumps({"method": "edited"}))
    with pytest.raises(IntegrityError, match="run.json"):
        export_rocrate(results, tmp_path / "crate")
    assert not (tmp_path / "crate").exists() and not list(tmp_path.glob(".crate.*"))


def test_a_folder_a_dag_is_writing_is_refused(results, tmp_path) -> None:
    writer = ResultsLock(results)
    writer.acquire()  # what the DAG holds while it writes the folder
    try:
        with pytest.raises(IntegrityError, match="is being written by another run"):
            export_rocrate(results, tmp_path / "crate")
    finally:
        writer.release()
    assert not (tmp_path / "crate").exists()
    assert export_rocrate(results, tmp_path / "crate").runs == 2  # the lock is given back after an export


def test_where_a_crate_may_go_and_a_second_export_replaces_the_first(results, tmp_path) -> None:
    with pytest.raises(IntegrityError, match="inside the results folder"):
        export_rocrate(results, results / "crate")
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    with pytest.raises(CrateError, match="not a crate this command wrote"):
        export_rocrate(results, other)
    assert (other / "mine.txt").read_text() == "keep"
    out = tmp_path / "crate"
    export_rocrate(results, out)
    (out / "stale.txt").write_text("from an earlier export")
    export_rocrate(results, out)
    assert not (out / "stale.txt").exists() and (out / METADATA).is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert ResultsLock.NAME not in {p.name for p in out.iterdir()}


def test_bad_input_is_named(hasfl_cli, results, tmp_path) -> None:
    with pytest.raises(CrateError, match="config file .*nope.yaml"):
        export_rocrate(results, tmp_path / "c", configfiles=[tmp_path / "nope.yaml"])
    (results / "findings.json").unlink()
    with pytest.raises(CrateError, match="no findings.json"):
        export_rocrate(results, tmp_path / "c")
    res = hasfl_cli("export", "rocrate", str(results))
    assert res.returncode != 0 and "--out DIR" in res.stderr


@pytest.mark.parametrize("link", ["loop", "outside", "dangling"])
def test_a_link_that_is_not_into_the_run_store_is_refused_named(results, tmp_path, link) -> None:
    """Links were followed, so a symlink loop crashed the export and a link to any file shipped it. Now a link is
    followed only to a file of the folder or of its run store; any other is named and nothing is written."""
    outside = tmp_path / "secret.txt"
    outside.write_text("not a result")
    place = results / "tables" / "extra"
    place.parent.mkdir(exist_ok=True)
    place.symlink_to({"loop": results / "tables", "outside": outside, "dangling": tmp_path / "gone"}[link])
    what = {"loop": "links the folder", "outside": "links a file outside the results folder and its run store",
            "dangling": "is a link that leads nowhere"}[link]
    with pytest.raises(CrateError, match=f"tables/extra' {what}"):
        export_rocrate(results, tmp_path / "crate")
    assert not (tmp_path / "crate").exists() and not list(tmp_path.glob(".crate.*"))
