"""A compact results page of one finished preset, for readers who do not run anything.

``hasfl results-page results/<name> docs/results/<name>.md --notes docs/results/<name>.notes.md
--configfile presets/<name>.yaml [overlays]`` writes the page and, beside it in ``docs/results/<name>/``,
small copies of four figures (the accuracy-capacity frontier, the convergence of the allocation
strategies, the estimates against the ground truth by capacity tier, or the final allocations where
the preset has no estimator figure, and Section 4.7's E0 of every method; a figure drawn from methods the preset does
not run is left out, and a copy
an earlier page left there that this one does not show is removed). Everything on the page is rendered from data
the DAG wrote, never from rendered Markdown: ``findings.json``, the tables' Parquet files (shown by their modules' ``display``,
as report.md shows them), the figures, and the registry's titles and captions
(:mod:`hasfl.analysis.artifacts`), each file checked first against the analysis manifest
(``analysis.manifest.json``, :func:`hasfl.analysis.manifest.verify_analysis`). The notes, a person's
reading, are filled at generation: every number and verdict in them is a reference into findings.json
(:mod:`hasfl.analysis.page_refs`), and a verdict typed by hand is refused. The page states the commands
that made it and that reproduce each claim, and its provenance (:mod:`hasfl.analysis.provenance`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.analysis.artifacts import FIGURES as ARTIFACT_FIGURES
from hasfl.analysis.artifacts import TABLES as ARTIFACT_TABLES
from hasfl.analysis.artifacts import figure_caption
from hasfl.analysis.findings import FINDING_RUNS, PAPER_CLAIM, VERDICT_RULES, finding_kind
from hasfl.analysis.findings.display import seeds_cell
from hasfl.analysis.findings.kernel import EXTENSION_ATTRIBUTION, PAPER_ATTRIBUTION
from hasfl.analysis.manifest import verify_analysis
from hasfl.analysis.markdown import measured, num
from hasfl.analysis.page_refs import NOT_RUN, NotesError, fill_notes, shown_verdict
from hasfl.analysis.provenance import (
    REPO,
    ProvenanceError,
    check_configfiles,
    code_sentence,
    dag_command,
    evaluation_cpu_hours,
    provenance,
    provenance_lines,
    reproduce_lines,
    reproduce_rows,
    run_identities,
    summary_block,
    total_cpu_hours,
)
from hasfl.errors import HasflError
from hasfl.io import atomic_path
from hasfl.staging import staged_folder

__all__ = ["FIGURES", "TABLES", "write_results_page"]

#: Tables on the page, in order (those the preset produced): the registry's ``results_page`` positions.
TABLES = tuple(a.name for a in sorted((a for a in ARTIFACT_TABLES.values() if a.results_page),
                                      key=lambda a: a.results_page))
#: Figures on the page: (slug, fallback slug), in order.
FIGURES = tuple((a.name, a.page_fallback) for a in sorted((a for a in ARTIFACT_FIGURES.values() if a.results_page),
                                                          key=lambda a: a.results_page))
WIDTH_PX = 800
#: The table shown with its findings' verdicts under each batch-norm rule (``bn_sensitivity_findings.parquet``).
BN_SENSITIVITY = "bn_sensitivity"
#: What the tag after a finding's id means (findings.json, field ``kind``).
KIND_LEGEND = ("A finding without a tag tests a claim of the paper; *(extension)*: this project's own question; "
               "*(pipeline check)*: the outcome follows from the construction (Proposition 3 on saved states, an "
               "estimate equal to TV without noise), so it checks the code, not the method; *(oracle)*: allocation "
               "by the true label histogram, an upper bound on what any estimate could give.")


class ResultsPageError(HasflError, ValueError):
    """The results folder lacks a file the page needs."""


def _fmt(x: Any) -> str:
    """A settings or per-unit value: floats as :func:`~hasfl.analysis.markdown.num` writes them, integers whole."""
    if isinstance(x, float):
        return num(x)
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
        value = measured(u.get("estimate"), u.get("low"), u.get("high"))
        parts.append(f"{u.get('unit', '?')}:{' ' + value if value else ''} {u.get('verdict', '')}".strip())
    rest = shown[MAX_UNITS_SHOWN:]
    if rest:
        counts = Counter(str(u.get("verdict")) for u in rest)
        parts.append(f"{len(rest)} more: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return "; ".join(parts) if parts else "--"


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


def _cell(text: Any) -> str:
    """A Markdown table cell: ``|`` escaped, no line breaks (a ``|`` in a reason would shift the columns)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def interval_label(ci_level: float, power: float) -> tuple[str, str]:
    """The findings table's headers that name what its intervals and MDE show, from the settings."""
    alpha = 1.0 - ci_level

    def pct(x: float) -> str:
        return f"{100 * x:.4g}%"
    return (f"measured (in-scope unit: value [two-sided {pct(1 - 2 * alpha)} interval, whose ends are the one-sided "
            f"{pct(ci_level)} bounds])", f"min. detectable effect ({pct(power)} power)")


