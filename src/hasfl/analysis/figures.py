"""Paper Figures 2-8 (seaborn / matplotlib, Agg backend), saved as PNG and PDF.

Every figure function takes plain data frames and returns a matplotlib Figure;
:func:`save_figure` writes it atomically with fixed metadata (no creation date), so
equal inputs give byte-identical files. A panel whose runs the preset does not have
says "not run" instead of failing. Seed bands are mean +- sample std over seeds.

* Fig 2 -- the allocation rule p = min(pmax, p_min + gamma H/H_bar) for pmax 1.0/0.6/0.3.
* Fig 3 -- test accuracy of hasfl, fjord, uniform per dataset.
* Fig 4 -- mean H~ and mean allocated p of hasfl over rounds, with the mean cap p_bar_max.
* Fig 5 -- final per-client allocation p_i vs pmax_i (hasfl), per dataset x seed.
* Fig 6 -- accuracy-capacity frontier: final accuracy vs avg p allocated and trained (joined),
  and vs upload MB per client-round, every method, error bars.
* Fig 7 -- test accuracy of hasfl vs the full-model methods.
* Fig 8 -- test loss of the same methods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from hasfl.analysis.specs import DATASET_LABELS, METHOD_LABELS  # noqa: E402
from hasfl.io import atomic_path  # noqa: E402

__all__ = [
    "METHOD_COLORS",
    "fig2_allocation_rule",
    "fig4_heterogeneity_allocation",
    "fig5_final_allocation",
    "fig6_frontier",
    "save_figure",
    "trajectories",
    "trajectory_figure",
]

_ORDER = ("hasfl", "hasfl_nocov", "heterofl", "fjord", "uniform", "random_budget", "fedavg", "scaffold", "fedprox")
METHOD_COLORS = dict(zip(_ORDER, sns.color_palette("tab10", len(_ORDER)).as_hex(), strict=True))


def _style() -> None:
    sns.set_theme(context="paper", style="whitegrid")
    plt.rcParams.update({"svg.hashsalt": "hasfl", "figure.dpi": 100, "savefig.dpi": 150})


def save_figure(fig: Figure, png: str | Path, pdf: str | Path) -> None:
    """Write ``fig`` to ``png`` and ``pdf`` atomically, without timestamps; closes the figure."""
    try:
        with atomic_path(png) as tmp:
            fig.savefig(tmp, format="png", metadata={"Software": None}, bbox_inches="tight")
        with atomic_path(pdf) as tmp:
            fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "ModDate": None, "Producer": None},
                        bbox_inches="tight")
    finally:
        plt.close(fig)


def _label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def _ds(dataset: str) -> str:
    return DATASET_LABELS.get(dataset, dataset)


def _empty(ax: plt.Axes, text: str = "not run") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _panels(n: int, width: float = 4.2, height: float = 3.2) -> tuple[Figure, list[plt.Axes]]:
    n = max(1, n)
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])


def fig2_allocation_rule(p_min: float, gamma: float, pmaxes: Sequence[float] = (1.0, 0.6, 0.3),
                         h_max: float = 3.0) -> Figure:
    """Figure 2: p_i = min(pmax_i, p_min + gamma H_i / H_bar) against H_i / H_bar."""
    _style()
    h = np.linspace(0.0, h_max, 301)
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for pm, color in zip(pmaxes, sns.color_palette("deep", len(pmaxes)), strict=True):
        ax.plot(h, np.minimum(pm, p_min + gamma * h), color=color, lw=2, label=f"$p^{{max}}_i$ = {pm:.1f}")
    ax.axhline(p_min, color="0.4", ls="--", lw=1, label=f"$p_{{min}}$ = {p_min:g}")
    ax.set_xlabel(r"Heterogeneity $H_i / \bar H$")
    ax.set_ylabel(r"Allocated width $p_i$")
    ax.set_xlim(0, h_max)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"HAS-FL allocation rule ($\\gamma$ = {gamma:g})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def trajectories(rounds: Mapping[tuple[str, str, int], pd.DataFrame]) -> pd.DataFrame:
    """Long frame of every run's rounds.parquet: dataset, method, seed, round, metrics (acc in %)."""
    parts = []
    for (dataset, method, seed), df in sorted(rounds.items()):
        d = df[["round", "test_acc", "test_loss", "avg_p", "mean_h_tilde"]].copy()
        d.insert(0, "seed", int(seed))
        d.insert(0, "method", method)
        d.insert(0, "dataset", dataset)
        d["test_acc_pct"] = d["test_acc"] * 100.0
        parts.append(d)
    cols = ["dataset", "method", "seed", "round", "test_acc", "test_loss", "avg_p", "mean_h_tilde", "test_acc_pct"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def _band(ax: plt.Axes, d: pd.DataFrame, y: str, color: str, label: str) -> None:
    """Mean over seeds per round with a +- sample-std band (NaN rounds skipped)."""
    g = d.dropna(subset=[y]).groupby("round")[y]
    mean, std = g.mean(), g.std(ddof=1).fillna(0.0)
    ax.plot(mean.index, mean.to_numpy(), color=color, lw=1.6, label=label)
    ax.fill_between(mean.index, (mean - std).to_numpy(), (mean + std).to_numpy(), color=color, alpha=0.2, lw=0)


def trajectory_figure(traj: pd.DataFrame, status: Mapping[tuple[str, str, int], str], datasets: Sequence[str],
                      methods: Sequence[str], y: str, ylabel: str, title: str) -> Figure:
    """Figures 3, 7, 8: one panel per dataset, one mean line with a seed band per method."""
    _style()
    fig, axes = _panels(len(datasets))
    if not datasets:
        _empty(axes[0], "no dataset")
    for ax, dataset in zip(axes, datasets, strict=False):
        drawn = 0
        for method in methods:
            d = traj[(traj["dataset"] == dataset) & (traj["method"] == method)] if len(traj) else traj
            if d.empty:
                continue
            n_div = sum(1 for (ds, m, _), s in status.items() if ds == dataset and m == method and s != "completed")
            label = _label(method) + (f" ({n_div} diverged)" if n_div else "")
            _band(ax, d, y, METHOD_COLORS.get(method, "k"), label)
            drawn += 1
        if not drawn:
            _empty(ax)
        else:
            ax.set_xlabel("Communication round")
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=7)
        ax.set_title(f"{_ds(dataset)}")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def fig4_heterogeneity_allocation(traj: pd.DataFrame, pmax_mean: Mapping[str, float], datasets: Sequence[str]) -> Figure:
    """Figure 4: mean H~ (left axis) and mean allocated p (right axis) of hasfl; dashed: p_bar_max."""
    _style()
    fig, axes = _panels(len(datasets), width=4.6)
    if not datasets:
        _empty(axes[0], "no dataset")
    green, purple = "#2ca02c", "#9467bd"
    for ax, dataset in zip(axes, datasets, strict=False):
        d = traj[(traj["dataset"] == dataset) & (traj["method"] == "hasfl")] if len(traj) else traj
        if d.empty:
            _empty(ax)
            ax.set_title(_ds(dataset))
            continue
        _band(ax, d, "mean_h_tilde", green, r"Mean $\tilde H$")
        ax.set_xlabel("Communication round")
        ax.set_ylabel(r"Mean heterogeneity $\bar H$", color=green)
        ax2 = ax.twinx()
        ax2.grid(False)
        _band(ax2, d, "avg_p", purple, r"HAS-FL $\bar p$")
        if dataset in pmax_mean and math.isfinite(pmax_mean[dataset]):
            ax2.axhline(pmax_mean[dataset], color="0.3", ls="--", lw=1, label=r"Mean cap $\bar p^{max}$")
        ax2.set_ylabel(r"Mean allocation $\bar p$", color=purple)
        lines = ax.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="best")
        ax.set_title(_ds(dataset))
    fig.suptitle("Mean heterogeneity estimate and allocation (HAS-FL)")
    fig.tight_layout()
    return fig


