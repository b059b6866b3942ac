"""The run store checks content against its key (issue 46 fault 1): an entry whose files match its own manifest but
whose manifest identity hashes to another key is refused when a job would link it, naming it; in-process on the
digits data stage (seconds), no Snakemake."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from hasfl.config import data_config, load_config
from hasfl.dag.identity import data_identity
from hasfl.dag.outputs import RunRecord, data_key, data_source
from hasfl.dag.jobs import stage_data
from hasfl.dag.store import check_key, entry_of, store_of
from hasfl.integrity import IntegrityError

REPO = Path(__file__).resolve().parents[1]


def _digits(alpha: float, tmp_path: Path) -> tuple[dict, dict]:
    cfg = load_config(REPO / "presets" / "quick.yaml")
    cfg = copy.deepcopy(cfg)
    cfg["partition"]["alpha"] = alpha
    dc = data_config(cfg, "digits")
    return dc, data_identity(dc, 42, "test-code")


def test_an_entry_holding_another_keys_content_is_refused_not_linked(tmp_path):
    """The hostile trial's case: the alpha-100 partition placed under the alpha-0.3 key. Before, the entry was
    'every file checked' and linked (a new variant trained on the wrong partition, exit 0); now the job refuses,
    naming the entry and the key its content belongs to, and links nothing."""
    results = tmp_path / "results" / "quick"
    results.mkdir(parents=True)
    dc_a, id_a = _digits(100.0, tmp_path)
    dc_b, id_b = _digits(0.3, tmp_path)
    assert data_key(id_a) != data_key(id_b)
    stage_data(dc_a, 42, results / "data/digits/seed42", id_a, results)
    store = store_of(results)
    entry_a, entry_b = entry_of(store, "data", data_key(id_a)), entry_of(store, "data", data_key(id_b))
    shutil.copytree(entry_a, entry_b)  # another key's content, its own manifest intact
    out = tmp_path / "variant" / "data/digits/seed42"
    with pytest.raises(IntegrityError, match="holds the content of another key") as err:
        stage_data(dc_b, 42, out, id_b, results)
    assert str(entry_b) in str(err.value) and data_key(id_a)[:16] in str(err.value)
    assert not out.exists() or not any(out.iterdir())  # nothing linked
    shutil.rmtree(entry_b)  # what the message says to do: the job then computes its own entry
    stage_data(dc_b, 42, out, id_b, results)
    assert (out / "manifest.json").resolve().parent == entry_b.resolve()


def test_a_run_entry_is_checked_against_its_key_with_the_jobs_data_stage():
    identity = {"config": {"method": "hasfl", "seed": 42}, "inputs": {"partition.parquet": "a", "clients.parquet": "b"},
                "code": "c", "budget": None, "device_class": "cpu"}
    source = data_source({"dataset": "digits", "seed": 42, "config": {}, "raw": {}, "code": "x"})
    key = RunRecord(identity["config"], "c", "cpu", source, identity["inputs"]).key()
    check_key(Path("e"), {"identity": identity}, key, lambda i: RunRecord.recorded(i, source).key())
    other = {**identity, "config": {"method": "hasfl", "seed": 43}}
    with pytest.raises(IntegrityError, match="hashes to"):
        check_key(Path("e"), {"identity": other}, key, lambda i: RunRecord.recorded(i, source).key())
    with pytest.raises(IntegrityError, match="no identity"):
        check_key(Path("e"), {}, key, lambda i: RunRecord.recorded(i, source).key())


def test_equal_numbers_give_equal_keys():
    """Issue 46 fault 3: ``capacity.tiers`` with ``1`` instead of ``1.0`` (the same value) retrained the data stage
    and every run, byte-identical. Config loading (load_config, and the Snakefile's session through the same
    canonical_numbers) writes an integer at a key the schema types ``number`` as its float; integer keys stay
    integers."""
    from hasfl.config import canonical_numbers, read_yaml
    from hasfl.dag.identity import run_slice
    from hasfl.dag.identity import digest

    quick = REPO / "presets" / "quick.yaml"
    plain = load_config(quick)
    ints = load_config(quick, overrides=["capacity.tiers=[0.25,0.5,0.75,1]", "partition.alpha=1"])
    floats = load_config(quick, overrides=["capacity.tiers=[0.25,0.5,0.75,1.0]", "partition.alpha=1.0"])
    assert ints["capacity"]["tiers"] == [0.25, 0.5, 0.75, 1.0] and isinstance(ints["capacity"]["tiers"][3], float)
    assert isinstance(ints["partition"]["alpha"], float) and isinstance(ints["seeds"][0], int)
    assert isinstance(ints["federation"]["rounds"], int)
    for d, m in (("digits", "hasfl"), ("shakespeare", "fedavg")):
        assert digest(run_slice(ints, d, m, 42)) == digest(run_slice(floats, d, m, 42))
        assert digest(data_config(ints, d)) == digest(data_config(floats, d))
    assert digest(run_slice(plain, "digits", "hasfl", 42)) == digest(run_slice(canonical_numbers(plain), "digits",
                                                                                 "hasfl", 42))
    raw = read_yaml(REPO / "config.yaml")
    assert canonical_numbers(raw)["capacity"] == raw["capacity"]  # the shipped presets are canonical already
    # issue 62: -0.0 is 0.0 (JSON writes them apart): config loading, the slices and the digests give one identity
    neg = load_config(quick, overrides=["method_params.fedprox.mu=-0.0"])
    pos = load_config(quick, overrides=["method_params.fedprox.mu=0.0"])
    assert str(neg["method_params"]["fedprox"]["mu"]) == "0.0"
    assert digest(run_slice(neg, "digits", "fedprox", 42)) == digest(run_slice(pos, "digits", "fedprox", 42))
    assert digest({"mu": -0.0, "x": [-0.0]}) == digest({"mu": 0.0, "x": [0.0]})


@pytest.mark.parametrize("command", [
    ["data", "--config", "presets/quick.yaml", "--dataset", "digits", "--seed", "42", "--overwrite"],
    ["train", "--config", "presets/quick.yaml", "--dataset", "digits", "--method", "hasfl", "--seed", "42"],
    ["export", "tensorboard", "RESULTS"],
])
def test_no_command_writes_inside_a_run_store(command, tmp_path, capsys):
    """Issue 46 fault 2: `hasfl data / train / export tensorboard --out` into results/.store swapped or rewrote a
    sealed entry every folder shares; each now stops with exit 2 naming the store, before writing anything (an
    entry folder and a folder beneath one alike)."""
    from hasfl.cli import main

    store = tmp_path / "results" / ".store"
    (tmp_path / "results" / "quick" / "runs").mkdir(parents=True)
    for out in (store / "runs" / "k", store / "data" / "k" / "sub"):
        args = [str(tmp_path / "results" / "quick") if a == "RESULTS" else
                (str(REPO / a) if a.startswith("presets/") else a) for a in command]
        assert main([*args, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "inside the run store" in err and str(store) in err, err
        assert not out.exists()


def _linked_world(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A results folder whose run folder links one store entry (two files and the manifest), made with the store's own
    link_into."""
    import json

    from hasfl.dag.store import link_into

    results = tmp_path / "results" / "quick"
    entry = tmp_path / "results" / ".store" / "runs" / ("k" * 64)
    entry.mkdir(parents=True)
    for name in ("clients.parquet", "rounds.parquet"):
        (entry / name).write_text(name)
    (entry / "manifest.json").write_text(json.dumps({"files": {"clients.parquet": {}, "rounds.parquet": {}}}))
    folder = results / "runs" / "digits" / "hasfl" / "seed42"
    link_into(entry, folder)
    return results, entry, folder


