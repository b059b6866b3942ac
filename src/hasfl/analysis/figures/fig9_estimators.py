"""Figure 9 (this project's extension of the paper's Section 5): every estimate E0-E3 of the
HAS-FL runs against the client's true TV, coloured by the client's capacity tier, with
least-squares lines within each tier; one row per dataset, one column per estimate.

Reads the hasfl runs' clients.parquet and run.json (the points of the completed runs), the
data-stage clients.parquet (pmax, TV) and Table 8 (:data:`TABLES`, pooled:
``tables/table8_estimators.parquet``), whose hasfl rows give the correlations, intervals and
verdict counts the panel titles print: the figure quotes the table, it does not recompute it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from hasfl.analysis import estimators
from hasfl.analysis.artifacts import FIGURES
from hasfl.analysis.figures.reading import datasets_of, paths, read_table, run_status, runs_of
from hasfl.analysis.figures.style import GREY, empty_panel, save_figure, set_style
from hasfl.analysis.labels import dataset_label
from hasfl.analysis.markdown import ci
from hasfl.analysis.runs import group_data_files
from hasfl.analysis.specs import ESTIMATORS, EstimatorSpec

__all__ = ["SLUG", "TABLES", "compute", "figure", "table8_stats"]

SLUG = "fig9_estimators"
#: The tables this figure reads (its registry entry's): Table 8, pooled over seeds.
TABLES: tuple[str, ...] = FIGURES[SLUG].tables
TABLE8 = TABLES[0]
#: The method whose runs the figure shows (and whose Table 8 rows the titles quote).
METHOD = "hasfl"

#: Capacity tiers from small to full width: warm to cool (Okabe-Ito, distinct for colour-blind readers).
_TIER_PALETTE = ("#D55E00", "#E69F00", "#56B4E9", "#0072B2", "#009E73", "#CC79A7", "#000000")


def _tier_colors(tiers: Sequence[float]) -> dict[float, str]:
    """One colour per capacity tier (smallest first), the same in every panel."""
    levels = sorted(set(float(t) for t in tiers))
    if len(levels) > len(_TIER_PALETTE):
        pal = sns.color_palette("viridis", len(levels)).as_hex()
        return dict(zip(levels, pal, strict=True))
    return {t: _TIER_PALETTE[i] for i, t in enumerate(levels)}


def _panel(ax: plt.Axes, ok: pd.DataFrame, est: EstimatorSpec, colors: Mapping[float, str]) -> bool:
    """The points of one estimate with a least-squares line per tier; returns whether the y axis is log."""
    log_y = est.id in ("E0", "E2") and bool((ok[est.column] > 0).all())
    for tier in sorted(ok["pmax"].unique()):
        sub = ok[ok["pmax"] == tier]
        x, y = sub["tv"].to_numpy(float), sub[est.column].to_numpy(float)
        c = colors[float(tier)]
        ax.scatter(x, y, s=14, color=c, alpha=0.8, linewidths=0.3, edgecolors="white", zorder=3)
        yy = np.log(y) if log_y else y
        if len(sub) >= 3 and np.ptp(x) > 0:
            slope, icpt = np.polyfit(x, yy, 1)
            xs = np.linspace(x.min(), x.max(), 20)
            line = slope * xs + icpt
            ax.plot(xs, np.exp(line) if log_y else line, color=c, lw=1.2, zorder=4)
    if log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    if est.id == "E3":
        lo = float(min(ok["tv"].min(), ok[est.column].min()))
        hi = float(max(ok["tv"].max(), ok[est.column].max()))
        ax.plot([lo, hi], [lo, hi], color=GREY, ls=":", lw=1.0, zorder=2)
    return log_y


def figure(points: pd.DataFrame, datasets: Sequence[str],
           stats: Mapping[tuple[str, str], Mapping[str, Any]] | None = None, *, level: float = 0.95,
           n_runs: Mapping[str, int] | None = None) -> Figure:
    """Figure 9: every estimate (one column per E0-E3) against the true TV, one row per dataset.

    ``points``: one row per client of every hasfl run (:func:`hasfl.analysis.estimators.figure_points`);
    colour = capacity tier pmax, thin lines = least-squares fit within each tier (all seeds).
    ``stats[(dataset, estimator id)]``: Table 8's pooled row (:func:`table8_stats`), whose
    r(E, pmax) and r(E, TV | pmax) the panel title prints. A dataset without runs, or an
    estimate its runs did not record, gets a panel that says so.
    """
    set_style()
    datasets = list(datasets) or [""]
    nr, nc = len(datasets), len(ESTIMATORS)
    fig, axes = plt.subplots(nr, nc, figsize=(3.6 * nc, 3.5 * nr), squeeze=False)
    colors = _tier_colors(points["pmax"].to_numpy(float) if len(points) else [1.0])
    for i, dataset in enumerate(datasets):
        d = points[points["dataset"] == dataset] if len(points) else points
        for j, est in enumerate(ESTIMATORS):
            ax = axes[i][j]
            head = f"{dataset_label(dataset)}: {est.label}"
            if d.empty:
                empty_panel(ax, "not run")
                ax.set_title(head, fontsize=8.5)
                continue
            if est.column not in d.columns or d[est.column].isna().all():
                empty_panel(ax, f"not recorded by these runs\n(no column {est.column})")
                ax.set_title(head, fontsize=8.5)
                continue
            log_y = _panel(ax, d[np.isfinite(d[est.column].to_numpy(float))], est, colors)
            r = (stats or {}).get((dataset, est.id))
            if r is not None:
                partial = ci(r["pr_e_tv_pmax"], r["pr_e_tv_pmax_low"], r["pr_e_tv_pmax_high"])
                head += (f"\nr(E, pmax) {ci(r['r_e_pmax'], r['r_e_pmax_low'], r['r_e_pmax_high'])}"
                         f"\nr(E, TV | pmax) {partial}")
                if isinstance(r.get("verdicts"), str) and r["verdicts"] != "--":
                    head += f"\ncheck per run: {r['verdicts']}"
            ax.set_title(head, fontsize=8)
            ax.set_xlabel("true TV (label heterogeneity)", fontsize=8)
            ax.set_ylabel(f"{est.id} ({est.name})" + (", log scale" if log_y else ""), fontsize=8)
            ax.tick_params(labelsize=7)
    handles = [Line2D([], [], marker="o", ls="-", lw=1.2, color=c, markersize=5, label=f"capacity pmax = {t:g}")
               for t, c in colors.items()]
    runs = ", ".join(f"{v} of {dataset_label(k)}" for k, v in (n_runs or {}).items())
    fig.suptitle("Which estimate E follows the data (rises within each colour) and which follows capacity "
                 "(colours in separate bands)" + (f"\nClients of the HAS-FL runs (seeds: {runs}); titles: correlations "
                                                  f"pooled over the seeds with {level:.0%} intervals, and the verdicts "
                                                  "of the capacity-grouped check" if runs else ""), fontsize=10)
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=max(1, len(handles)),
               fontsize=8, frameon=False, title="colour: client capacity (largest width its device trains); "
               "line: least-squares fit within the tier", title_fontsize=8)
    return fig


def table8_stats(pooled: pd.DataFrame, method: str = METHOD) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(dataset, estimator id): row}`` of Table 8's pooled rows of ``method``."""
    if pooled.empty:
        return {}
    rows = pooled[pooled["method"] == method]
    return {(r["dataset"], r["estimator"]): r for r in rows.to_dict("records")}


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 9 to ``outputs["png"]`` / ``outputs["pdf"]`` from ``inputs["runs"]`` (clients.parquet,
    run.json), ``inputs["data_clients"]`` and ``inputs["table8_estimators"]`` (the titles)."""
    datasets = datasets_of(params)
    data_files = group_data_files(paths(inputs, "data_clients"))
    data = {k: pd.read_parquet(f["clients.parquet"]) for k, f in data_files.items()}
    runs = runs_of(inputs)
    status = run_status(runs)
    done = {(d, s): pd.read_parquet(f["clients.parquet"]) for (d, m, s), f in runs.items()
            if status.get((d, m, s), "completed") == "completed"}
    stats = table8_stats(read_table(inputs, TABLE8, SLUG))
    fig = figure(estimators.figure_points(data, done), datasets, stats, level=float(params.get("ci_level", 0.95)),
                 n_runs={d: sum(1 for dd, _s in done if dd == d) for d in datasets})
    save_figure(fig, outputs["png"], outputs["pdf"])
