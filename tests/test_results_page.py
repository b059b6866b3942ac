"""`hasfl results-page`: a page from a finished preset's files, figures shrunk beside it."""

from __future__ import annotations

import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

from hasfl.analysis.manifest import write_analysis_manifest  # noqa: E402


def _results(root):
    (root / "tables").mkdir(parents=True)
    (root / "figures").mkdir()
    (root / "findings.json").write_text(json.dumps({"findings": [
        {"id": "F3", "claim": "HAS-FL and random budget are indistinguishable", "verdict": "inconclusive",
         "statistic": "paired difference", "n_per_unit": {"digits": 3}, "margin": 2.0, "mde": {"digits": 9.0},
         "reason": "digits: inconclusive -- the TOST interval is not inside +-2",
         "units": [{"unit": "digits", "in_scope": True, "estimate": 2.2, "low": -2.65, "high": 7.11,
                    "verdict": "inconclusive"},
                   {"unit": "shakespeare", "in_scope": False, "estimate": 9.0, "low": 1.0, "high": 2.0,
                    "verdict": "supported"}]},
        {"id": "F6", "claim": "positive control", "verdict": "supported", "extension": True, "statistic": "r",
         "n_per_unit": {"digits": 3}, "margin": 0.0, "mde": {"digits": 0.33}, "reason": "digits: supported",
         "units": [{"unit": f"digits/fedavg/seed{s}", "verdict": "supported", "estimate": 0} for s in range(5)]},
        {"id": "F5", "claim": "Proposition 3", "verdict": "supported", "statistic": "changed coordinates",
         "n_per_unit": {f"run{s}": 1 for s in range(12)}, "margin": 0, "mde": {f"run{s}": None for s in range(12)},
         "reason": "every run: supported", "units": []}]}))
    (root / "tables" / "table3_allocation.md").write_text(
        "# Table 3 -- allocation\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Per seed\n\n| seed | x |\n|---|---|\n| 42 | 9 |\n")
    fig, ax = plt.subplots(figsize=(16, 8), dpi=100)
    ax.plot([0, 1], [0, 1])
    fig.savefig(root / "figures" / "fig6_frontier.png")
    plt.close(fig)
    (root / "report.md").write_text("### Figure 6\n\n![Figure 6](figures/fig6_frontier.png)\n\n"
                                    "*Figure 6.* Final accuracy against width.\n\n")
    # the DAG's last rule: the analysis outputs' sha256 and the runs they read (none here)
    verified = root.parent / "verified.json"
    verified.write_text("{}")
    files = [root / "findings.json", root / "report.md", root / "tables" / "table3_allocation.md",
             root / "figures" / "fig6_frontier.png"]
    write_analysis_manifest(root, [str(f) for f in files], verified)


def _page(results, out, *extra):
    return subprocess.run([sys.executable, "-m", "hasfl.cli", "results-page", str(results), str(out), *extra],
                          capture_output=True, text=True)


def test_results_page_from_files(tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    out = tmp_path / "docs" / "results" / "quick.md"
    res = subprocess.run([sys.executable, "-m", "hasfl.cli", "results-page", str(results), str(out)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "| F3 | HAS-FL and random budget are indistinguishable | **inconclusive** |" in page
    assert "| F6 (extension) |" in page and "**supported**" in page
    # the measured value of each in-scope unit with its interval; out-of-scope units are not shown
    assert "| digits: 2.2 [-2.65, 7.11] inconclusive |" in page and "shakespeare: 9" not in page
    # many units: the first three, then a count per verdict
    assert "digits/fedavg/seed2: 0 supported; 2 more: 2 supported |" in page
    # a finding with many units: their common count and MDE in one phrase, not twelve
    assert "| 12 units: 1 each | 0 | 12 units: -- each |" in page
    assert "### Table 3 -- allocation" in page and "| 1 | 2 |" in page and "| 42 | 9 |" not in page
    assert "![fig6_frontier](quick/fig6_frontier.png)" in page and "*Figure 6.* Final accuracy against width." in page
    with Image.open(out.parent / "quick" / "fig6_frontier.png") as im:
        assert im.width == 800  # shrunk from 1600 px


def test_results_page_needs_a_finished_run(tmp_path) -> None:
    res = subprocess.run([sys.executable, "-m", "hasfl.cli", "results-page", str(tmp_path), str(tmp_path / "p.md")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "findings.json' does not exist" in res.stderr


def test_results_page_names_its_notes_file(tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    notes = tmp_path / "quick.notes.md"
    notes.write_text("At this scale most findings are inconclusive.\n")
    out = tmp_path / "quick.md"
    res = subprocess.run([sys.executable, "-m", "hasfl.cli", "results-page", str(results), str(out), "--notes",
                          str(notes)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert f"--notes {notes.as_posix()}`" in page and "a person's reading" in page
    assert page.index("At this scale most findings are inconclusive.") < page.index("## Findings")


def test_results_page_names_a_missing_notes_file(tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    missing = tmp_path / "none.md"
    res = subprocess.run([sys.executable, "-m", "hasfl.cli", "results-page", str(results), str(tmp_path / "p.md"),
                          "--notes", str(missing)], capture_output=True, text=True)
    assert res.returncode == 2 and f"notes file '{missing}' does not exist" in res.stderr
    assert "Traceback" not in res.stderr


def test_results_page_refuses_an_edited_analysis_file(tmp_path) -> None:
    """A findings.json changed after the analysis wrote it never reaches a page (exit 2, the file named)."""
    results = tmp_path / "results" / "quick"
    _results(results)
    findings = results / "findings.json"
    findings.write_text(findings.read_text().replace('"inconclusive"', '"supported"'))
    res = _page(results, tmp_path / "p.md")
    assert res.returncode == 2 and f"analysis file '{findings}' was modified after the analysis wrote it" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "p.md").exists()


def test_results_page_refuses_a_table_the_analysis_did_not_write(tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    extra = results / "tables" / "table7_shakespeare.md"
    extra.write_text("# Table 7\n\n| a |\n|---|\n| typed by hand |\n")
    res = _page(results, tmp_path / "p.md")
    assert res.returncode == 2 and f"'{extra}' is not an output of the analysis" in res.stderr


def test_results_page_needs_the_analysis_manifest(tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    (results / "analysis.manifest.json").unlink()
    res = _page(results, tmp_path / "p.md")
    assert res.returncode == 2 and "has no analysis.manifest.json: its analysis did not finish" in res.stderr


def test_results_page_refuses_its_own_notes_file_as_the_page(tmp_path) -> None:
    """`--notes X` with X the page itself (same path, a ./ spelling, or a symlink to it) is refused before anything
    is written: the notes stay as they were and no figure folder appears."""
    results = tmp_path / "results" / "quick"
    _results(results)
    docs = tmp_path / "docs"
    docs.mkdir()
    notes = docs / "quick.md"
    text = "My reading of the findings.\n"
    notes.write_text(text)
    (tmp_path / "alias.md").symlink_to(notes)
    spellings = [(notes, notes), (notes, docs / "." / "quick.md"), (notes, docs / ".." / "docs" / "quick.md"),
                 (tmp_path / "alias.md", notes), (notes, tmp_path / "alias.md")]
    for out, given in spellings:
        res = _page(results, out, "--notes", str(given))
        assert res.returncode == 2, (out, given, res.stderr)
        assert f"notes file '{given}' is the page to write '{out}'" in res.stderr and "Traceback" not in res.stderr
        assert notes.read_text() == text and (tmp_path / "alias.md").is_symlink()
        assert not (docs / "quick").exists() and not (tmp_path / "alias").exists()