def _links(root: Path) -> dict[str, str]:
    import os

    return {p.relative_to(root).as_posix(): os.readlink(p) for p in sorted(root.rglob("*")) if p.is_symlink()}


def test_a_link_repointed_at_a_missing_entry_is_relinked_from_the_entry_that_holds_it(tmp_path):
    """The fault found while measuring (issue 46): one run file's link pointed at a store entry that is gone. The
    session said "made again" and then refused "delete the folder" on every later run, and a dry run had already
    deleted the link. Now a dry run changes nothing and says what a run would do; a run points the link at the entry
    that holds the file (nothing retrains); a folder whose entry is gone loses its links (its job links or recomputes
    its entry); a store that is missing (unmounted, moved) is named and nothing is removed."""
    import os

    from hasfl.dag.store import repair_links

    results, entry, folder = _linked_world(tmp_path)
    good = os.readlink(folder / "clients.parquet")
    (folder / "clients.parquet").unlink()
    os.symlink("../../../../../.store/runs/missing/clients.parquet", folder / "clients.parquet")
    before = _links(results)
    dry = repair_links(results, apply=False)
    assert dry.relinked == ("runs/digits/hasfl/seed42",) and dry.dropped == () and _links(results) == before
    done = repair_links(results, apply=True)
    assert done.relinked == dry.relinked and os.readlink(folder / "clients.parquet") == good
    assert (folder / "clients.parquet").read_text() == "clients.parquet"
    assert repair_links(results, apply=True) == type(done)((), ())  # nothing left to repair
    (folder / "rounds.parquet").unlink()  # a link removed (an older dry run did this): relinked too
    assert repair_links(results, apply=True).relinked == ("runs/digits/hasfl/seed42",)
    assert (folder / "rounds.parquet").is_symlink()
    store = entry.parent.parent
    store.rename(tmp_path / "moved")  # the store unmounted: every link dangles, none is removed
    before = _links(results)
    with pytest.raises(IntegrityError, match="does not exist") as err:
        repair_links(results, apply=True)
    assert str(store) in str(err.value) and _links(results) == before
    (tmp_path / "moved").rename(store)
    import shutil

    shutil.rmtree(entry)  # the entry itself gone (gc --delete): the folder's links go, its job makes it again
    assert repair_links(results, apply=False).dropped == ("runs/digits/hasfl/seed42",) and _links(results) == before
    assert repair_links(results, apply=True).dropped == ("runs/digits/hasfl/seed42",)
    assert _links(results) == {} and folder.is_dir()


