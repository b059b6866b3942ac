"""`hasfl compare A B` (issue 28): runs by identity and bytes, table cells beyond rounding, verdicts old -> new, and
the overlay figure. The runs are real tiny training runs (`hasfl train`); the tables and findings files are written
in the DAG's formats."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hasfl.analysis.compare import CompareError, compare, config_difference, plot, render
from hasfl.io import sha256_file, write_parquet

CLI = "import sys; from hasfl.cli import main; sys.exit(main(sys.argv[1:]))"


def _train(preset: Path, out: Path, method: str) -> None:
    subprocess.run([sys.executable, "-c", CLI, "train", "--config", str(preset), "--dataset", "digits", "--method",
                    method, "--seed", "42", "--out", str(out), "--threads", "1"], check=True, capture_output=True)


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_preset):
    """A: fedavg and fedprox (mu 1.0); B: the same fedavg run copied, fedprox with mu 0.5 and a run of B only."""
    root = tmp_path_factory.mktemp("compare")
    base = tiny_preset(root, "a", standalone=True, results_dir=None, data_dir=None)
    variant = tiny_preset(root, "b", standalone=True, results_dir=None, data_dir=None,
                          method_params={"fedprox": {"mu": 0.5}})
    a, b = root / "A", root / "B"
    for m in ("fedavg", "fedprox"):
        _train(base, a / "runs" / "digits" / m / "seed42", m)
    shutil.copytree(a / "runs" / "digits" / "fedavg", b / "runs" / "digits" / "fedavg")
    _train(variant, b / "runs" / "digits" / "fedprox" / "seed42", "fedprox")
    _train(base, b / "runs" / "digits" / "uniform" / "seed42", "uniform")
    for folder, acc, verdict in ((a, 0.5, "supported"), (b, 0.5 + 1e-3, "inconclusive")):
        (folder / "tables").mkdir()
        write_parquet(pd.DataFrame({"dataset": ["digits", "digits"], "method": ["fedavg", "fedprox"],
                                    "final_acc_pct": [70.0, acc], "n": [3, 3]}), folder / "tables" / "t.parquet")
        write_parquet(pd.DataFrame({"dataset": ["digits"], "r": [0.25]}), folder / "tables" / "same.parquet")
        (folder / "findings.json").write_text(json.dumps({"findings": [{"id": "F4", "verdict": "supported"},
                                                                       {"id": "F9b", "verdict": verdict}]}))
    return a, b


def test_compare_names_exactly_the_runs_cells_and_verdicts_that_differ(folders, tmp_path):
    a, b = folders
    res = compare(a, b)
    runs = {(r["method"]): r for r in res["runs"]}
    assert runs["fedavg"]["status"] == "identical"
    assert runs["fedprox"]["status"] == "different identity"
    assert runs["fedprox"]["config_keys"] == ["method_params.mu"]
    assert runs["uniform"]["status"] == "only in B"
    tables = {t["table"]: t for t in res["tables"]}
    assert tables["same"]["status"] == "identical"
    assert tables["t"]["status"] == "different" and tables["t"]["cells"] == 1
    assert tables["t"]["examples"][0]["column"] == "final_acc_pct"
    assert [f["id"] for f in res["findings"] if f["moved"]] == ["F9b"]
    md = render(res)
    assert "1 identical" in md and "1 different identity" in md and "config: method_params.mu" in md
    assert "| F9b | supported | inconclusive |" in md and "F4" not in md.split("## Findings")[1]
    assert plot(res, tmp_path / "cmp.png") == ["digits/fedprox", "digits/uniform"]
    assert (tmp_path / "cmp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_same_identity_other_bytes_names_the_machines(folders, tmp_path):
    """A run whose identity matches but whose bytes differ is reported with the device and CPU instruction set each
    recorded (the cause the comparison suggests)."""
    a, b = folders
    c = tmp_path / "C"
    shutil.copytree(b, c)
    run = c / "runs" / "digits" / "fedavg" / "seed42"
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "final.pt").write_bytes((run / "final.pt").read_bytes() + b"\0")  # as a run on another machine would
    manifest["files"]["final.pt"]["sha256"] = sha256_file(run / "final.pt")  # differ, its manifest written after
    (run / "manifest.json").write_text(json.dumps(manifest))
    timings = json.loads((run / "timings.json").read_text())
    (run / "timings.json").write_text(json.dumps({**timings, "cpu_capability": "AVX2"}))
    res = compare(a, c)
    r = next(x for x in res["runs"] if x["method"] == "fedavg")
    assert r["status"] == "same identity, different bytes" and r["files"] == ["final.pt"]
    assert r["machine_b"]["cpu_capability"] == "AVX2" and "cpu_capability AVX2" in render(res)


def test_cli_and_bad_folders(folders, tmp_path, capsys):
    from hasfl.cli import main

    a, b = folders
    assert main(["compare", str(a), str(b), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["status"] for r in doc["runs"]} == {"identical", "different identity", "only in B"}
    with pytest.raises(CompareError, match="is not a folder"):
        compare(tmp_path / "missing", b)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="not a results folder"):
        compare(tmp_path / "empty", b)
    assert config_difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3, "d": 0}}) == ["a.c", "a.d"]


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from hasfl.cli import main

    rc = main(["compare", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _assert_failed(folders, c: Path, problem: str, capsys) -> None:
    """``compare(A, C)`` reports A's fedavg run in C as failed verification with ``problem``, never identical, in
    Markdown and JSON, and the CLI names it and exits non-zero."""
    a, _ = folders
    res = compare(a, c)
    fedavg = next(r for r in res["runs"] if r["method"] == "fedavg")
    assert fedavg["status"] == "failed verification" and fedavg["in"] == "both", fedavg
    assert list(fedavg["verification"]) == ["B"] and problem in fedavg["verification"]["B"], fedavg
    assert res["verification_failed"] == [{"folder": "B", "run": "runs/digits/fedavg/seed42",
                                           "problems": fedavg["verification"]["B"]}]
    md = render(res)
    assert "Verification: 1 run folder(s) FAILED" in md and problem in md and "0 identical" in md
    rc, out, err = _cli(capsys, a, c)
    assert rc != 0 and problem in out and "failed verification" in err
    assert f"B {(c / 'runs/digits/fedavg/seed42').as_posix()}: " in err and problem in err and "Traceback" not in err
    rc, out, err = _cli(capsys, a, c, "--json")
    doc = json.loads(out)
    assert rc != 0 and "identical" not in {r["status"] for r in doc["runs"]}
    assert problem in doc["verification_failed"][0]["problems"]


def test_a_copy_of_dangling_symlinks_is_not_identical(folders, tmp_path, capsys):
    """B's fedavg run as symlinks to files that are gone (a shared run whose source folder was deleted), the manifest
    copied: its manifest alone matches A's, its bytes are missing."""
    _, b = folders
    c = tmp_path / "C"
    shutil.copytree(b, c, symlinks=True)
    run = c / "runs" / "digits" / "fedavg" / "seed42"
    gone = tmp_path / "gone"
    gone.mkdir()
    for f in run.iterdir():
        if f.name != "manifest.json":
            shutil.move(f, gone / f.name)
            f.symlink_to(gone / f.name)
    shutil.rmtree(gone)
    _assert_failed(folders, c, f"missing: rounds.parquet is a dangling symlink (to '{gone / 'rounds.parquet'}'); "
                               "its manifest lists it", capsys)


def test_a_run_edited_after_its_manifest_is_not_identical(folders, tmp_path, capsys):
    """B's fedavg run with one test_acc changed to 0.99 in rounds.parquet after its manifest was written."""
    _, b = folders
    c = tmp_path / "C"
    shutil.copytree(b, c)
    rounds = c / "runs" / "digits" / "fedavg" / "seed42" / "rounds.parquet"
    df = pd.read_parquet(rounds)
    df.loc[df.index[-1], "test_acc"] = 0.99
    write_parquet(df, rounds)
    _assert_failed(folders, c, "modified: rounds.parquet sha256 differs from its manifest", capsys)
    assert not plot(compare(folders[0], c), tmp_path / "p.png").count("digits/fedavg")
