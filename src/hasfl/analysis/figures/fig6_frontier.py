"""Paper Figure 6: the accuracy-capacity frontier. Final test accuracy of every method against
its average width trained and uploaded (the allocated width joined as a cross) and against the
mean upload MB per client-round, one column per dataset; error bars +- 1 sample std over seeds.

Reads no run files: every number comes from the per-seed files of the method tables
(:data:`TABLES`: Tables 3, 4, 6 and 7, ``tables/<table>_seeds.parquet``), whose rows carry each
run's status, final accuracy, allocated ``avg_p``, the costs as paid (``avg_p_trained``,
``upload_mb``), the floor flag ``at_floor`` and the dataset's floors. A run several tables
list (hasfl is in all four) is drawn once. With the batch-norm sensitivity (:data:`RULE_TABLE`), each
run's final accuracy and floor flag are the findings' own: under its method's declared batch-norm rule
(:func:`hasfl.analysis.bn_sensitivity.tables_under`), so a point sits where the verdicts read it (a run
trained under per-width statistics whose authors evaluate with test-batch statistics is drawn at the
latter) and a hollow marker is a run the findings call failed to train.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hasfl.analysis.artifacts import FIGURES
from hasfl.analysis.figures.reading import (
    FigureInputError,
    datasets_of,
    floor_flags,
    n_seeds_of,
    paths,
    read_table,
    seeds_of,
)
from hasfl.analysis.figures.style import (
    GREY,
    FloorFlags,
    Floors,
    dodge,
    empty_panel,
    floor_lines,
    floor_state,
    save_figure,
    set_style,
)
from hasfl.analysis.floors import FLOOR_COLUMNS
from hasfl.analysis.labels import dataset_label, method_color, method_label, method_marker

__all__ = ["RULE_TABLE", "RUN_COLUMNS", "SLUG", "TABLES", "compute", "figure", "frontier_runs", "table_floors"]

SLUG = "fig6_frontier"
#: Every run's final model under every batch-norm mode: where the figure reads each run's accuracy under its
#: method's declared rule, as findings.json does.
RULE_TABLE = "bn_sensitivity"
#: The tables the points come from (its registry entry's, less :data:`RULE_TABLE`): the per-seed rows of the method
#: tables 3, 4, 6 and 7, which together hold every run of the figure's methods on every dataset.
TABLES: tuple[str, ...] = tuple(t for t in FIGURES[SLUG].tables if t != RULE_TABLE)
#: What the figure needs of every run.
RUN_COLUMNS = ("dataset", "method", "seed", "status", "final_acc_pct", "avg_p", "avg_p_trained", "upload_mb")


def figure(runs: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str], *, floors: Floors | None = None,
           flags: FloorFlags | None = None, n_seeds: int | None = None, declared: bool = False) -> Figure:
    """Figure 6: final accuracy vs average cost, as allocated and as paid.

    Top row: final accuracy vs the average width trained and uploaded ``avg_p_trained``
    (filled marker), joined to a cross at the allocated width ``avg_p`` (they differ for
    FjORD, whose clients train at pmax). Bottom row: final accuracy vs the mean upload MB
    per client-round (cost model). Mean +- sample std over the completed seeds. Points
    that would hide each other are dodged sideways; hollow markers: runs at the
    floor. ``runs`` has :data:`RUN_COLUMNS` (:func:`frontier_runs`). ``declared``: the accuracies and flags are
    read under each method's declared batch-norm rule (the legend says so).
    """
    set_style()
    n = max(1, len(datasets))
    fig, axes = plt.subplots(2, n, figsize=(4.8 * n, 7.0), squeeze=False)
    if not datasets:
        empty_panel(axes[0][0], "no dataset")
        empty_panel(axes[1][0], "no dataset")

    def sd(v: np.ndarray) -> float:
        return float(np.std(v, ddof=1)) if len(v) > 1 else 0.0

    legend: dict[str, Line2D] = {}
    floor_states: set[str] = set()
    for j, dataset in enumerate(datasets):
        top, bottom = axes[0][j], axes[1][j]
        d = runs[(runs["dataset"] == dataset) & (runs["status"] == "completed")] if len(runs) else runs
        pts = []
        for method in methods:
            g = d[d["method"] == method]
            if g.empty:
                continue
            y = g["final_acc_pct"].to_numpy(float)
            xa, xt, mb = (g[c].to_numpy(float) for c in ("avg_p", "avg_p_trained", "upload_mb"))
            pts.append((method, y, xa, xt, mb))
        top.set_title(dataset_label(dataset))
        if not pts:
            empty_panel(top)
            empty_panel(bottom)
            continue
        top.set_xlim(0.15, 1.1)
        ys = [float(p[1].mean()) for p in pts]
        y_span = (max(ys) - min(ys)) or 1.0
        dx_top = dodge([float(p[3].mean()) for p in pts], ys, 0.95, y_span)
        mb_all = [float(p[4].mean()) for p in pts]
        mb_span = (max(mb_all) - min(mb_all)) or max(mb_all) or 1.0
        dx_bot = dodge(mb_all, ys, mb_span * 1.1, y_span)
        for k, (method, y, xa, xt, mb) in enumerate(pts):
            color, marker = method_color(method), method_marker(method)
            floor = floor_state(flags, dataset, method)
            floor_states.add(floor)
            face = {"mfc": "white" if floor == "all" else color, "mfcalt": "white",
                    "fillstyle": "left" if floor == "some" else "full"}
            ym = float(y.mean())
            top.plot([xa.mean() + dx_top[k], xt.mean() + dx_top[k]], [ym, ym], color=color, lw=0.8, alpha=0.7)
            top.plot([xa.mean() + dx_top[k]], [ym], marker="x", ms=5, color=color, ls="none")
            top.errorbar(float(xt.mean()) + dx_top[k], ym, xerr=sd(xt), yerr=sd(y), fmt=marker, mec=color,
                         capsize=3, ms=7, color=color, elinewidth=1, **face)
            bottom.errorbar(float(mb.mean()) + dx_bot[k], ym, xerr=sd(mb), yerr=sd(y), fmt=marker, mec=color,
                            capsize=3, ms=7, color=color, elinewidth=1, **face)
            legend.setdefault(method, Line2D([], [], color=color, marker=marker, ls="none", ms=7,
                                             label=method_label(method)))
        for ax in (top, bottom):
            ax.set_ylabel("Final test accuracy (%)")
            floor_lines(ax, floors, dataset, annotate=True)
        top.set_xlabel(r"Average width trained and uploaded $\bar p$ per client-round")
        bottom.set_xlabel("Mean upload per client-round (MB, cost model)")
    extra = [Line2D([], [], color="0.3", marker="x", ls="none", ms=5, label="average width allocated (joined)")]
    if "all" in floor_states:
        extra.append(Line2D([], [], color="0.3", marker="o", mfc="white", ls="none", ms=7,
                            label="hollow: every seed at the majority-class floor"))
    if "some" in floor_states:
        extra.append(Line2D([], [], color="0.3", marker="o", mfc="0.3", mfcalt="white", fillstyle="left", ls="none",
                            ms=7, label="half-filled: some seeds at the majority-class floor"))
    extra += [Line2D([], [], color=GREY, ls="--", lw=1.1, label="majority-class rate of the test set"),
              Line2D([], [], color=GREY, ls=":", lw=1.1, label="chance rate (1 / classes)")] if floors else []
    extra.append(Line2D([], [], color="0.3", marker="|", ls="none", ms=9,
                        label=f"error bars: ± 1 sample std over {n_seeds or 'the'} seeds"))
    if declared:
        extra.append(Line2D([], [], ls="none", label="accuracy and floor: each method's declared batch-norm rule, "
                            "as the findings read them"))
    fig.suptitle("Final accuracy vs cost per client-round (the paper's accuracy-capacity frontier)")
    fig.tight_layout()
    fig.legend(handles=[*legend.values(), *extra], loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=8,
               frameon=False)
    return fig


def frontier_runs(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per run of the per-seed tables (name -> frame), sorted by (dataset, method, seed):
    :data:`RUN_COLUMNS` plus, where the tables carry them, the floors and ``at_floor``.

    Raises:
        FigureInputError: naming the table and the columns a non-empty table lacks, or the run
            and the column two tables disagree on.
    """
    parts = []
    for name, df in tables.items():
        if df.empty:
            continue
        missing = [c for c in RUN_COLUMNS if c not in df.columns]
        if missing:
            raise FigureInputError(f"{SLUG}: the table '{name}' lacks the column(s) {', '.join(missing)}")
        parts.append(df.assign(_table=name))
    extra = [c for c in (*FLOOR_COLUMNS, "at_floor") if any(c in p.columns for p in parts)]
    cols = [*RUN_COLUMNS, *extra]
    if not parts:
        return pd.DataFrame(columns=cols)
    rows = pd.concat([p.reindex(columns=[*cols, "_table"]) for p in parts], ignore_index=True)
    key = ["dataset", "method", "seed"]
    for (d, m, s), g in rows[rows.duplicated(key, keep=False)].groupby(key, sort=True):
        for c in RUN_COLUMNS[3:]:
            values = g[c].astype(object).where(g[c].notna(), None)
            if values.nunique(dropna=False) > 1:
                raise FigureInputError(f"{SLUG}: the tables {', '.join(g['_table'])} disagree on '{c}' of run "
                                       f"{d}/{m}/seed{s}")
    out = rows.drop_duplicates(key, keep="first").drop(columns="_table")
    return out.astype({"seed": "int64"}).sort_values(key, kind="stable").reset_index(drop=True)