def _findings_table(findings: Sequence[Mapping[str, Any]], ci_level: float = 0.95,
                    power: float = 0.8) -> list[str]:
    measured_head, mde_head = interval_label(ci_level, power)
    lines = [f"| finding | claim | verdict | {measured_head} | statistic | "
             f"seeds or runs per unit | margin | {mde_head} | seeds for {power:.0%} power "
             "(inconclusive units) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for f in findings:
        units = f.get("n_per_unit") or {}
        kind, verdict = finding_kind(f), shown_verdict(f)
        measured = NOT_RUN if verdict == NOT_RUN else _measured(f.get("units") or [])
        cells = [f"{f['id']}{'' if kind == PAPER_CLAIM else f' ({kind})'}", f.get("claim", "") + whose_claim(f),
                 f"**{verdict}**",
                 measured, f.get("statistic", ""), _per_unit(units) if units else f.get("n_units", "--"),
                 _fmt(f.get("margin")), _per_unit(f.get("mde")), seeds_needed_cell(f.get("units") or [])]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "Why each verdict (`findings.json`, field `reason`):", ""]
    lines += [f"- **{f['id']}**: {f.get('reason', '')}" for f in findings]
    return lines


def whose_claim(f: Mapping[str, Any]) -> str:
    """`` [full model: Alam et al. 2022 (FedRolex)'s claim; sub-models: this project's extension]`` after a claim with
    more than one estimand: whose claim each estimand's verdict is (``estimands[].attribution``); nothing for one."""
    ests = [e for e in f.get("estimands") or [] if e.get("verdict") != NOT_RUN]
    if len(ests) < 2:
        return ""
    parts = []
    for e in ests:
        who = str(e.get("attribution") or "")
        said = who if who in (EXTENSION_ATTRIBUTION, PAPER_ATTRIBUTION) else f"{who}'s claim"
        parts.append(f"{e.get('label') or e.get('estimand')}: {said}")
    return " [" + "; ".join(parts) + "]"


def failed_lines(findings: Sequence[Mapping[str, Any]], name: str) -> list[str]:
    """The page's top section on runs that failed to train at this budget: one row per run (dataset, method, seed,
    why) and the units it withholds or decides; nothing when none did."""
    runs: dict[tuple[str, str, int], str] = {}
    withheld: dict[tuple[str, str, int], list[str]] = {}
    for f in findings:
        for u in f.get("units") or []:
            for part in [u, *u.get("parts", [])]:
                for r in part.get("failed_runs") or []:
                    key = (str(r.get("dataset")), str(r.get("method")), int(r["seed"]))
                    runs[key] = str(r.get("why"))
                    label = f"{f['id']} {u.get('unit')}" + (f" ({part['unit']})" if part is not u else "")
                    if part.get("decided_by"):
                        label += " (contradicted at this budget)"
                    if label not in withheld.setdefault(key, []):
                        withheld[key].append(label)
    if not runs:
        return []
    lines = ["## Failed to train at this budget", "",
             f"On this rung (the {name} preset's rounds, widths and data) these runs never learned: their accuracy "
             "under their method's declared batch-norm rule never rose above the majority-class floor (the class "
             "frequencies). A unit whose baseline failed is withheld and says so; a unit whose claimed-better method "
             "failed while the baseline learned is contradicted at this budget. That a method failed here is "
             "evidence about the regime, and more seeds would not change it.", "",
             "| dataset | method | seed | why | units withheld or decided |", "|---|---|---|---|---|"]
    for (dataset, method, seed), why in sorted(runs.items()):
        lines.append("| " + " | ".join(_cell(c) for c in (dataset, method, seed, why,
                                                             ", ".join(withheld[(dataset, method, seed)]))) + " |")
    return [*lines, ""]


