"""report.md: the stand-alone report of one preset run, assembled from the artifact registry
(:mod:`hasfl.analysis.artifacts`): the settings, the runs at the accuracy floor, the findings, each
table's own section (its module's ``summary``), every table with its note and display, and every figure
with its caption.

Numbers are printed from the Parquet tables only (each section names its file), so every number in the
report traces back to a file under ``results/<name>/``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.artifacts import FIGURES, METHOD_TABLES, STD_NOTE, TABLES, figure_caption
from hasfl.analysis.findings import VERDICT_RULES
from hasfl.analysis.findings.display import summary_frame, units_frame
from hasfl.analysis.floors import is_missing
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import fmt, md_table, num, pm, render_parts
from hasfl.analysis.page_refs import NOT_RUN, shown_verdict, verdict_counts
from hasfl.analysis.specs import FLOOR_TOL_PCT
from hasfl.analysis.tables.base import ReportContext, display_parts, preamble
from hasfl.registry import resolve

__all__ = ["floor_section", "report_markdown"]


def _sections(ctx: ReportContext, *, after: bool) -> list[str]:
    """The tables' own sections (their ``summary``) in registry order, for the tables present."""
    return [f"\n## {art.section}\n\n" + resolve(art.summary)(ctx) for name, art in TABLES.items()
            if art.summary and art.summary_after == after and name in ctx.tables]


def _floor_rows(tables: Mapping[str, pd.DataFrame]) -> dict[tuple[str, str], dict[str, Any]]:
    """One method-table row per (dataset, method) with a known floor flag, plus the tables it is in."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for tname in METHOD_TABLES:
        df = tables.get(tname)
        if df is None or df.empty or "n_at_floor" not in df.columns:
            continue
        for r in df.to_dict("records"):
            if r["status"] == "not run" or int(r["n_completed"]) == 0 or is_missing(r["n_at_floor"]):
                continue
            entry = seen.setdefault((r["dataset"], r["method"]), {**r, "tables": []})
            entry["tables"].append(str(int(r["table"])))
    return seen


def floor_section(tables: Mapping[str, pd.DataFrame]) -> str:
    """report.md's "Runs at the floor": every (dataset, method) with a seed at (or ending at) the floor."""
    seen = _floor_rows(tables)
    known = bool(seen)
    rows = [e for e in seen.values()
            if int(e["n_at_floor"]) or (not is_missing(e["n_final_at_floor"]) and int(e["n_final_at_floor"]))]
    tol = ", ".join(sorted({f"{float(e['floor_tol_pct']):.2g}" for e in seen.values()
                            if math.isfinite(float(e["floor_tol_pct"]))})) or f"{FLOOR_TOL_PCT:g}"
    text = ("A run is **at the floor** when its best test accuracy over every evaluated round stays within "
            f"{tol} points (or one test example) of the majority-class rate of the test set: it never predicted "
            "better than always answering the most common class. Such a run learned nothing the tables can "
            "compare; its accuracy, its gap to other methods and any finding resting on it describe a failure to "
            "train, not the method. Every table and figure marks these runs (`at floor: k of n seeds`; in the "
            "figures dashed curves and hollow markers when every seed is at the floor, half-filled markers when "
            "some are). Floors per dataset: Table 2.\n\n")
    if not known:
        return text + ("Unknown at this run: the data-stage manifests predate the majority-class rate (rerun the "
                       "data stage).\n")
    if not rows:
        return text + "No run is at the floor or ends there.\n"
    out = pd.DataFrame({
        "Dataset": [dataset_label(e["dataset"]) for e in rows],
        "Method": [method_label(e["method"]) for e in rows],
        "Never above the floor": [f"**{int(e['n_at_floor'])} of {int(e['n_completed'])} seeds**"
                                  if int(e["n_at_floor"]) else "0" for e in rows],
        "Ends at the floor": [f"{int(e['n_final_at_floor'])} of {int(e['n_completed'])} seeds"
                              if not is_missing(e["n_final_at_floor"]) else "--" for e in rows],
        "Best acc (%)": [pm(e["best_acc_pct_mean"], e["best_acc_pct_std"], 2) for e in rows],
        "Final acc (%)": [pm(e["final_acc_pct_mean"], e["final_acc_pct_std"], 2) for e in rows],
        "Majority class (%)": [f"{float(e['majority_pct']):.2f}" for e in rows],
        "Chance (%)": [f"{float(e['chance_pct']):.2f}" for e in rows],
        "In tables": [", ".join(e["tables"]) for e in rows],
    })
    return text + md_table(out)