def fig5_final_allocation(clients: Mapping[tuple[str, int], pd.DataFrame], datasets: Sequence[str],
                          seeds: Sequence[int]) -> Figure:
    """Figure 5: final per-client allocation p_i (blue) vs pmax_i (gray) of hasfl, dataset x seed."""
    _style()
    nr, nc = max(1, len(datasets)), max(1, len(seeds))
    fig, axes = plt.subplots(nr, nc, figsize=(3.6 * nc, 2.6 * nr), squeeze=False)
    for i, dataset in enumerate(datasets or [""]):
        for j, seed in enumerate(seeds or [0]):
            ax = axes[i][j]
            df = clients.get((dataset, int(seed)))
            if df is None:
                _empty(ax)
            else:
                df = df.sort_values("client_id")
                x = df["client_id"].to_numpy()
                ax.bar(x, df["pmax"].to_numpy(), color="0.75", width=0.8, label=r"$p^{max}_i$")
                ax.bar(x, df["p_final"].to_numpy(), color="#1f77b4", width=0.45, label=r"$p_i$ (allocated)")
                ax.set_ylim(0, 1.08)
                ax.set_xlabel("Client ID")
                ax.set_ylabel("Width multiplier p")
                if i == 0 and j == 0:
                    ax.legend(fontsize=7, loc="upper right")
            ax.set_title(f"{_ds(dataset)}, seed {seed}", fontsize=9)
    fig.suptitle("Final per-client allocation vs resource constraint (HAS-FL)")
    fig.tight_layout()
    return fig