def calibration_lines(doc: Mapping[str, Any]) -> list[str]:
    """The trend rule's calibration at these runs' noise (findings.json ``trend_calibration``) and each final-accuracy
    unit's power at its own spread and seeds (``unit_calibration``)."""
    cal = doc.get("trend_calibration") or {}
    units = doc.get("unit_calibration") or []
    if not cal and not units:
        return []
    lines = ["The gap-trend caveat is calibrated by simulation at the evaluation noise these runs show "
             "(`findings.json`, `trend_calibration`; `hasfl.analysis.calibration`): plateaued comparisons at the "
             "preset's seeds.", "",
             "| dataset | runs | evaluation noise sd (points) | seed-to-seed sd (points) | evaluations in the window | "
             "caveat on a plateau | removed 'still rising' gate on a plateau |",
             "|---|---|---|---|---|---|---|"]
    for d, c in cal.items():
        p = c.get("plateau") or {}
        lines.append(f"| {d} | {c.get('runs')} | {_fmt(c.get('noise_sd_pct'))} | {_fmt(c.get('seed_sd_pct'))} | "
                     f"{c.get('evals')} | {_pct(p.get('caveat'))} | {_pct(p.get('removed_gate'))} |")
    if units:
        gap = _fmt(units[0].get("power_gap_pct"))
        lines += ["", f"Each final-accuracy unit's power on a {gap}-point gap beyond its margin, at its own seeds and "
                      "the spread of its own per-seed gaps (`findings.json`, `unit_calibration`), and the caveat's rate "
                      "on a plateau there (a sub-model unit has no curve):", "",
                  f"| finding | unit | seeds | sd of the per-seed gaps (points) | min. detectable effect | caveat on a "
                  f"plateau | power on a {gap}-point gap |", "|---|---|---|---|---|---|---|"]
        for r in units:
            caveat = "no curve" if r.get("caveat") is None else _pct(r.get("caveat"))
            lines.append(f"| {r['finding']} | {r['unit']} | {r['n']} | {_fmt(r.get('sd_pct'))} | {_fmt(r.get('mde'))} "
                         f"| {caveat} | {_pct(r.get('power'))} |")
    return [*lines, ""]


def _horizon_text(h: Mapping[str, Any]) -> str:
    seeds = h.get("seeds") or []
    return f"{h.get('rounds')} rounds, {len(seeds)} seeds" if h else "its horizon"


def _unit_value(u: Mapping[str, Any] | None) -> str:
    if u is None:
        return "--"
    value = measured(u.get("estimate"), u.get("low"), u.get("high"))
    trend = u.get("gap_trend") or {}
    note = " (no trend read: final state only)" if trend.get("read") == "none" else ""
    return f"{value + ' ' if value else ''}{u.get('verdict')}{note}"


