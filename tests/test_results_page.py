"""`hasfl results-page`: a page from a finished preset's files, figures shrunk beside it."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from hasfl.analysis.manifest import write_analysis_manifest  # noqa: E402
from hasfl.analysis.page_refs import NotesError, fill_notes  # noqa: E402
from hasfl.integrity import write_run_manifest  # noqa: E402


def _run(root, dataset, method, seed, total_s):
    """A finished run folder (its manifest, the identity the analysis recorded) with a timings.json."""
    folder = root / "runs" / dataset / method / f"seed{seed}"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text("{}")
    (folder / "timings.json").write_text(json.dumps({"device": "cpu", "cpu_capability": "AVX512", "isa_env": {},
                                                     "total_s": total_s}))
    write_run_manifest(folder, ["run.json"], {"digest": f"{dataset}-{method}-{seed}"})
    return folder


FINDINGS = {"alpha": 0.05, "thresholds": {"ci_level": 0.95}, "verdicts": ["supported", "contradicted", "inconclusive"],
            "findings": [
    {"id": "F3", "claim": "HAS-FL and random budget are indistinguishable", "verdict": "inconclusive",
     "statistic": "paired difference", "n_per_unit": {"digits": 3}, "margin": 2.0, "mde": {"digits": 9.0},
     "reason": "digits: inconclusive -- the TOST interval is not inside +-2", "n_units": 1,
     "files": ["tables/matched_budget.parquet"],
     "units": [{"unit": "digits", "in_scope": True, "estimate": 2.2, "low": -2.65, "high": 7.11,
                "verdict": "inconclusive"},
               {"unit": "shakespeare", "in_scope": False, "estimate": 9.0, "low": 1.0, "high": 2.0,
                "verdict": "supported"}]},
    {"id": "F6", "claim": "positive control", "verdict": "supported", "extension": True, "statistic": "r",
     "n_per_unit": {"digits": 3}, "margin": 0.0, "mde": {"digits": 0.33}, "reason": "digits: supported", "n_units": 5,
     "units": [{"unit": f"digits/fedavg/seed{s}", "verdict": "supported", "estimate": 0} for s in range(5)]},
    {"id": "F5", "claim": "Proposition 3", "verdict": "supported", "statistic": "changed coordinates",
     "n_per_unit": {f"run{s}": 1 for s in range(12)}, "margin": 0, "mde": {f"run{s}": None for s in range(12)},
     "reason": "every run: supported", "n_units": 12, "units": []},
    {"id": "F8-probe", "claim": "Allocating by E2 beats its matched random budget", "verdict": "inconclusive",
     "extension": True, "statistic": "paired difference", "n_per_unit": {}, "margin": 2.0, "mde": {}, "n_units": 0,
     "reason": "not run: hasfl_probe or random_budget_probe not run in this preset", "units": []}]}

TABLE3 = {"dataset": ["digits"], "method": ["hasfl"], "status": ["ok"], "n_completed": [3],
          "best_acc_pct_mean": [81.25], "best_acc_pct_std": [1.5], "final_acc_pct_mean": [78.5],
          "final_acc_pct_std": [2.0], "delta_pct_mean": [-2.75], "delta_pct_std": [0.5], "avg_p_mean": [0.5],
          "avg_p_std": [0.01]}


def _results(root, findings=None, methods=("hasfl", "random_budget", "fedavg"), figures=("fig6_frontier",),
             dataset="digits"):
    (root / "tables").mkdir(parents=True)
    (root / "figures").mkdir()
    (root / "findings.json").write_text(json.dumps(findings or FINDINGS))
    pd.DataFrame(TABLE3).to_parquet(root / "tables" / "table3_allocation.parquet")
    # a rendered Markdown table that disagrees with the Parquet: the page must not read it
    (root / "tables" / "table3_allocation.md").write_text(
        "# Table 3 -- allocation\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Per seed\n\n| seed | x |\n|---|---|\n| 42 | 9 |\n")
    for slug in figures:
        fig, ax = plt.subplots(figsize=(16, 8), dpi=100)
        ax.plot([0, 1], [0, 1])
        fig.savefig(root / "figures" / f"{slug}.png")
        plt.close(fig)
    (root / "report.md").write_text("### Figure 6\n\n![Figure 6](figures/fig6_frontier.png)\n\n"
                                    "*Figure 6.* Final accuracy against width.\n\n")
    runs = [_run(root, dataset, m, s, 360.0) for m in methods for s in (42, 43)]
    # the DAG's last rule: the analysis outputs' sha256 and the runs they read
    verified = root.parent / f"verified-{root.name}.json"
    verified.write_text(json.dumps({str(r): f"{dataset}-{r.parent.name}-{r.name[4:]}" for r in runs}))
    files = [root / "findings.json", root / "report.md", root / "tables" / "table3_allocation.md",
             root / "tables" / "table3_allocation.parquet", *(root / "figures" / f"{s}.png" for s in figures)]
    write_analysis_manifest(root, [str(f) for f in files], verified, identity={"digest": "abc123identity"})


def _page(cli, results, out, *extra):
    return cli("results-page", results, out, *extra)


def test_results_page_from_files(hasfl_cli, tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    out = tmp_path / "docs" / "results" / "quick.md"
    res = hasfl_cli("results-page", str(results), str(out))
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "| F3 | HAS-FL and random budget are indistinguishable | **inconclusive** |" in page
    assert "| F6 (extension) |" in page and "**supported**" in page
    # the measured value of each in-scope unit with its interval; out-of-scope units are not shown
    assert "| digits: 2.2 [-2.65, 7.11] inconclusive |" in page and "shakespeare: 9" not in page
    # many units: the first three, then a count per verdict
    assert "digits/fedavg/seed2: 0 supported; 2 more: 2 supported |" in page
    # a finding with many units: their common count and MDE in one phrase, not twelve
    assert "| F5 | Proposition 3 | **supported** | -- | changed coordinates | 12 units: 1 each | 0 | 12 units: -- each |" in page
    # tables from their Parquet, titled by the registry; the rendered Markdown beside it is not read
    assert "### Table 3 -- Sub-model allocation strategies" in page and "From `tables/table3_allocation.parquet`." in page
    assert "78.5" in page and "| 1 | 2 |" not in page and "| 42 | 9 |" not in page
    # the figure with the registry's caption (not report.md's)
    assert "![fig6_frontier](quick/fig6_frontier.png)" in page and "*Figure 6.*" in page
    assert "Final accuracy against width." not in page
    with Image.open(out.parent / "quick" / "fig6_frontier.png") as im:
        assert im.width == 800  # shrunk from 1600 px


def test_results_page_skips_a_figure_of_methods_the_preset_does_not_run(hasfl_cli, tmp_path) -> None:
    """Figure 9 and its fallback Figure 5 draw the hasfl runs: without them every panel says "not run", so a
    preset without hasfl (the coverage overlay) shows neither; with hasfl, Figure 9 is shown."""
    figs = ("fig6_frontier", "fig9_estimators", "fig5_final_allocation")
    for methods, shown in ((("uniform", "fedavg"), False), (("hasfl", "fedavg"), True)):
        results = tmp_path / "-".join(methods) / "results" / "cov"
        _results(results, methods=methods, figures=figs)
        out = tmp_path / "-".join(methods) / "page.md"
        res = _page(hasfl_cli, results, out)
        assert res.returncode == 0, res.stderr
        page = out.read_text()
        assert "![fig6_frontier]" in page
        assert ("![fig9_estimators]" in page) is shown
        assert "![fig5_final_allocation]" not in page  # the fallback only replaces a missing Figure 9


def test_results_page_removes_the_figure_copies_it_no_longer_shows(hasfl_cli, tmp_path) -> None:
    """The page's figure folder held a Figure 9 copy from an earlier page after the page stopped showing it (removed
    by hand in aa51e0c); a file there that is no registry figure is the user's and stays."""
    results = tmp_path / "results" / "cov"
    _results(results, methods=("uniform", "fedavg"), figures=("fig6_frontier", "fig9_estimators"))
    out = tmp_path / "cov.md"
    fig_dir = tmp_path / "cov"
    fig_dir.mkdir()
    (fig_dir / "fig9_estimators.png").write_bytes(b"an earlier page's copy")
    (fig_dir / "sketch.png").write_bytes(b"someone's own file")
    res = _page(hasfl_cli, results, out)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in fig_dir.iterdir()) == ["fig6_frontier.png", "sketch.png"]
    assert "![fig6_frontier](cov/fig6_frontier.png)" in out.read_text()


