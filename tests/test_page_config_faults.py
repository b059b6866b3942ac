"""Issue 46, faults 10, 16, 17 and 20: a ``cp -r`` copy of a results folder given to ``hasfl compare``, the results
page's notes guard (verdict words spelt through entities, invisible characters or words it did not list), a config
``name`` that is the run store's folder (or hidden, or a path), and a notes format spec of a huge width. Every test
runs the library in-process on real files (no Snakemake, no training)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hasfl.analysis.compare import CompareError, compare
from hasfl.analysis.page_refs import NotesError, fill_notes
from hasfl.config import PAPER_CONFIG, ConfigError, deep_merge, read_yaml, validate_config
from hasfl.integrity import STORE_NAME, write_run_manifest

RUN = Path("runs") / "digits" / "hasfl" / "seed42"


# --------------------------------------------------------------------------- fault 10: compare of a cp -r copy
def _stored_results(root: Path, name: str = "quick") -> Path:
    """``root/results/<name>``: one run whose files are relative links into ``root/results/.store`` (as the DAG
    leaves them, :func:`hasfl.dag.store.link_into`), and a table of real bytes."""
    from hasfl.dag.store import entry_of, link_into

    entry = entry_of(root / "results" / STORE_NAME, "runs", "k" * 16)
    entry.mkdir(parents=True)
    (entry / "rounds.parquet").write_bytes(b"rounds of one run")
    write_run_manifest(entry, ["rounds.parquet"], {"digest": "d1", "config": {"seed": 42}})
    folder = root / "results" / name
    link_into(entry, folder / RUN)
    (folder / "tables").mkdir()
    (folder / "findings.json").write_text(json.dumps({"findings": [{"id": "F4", "verdict": "supported"}]}))
    return folder


def test_compare_of_a_cp_r_copy_whose_store_links_dangle_exits_2_naming_them(tmp_path, capsys) -> None:
    """A ``cp -r`` copy (links copied as links) away from ``results/.store``: every link in it dangles. Before, its
    runs were not found and compare said "only in B" with exit 0; now it is refused, naming the folder, a link and
    what to do."""
    from hasfl.cli import main

    original = _stored_results(tmp_path / "here")
    copy = tmp_path / "elsewhere" / "quick"
    shutil.copytree(original, copy, symlinks=True)  # what `cp -r` does with symbolic links
    assert (copy / RUN / "manifest.json").is_symlink() and not (copy / RUN / "manifest.json").exists()
    with pytest.raises(CompareError) as info:
        compare(copy, original)
    message = str(info.value)
    assert f"'{copy}'" in message and "dangling" in message and STORE_NAME in message, message
    assert f"{RUN.as_posix()}/manifest.json" in message and "cp -rL" in message and "tar -chf" in message, message
    assert main(["compare", str(original), str(copy)]) == 2
    err = capsys.readouterr().err
    assert "dangling" in err and "cp -rL" in err and "Traceback" not in err


def test_compare_of_a_copy_beside_its_store_still_compares(tmp_path) -> None:
    """A ``cp -a`` copy beside the original shares the store: its links resolve and the run is identical."""
    original = _stored_results(tmp_path)
    copy = original.parent / "quick-copy"
    shutil.copytree(original, copy, symlinks=True)
    res = compare(original, copy)
    assert [r["status"] for r in res["runs"]] == ["identical"] and not res["verification_failed"]


# --------------------------------------------------------------------------- fault 16: the notes guard
DOC: dict[str, Any] = {"findings": [{"id": "F6", "verdict": "supported", "n_units": 1,
                                     "units": [{"unit": "digits", "estimate": 1.25, "verdict": "supported"}]}]}


def _refused(text: str, word: str, line: int = 1) -> None:
    with pytest.raises(NotesError, match=f"notes, line {line}: the verdict word '{word}' is typed by hand"):
        fill_notes(text, DOC)


def test_notes_guard_knows_every_verdict_the_findings_give_and_unsupported() -> None:
    """Every verdict of the findings' kernel (``mixed`` included) and the negations ``unsupported`` /
    ``uncontradicted`` typed by hand are refused."""
    from hasfl.analysis.findings.kernel import VERDICTS

    for verdict in VERDICTS:
        _refused(f"F6 is {{F6.verdict}}; F3 is {verdict}.", verdict)
    _refused("F3 is Mixed.", "Mixed")
    _refused("F3 is unsupported here.", "unsupported")
    _refused("F3 is uncontradicted.", "uncontradicted")


def test_notes_guard_sees_through_entities_and_invisible_characters() -> None:
    """A verdict spelt with an HTML entity, a soft hyphen, a zero-width character, a no-break space or full-width
    letters renders as the word on the page; the guard reads it as rendered, and names the right line."""
    _refused("F3 is &#115;upported.", "supported")
    _refused("F3 is &#x73;upported.", "supported")
    _refused("F3 is sup\u00adported.", "supported")
    _refused("F3 is sup&shy;ported.", "supported")
    _refused("F3 is con\u200btra\u2060dicted.", "contradicted")
    _refused("F3 is not&nbsp;run.", "not run")
    _refused("F3 is not\u00a0run.", "not run")
    _refused("F3 is \uff53\uff55\uff50\uff50\uff4f\uff52\uff54\uff45\uff44.", "supported")
    _refused("F3 is sup<span></span>ported.", "supported")
    _refused("First line; &#10; still the first.\nF3 is in&shy;con&shy;clu&shy;sive.", "inconclusive", line=2)


def test_notes_guard_still_passes_references_and_plain_text() -> None:
    """References (their values are verdicts), words that only contain one, and the batch-norm mode written as code
    (`mixed`, a config value) are fine; entities outside verdict words are left as written."""
    text = "F6 is {F6.verdict} &amp; `mixed` statistics; supportedly, {F6.digits.estimate:.1f}&nbsp;points."
    assert fill_notes(text, DOC) == "F6 is supported &amp; `mixed` statistics; supportedly, 1.2&nbsp;points."


# --------------------------------------------------------------------------- fault 17: config name
def _with_name(name: Any) -> dict[str, Any]:
    return deep_merge(read_yaml(PAPER_CONFIG), {"name": name})


@pytest.mark.parametrize("name", [STORE_NAME, ".hidden", "a..b", "..", ".", "../x", "a/b", "a\\b"])
def test_config_name_refuses_the_store_hidden_folders_and_paths(name: str) -> None:
    """``name`` is a folder under ``results_dir``: the run store's name (which ``hasfl gc`` cleans), a hidden name,
    ``..`` or a path separator is refused at load, naming the key, the value and what is allowed."""
    with pytest.raises(ConfigError) as info:
        validate_config(_with_name(name))
    message = str(info.value)
    assert f"config key 'name': {name!r}" in message and "not starting with '.'" in message, message
    assert "'..'" in message, message


@pytest.mark.parametrize("name", ["paper", "quick", "medium-coverage", "paper-mu05", "v1.2", "run_3"])
def test_config_name_keeps_plain_folder_names(name: str) -> None:
    validate_config(_with_name(name))


# --------------------------------------------------------------------------- fault 20: format spec widths
def test_a_notes_format_width_or_precision_past_the_limit_is_refused_before_formatting() -> None:
    """``{F6.digits.estimate:1000}`` gave a 1000-character cell and ``:99999999999`` a MemoryError; a width or
    precision above the limit is refused naming the reference and the limit (the value is never formatted)."""
    for spec in ("1000", ">1000.2f", ".1000f", "99999999999", "0>99999999999", ".99999999999f", ",.9999999999999e"):
        with pytest.raises(NotesError, match=(rf"notes, line 1: reference \{{F6.digits.estimate:{spec}\}} asks for "
                                              r"a width or precision of \d+; at most \d+")):
            fill_notes(f"Gap: {{F6.digits.estimate:{spec}}}.", DOC)
    assert fill_notes("Gap: {F6.digits.estimate:>100.2f}", DOC) == "Gap: " + "1.25".rjust(100)
    assert fill_notes("Gap: {F6.digits.estimate:+.1f}, {F6.verdict:>12}", DOC) == "Gap: +1.2,    supported"