def table_floors(runs: pd.DataFrame) -> dict[str, dict[str, float]]:
    """``{dataset: {majority_pct, chance_pct, floor_tol_pct}}`` from the rows of :func:`frontier_runs`
    (the floors the tables were flagged with); a dataset whose floors are unknown is left out."""
    if "majority_pct" not in runs.columns:
        return {}
    out = {}
    for dataset, g in runs.groupby("dataset", sort=True):
        known = g[np.isfinite(g["majority_pct"].to_numpy(float))]
        if len(known):
            out[str(dataset)] = {c: float(known[c].iloc[0]) if c in known.columns else math.nan
                                 for c in FLOOR_COLUMNS}
    return out


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 6 to ``outputs["png"]`` / ``outputs["pdf"]`` from the tables :data:`TABLES`
    (``inputs[name] = [path]``), each run's accuracy and floor flag under its method's declared batch-norm rule when
    :data:`RULE_TABLE` is among the inputs; the floor lines are the tables' own."""
    tables = {name: read_table(inputs, name, SLUG) for name in TABLES}
    declared = bool(paths(inputs, RULE_TABLE))
    if declared:
        from hasfl.analysis.bn_sensitivity import declared_rules, tables_under

        tables = tables_under(tables, read_table(inputs, RULE_TABLE, SLUG), declared_rules())
    runs = frontier_runs(tables)
    seeds = seeds_of(params)
    if seeds and len(runs):
        runs = runs[runs["seed"].isin(seeds)]
    fig = figure(runs, datasets_of(params), list(params.get("methods", [])), floors=table_floors(runs),
                 flags=floor_flags(runs), n_seeds=n_seeds_of(params), declared=declared)
    save_figure(fig, outputs["png"], outputs["pdf"])