def horizon_rows(base: Mapping[str, Any], longer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each estimand of ``base``'s findings beside the same estimand at the longer horizon of ``longer`` (another
    folder's findings.json): its verdict at each horizon and each unit's value; ``dependent`` where both ran and the
    verdicts differ (the verdict is horizon-dependent)."""
    other = {str(f["id"]): f for f in longer.get("findings") or []}
    rows = []
    for f in base.get("findings") or []:
        g = other.get(str(f["id"]))
        if g is None:
            continue
        theirs = {e["estimand"]: e for e in g.get("estimands") or []}
        units_a = {str(u["unit"]): u for u in f.get("units") or []}
        units_b = {str(u["unit"]): u for u in g.get("units") or []}
        for e in f.get("estimands") or []:
            t = theirs.get(e["estimand"])
            if e.get("verdict") == NOT_RUN or t is None or t.get("verdict") == NOT_RUN:
                continue
            names = list(dict.fromkeys([*e.get("units", []), *t.get("units", [])]))
            rows.append({"id": f["id"], "estimand": e.get("label") or "", "a": e["verdict"], "b": t["verdict"],
                         "dependent": e["verdict"] != t["verdict"],
                         "units": [(n, _unit_value(units_a.get(n)), _unit_value(units_b.get(n))) for n in names]})
    return rows


def horizon_lines(base: Mapping[str, Any],
                  longer: Sequence[tuple[str, Mapping[str, Any], Sequence[Mapping[str, Any]]]]) -> list[str]:
    """The section that shows every estimand of the page's findings at each longer horizon of an overlay folder
    (``longer``: its name, findings.json and :func:`horizon_rows`), a verdict that differs labelled
    horizon-dependent."""
    if not longer:
        return []
    here = _horizon_text(base.get("horizon") or {})
    lines = ["## Horizons side by side", ""]
    for name, doc, rows in longer:
        there = _horizon_text(doc.get("horizon") or {})
        dep = [r for r in rows if r["dependent"]]
        lines += [f"Each estimand this page's folder tests at {here}, beside the same test in `{name}` at {there} "
                  f"(the overlay's own section has its reasons). {len(rows)} estimand verdicts are tested at both; "
                  f"{len(dep)} differ between the horizons (**horizon-dependent**"
                  + (": " + ", ".join(f"{r['id']} {r['estimand']}".strip() for r in dep) if dep else "") + "). A "
                  "verdict holds at its horizon; a sub-model unit has no accuracy curve, so its trend is not read and "
                  "its value at the longer horizon is what shows whether the gap moves.", "",
                  f"| finding | estimand | unit | at {here} | at {there} | horizon-dependent |",
                  "|---|---|---|---|---|---|"]
        for r in rows:
            lines.append("| " + " | ".join(_cell(c) for c in (
                r["id"], r["estimand"] or "--", "(verdict)", f"**{r['a']}**", f"**{r['b']}**",
                "**yes**" if r["dependent"] else "no")) + " |")
            for unit, a, b in r["units"]:
                lines.append("| " + " | ".join(_cell(c) for c in ("", "", unit, a, b, "")) + " |")
        lines.append("")
    return lines


def longer_horizons(base: Mapping[str, Any], overlays: Mapping[Path, tuple[dict[str, Any], dict[str, Any]]]
                    ) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """The overlay folders (``overlays``: each one's verified manifest and findings.json) whose findings were made at
    more rounds than ``base``'s: their name, findings.json and :func:`horizon_rows`."""
    rounds = (base.get("horizon") or {}).get("rounds")
    out = []
    for path, (_manifest, doc) in overlays.items():
        theirs = (doc.get("horizon") or {}).get("rounds")
        if rounds is not None and theirs is not None and theirs > rounds:
            out.append((path.name, doc, horizon_rows(base, doc)))
    return out


LADDER_LEAD = (
    "The estimands of the paper's capacity confound at each {axis} that this page's folder and its overlays ran on "
    "{dataset}, at one setting otherwise (data, federation, local training, model) and one seed set, beside the "
    "paper's values at its {paper}. A measured row is that folder's unit of the finding: its estimate, its two-sided "
    "interval where the unit has one (else the interval its test reads, level given) and its verdict at that folder's "
    "horizon. A **published** row is the paper's: the mean over its 3 seeds with +- their sample sd (a spread, not an "
    "interval), F4's the difference of two published means; it is never pooled with a measured row. The reading "
    "below the figure states distances from the numbers and carries no verdict.")


def _paper_slices() -> dict[str, Any]:
    """The paper's protocol per dataset of Table 5: the hasfl run slice this checkout's config.yaml gives."""
    from hasfl.analysis.ladder import PAPER_DATASETS
    from hasfl.config import load_config, run_config

    paper = load_config([REPO / "config.yaml"])
    return {d: run_config(paper, d, "hasfl", int(paper["seeds"][0])) for d in PAPER_DATASETS}


def _on_axis(rung: Any, own: Any, axis: Any) -> bool:
    """Whether ``rung`` (an overlay folder's) steps from the page's folder (``own``) along ``axis`` alone: another
    width (the width ladder, whose own check refuses any other difference), or the same width with only the train
    images per class changed (the local-steps ladder; an overlay of another horizon or method set is neither)."""
    from hasfl.analysis import ladder

    if axis is ladder.WIDTH:
        return rung.width != own.width
    changed = {k for k in ladder.SETTING if rung.setting.get(k) != own.setting.get(k)}
    return rung.width == own.width and bool(changed) and changed <= set(axis.free)


def ladder_lines(results: Path, manifest: Mapping[str, Any], doc: Mapping[str, Any],
                 verified: Mapping[Path, tuple[dict[str, Any], dict[str, Any]]]) -> tuple[list[str], dict[str, Any]]:
    """The ladder sections (:mod:`hasfl.analysis.ladder`) where overlay folders run a dataset at another base width
    than the page's folder (the width ladder) or at its width with other train images per class (the local-steps
    ladder): per dataset and axis its table, its figure (returned by file name, drawn into the page's figure folder)
    and its reading. Each run's width and setting are read from its manifest's recorded config slice. Nothing where
    no overlay steps along an axis."""
    from hasfl.analysis import ladder

    def configs(folder: Path, runs: Mapping[str, Any]) -> dict[str, Any]:
        return {rel: ident.get("config") for rel, ident in run_identities(folder, list(runs)).items()}

    folders = {results.name: (manifest["runs"], doc, configs(results, manifest["runs"]))}
    for path, (m, d) in verified.items():
        folders[path.name] = (m["runs"], d, configs(path, m["runs"]))
    try:
        rungs = ladder.folder_rungs(folders)
        lines: list[str] = []
        figures: dict[str, Any] = {}
        paper = _paper_slices()
        for dataset, found in sorted(rungs.items()):
            own = next((r for r in found if r.folder == results.name), None)
            if own is None:
                continue
            for axis in (ladder.WIDTH, ladder.STEPS):
                steps = [own, *(r for r in found if r is not own and _on_axis(r, own, axis))]
                if len(steps) < 2:
                    continue
                frame = ladder.ladder_frame(steps, dataset, axis=axis, paper_at=ladder.paper_positions(paper, axis))
                name = f"{axis.key}_ladder_{dataset}.png"
                figures[name] = ladder.figure(frame)
                title = ("Width ladder" if axis is ladder.WIDTH else f"Local-steps ladder at base width {own.width}")
                lines += [f"## {title} ({dataset})", "",
                          LADDER_LEAD.format(dataset=dataset, axis=axis.name,
                                             paper="width 64" if axis is ladder.WIDTH else "own local steps"), "",
                          *ladder.table_lines(frame), "",
                          "Where the ladder's protocol stands against the paper's runs of Table 5 (its config slices, "
                          "config.yaml; images and local steps at an equal split of the training set over the "
                          "clients):", "", *ladder.protocol_lines(steps, dataset, paper), "",
                          f"![{axis.name} ladder]({{fig_dir}}/{name})", "",
                          f"*{title}.* Measured estimates with their intervals against the {axis.name} (log scale), "
                          "the paper's published values at its own as hollow markers, one per published dataset "
                          "(bars: +- the sd over its seeds).",
                          "", *ladder.reading_lines(frame), ""]
    except ladder.LadderError as exc:
        raise ResultsPageError(str(exc)) from None
    return lines, figures


def _pct(x: Any) -> str:
    return "--" if x is None else f"{100 * float(x):.1f}%"


def _small_png(src: Path, dest: Path) -> None:
    from PIL import Image

    with Image.open(src) as im:
        if im.width > WIDTH_PX:
            im = im.resize((WIDTH_PX, round(im.height * WIDTH_PX / im.width)), Image.LANCZOS)
        im = im.convert("RGB").quantize(colors=128)  # plots: a palette keeps them a fraction of the size
        dest.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(dest) as tmp:
            im.save(tmp, format="PNG", optimize=True)


def _listed(results: Path, listed: Mapping[str, Any], path: Path) -> Path:
    """``path``, a file of the results folder the page reads, if the analysis manifest lists it."""
    if path.relative_to(results).as_posix() not in listed:
        raise ResultsPageError(f"'{path}' is not an output of the analysis (analysis.manifest.json does not list "
                               "it); rerun the preset's DAG to redo the analysis")
    return path


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




def _preset_files(name: str, configfiles: Sequence[str | Path] | None) -> list[str]:
    """The config files that made the results folder ``name``: those given, else ``presets/<name>.yaml``; refused
    when the last ``name`` they set is not the folder's (the page would name a command making another folder)."""
    from hasfl.config import read_yaml

    if not configfiles:
        default = Path("presets") / f"{name}.yaml"
        if not (REPO / default).is_file():  # the commands name what is missing; --configfile names it
            return [f"<the config files of '{name}': hasfl results-page --configfile>"]
        configfiles = [default]
    files = [Path(c).as_posix() for c in configfiles]
    set_name = None
    for c in files:
        path = _config_path(c)
        if not path.is_file():
            raise ResultsPageError(f"config file '{c}' does not exist")
        set_name = read_yaml(path).get("name", set_name)
    if set_name is not None and set_name != name:
        raise ResultsPageError(f"config files {' '.join(files)} make results folder '{set_name}', not '{name}'")
    return files


def _config_path(c: str) -> Path:
    """A config file as given (absolute, or relative to the working folder) or relative to the repository."""
    return Path(c) if Path(c).is_absolute() or Path(c).is_file() else REPO / c


def _refuse_other_configs(results: Path, files: Sequence[str], runs: Mapping[str, Any]) -> None:
    """Refuse config files that do not make the runs the analysis read: each run's recorded config slice against
    :func:`hasfl.config.run_config` of the merged files (:func:`hasfl.analysis.provenance.check_configfiles`), the
    first differing key named (a 6-round folder is not made by an 8-round preset)."""
    if any(c.startswith("<") for c in files):
        return
    try:
        check_configfiles(results, list(runs), [_config_path(c) for c in files], names=files)
    except ProvenanceError as exc:
        raise ResultsPageError(str(exc)) from None


def _refuse_other_methods(files: Sequence[str], runs: Mapping[str, Any]) -> None:
    """Refuse config files whose methods are not those of the runs the analysis read (an overlay left out: the
    page would name a command that does not make these findings)."""
    from hasfl.config import deep_merge, read_yaml

    if any(c.startswith("<") for c in files):
        return
    config = read_yaml(REPO / "config.yaml")
    for c in files:
        config = deep_merge(config, read_yaml(_config_path(c)))
    ran = {r.split("/")[-2] for r in runs}
    missing = sorted(ran - set(config.get("methods") or []))
    if missing:
        raise ResultsPageError(f"the analysis read runs of {', '.join(missing)}, which config files {' '.join(files)} "
                               "do not run: give every config file of the DAG run with --configfile (an overlay such "
                               "as presets/<name>-rolling.yaml)")


def _methods_run(runs: Sequence[str] | Mapping[str, Any]) -> set[str]:
    """The methods of the analysis manifest's runs (``runs/<dataset>/<method>/seed<k>``)."""
    return {Path(r).parent.name for r in runs}


def _figure_has_runs(slug: str, ran: set[str]) -> bool:
    """A figure drawn from runs (its registry entry names methods) is shown only when the preset runs one of
    them; otherwise every panel of it says "not run" and the page skips it (and tries its fallback)."""
    methods = ARTIFACT_FIGURES[slug].methods
    return not methods or bool(ran & set(methods))


def _figure_context(files: Sequence[str], n_seeds: int, ci_level: Any) -> dict[str, Any]:
    """The numbers the registry's captions quote (``workflow/rules/analysis.smk``, FIGURE_CONTEXT), from the
    preset's config files; a key the files do not give is written as its symbol."""
    from hasfl.config import deep_merge, read_yaml

    ctx: dict[str, Any] = {"n_seeds": n_seeds or None, "ci_level": ci_level}
    try:
        config = read_yaml(REPO / "config.yaml")
        for c in files:
            config = deep_merge(config, read_yaml(_config_path(c)))
        ctx.update({k: config["hasfl"][k] for k in ("p_min", "gamma", "warmup", "t_adapt", "t_norm")})
    except (OSError, KeyError, ValueError, HasflError):
        pass
    return ctx


def _table_lines(results: Path, listed: Mapping[str, Any], name: str, not_run: set[str]) -> list[str]:
    """Table ``name`` from its Parquet file, shown as report.md shows it (its module's ``display``); ``not_run``:
    the findings this preset does not run (no batch-norm sensitivity line: no verdict to change)."""
    import pandas as pd

    from hasfl.analysis.markdown import render_parts
    from hasfl.analysis.tables.base import display_parts, preamble

    art = ARTIFACT_TABLES[name]
    df = pd.read_parquet(_listed(results, listed, results / "tables" / f"{name}.parquet"))
    if name == BN_SENSITIVITY:  # as report.md shows it: accuracy per mode, and the verdicts under each rule
        from hasfl.analysis.bn_sensitivity import markdown as bn_markdown

        verdicts = pd.read_parquet(_listed(results, listed, results / "tables" / f"{BN_SENSITIVITY}_findings.parquet"))
        if len(verdicts):
            verdicts = verdicts[~verdicts["finding"].isin(not_run)]
        pre, body = "", bn_markdown(df, verdicts, level="###").strip()
    else:
        pre, body = preamble(name, df), render_parts(display_parts(name, df), level="####").strip()
    source = f"`tables/{name}.parquet`" + (f" and `tables/{name}_findings.parquet`" if name == BN_SENSITIVITY else "")
    return [f"### {art.title}", "", f"From {source}." + (f" {art.note}" if art.note else ""), "",
            *([pre, ""] if pre else []), body, ""]


def _levels(doc: Mapping[str, Any]) -> tuple[float, float]:
    """(interval level, power) that a findings.json's intervals and MDEs were computed at (its ``thresholds``)."""
    th = doc.get("thresholds") or {}
    return float(th.get("ci_level", 0.95)), float(th.get("power", 0.8))


def _verified_findings(results: Path, what: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """The analysis manifest of ``results`` (every listed file checked) and its findings.json, read through it."""
    findings_path = results / "findings.json"
    if not findings_path.is_file():
        raise ResultsPageError(f"{what}'{findings_path}' does not exist: run the preset's DAG to the end first")
    manifest = verify_analysis(results)
    return manifest, json.loads(_listed(results, manifest["files"], findings_path).read_text())


def _overlay_lines(overlay: Path, verified: tuple[dict[str, Any], dict[str, Any]], base_files: Sequence[str],
                   analysis_code: str | None) -> list[str]:
    """The section of a folder made with one more config file on top of the page's (``presets/<its name>.yaml``: a
    longer horizon, methods at each client's capacity): its command and provenance in one paragraph, the findings it
    ran (the table of the page's own findings, the others omitted as not run there) and its coverage table. Its
    analysis is verified against its manifest (``verified``: :func:`_verified_findings` of it) and its runs against
    the config files, as the page's own."""
    manifest, doc = verified
    listed = manifest["files"]
    extra = Path("presets") / f"{overlay.name}.yaml"
    if not (REPO / extra).is_file():
        raise ResultsPageError(f"overlay '{overlay}': expected its config file '{extra.as_posix()}' (the overlay "
                               "folder's name is the name its config file sets)")
    files = _preset_files(overlay.name, [*base_files, extra.as_posix()])
    _refuse_other_methods(files, manifest["runs"])
    _refuse_other_configs(overlay, files, manifest["runs"])
    prov = provenance(overlay, manifest, analysis_code=analysis_code)
    not_run = {str(f["id"]) for f in doc["findings"] if shown_verdict(f) == NOT_RUN}
    ran = [f for f in doc["findings"] if str(f["id"]) not in not_run]
    lines = [f"## Overlay `{overlay.name}`", "",
             f"Made by `{dag_command(files)}` (its own results folder `{overlay.as_posix()}`; {prov['n_runs']} training "
             f"runs, identities digest `{prov['runs_digest']}`, analysis identity `{prov['analysis_identity'][:16]}`). "
             f"{code_sentence(prov['training_code'])} The findings it tests, at its own horizon and budget "
             f"({len(ran)}; {len(not_run)} not run there); the rules and columns are those of section Findings.", ""]
    lines += [*_findings_table(ran, *_levels(doc)), ""] if ran else ["No finding ran in this folder.", ""]
    coverage = "table4c_coverage_over_time"
    if (overlay / "tables" / f"{coverage}.parquet").is_file():
        lines += [line.replace("### ", "#### ", 1) if line.startswith("### ") else line
                  for line in _table_lines(overlay, listed, coverage, not_run)]
    return lines


def write_results_page(results: str | Path, out_md: str | Path, *, title: str | None = None,
                       notes_path: str | Path | None = None,
                       configfiles: Sequence[str | Path] | None = None, analysis_code: str | None = None,
                       overlays: Sequence[str | Path] = ()) -> Path:
    """Write the page for the finished preset in ``results`` (``<results_dir>/<name>``), with the notes of
    ``notes_path`` (a person's reading of the findings, its references filled from findings.json) under the
    title; ``configfiles``: the preset's config files (default ``presets/<name>.yaml``), for the commands, checked
    against the runs' recorded config slices; ``analysis_code``: this checkout's analysis code digest, compared
    with the analysis manifest's in the provenance; ``overlays``: results folders made with one more config file on
    top (:func:`_overlay_lines`), a section each after the findings. The page says whether the runs' recorded
    training code is this checkout's (runs record code digests, not a commit)."""
    results, out_md = Path(results), Path(out_md)
    if notes_path is not None and not Path(notes_path).is_file():
        raise ResultsPageError(f"notes file '{notes_path}' does not exist")
    if notes_path is not None:
        _refuse_notes_as_page(Path(notes_path), out_md)
    manifest, doc = _verified_findings(results)
    listed = manifest["files"]
    findings = doc["findings"]
    not_run = {str(f["id"]) for f in findings if shown_verdict(f) == NOT_RUN}
    name = results.name
    files = _preset_files(name, configfiles)
    _refuse_other_methods(files, manifest["runs"])
    _refuse_other_configs(results, files, manifest["runs"])
    notes = None
    if notes_path is not None:
        try:
            notes = fill_notes(Path(notes_path).read_text(), doc, source=str(notes_path))
        except NotesError as exc:
            raise ResultsPageError(str(exc)) from None
    prov = provenance(results, manifest, analysis_code=analysis_code)
    rows = reproduce_rows(results, findings, manifest, files, FINDING_RUNS)
    all_hours = total_cpu_hours(results, manifest)
    fig_dir = out_md.parent / out_md.stem
    notes_arg = f" --notes {Path(notes_path).as_posix()}" if notes_path is not None else ""
    dag = dag_command(files)
    overlay_arg = f" --overlay {' '.join(Path(o).as_posix() for o in overlays)}" if overlays else ""
    page_cmd = (f"hasfl results-page {results.as_posix()} {out_md.as_posix()}{notes_arg}{overlay_arg} --configfile "
                f"{' '.join(files)}")
    dirty = " (tree dirty)" if prov["dirty"] else ""
    lines = [f"# {title or f'Results of the {name} preset'}", "",
             f"Made by `{dag}` (the runs and the analysis), then `{page_cmd}` (this page), at commit "
             f"`{prov['commit'][:12]}`{dirty}, the page's checkout ({prov['n_runs']} training runs, identities digest "
             f"`{prov['runs_digest']}`; section Provenance). {code_sentence(prov['training_code'])} Findings, "
             "tables and figures are rendered from `findings.json`, the tables' Parquet files and the figures; "
             "`report.md` in the results folder has everything."
             + (" The notes before the findings are a person's reading of them (the `--notes` file); every number "
                "and verdict in them is filled from `findings.json` when the page is made." if notes else ""), ""]
    verified = {Path(o): _verified_findings(Path(o), f"overlay '{o}': ") for o in overlays}
    longer = longer_horizons(doc, verified)
    dependent = [(name, r) for name, _d, rows in longer for r in rows if r["dependent"]]
    lines += summary_block(findings, dag, prov["n_runs"], all_hours, evaluations=evaluation_cpu_hours(results),
                           horizon_dependent=[f"{r['id']} {r['estimand']} ({name})".replace("  ", " ")
                                              for name, r in dependent])
    lines += failed_lines(findings, name)
    if notes:
        lines += ["## Reading", "", notes.strip(), ""]
    record = Path(os.path.relpath(REPO / "docs" / "preregistration.md", out_md.resolve().parent)).as_posix()
    lines += ["## Findings", "", KIND_LEGEND, "", VERDICT_RULES, "",
              f"Every margin, level, seed minimum, horizon and rule constant above, with the commit at which it was "
              f"fixed and the results that existed then: the [pre-registration record]({record}).", "",
              *calibration_lines(doc),
              f"A finding none of whose methods or datasets this preset runs is **{NOT_RUN}**.", "",
              *_findings_table(findings, *_levels(doc)), ""]
    lines += reproduce_lines(rows, prov["kernels"])
    lines += horizon_lines(doc, longer)
    ladder, ladder_figures = ladder_lines(results, manifest, doc, verified)
    lines += [line.replace("{fig_dir}", fig_dir.name) for line in ladder]
    for overlay in overlays:
        lines += _overlay_lines(Path(overlay), verified[Path(overlay)], files, analysis_code)
    lines += ["## Tables", ""]
    for table in TABLES:
        if (results / "tables" / f"{table}.parquet").is_file():
            lines += _table_lines(results, listed, table, not_run)
    lines += ["## Figures", ""]
    seeds = {r.rsplit("/", 1)[-1] for r in manifest["runs"]}
    ran = _methods_run(manifest["runs"])
    ctx = _figure_context(files, len(seeds), (doc.get("thresholds") or {}).get("ci_level"))
    # the figures and the page replace the old ones together: staged beside them, renamed into place only when
    # every file is written (a full disk leaves the old page and its figures, never half of each)
    with staged_folder(fig_dir, keep=lambda f: not (f.suffix == ".png" and (f.stem in ARTIFACT_FIGURES
                                                                      or "_ladder_" in f.stem)),
                       make_empty=False) as staging:
        for slug, fallback in FIGURES:
            for s in (slug, fallback):
                if s is None or not _figure_has_runs(s, ran):
                    continue
                png = results / "figures" / f"{s}.png"
                if png.is_file():
                    _small_png(_listed(results, listed, png), staging / f"{s}.png")
                    lines += [f"![{s}]({fig_dir.name}/{s}.png)", ""]
                    spec = ARTIFACT_FIGURES[s]
                    lines += [f"*Figure {spec.paper}.* {figure_caption(s, ctx)}", ""]
                    break
        for file_name, fig in ladder_figures.items():
            import matplotlib.pyplot as plt

            fig.savefig(staging / file_name, dpi=100, metadata={"Software": None})
            plt.close(fig)
        lines += provenance_lines(prov)
        with atomic_path(out_md) as tmp:
            tmp.write_text("\n".join(lines).rstrip() + "\n")
    return out_md