def test_results_page_shows_the_verdicts_under_each_batch_norm_rule(hasfl_cli, tmp_path) -> None:
    """Issue 37: F9's batch-norm sensitivity lines on the page (they were in report.md only; the page listed the
    per-run accuracies): what each rule applied to every method alike concludes, from
    bn_sensitivity_findings.parquet, as report.md renders it."""
    results = tmp_path / "results" / "cov"
    _results(results)
    sens = pd.DataFrame([{"dataset": "digits", "method": m, "seed": s, "status": "completed", "run_mode": "per_width",
                          "mode": mode, "final_acc_pct": acc + (5.0 if mode == "batch" else 0.0),
                          "logged_final_acc_pct": acc}
                         for m, acc in (("uniform", 40.0), ("uniform_rolling", 30.0)) for s in (42, 43)
                         for mode in ("per_width", "batch")])
    line = {"finding": "F9b", "verdict": "inconclusive", "rules": "uniform: per_width, uniform_rolling: batch",
            "units": "digits: inconclusive", "note": ""}
    verdicts = pd.DataFrame([{**line, "mode": "per_width", "verdict_under_mode": "contradicted", "changed": True,
                              "units_under_mode": "digits: contradicted"},
                             {**line, "mode": "batch", "verdict_under_mode": "inconclusive", "changed": False,
                              "units_under_mode": "digits: inconclusive"},
                             {**line, "finding": "F8-probe", "mode": "batch", "rules": "", "units": "",
                              "verdict_under_mode": "inconclusive", "changed": False, "units_under_mode": ""}]
                            ).astype({"changed": "boolean"})
    sens.to_parquet(results / "tables" / "bn_sensitivity.parquet")
    verdicts.to_parquet(results / "tables" / "bn_sensitivity_findings.parquet")
    manifest = json.loads((results / "analysis.manifest.json").read_text())
    for name in ("bn_sensitivity.parquet", "bn_sensitivity_findings.parquet"):
        f = results / "tables" / name
        manifest["files"][f"tables/{name}"] = {"sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
                                               "bytes": f.stat().st_size}
    (results / "analysis.manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "cov.md"
    res = _page(hasfl_cli, results, out)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "and `tables/bn_sensitivity_findings.parquet`" in page
    assert "#### Would a verdict change under another mode?" in page
    assert ("- **F9b** (inconclusive under the declared rules uniform: per_width, uniform_rolling: batch -- digits: "
            "inconclusive); every method alike under per_width: contradicted (digits: contradicted) (**changes**); "
            "batch: inconclusive (digits: inconclusive)") in page
    assert "1 verdict(s) change under another mode." in page
    # a finding this preset does not run has no line (F8-probe is 'not run' in FINDINGS): no verdict to change
    assert "F8-probe" not in page.split("#### Would a verdict change", 1)[1].split("\n## ", 1)[0]


def test_results_page_needs_a_finished_run(hasfl_cli, tmp_path) -> None:
    res = hasfl_cli("results-page", str(tmp_path), str(tmp_path / "p.md"))
    assert res.returncode == 2 and "findings.json' does not exist" in res.stderr


def test_results_page_names_its_notes_file(hasfl_cli, tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    notes = tmp_path / "quick.notes.md"
    notes.write_text("At this scale F3 is {F3.verdict} ({F3.digits.estimate:.1f} points, {{3 seeds}}).\n")
    out = tmp_path / "quick.md"
    res = hasfl_cli("results-page", str(results), str(out), "--notes",
                          str(notes))
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert f"--notes {notes.as_posix()} --configfile presets/quick.yaml`" in page and "a person's reading" in page
    assert page.index("At this scale F3 is inconclusive (2.2 points, {3 seeds}).") < page.index("## Findings")


def test_results_page_names_a_missing_notes_file(hasfl_cli, tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    missing = tmp_path / "none.md"
    res = hasfl_cli("results-page", str(results), str(tmp_path / "p.md"),
                          "--notes", str(missing))
    assert res.returncode == 2 and f"notes file '{missing}' does not exist" in res.stderr
    assert "Traceback" not in res.stderr


def test_results_page_refuses_an_edited_analysis_file(hasfl_cli, tmp_path) -> None:
    """A findings.json changed after the analysis wrote it never reaches a page (exit 2, the file named)."""
    results = tmp_path / "results" / "quick"
    _results(results)
    findings = results / "findings.json"
    findings.write_text(findings.read_text().replace('"inconclusive"', '"supported"'))
    res = _page(hasfl_cli, results, tmp_path / "p.md")
    assert res.returncode == 2 and f"analysis file '{findings}' was modified after the analysis wrote it" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "p.md").exists()


def test_results_page_refuses_a_table_the_analysis_did_not_write(hasfl_cli, tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    extra = results / "tables" / "table7_shakespeare.parquet"
    pd.DataFrame(TABLE3).to_parquet(extra)
    res = _page(hasfl_cli, results, tmp_path / "p.md")
    assert res.returncode == 2 and f"'{extra}' is not an output of the analysis" in res.stderr


def test_results_page_needs_the_analysis_manifest(hasfl_cli, tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    (results / "analysis.manifest.json").unlink()
    res = _page(hasfl_cli, results, tmp_path / "p.md")
    assert res.returncode == 2 and "has no analysis.manifest.json: its analysis did not finish" in res.stderr


def test_results_page_refuses_its_own_notes_file_as_the_page(hasfl_cli, tmp_path) -> None:
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
        res = _page(hasfl_cli, results, out, "--notes", str(given))
        assert res.returncode == 2, (out, given, res.stderr)
        assert f"notes file '{given}' is the page to write '{out}'" in res.stderr and "Traceback" not in res.stderr
        assert notes.read_text() == text and (tmp_path / "alias.md").is_symlink()
        assert not (docs / "quick").exists() and not (tmp_path / "alias").exists()


def _notes_page(cli, tmp_path, text, findings=None):
    results = tmp_path / "results" / "quick"
    _results(results, findings)
    notes = tmp_path / "quick.notes.md"
    notes.write_text(text)
    out = tmp_path / "quick.md"
    return _page(cli, results, out, "--notes", str(notes)), out, notes


def test_results_page_reading_follows_findings_json(hasfl_cli, tmp_path) -> None:
    """One verdict changed in a copy of findings.json: the notes' reading on the page follows it."""
    text = "F3 is {F3.verdict} on digits ({F3.digits.estimate:+.2f}, interval {F3.digits.low:.2f} to {F3.digits.high:.2f}).\n"
    res, out, _ = _notes_page(hasfl_cli, tmp_path / "a", text)
    assert res.returncode == 0, res.stderr
    assert "F3 is inconclusive on digits (+2.20, interval -2.65 to 7.11)." in out.read_text()
    changed = json.loads(json.dumps(FINDINGS))
    changed["findings"][0]["verdict"] = "contradicted"
    changed["findings"][0]["units"][0].update(estimate=-4.0, high=-3.0)
    res, out, _ = _notes_page(hasfl_cli, tmp_path / "b", text, changed)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "F3 is contradicted on digits (-4.00, interval -2.65 to -3.00)." in page and "F3 is inconclusive" not in page
    assert "| F3 | HAS-FL and random budget are indistinguishable | **contradicted** |" in page


def test_results_page_refuses_a_verdict_typed_by_hand(hasfl_cli, tmp_path) -> None:
    res, out, notes = _notes_page(hasfl_cli, tmp_path, "F6 is {F6.verdict}.\nF3 is supported.\n")
    assert res.returncode == 2 and "Traceback" not in res.stderr and not out.exists()
    assert (f"{notes}, line 2: the verdict word 'supported' is typed by hand; write it as a reference to the finding "
            "it describes, e.g. {F1c.verdict}") in res.stderr
    for word in ("Contradicted", "inconclusive", "not run", "not\nrun", "NOT  RUN"):
        with pytest.raises(NotesError, match=f"notes, line 1: the verdict word '{' '.join(word.split())}' is typed"):
            fill_notes(f"F6 is {{F6.verdict}}; F3 is {word}.", FINDINGS)
    # words that only contain one, and a verdict inside a reference or its value, are fine
    assert fill_notes("supportedly; {F6.verdict}", FINDINGS) == "supportedly; supported"


def test_results_page_refuses_an_unresolvable_reference_naming_it(hasfl_cli, tmp_path) -> None:
    res, out, notes = _notes_page(hasfl_cli, tmp_path, "First line.\nSee {F9x.verdict} here.\n")
    assert res.returncode == 2 and "Traceback" not in res.stderr and not out.exists()
    assert f"{notes}, line 2: reference {{F9x.verdict}} does not resolve: findings.json has no finding 'F9x'" \
        in res.stderr
    cases = {"{F3.cifar10.estimate}": "'F3' has no field or unit 'cifar10'",
             "{F3.digits.estimat:.1f}": "'F3.digits' has no field or unit 'estimat'",
             "{F3.digits}": "names a mapping, not a value",
             "{F3.verdict:.1f}": "cannot be formatted",
             "{F3 verdict}": "an unmatched or malformed brace"}
    for ref, why in cases.items():
        with pytest.raises(NotesError, match="line 2") as err:
            fill_notes(f"First line.\nSee {ref} here.", FINDINGS)
        assert why in str(err.value) and (ref in str(err.value) or "brace" in why), (ref, str(err.value))


def test_results_page_not_run_is_its_own_verdict(hasfl_cli, tmp_path) -> None:
    res, out, _ = _notes_page(hasfl_cli, tmp_path, "F8-probe: {F8-probe.verdict}; {count.not_run} finding(s) not in this preset.\n")
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    assert "F8-probe: not run; 1 finding(s) not in this preset." in page
    assert "| F8-probe (extension) | Allocating by E2 beats its matched random budget | **not run** | not run |" in page
    assert "Verdicts: 2 supported, 1 inconclusive, 1 not run" in page


def test_results_page_states_provenance_and_commands(hasfl_cli, tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    out = tmp_path / "quick.md"
    res = _page(hasfl_cli, results, out)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    assert "## Provenance" in page and f"`{commit}`" in page and f"at commit `{commit[:12]}`" in page
    for what in ("Python / torch / Snakemake / numpy", "cpu AVX512 (6 runs)", "none (every run on the CPU)",
                 "`abc123identity`", "machine writing this file"):
        assert what in page, what
    # the README's command: targets before --configfile, which takes every word after it
    assert "Made by `snakemake --cores 2 all --configfile presets/quick.yaml`" in page
    assert f"`hasfl results-page {results.as_posix()} {out.as_posix()} --configfile presets/quick.yaml` (this page)" in page
    # Reproduce a claim: F3 reads hasfl and random_budget on digits (4 runs of 6 minutes: 0.4 job-hours)
    assert "## Reproduce a claim" in page
    assert (f"| F3 | inconclusive | `snakemake --cores 2 {results.as_posix()}/tables/matched_budget.parquet "
            "--configfile presets/quick.yaml` | 4 | 0.4 |") in page
    for heading in ("Scope of reproducibility", "Methodology", "Results", "What was easy", "What was difficult",
                    "Communication with original authors"):
        assert f"### {heading}" in page, heading
    assert "6 training runs, 0.6 CPU job-hours of training measured" in page
    assert "they grow with whatever else loaded the machine then" in page  # load-dependent, and said so


def test_results_page_refuses_config_files_of_another_folder(hasfl_cli, tmp_path) -> None:
    results = tmp_path / "results" / "quick"
    _results(results)
    res = _page(hasfl_cli, results, tmp_path / "p.md", "--configfile", "presets/medium.yaml")
    assert res.returncode == 2 and "make results folder 'medium', not 'quick'" in res.stderr


def test_report_md_shows_not_run_and_provenance(tmp_path) -> None:
    """report.md: a finding none of whose units ran is "not run" in its table and its count, and the report carries
    the reproducibility summary, the command per claim and the provenance (job_report's lines)."""
    from hasfl.analysis import report
    from hasfl.analysis.findings import FINDING_METHODS
    from hasfl.analysis.provenance import report_lines

    results = tmp_path / "results" / "quick"
    _results(results)
    base = {"claim": "c", "source": "s", "scope": "every dataset", "test": "t", "margin_key": "analysis.m"}
    doc = {**FINDINGS, "thresholds": {"power": 0.8}, "findings": [
        {**f, **base, "units": [{"reason": "r", **u} for u in f["units"]]} for f in FINDINGS["findings"]]}
    summary = {"preset": "quick", "datasets": ["digits"], "methods": ["hasfl", "random_budget", "fedavg"],
               "seeds": [42, 43]}
    lines = report_lines(results, summary, doc["findings"], ["presets/quick.yaml"], FINDING_METHODS)
    text = report.report_markdown(name="quick", config_summary=summary, tables={}, findings=doc, figures=[],
                                  provenance=lines)
    assert "| F8-probe | **not run** |" in text and "not run: 1" in text
    assert "Verdicts: supported: 2, contradicted: 0, inconclusive: 1, not run: 1 (4 findings)." in text
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    assert "## Provenance" in text and f"`{commit}`" in text and "## Reproduce a claim" in text
    assert "### Communication with original authors" in text and "6 training runs, 0.6 CPU job-hours" in text
    assert f"| F3 | inconclusive | `snakemake --cores 2 {results.as_posix()}/tables/matched_budget.parquet " in text


def test_the_committed_notes_refer_to_known_findings_and_type_no_verdict() -> None:
    """docs/results/*.notes.md: every reference names a finding of findings.json (or count / a top-level key), and
    no verdict is typed by hand (checked against a findings.json that has every finding id, each unit a stand-in)."""
    from hasfl.analysis.findings import ALL_FINDING_IDS
    from hasfl.analysis.page_refs import references

    from hasfl.analysis.findings.claims import ESTIMANDS

    unit = {"unit": "u", "estimate": 1.0, "low": 0.0, "high": 2.0, "n": 3, "mde": 1.0, "verdict": "supported"}
    estimands = {key for pairs in ESTIMANDS.values() for key, _label in pairs}
    for notes in sorted((Path(__file__).parents[1] / "docs" / "results").glob("*.notes.md")):
        text = notes.read_text()
        refs = references(text)
        assert refs, notes
        for ref in refs:
            assert ref.split(".")[0] in (*ALL_FINDING_IDS, "count", "alpha", "thresholds"), (notes.name, ref)
        units = {r.split(".")[1] for r in refs if len(r.split(".")) in (3, 4)} - estimands
        nested = {(r.split(".")[1], r.split(".")[2]) for r in refs if len(r.split(".")) == 4}  # unit.learned_seeds.n
        doc = {"findings": [{"id": fid, "verdict": "supported", "n_units": 1, "margin": 2.0,
                             "units": [{**unit, "unit": u, **{k: dict(unit) for uu, k in nested if uu == u}}
                                       for u in units],
                             "estimands": [{"estimand": key, "label": label, "verdict": "supported",
                                            "attribution": "this project's extension"}
                                           for key, label in ESTIMANDS.get(fid, ())]}
                            for fid in ALL_FINDING_IDS]}
        fill_notes(text, doc, source=notes.name)  # raises on a verdict typed by hand or a malformed reference


def test_results_page_without_a_preset_file_names_what_is_missing(hasfl_cli, tmp_path) -> None:
    """A results folder with no presets/<name>.yaml and no --configfile: the page is written, its commands say
    which config files to name (as `hasfl results-page --configfile` would)."""
    results = tmp_path / "results" / "tiny"
    _results(results)
    res = _page(hasfl_cli, results, tmp_path / "p.md")
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "p.md").read_text()
    assert "`snakemake --cores 2 all --configfile <the config files of 'tiny': hasfl results-page --configfile>`" in page
    assert "(6 training runs, identities digest" in page


def test_results_page_refuses_config_files_without_the_runs_methods(hasfl_cli, tmp_path) -> None:
    """Runs of a method the named config files do not run (an overlay left out): refused, naming the method."""
    results = tmp_path / "results" / "quick"
    _results(results)
    run = _run(results, "digits", "fedrolex", 42, 60.0)
    verified = results.parent / f"verified-{results.name}.json"
    listed = json.loads(verified.read_text())
    verified.write_text(json.dumps({**listed, str(run): "digits-fedrolex-42"}))
    write_analysis_manifest(results, [str(results / f) for f in json.loads(
        (results / "analysis.manifest.json").read_text())["files"]], verified, identity={"digest": "x"})
    res = _page(hasfl_cli, results, tmp_path / "p.md")
    assert res.returncode == 2 and "the analysis read runs of fedrolex, which config files presets/quick.yaml" \
        in res.stderr, res.stderr
    res = _page(hasfl_cli, results, tmp_path / "p.md", "--configfile", "presets/quick.yaml", "presets/quick-rolling.yaml")
    assert res.returncode == 0, res.stderr
    assert "`snakemake --cores 2 all --configfile presets/quick.yaml presets/quick-rolling.yaml`" in \
        (tmp_path / "p.md").read_text()


def test_the_reproduce_section_prefixes_the_whole_portable_pin_only() -> None:
    """Runs made under every setting of the portable pin get commands prefixed with it; runs made under the
    two-setting pin of the pages before 2026-12-05 (MKL left to pick its path by the CPU's maker: an Intel and an AMD
    machine gave other digits runs) are told to add it, not said to reproduce anywhere."""
    from hasfl.analysis.provenance import PORTABLE_PIN, _kernels, reproduce_lines

    assert "MKL_CBWR=COMPATIBLE" in PORTABLE_PIN.split()
    rows = [{"id": "F3", "verdict": "inconclusive", "command": "snakemake all", "runs": 1, "cpu_job_hours": 0.1,
             "partial": False}]
    full = dict(kv.split("=") for kv in PORTABLE_PIN.split())
    two = {k: v for k, v in full.items() if not k.startswith("MKL")}
    for env, pinned in ((full, True), (two, False)):
        kernels = _kernels({"runs/digits/hasfl/seed42": {"cpu_capability": "AVX2", "isa_env": env}})
        text = "\n".join(reproduce_lines(rows, kernels))
        assert ("They ran under the portable kernel pin" in text) is pinned, text
        assert (f"`{PORTABLE_PIN} snakemake" in text) is pinned and f"`{PORTABLE_PIN}`" in text


def test_the_page_and_report_md_write_a_units_interval_the_same_way() -> None:
    """One renderer of a verdict's numbers: the page's measured cell and report.md's units table both come from
    :func:`hasfl.analysis.markdown.measured` / :func:`~hasfl.analysis.markdown.interval` (3 significant digits)."""
    from hasfl.analysis.findings.display import units_frame
    from hasfl.analysis.markdown import interval, measured
    from hasfl.analysis.results_page import _measured

    unit = {"unit": "digits", "estimate": -1.23456, "low": -3.8349, "high": 1.0512, "verdict": "inconclusive",
            "reason": "r", "n": 6, "mde": 5.0}
    assert measured(unit["estimate"], unit["low"], unit["high"]) == "-1.23 [-3.83, 1.05]"
    assert measured(2.0, None, 1.0) == "2" and measured(None, 0.0, 1.0) == "" and interval(None, 1.0) == "--"
    assert _measured([unit]) == "digits: -1.23 [-3.83, 1.05] inconclusive"
    row = units_frame([{"id": "F0", "units": [unit]}]).iloc[0]
    assert f"{row['Estimate']} {row['Interval']}" == measured(unit["estimate"], unit["low"], unit["high"])


def test_an_overlay_folder_is_a_section_with_the_findings_it_ran(hasfl_cli, tmp_path) -> None:
    """``--overlay results/medium-coverage-long``: a section after the findings with its command (the page's config
    files and presets/<its name>.yaml), its runs' digest, the findings it ran (the others omitted as not run there);
    an overlay without its config file, or without findings.json, is refused naming it."""
    root = tmp_path / "results"
    ran = {**FINDINGS, "thresholds": {"ci_level": 0.9}, "findings": [{**FINDINGS["findings"][0], "id": "F9e", "claim": "FIARSE beats Uniform",
                                     "units": [{"unit": "fashion_mnist", "in_scope": True, "estimate": 3.25,
                                                "low": 1.5, "high": 5.0, "verdict": "supported"}],
                                     "verdict": "supported"}, FINDINGS["findings"][3]]}
    _results(root / "medium-coverage", methods=("uniform", "fiarse"), dataset="fashion_mnist")
    _results(root / "medium-coverage-long", ran, methods=("uniform", "fiarse"), dataset="fashion_mnist")
    out = tmp_path / "p.md"
    files = ("--configfile", "presets/medium.yaml", "presets/medium-coverage.yaml")
    res = _page(hasfl_cli, root / "medium-coverage", out, "--overlay", root / "medium-coverage-long", *files)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    section = page.split("## Overlay `medium-coverage-long`", 1)[1].split("\n## ", 1)[0]
    assert ("`snakemake --cores 2 all --configfile presets/medium.yaml presets/medium-coverage.yaml "
            "presets/medium-coverage-long.yaml`") in section
    assert "4 training runs" in section and "(1; 1 not run there)" in section
    assert "| F9e | FIARSE beats Uniform | **supported** |" in section and "fashion_mnist: 3.25 [1.5, 5] supported" in section
    assert "F8-probe" not in section and page.index("## Overlay") < page.index("## Tables")
    # its intervals are labelled at the level its own findings.json computed them (90%: two-sided 80%), the page's at 95%
    assert "two-sided 80% interval" in section and "two-sided 80% interval" not in page.split("## Overlay", 1)[0]
    assert f"--overlay {(root / 'medium-coverage-long').as_posix()} --configfile" in page
    (root / "medium-coverage-x").mkdir()
    res = _page(hasfl_cli, root / "medium-coverage", out, "--overlay", root / "medium-coverage-x", *files)
    assert res.returncode == 2 and "medium-coverage-x/findings.json' does not exist" in res.stderr
    shutil.copytree(root / "medium-coverage-long", root / "medium-coverage-y", symlinks=True)
    res = _page(hasfl_cli, root / "medium-coverage", out, "--overlay", root / "medium-coverage-y", *files)
    assert res.returncode == 2 and "expected its config file 'presets/medium-coverage-y.yaml'" in res.stderr


def test_results_page_on_a_full_disk_leaves_the_old_page_and_figures_and_says_so(hasfl_cli, tmp_path) -> None:
    """The page's figures were written in place, so a full disk left a half-new figure folder beside the old page
    (and a traceback). Now figures and page are staged and renamed in: the old ones stay whole, the error is one
    line naming the path, and no staging folder is left."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("a full disk needs a tmpfs mount (root)")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)]).returncode != 0:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        results = tmp_path / "results" / "quick"
        _results(results, figures=("fig6_frontier", "fig9_estimators"))
        out = disk / "quick.md"
        assert _page(hasfl_cli, results, out).returncode == 0
        before = {p.name: p.read_bytes() for p in (disk / "quick").iterdir()} | {"page": out.read_bytes()}
        assert len(before) == 3
        filler = disk / "filler"
        with open(filler, "wb", buffering=0) as f:  # the disk full but a few KiB: less than one figure
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        os.truncate(filler, filler.stat().st_size - 8192)
        res = _page(hasfl_cli, results, out)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1 and "No space left on device" in res.stderr, res.stderr
        after = {p.name: p.read_bytes() for p in (disk / "quick").iterdir()} | {"page": out.read_bytes()}
        assert after == before
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "quick", "quick.md"]
    finally:
        subprocess.run(["umount", str(disk)])


def test_reproduce_a_claim_counts_the_runs_a_finding_reads(tmp_path) -> None:
    """F7-E3 (reported labels, fixed before training: no accuracy enters it) reads the hasfl runs, as F7-E0 does: its
    row counted every run of the dataset (54 on the quick page, 6 for F7-E0) while its accuracy methods were empty.
    Section 4.7's F10a reads every method's runs."""
    from hasfl.analysis.findings import FINDING_RUNS
    from hasfl.analysis.provenance import reproduce_rows

    results = tmp_path / "results" / "quick"
    runs = [_run(results, "digits", m, s, 360.0) for m in ("hasfl", "fedavg", "uniform") for s in (42, 43)]
    manifest = {"runs": {f"runs/digits/{r.parent.name}/{r.name}": "x" for r in runs}}
    findings = [{"id": fid, "verdict": "inconclusive", "units": [{"unit": "digits"}]}
                for fid in ("F7-E0", "F7-E3", "F10a")]
    rows = {r["id"]: r["runs"] for r in reproduce_rows(results, findings, manifest, ["presets/quick.yaml"],
                                                       FINDING_RUNS)}
    assert rows == {"F7-E0": 2, "F7-E3": 2, "F10a": 6}
