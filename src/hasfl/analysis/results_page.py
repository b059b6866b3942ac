"""A compact results page of one finished preset, for readers who do not run anything.

``hasfl results-page results/<name> docs/results/<name>.md`` writes the page and, beside it in
``docs/results/<name>/``, small copies of three figures (the accuracy-capacity frontier, the
convergence of the allocation strategies, and the estimates against the ground truth by capacity
tier, or the final allocations where the preset has no estimator figure). Everything on the page
is read from files the DAG wrote: ``findings.json``, the tables' Markdown, ``report.md`` (for the
figure captions) and the figures, each checked first against the analysis manifest
(``analysis.manifest.json``, :func:`hasfl.analysis.manifest.verify_analysis`), which also names the runs
the analysis was computed from (their count and a digest of their identities head the page).
Nothing is typed by hand.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.analysis.artifacts import FIGURES as ARTIFACT_FIGURES
from hasfl.analysis.artifacts import TABLES as ARTIFACT_TABLES
from hasfl.analysis.findings import PAPER_CLAIM, VERDICT_RULES, finding_kind
from hasfl.analysis.findings.display import seeds_cell
from hasfl.analysis.manifest import verify_analysis
from hasfl.errors import HasflError
from hasfl.io import atomic_path

__all__ = ["FIGURES", "TABLES", "write_results_page"]

#: Tables on the page, in order (those the preset produced): the registry's ``results_page`` positions.
TABLES = tuple(a.name for a in sorted((a for a in ARTIFACT_TABLES.values() if a.results_page),
                                      key=lambda a: a.results_page))
#: Figures on the page: (slug, fallback slug), in order.
FIGURES = tuple((a.name, a.page_fallback) for a in sorted((a for a in ARTIFACT_FIGURES.values() if a.results_page),
                                                          key=lambda a: a.results_page))
WIDTH_PX = 800
#: What the tag after a finding's id means (findings.json, field ``kind``).
KIND_LEGEND = ("A finding without a tag tests a claim of the paper; *(extension)*: this project's own question; "
               "*(pipeline check)*: the outcome follows from the construction (Proposition 3 on saved states, an "
               "estimate equal to TV without noise), so it checks the code, not the method; *(oracle)*: allocation "
               "by the true label histogram, an upper bound on what any estimate could give.")


class ResultsPageError(HasflError, ValueError):
    """The results folder lacks a file the page needs."""


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "--" if not math.isfinite(x) else f"{x:.3g}"
    if isinstance(x, dict):
        return "; ".join(f"{k}: {_fmt(v)}" for k, v in x.items())
    return "--" if x is None else str(x)


MAX_UNITS_SHOWN = 3


def _measured(units: Sequence[Mapping[str, Any]]) -> str:
    """The value of each in-scope unit with its interval and verdict, e.g.
    ``fashion_mnist: -0.17 [-0.381, 0.059] contradicted``; a unit without a single value (a
    composite test) gives its verdict alone; past MAX_UNITS_SHOWN units, a count per verdict."""
    shown = [u for u in units if u.get("in_scope", True)]
    parts = []
    for u in shown[:MAX_UNITS_SHOWN]:
        est = u.get("estimate")
        value = "" if est is None else f" {_fmt(float(est))}"
        low, high = u.get("low"), u.get("high")
        if value and low is not None and high is not None:
            value += f" [{_fmt(float(low))}, {_fmt(float(high))}]"
        parts.append(f"{u.get('unit', '?')}:{value} {u.get('verdict', '')}".strip())
    rest = shown[MAX_UNITS_SHOWN:]
    if rest:
        counts = Counter(str(u.get("verdict")) for u in rest)
        parts.append(f"{len(rest)} more: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return "; ".join(parts) if parts else "not run"


def _per_unit(values: Any) -> str:
    """A per-unit mapping (seeds per unit, MDE per unit) in a cell: past MAX_UNITS_SHOWN units, the
    common value ("12 units: 1 each") or the first few and a count."""
    if not isinstance(values, dict) or len(values) <= MAX_UNITS_SHOWN:
        return _fmt(values)
    distinct = {_fmt(v) for v in values.values()}
    if len(distinct) == 1:
        return f"{len(values)} units: {distinct.pop()} each"
    head = dict(list(values.items())[:MAX_UNITS_SHOWN])
    return f"{_fmt(head)}; {len(values) - MAX_UNITS_SHOWN} more (findings.json)"


def seeds_needed_cell(units: Sequence[Mapping[str, Any]]) -> str:
    """``unit: seeds`` for each inconclusive in-scope unit (:func:`hasfl.analysis.findings.display.seeds_cell`)."""
    parts = [f"{u.get('unit')}: {seeds_cell(u)}" for u in units
             if u.get("verdict") == "inconclusive" and u.get("in_scope", True)]
    return "; ".join(parts) if parts else "--"


def _findings_table(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["| finding | claim | verdict | measured (in-scope unit: value [one-sided interval]) | statistic | "
             "seeds or runs per unit | margin | min. detectable effect (80% power) | seeds for 80% power "
             "(inconclusive units) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for f in findings:
        units = f.get("n_per_unit") or {}
        kind = finding_kind(f)
        lines.append(f"| {f['id']}{'' if kind == PAPER_CLAIM else f' ({kind})'} | {f.get('claim', '')} | "
                     f"**{f['verdict']}** | {_measured(f.get('units') or [])} | {f.get('statistic', '')} | "
                     f"{_per_unit(units) if units else f.get('n_units', '--')} | {_fmt(f.get('margin'))} | "
                     f"{_per_unit(f.get('mde'))} | {seeds_needed_cell(f.get('units') or [])} |")
    lines += ["", "Why each verdict (`findings.json`, field `reason`):", ""]
    lines += [f"- **{f['id']}**: {f.get('reason', '')}" for f in findings]
    return lines


def _table_body(md: str) -> list[str]:
    """A table's Markdown file up to its first sub-section (per-seed rows and the list of files it
    read stay in the results folder), without its title line (the page gives its own heading)."""
    lines = md.strip().splitlines()
    lines = lines[1:] if lines and lines[0].startswith("# ") else lines
    for i, line in enumerate(lines):
        if line.startswith("## "):
            return [*lines[:i], "(Per-seed rows and the files read: `tables/` in the results folder.)"]
    return lines


def _small_png(src: Path, dest: Path) -> None:
    from PIL import Image

    with Image.open(src) as im:
        if im.width > WIDTH_PX:
            im = im.resize((WIDTH_PX, round(im.height * WIDTH_PX / im.width)), Image.LANCZOS)
        im = im.convert("RGB").quantize(colors=128)  # plots: a palette keeps them a fraction of the size
        dest.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(dest) as tmp:
            im.save(tmp, format="PNG", optimize=True)


def _caption(report_md: str, slug: str) -> str:
    """The caption report.md prints under figure ``slug`` (the paragraph after its image)."""
    marker = f"(figures/{slug}.png)"
    at = report_md.find(marker)
    if at < 0:
        return ""
    rest = report_md[at + len(marker):].lstrip("\n")
    para = rest.split("\n\n", 1)[0].strip()
    return para if para.startswith("*Figure") else ""


def _runs_digest(runs: Mapping[str, str]) -> tuple[int, str]:
    """Number of runs the analysis read and a digest of their identities (which runs the page is about)."""
    ids = [runs[folder] for folder in sorted(runs)]
    return len(ids), hashlib.sha256("".join(ids).encode()).hexdigest()[:16]


def _listed(results: Path, listed: Mapping[str, Any], path: Path) -> Path:
    """``path``, a file of the results folder the page reads, if the analysis manifest lists it."""
    if path.relative_to(results).as_posix() not in listed:
        raise ResultsPageError(f"'{path}' is not an output of the analysis (analysis.manifest.json does not list "
                               "it); rerun the preset's DAG to redo the analysis")
    return path


def _kernels(results: Path, runs: Any) -> str:
    """Which CPU kernels the runs used, from each run's ``timings.json`` (``cpu_capability``, and any instruction-set
    setting in force): float bytes hold across machines only at the same capability (README "Bytes across
    machines")."""
    counts: dict[str, int] = {}
    folders = list(runs) if isinstance(runs, Mapping) else [str(r) for r in runs]
    for folder in folders:
        path = results / folder / "timings.json" if not Path(folder).is_absolute() else Path(folder) / "timings.json"
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            info = {}
        cap = info.get("cpu_capability")
        pins = ", ".join(f"{k}={v}" for k, v in sorted((info.get("isa_env") or {}).items()))
        key = (f"{info.get('device', 'cpu')} {cap}" + (f" ({pins})" if pins else "")) if cap else "not recorded"
        counts[key] = counts.get(key, 0) + 1
    return "CPU kernels: " + ", ".join(f"{k} ({n} runs)" for k, n in sorted(counts.items()))


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once symlinks, ``.`` and ``..`` are resolved, or
    (both existing) the same inode (a hard link)."""
    if a.resolve() == b.resolve():
        return True
    return a.exists() and b.exists() and a.samefile(b)


def _refuse_notes_as_page(notes: Path, out_md: Path) -> None:
    """Raise :class:`ResultsPageError` when the page would be written over its own ``--notes`` file (the
    notes, a person's text, would be lost)."""
    if _same_file(notes, out_md):
        raise ResultsPageError(f"notes file '{notes}' is the page to write '{out_md}' (both are "
                               f"'{out_md.resolve()}'); writing the page would destroy the notes. Keep the notes "
                               "in a file of their own, e.g. docs/results/<name>.notes.md")


def write_results_page(results: str | Path, out_md: str | Path, *, title: str | None = None,
                       notes_path: str | Path | None = None) -> Path:
    """Write the page for the finished preset in ``results`` (``<results_dir>/<name>``), with the
    Markdown of ``notes_path`` (a person's reading of the findings) under the title."""
    results, out_md = Path(results), Path(out_md)
    if notes_path is not None and not Path(notes_path).is_file():
        raise ResultsPageError(f"notes file '{notes_path}' does not exist")
    if notes_path is not None:
        _refuse_notes_as_page(Path(notes_path), out_md)
    notes = Path(notes_path).read_text() if notes_path is not None else None
    findings_path = results / "findings.json"
    if not findings_path.is_file():
        raise ResultsPageError(f"'{findings_path}' does not exist: run the preset's DAG to the end first")
    manifest = verify_analysis(results)
    listed = manifest["files"]
    findings = json.loads(_listed(results, listed, findings_path).read_text())
    name = results.name
    n_runs, digest = _runs_digest(manifest["runs"])
    fig_dir = out_md.parent / out_md.stem
    report_path = results / "report.md"
    report_md = _listed(results, listed, report_path).read_text() if report_path.is_file() else ""
    notes_arg = f" --notes {Path(notes_path).as_posix()}" if notes_path is not None else ""
    lines = [f"# {title or f'Results of the {name} preset'}", "",
             f"Generated by `hasfl results-page {results.as_posix()} {out_md.as_posix()}{notes_arg}` from the files "
             f"of a finished DAG run: `findings.json`, `tables/*.md`, `figures/*.png` ({n_runs} training runs, "
             f"identities digest `{digest}`; {_kernels(results, manifest['runs'])}). Findings, tables and figures are "
             "not typed by hand; `report.md` in the results folder has everything."
             + (" The notes before the findings are a person's reading of them (the `--notes` file); their "
                "numbers are copied from the sections below." if notes else ""), ""]
    if notes:
        lines += [notes.strip(), ""]
    lines += ["## Findings", "", KIND_LEGEND, "", VERDICT_RULES, "", *_findings_table(findings["findings"]), ""]
    lines += ["## Tables", ""]
    for table in TABLES:
        md = results / "tables" / f"{table}.md"
        if md.is_file():
            text = _listed(results, listed, md).read_text()
            heading = text.strip().splitlines()[0].lstrip("# ").strip() if text.strip() else table
            lines += [f"### {heading}", "", *_table_body(text), ""]
    lines += ["## Figures", ""]
    for slug, fallback in FIGURES:
        for s in (slug, fallback):
            if s is None:
                continue
            png = results / "figures" / f"{s}.png"
            if png.is_file():
                _small_png(_listed(results, listed, png), fig_dir / f"{s}.png")
                lines += [f"![{s}]({fig_dir.name}/{s}.png)", ""]
                caption = _caption(report_md, s)
                if caption:
                    lines += [caption, ""]
                break
    with atomic_path(out_md) as tmp:
        tmp.write_text("\n".join(lines).rstrip() + "\n")
    return out_md
