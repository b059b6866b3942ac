"""Figure 10 (Section 4.7, "Who Inherits the Confound?"): the update-divergence estimate E0 of every method against
capacity and the data, one row per method.

Reads Table 10 (:data:`TABLES`, per run: ``tables/table10_inheritance.parquet``): left, each run's r(E0, pmax) (dots)
and the method's mean over its seeds (the large marker), with the band +-``f10_equiv_r_e_pmax`` inside which F10a /
F10b call a method uncoupled from capacity; right, each run's partial r(E0, TV | pmax), the data signal left once
capacity is held fixed. Colour: the method's population (sub-model, or equal widths). The verdicts, pooled with
intervals, are F10a / F10b's (findings.json); the figure shows the runs they pool, it does not test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hasfl.analysis.artifacts import FIGURES
from hasfl.analysis.confound import EQUAL_WIDTHS, SUB_MODEL
from hasfl.analysis.figures.reading import datasets_of, read_table
from hasfl.analysis.figures.style import GREY, empty_panel, save_figure, set_style
from hasfl.analysis.labels import dataset_label, method_label

__all__ = ["SLUG", "TABLES", "compute", "figure"]

SLUG = "fig10_inheritance"
#: The tables this figure reads (its registry entry's): Table 10, one row per run.
TABLES: tuple[str, ...] = FIGURES[SLUG].tables
COLORS = {SUB_MODEL: "#b03a2e", EQUAL_WIDTHS: "#1f5f8b"}
PANELS = (("r_h_pmax", "r(E0, pmax): coupling to capacity"), ("pr_h_tv_pmax", "r(E0, TV | pmax): data signal"))


def figure(runs: pd.DataFrame, datasets: Sequence[str], margin: float | None) -> Figure:
    """One row of panels per dataset (``runs``: Table 10's rows), one line per method that ran there."""
    set_style()
    n = max(1, len(datasets))
    methods = max([len(set(runs[runs["dataset"] == d]["method"])) for d in datasets] or [1])
    fig, axes = plt.subplots(n, 2, figsize=(9.0, 0.9 + 0.38 * max(methods, 2) * n), squeeze=False, sharey="row")
    done = runs[runs["status"] == "completed"] if len(runs) else runs
    for i, dataset in enumerate(datasets or [""]):
        d = done[done["dataset"] == dataset] if len(done) else done
        order = sorted(set(d["method"]), key=lambda m: (str(d[d["method"] == m]["population"].iloc[0]), m)) \
            if len(d) else []
        for j, (column, title) in enumerate(PANELS):
            ax = axes[i][j]
            ax.set_title(f"{dataset_label(dataset)}: {title}" if dataset else title, fontsize=9)
            if not order:
                empty_panel(ax)
                continue
            if column == "r_h_pmax" and margin is not None:
                ax.axvspan(-margin, margin, color="0.9", zorder=0)
            ax.axvline(0, color=GREY, lw=0.8)
            for k, method in enumerate(order):
                g = d[d["method"] == method]
                color = COLORS.get(str(g["population"].iloc[0]), "0.3")
                v = g[column].to_numpy(float)
                v = v[np.isfinite(v)]
                ax.plot(v, np.full(len(v), k), "o", ms=3.5, color=color, alpha=0.55)
                if len(v):
                    ax.plot([v.mean()], [k], "D", ms=7, color=color)
            ax.set_yticks(range(len(order)), [method_label(m) for m in order])
            ax.set_xlim(-1.0, 1.0)
            ax.invert_yaxis()
    handles = [Line2D([], [], color=c, marker="D", ls="none", label=p) for p, c in COLORS.items()]
    handles.append(Line2D([], [], color="0.4", marker="o", ms=3.5, ls="none", alpha=0.55, label="one run (seed)"))
    if margin is not None:
        handles.append(plt.Rectangle((0, 0), 1, 1, color="0.9", label=f"+-{margin:g}: uncoupled (F10a / F10b)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 10 to ``outputs["png"]`` / ``outputs["pdf"]`` from Table 10 (``inputs[TABLES[0]]``)."""
    margin = (params.get("thresholds") or {}).get("f10_equiv_r_e_pmax")
    fig = figure(read_table(inputs, TABLES[0], SLUG), datasets_of(params),
                 float(margin) if margin is not None else None)
    save_figure(fig, outputs["png"], outputs["pdf"])
