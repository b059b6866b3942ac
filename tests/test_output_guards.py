"""The CLI never writes into a results folder or a finished folder, also not through a symlink (fault 6c): `hasfl
results-page`, `hasfl data --out` and `hasfl train --out` resolve every symlink of the output path before the guard
(:func:`hasfl.integrity.refuse_results_folder`), including an output path that does not exist yet whose parent is
a link."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hasfl.cli import main
from hasfl.integrity import IntegrityError, owning_results, refuse_results_folder


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its sha256 (what a refused command must leave unchanged)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _locked_results(root: Path) -> Path:
    """A results folder as the workflow leaves it: ``.hasfl.lock`` and a data folder."""
    results = root / "results" / "quick"
    (results / "data" / "digits" / "seed42").mkdir(parents=True)
    (results / ".hasfl.lock").write_text("{}")
    return results


def _finished_run(root: Path) -> Path:
    """A finished run folder outside any results folder (it has a manifest.json)."""
    run = root / "scratch" / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "manifest.json").write_text('{"files": {}}')
    return run


@pytest.fixture(params=["locked", "finished"])
def target(request, tmp_path) -> tuple[Path, Path]:
    """(a symlink outside pointing to a subfolder of the protected folder, the protected folder): neither the
    link nor any folder above it holds the lock or the manifest, only the folder the link resolves into."""
    locked = request.param == "locked"
    protected = _locked_results(tmp_path) if locked else _finished_run(tmp_path)
    link = tmp_path / "outside" / "link"
    link.parent.mkdir()
    link.symlink_to(protected / ("data" if locked else "checkpoints"), target_is_directory=True)
    return link, protected


def _refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_guard_resolves_a_symlink_into_a_results_folder(tmp_path) -> None:
    results = _locked_results(tmp_path)
    (tmp_path / "out").symlink_to(results / "data", target_is_directory=True)
    assert owning_results(tmp_path / "out" / "new" / "page.md") == results.resolve()
    with pytest.raises(IntegrityError, match="inside the results folder"):
        refuse_results_folder(tmp_path / "out" / "not" / "yet" / "there", "--out")


def test_results_page_refuses_a_symlink_into_a_protected_folder(target, tmp_path, capsys) -> None:
    link, protected = target
    before = _snapshot(protected)
    err = _refused(["results-page", str(tmp_path / "any-results"), str(link / "page.md")], capsys)
    assert "inside the results folder" in err or "inside the finished folder" in err, err
    assert str(protected.resolve()) in err
    assert _snapshot(protected) == before and not (protected / "page.md").exists()


def test_data_out_refuses_a_symlink_into_a_protected_folder(target, tmp_path, capsys) -> None:
    link, protected = target
    before = _snapshot(protected)
    # --config names a file that does not exist: only the guard, which runs first, can answer
    err = _refused(["data", "--config", str(tmp_path / "none.yaml"), "--dataset", "digits", "--seed", "42", "--out",
                    str(link / "digits" / "seed43")], capsys)
    assert "inside the results folder" in err or "inside the finished folder" in err, err
    assert _snapshot(protected) == before


def test_train_out_refuses_a_symlink_into_a_protected_folder(target, tmp_path, capsys) -> None:
    link, protected = target
    before = _snapshot(protected)
    err = _refused(["train", "--config", str(tmp_path / "none.yaml"), "--dataset", "digits", "--method", "fedavg",
                    "--seed", "42", "--out", str(link / "fedavg"), "--log"], capsys)
    assert "inside the results folder" in err or "inside the finished folder" in err, err
    assert _snapshot(protected) == before and not (protected / "fedavg").exists()