def fig6_frontier(runs: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str]) -> Figure:
    """Figure 6: final accuracy vs average capacity, as allocated and as paid (issue 14).

    Top row: final accuracy vs the average width, hollow marker at the allocated
    (sampled) width ``avg_p``, filled marker at the width actually trained and uploaded
    ``avg_p_trained`` (they differ for FjORD, whose clients train at pmax), joined by a
    line. Bottom row: final accuracy vs the mean upload MB per client-round (cost
    model). Mean +- sample std over the completed seeds. ``runs`` has dataset, method,
    seed, status, final_acc_pct, avg_p, avg_p_trained, upload_mb.
    """
    _style()
    n = max(1, len(datasets))
    fig, axes = plt.subplots(2, n, figsize=(4.6 * n, 7.0), squeeze=False)
    if not datasets:
        _empty(axes[0][0], "no dataset")
        _empty(axes[1][0], "no dataset")

    def sd(v: np.ndarray) -> float:
        return float(np.std(v, ddof=1)) if len(v) > 1 else 0.0

    for j, dataset in enumerate(datasets):
        top, bottom = axes[0][j], axes[1][j]
        d = runs[(runs["dataset"] == dataset) & (runs["status"] == "completed")] if len(runs) else runs
        drawn = 0
        for method in methods:
            g = d[d["method"] == method]
            if g.empty:
                continue
            color = METHOD_COLORS.get(method, "k")
            y = g["final_acc_pct"].to_numpy(float)
            xa, xt, mb = (g[c].to_numpy(float) for c in ("avg_p", "avg_p_trained", "upload_mb"))
            top.plot([xa.mean(), xt.mean()], [y.mean(), y.mean()], color=color, lw=1, alpha=0.6)
            top.errorbar(float(xa.mean()), float(y.mean()), xerr=sd(xa), yerr=sd(y), fmt="o", mfc="white",
                         capsize=3, ms=6, color=color)
            top.errorbar(float(xt.mean()), float(y.mean()), xerr=sd(xt), yerr=sd(y), fmt="o", capsize=3, ms=6,
                         color=color, label=_label(method))
            bottom.errorbar(float(mb.mean()), float(y.mean()), xerr=sd(mb), yerr=sd(y), fmt="o", capsize=3, ms=6,
                            color=color, label=_label(method))
            drawn += 1
        if not drawn:
            _empty(top)
            _empty(bottom)
        else:
            top.set_xlim(0.2, 1.05)
            top.set_xlabel(r"Average width $\bar p$ (hollow: allocated, filled: trained and uploaded)")
            top.set_ylabel("Final accuracy (%)")
            top.legend(fontsize=7, loc="best")
            bottom.set_xlabel("Upload per client-round (MB, cost model)")
            bottom.set_ylabel("Final accuracy (%)")
        top.set_title(_ds(dataset))
    fig.suptitle("Accuracy-capacity frontier, as allocated and as paid (mean +- std over seeds)")
    fig.tight_layout()
    return fig