def test_gc_leaves_an_entry_a_job_holds_and_keeps_a_killed_jobs_checkpoint(tmp_path):
    """Issue 46 faults 4 and 6: `hasfl gc --delete` while a DAG runs deleted a just-trained entry (the job had sealed
    it and not yet linked it); after a crash it deleted the killed run's .partial folder, so its rerun started at
    round 0. Now an entry whose lock a job holds is left alone (busy), and a .partial nobody writes is listed and
    kept unless --partial; an entry no folder links and no job holds is removed as before."""
    import json

    from hasfl.dag.gc import collect
    from hasfl.dag.store import entry_lock

    results, entry, folder = _linked_world(tmp_path)
    store = entry.parent.parent
    orphan, held = store / "runs" / ("a" * 64), store / "runs" / ("b" * 64)
    for e in (orphan, held):
        e.mkdir()
        (e / "manifest.json").write_text(json.dumps({"files": {}}))
    ckpt = store / "runs" / (("c" * 64) + ".partial")
    ckpt.mkdir()
    (ckpt / "checkpoint.pt").write_text("round 7")
    with entry_lock(held):  # a job sealed it and is about to link it
        found = collect(tmp_path / "results", delete=True)
    assert not orphan.exists() and held.is_dir() and ckpt.is_dir() and entry.is_dir()
    assert held in found.busy and ckpt in found.partial and found.referenced == 1
    found = collect(tmp_path / "results", delete=True)  # the job is gone and never linked it: now it goes
    assert not held.exists() and ckpt.is_dir()
    collect(tmp_path / "results", delete=True, partial=True)
    assert not ckpt.exists() and entry.is_dir() and (folder / "clients.parquet").read_text() == "clients.parquet"


def test_a_planned_link_whose_entry_is_gone_by_the_job_is_made_and_said(tmp_path, caplog):
    """Issue 46 point 4: a link rule's job (workflow/rules/link.smk) runs the same job function as its twin with
    ``link=True``. An entry the build found finished but that is gone when the job runs (deleted in between) is made
    all the same (never a wrong or missing result), and the log says the plan was a link."""
    results = tmp_path / "results" / "quick"
    results.mkdir(parents=True)
    dc, ident = _digits(0.3, tmp_path)
    out = results / "data/digits/seed42"
    with caplog.at_level("WARNING", logger="hasfl"):
        stage_data(dc, 42, out, ident, results, link=True)
    assert (out / "manifest.json").resolve().parent == entry_of(store_of(results), "data", data_key(ident)).resolve()
    assert any("planned a link" in r.getMessage() and data_key(ident)[:16] in r.getMessage() for r in caplog.records)
    caplog.clear()
    again = tmp_path / "variant" / "data/digits/seed42"
    with caplog.at_level("WARNING", logger="hasfl"):
        stage_data(dc, 42, again, ident, results, link=True)  # finished now: linked, nothing said
    assert not [r for r in caplog.records if "planned a link" in r.getMessage()]
    assert (again / "manifest.json").resolve() == (out / "manifest.json").resolve()


def test_a_run_job_refuses_code_other_than_the_code_the_dag_planned_with(tmp_path):
    """Issue 46 point 3: the run job receives its training-code digest from the rule (the session's, from the
    Snakefile's checkout). A job whose installed package is other code (a checkout beside a wheel, an edit after the
    plan) is refused naming both digests, before it trains or links anything."""
    from hasfl.dag.identity import data_slice, run_slice
    from hasfl.dag.jobs import train_run
    from hasfl.integrity import training_code_digest

    cfg = load_config(REPO / "presets" / "quick.yaml")
    results = tmp_path / "results" / "quick"
    results.mkdir(parents=True)
    dc, ident = _digits(0.3, tmp_path)
    stage = results / "data/digits/seed42"
    stage_data(dc, 42, stage, ident, results)
    out = results / "runs/digits/fedavg/seed42"
    with pytest.raises(IntegrityError, match="not the code the DAG planned") as err:
        train_run(run_slice(cfg, "digits", "fedavg", 42), data_slice(cfg, "digits"), out, data_dir=stage,
                  results=results, code="0" * 64)
    assert training_code_digest("fedavg", "digits")[:12] in str(err.value) and "000000000000" in str(err.value)
    assert not out.exists() and not (store_of(results) / "runs").exists()