def report_markdown(*, name: str, config_summary: Mapping[str, Any], tables: Mapping[str, pd.DataFrame],
                    findings: Mapping[str, Any], figures: Sequence[str], figure_context: Mapping[str, Any] | None = None,
                    published: pd.DataFrame | None = None, provenance: Sequence[str] = ()) -> str:
    """report.md: findings, the tables, the comparison and the figures of one preset run.

    ``tables`` maps table names (the registry's, :data:`hasfl.analysis.artifacts.TABLES`, with the
    comparison and extra outputs) to their frames, in the registry's order; ``figures`` lists the figure slugs
    (PNG beside the report under ``figures/``), ``findings`` is findings.json,
    ``figure_context`` the numbers the captions quote (:func:`hasfl.analysis.specs.figure_caption`);
    ``provenance``: Markdown lines put after the findings (:mod:`hasfl.analysis.provenance`: the reproducibility
    summary, the command per claim, the code and machine that made the report).
    """
    out = [f"# HAS-FL reproduction report -- preset `{name}`\n\n"]
    out.append("Every number below is printed from a file under this folder; each section names it. "
               "Run files: `runs/<dataset>/<method>/seed<seed>/`; data-stage files: `data/<dataset>/seed<seed>/`.\n\n")
    out.append("| Setting | Value |\n|---|---|\n")
    for k, v in config_summary.items():
        out.append(f"| {k} | {fmt(v) if not isinstance(v, (list, tuple)) else ', '.join(map(str, v))} |\n")

    out.append("\n## Runs at the floor\n\nFrom the method tables (`tables/table{3,4,6,7}_*.parquet`, columns "
               "`n_at_floor`, `n_final_at_floor`).\n\n" + floor_section(tables))

    items = findings["findings"]
    alpha, power = findings.get("alpha"), findings["thresholds"].get("power")
    # every finding counted as the table lists it; a finding none of whose units ran is "not run", not inconclusive
    counts = {v: n for v, n in verdict_counts(items).items() if n or v in findings.get("verdicts", []) or v == NOT_RUN}
    out.append("\n## Findings\n\nFrom `findings.json`. Each claim of the paper is tested in the scope the paper "
               f"states it, at alpha = {num(alpha)}: **supported** when the interval lies beyond the margin (inside "
               "+-margin for claims of no difference), **contradicted** when it lies on the other side (or a claimed "
               "absence of difference is rejected), **inconclusive** otherwise -- absence of evidence is not read as "
               f"equivalence. MDE: the minimum detectable effect at {num(power)} power for the seeds / runs at hand "
               "(its meaning per finding is in `findings.json`, `mde_meaning`). Margins: config block `analysis`, "
               "defaults justified in docs/decisions.md. A claim tagged [extension] is this project's own question, "
               "[pipeline check] one whose outcome follows from the construction (it checks the code, not the method), "
               "[oracle] an allocation by the true label histogram. A finding none of whose methods or datasets the preset "
               f"runs is **{NOT_RUN}**.\n\n" + VERDICT_RULES + "\n\n")
    same = [f"{f['id']} (= {f['same_statistic_as']})" for f in items if f.get("same_statistic_as")]
    out.append("Verdicts: " + ", ".join(f"{k}: {v}" for k, v in counts.items())
               + (f" ({len(items)} findings; {', '.join(same)}: the same statistic, read by mirror rules)"
                  if same else f" ({len(items)} findings)") + ".\n\n")
    out.append(md_table(summary_frame([{**f, "verdict": shown_verdict(f)} for f in items])))
    units = units_frame(items, _floor_rows(tables))
    out.append("\n### Per unit (dataset, or run for F5)\n\nUnits marked `In scope: no` are reported but do not count "
               "toward the verdict."
               + (" `Floor`: runs the unit compares that never rose above the majority-class rate (section \"Runs "
                  "at the floor\"); a verdict on them says nothing about the method." if "Floor" in units.columns
                  else "") + "\n\n")
    out.append(md_table(units))
    out.append("\nSettings: " + ", ".join(f"`{k}` = {fmt(v)}" for k, v in sorted(findings["thresholds"].items())) + "\n")
    if provenance:
        out.append("\n" + "\n".join(provenance).rstrip() + "\n")
    ctx = ReportContext(tables=tables, findings=items, power=power, published=published,
                        config_summary=config_summary)
    out += _sections(ctx, after=False)
    out.append("\n## Tables\n\n" + STD_NOTE + "\n")
    for tname, df in tables.items():
        art = TABLES.get(tname)
        if art is None or not art.in_tables_section:
            continue  # an extra output, or shown in a section of its own
        out.append(f"\n### {art.title}\n\nFrom `tables/{tname}.parquet`.")
        if art.note:
            out.append(" " + art.note)
        pre = preamble(tname, df)
        out.append("\n\n" + (pre + "\n\n" if pre else "") + render_parts(display_parts(tname, df), level="####"))
    out += _sections(ctx, after=True)

    out.append("\n## Figures\n\nEach caption says what is plotted and what every line, band and marker means.\n\n")
    fig_ctx = {"n_seeds": len(config_summary.get("seeds", []) or []) or None, **dict(figure_context or {})}
    for slug in figures:
        spec = FIGURES.get(slug)
        title = f"Figure {spec.paper} -- {spec.title}" if spec else slug
        caption = figure_caption(slug, fig_ctx) if spec else ""
        out.append(f"### {title}\n\n![{title}](figures/{slug}.png)\n\n")
        if caption:
            out.append(f"*Figure {spec.paper}.* {caption}\n\n")
        out.append(f"Files: `figures/{slug}.png`, `figures/{slug}.pdf`.\n\n")
    return "".join(out)
