"""Paper Figures 2-8 (seaborn / matplotlib, Agg backend), saved as PNG and PDF.

Every figure function takes plain data frames and returns a matplotlib Figure;
:func:`save_figure` writes it atomically with fixed metadata (no creation date), so
equal inputs give byte-identical files. A panel whose runs the preset does not have
says "not run" instead of failing. Seed bands are mean +- sample std over seeds; the
captions (``hasfl.analysis.specs.FIGURES``) say what every band, line and marker means.

Conventions shared by the figures: one colour and one marker shape per method
(:data:`METHOD_COLORS`, :data:`METHOD_MARKERS`); accuracy panels carry the test set's
majority-class rate (grey dashed) and chance rate (grey dotted) when the floors are
known; a method whose runs are all at the floor (:mod:`hasfl.analysis.floors`) is drawn
dashed with hollow markers (curves) or hollow (points), one with some runs at the floor
with half-filled markers, and its legend entry says in how many seeds; legends sit
outside the data.

* Fig 2 -- the allocation rule p = min(pmax, p_min + gamma H/H_bar) for capacities 1.0/0.6/0.3.
* Fig 3 -- test accuracy of hasfl, fjord, uniform per dataset.
* Fig 4 -- mean H~ (top) and mean allocated p with the mean capacity (bottom) of hasfl over
  rounds, with the warm-up, the reallocation rounds and the renormalisation rounds marked.
* Fig 5 -- final per-client allocation p_i vs capacity pmax_i (hasfl), per dataset x seed.
* Fig 6 -- final accuracy vs avg width trained (allocated joined) and vs upload MB per
  client-round, every method, error bars; points at equal cost dodged sideways.
* Fig 7 -- test accuracy of hasfl vs the full-model methods.
* Fig 8 -- test loss of the same methods.
* Fig 9 -- this project's extension: every estimate E0-E3 against the true TV, coloured by the
  client's capacity tier, with least-squares lines within each tier (one row per dataset).
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
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
from matplotlib.transforms import offset_copy  # noqa: E402

from hasfl.analysis.specs import DATASET_LABELS, ESTIMATORS, METHOD_LABELS  # noqa: E402
from hasfl.io import atomic_path  # noqa: E402

__all__ = [
    "METHOD_COLORS",
    "METHOD_MARKERS",
    "fig2_allocation_rule",
    "fig4_heterogeneity_allocation",
    "fig5_final_allocation",
    "fig6_frontier",
    "fig9_estimators",
    "save_figure",
    "trajectories",
    "trajectory_figure",
]

_ORDER = ("hasfl", "hasfl_nocov", "heterofl", "fjord", "uniform", "random_budget", "fedavg", "scaffold", "fedprox")
METHOD_COLORS = dict(zip(_ORDER, sns.color_palette("tab10", len(_ORDER)).as_hex(), strict=True))
METHOD_MARKERS = dict(zip(_ORDER, ("o", "v", "s", "D", "^", "P", "X", "<", ">"), strict=True))

#: Floors of a dataset: {"majority_pct", "chance_pct", "floor_tol_pct"} (hasfl.analysis.floors).
Floors = Mapping[str, Mapping[str, float]]
#: Runs at the floor per (dataset, method): (seeds at the floor, seeds with a known flag).
FloorFlags = Mapping[tuple[str, str], tuple[int, int]]

_GREY = "0.45"
_WARMUP = "#f6ebc8"


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


def _floor_note(flags: FloorFlags | None, dataset: str, method: str) -> str:
    """" (at floor, k of n seeds)" for a method with runs at the floor, else ""."""
    k, n = (flags or {}).get((dataset, method), (0, 0))
    return f" (at floor, {k} of {n} seeds)" if k else ""


def _floor_state(flags: FloorFlags | None, dataset: str, method: str) -> str:
    """"all" (every seed at the floor), "some" or "" (none, or unknown)."""
    k, n = (flags or {}).get((dataset, method), (0, 0))
    return "" if not k else ("all" if k == n else "some")


#: Marker fill per floor state: hollow when every seed is at the floor, half-filled when some are.
_FILL = {"all": "none", "some": "left", "": "full"}


def _floor_lines(ax: plt.Axes, floors: Floors | None, dataset: str, annotate: bool = False) -> list[Line2D]:
    """Majority-class (dashed) and chance (dotted) rates of ``dataset`` as reference lines.

    The chance line is drawn only where it does not stretch the axis far below the data
    (then its legend entry gives the value and says so); ``annotate`` writes the values
    on the lines. Returns the legend handles.
    """
    f = (floors or {}).get(dataset)
    if not f or not math.isfinite(f.get("majority_pct", math.nan)):
        return []
    maj, chance = float(f["majority_pct"]), float(f.get("chance_pct", math.nan))
    lo, hi = ax.get_ylim()
    handles = [ax.axhline(maj, color=_GREY, ls="--", lw=1.1, zorder=1.5,
                          label=f"majority-class rate ({maj:.1f}%)")]
    if math.isfinite(chance):
        span = max(hi, maj) - min(lo, maj)
        if chance >= min(lo, maj) - 0.15 * span:
            handles.append(ax.axhline(chance, color=_GREY, ls=":", lw=1.1, zorder=1.5,
                                      label=f"chance rate ({chance:.1f}%)"))
        else:
            handles.append(Line2D([], [], color=_GREY, ls=":", lw=1.1,
                                  label=f"chance rate ({chance:.1f}%, below the axis)"))
    if annotate:
        off = "" if len(handles) < 2 or handles[1].axes is ax else f" (chance {chance:.1f}%, below the axis)"
        ax.annotate(f"majority class {maj:.1f}%{off}", (1.0, maj), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                    textcoords="offset points", ha="right", va="bottom", fontsize=6.5, color=_GREY)
    return handles


def _legend_below(ax: plt.Axes, handles: Sequence, ncol: int = 2, fontsize: float = 7) -> None:
    """The legend under the panel, outside the data."""
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-34 if ax.get_xlabel() else -20, units="points")
    ax.legend(handles=list(handles), fontsize=fontsize, loc="upper center", bbox_to_anchor=(0.5, 0.0),
              bbox_transform=below, ncol=ncol, frameon=False)


def _band_handle(n_seeds: int | None, color: str = "0.5") -> Patch:
    who = f"{n_seeds} seeds" if n_seeds else "seeds"
    return Patch(facecolor=color, alpha=0.25, lw=0, label=f"shaded: ± 1 sample std over {who}")


def fig2_allocation_rule(p_min: float, gamma: float, pmaxes: Sequence[float] = (1.0, 0.6, 0.3),
                         h_max: float = 3.0) -> Figure:
    """Figure 2: p_i = min(pmax_i, p_min + gamma H_i / H_bar) against H_i / H_bar."""
    _style()
    h = np.linspace(0.0, h_max, 301)
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    for pm, color in zip(pmaxes, sns.color_palette("deep", len(pmaxes)), strict=True):
        ax.plot(h, np.minimum(pm, p_min + gamma * h), color=color, lw=2, label=f"capacity $p^{{max}}$ = {pm:.1f}")
    ax.axhline(p_min, color="0.4", ls="--", lw=1, label=f"$p_{{min}}$ = {p_min:g}")
    ax.set_xlabel(r"Heterogeneity estimate relative to the mean, $H_i / \bar H$")
    ax.set_ylabel(r"Allocated width $p_i$")
    ax.set_xlim(0, h_max)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"HAS-FL allocation rule ($\\gamma$ = {gamma:g})")
    ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False)
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


def _band(ax: plt.Axes, d: pd.DataFrame, y: str, color: str, label: str, *, marker: str | None = None,
          markevery: tuple[int, int] | None = None, ls: str = "-", fill: str = "full",
          drawstyle: str = "default") -> Line2D:
    """Mean over seeds per round with a +- sample-std band (NaN rounds skipped); returns the line."""
    g = d.dropna(subset=[y]).groupby("round")[y]
    mean, std = g.mean(), g.std(ddof=1).fillna(0.0)
    (line,) = ax.plot(mean.index, mean.to_numpy(), color=color, lw=1.6, ls=ls, label=label, marker=marker,
                      markevery=markevery, ms=5, mec=color, mfc=color if fill != "none" else "white",
                      mfcalt="white", fillstyle=fill if fill != "none" else "full", drawstyle=drawstyle)
    step = drawstyle.split("-")[1] if drawstyle.startswith("steps-") else None
    ax.fill_between(mean.index, (mean - std).to_numpy(), (mean + std).to_numpy(), color=color, alpha=0.2, lw=0,
                    step=step)
    return line


def _markevery(i: int, k: int, n_rounds: int) -> tuple[int, int]:
    """Markers every ``step`` rounds, method ``i`` of ``k`` offset so coinciding curves show every marker."""
    step = max(k, n_rounds // 6)
    return (int(i * step // max(1, k)), int(step))


def trajectory_figure(traj: pd.DataFrame, status: Mapping[tuple[str, str, int], str], datasets: Sequence[str],
                      methods: Sequence[str], y: str, ylabel: str, title: str, *, floors: Floors | None = None,
                      flags: FloorFlags | None = None, n_seeds: int | None = None) -> Figure:
    """Figures 3, 7, 8: one panel per dataset, one mean line with a seed band per method.

    Accuracy panels (``y = "test_acc_pct"``) get the floors as reference lines; methods
    with runs at the floor are dashed and say so in the legend (below each panel).
    """
    _style()
    fig, axes = _panels(len(datasets), width=4.6, height=3.4)
    if not datasets:
        _empty(axes[0], "no dataset")
    for ax, dataset in zip(axes, datasets, strict=False):
        handles = []
        present = [m for m in methods if len(traj) and not traj[(traj["dataset"] == dataset)
                                                                 & (traj["method"] == m)].empty]
        n_rounds = int(traj["round"].max()) if len(traj) else 1
        for i, method in enumerate(present):
            d = traj[(traj["dataset"] == dataset) & (traj["method"] == method)]
            n_div = sum(1 for (ds, m, _), s in status.items() if ds == dataset and m == method and s != "completed")
            label = _label(method) + (f" ({n_div} diverged)" if n_div else "") + _floor_note(flags, dataset, method)
            floor = _floor_state(flags, dataset, method)
            handles.append(_band(ax, d, y, METHOD_COLORS.get(method, "k"), label,
                                 marker=METHOD_MARKERS.get(method, "o"), markevery=_markevery(i, len(present), n_rounds),
                                 ls="--" if floor == "all" else "-", fill=_FILL[floor]))
        ax.set_title(f"{_ds(dataset)}")
        if not present:
            _empty(ax)
            continue
        ax.set_xlabel("Communication round")
        ax.set_ylabel(ylabel)
        if y == "test_acc_pct":
            handles += _floor_lines(ax, floors, dataset)
        handles.append(_band_handle(n_seeds))
        _legend_below(ax, handles)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _round_marks(ax: plt.Axes, n_rounds: int, warmup: int | None, t_adapt: int | None, t_norm: int | None,
                 legend: bool) -> list:
    """Warm-up shading and the rounds whose estimate update / renormalisation the record shows.

    The engine (0-based round t) updates the estimate when t >= warmup and t % t_adapt == 0
    and renormalises it when t > 0 and t % t_norm == 0; rounds.parquet numbers round t as t + 1.
    """
    handles = []
    if warmup:
        span = ax.axvspan(0.5, warmup + 0.5, color=_WARMUP, lw=0, zorder=0,
                          label=f"warm-up (rounds 1-{warmup}): every client at its capacity")
        handles.append(span)
    norm = {t + 1 for t in range(1, n_rounds) if t_norm and t % t_norm == 0}
    adapt = {t + 1 for t in range(n_rounds) if t_adapt and warmup is not None and t >= warmup and t % t_adapt == 0}
    for r in sorted(adapt - norm):
        ax.axvline(r, color="0.55", lw=0.6, zorder=0.5)
    for r in sorted(norm):
        ax.axvline(r, color="0.2", lw=0.9, ls=":", zorder=0.5)
    if legend:
        if adapt - norm:
            handles.append(Line2D([], [], color="0.55", lw=0.6, label=f"estimate updated, widths reallocated "
                                                                     f"(every {t_adapt} rounds)"))
        if norm:
            handles.append(Line2D([], [], color="0.2", lw=0.9, ls=":", label=f"estimate rescaled to mean 1 "
                                                                            f"(every {t_norm} rounds)"))
    return handles


def fig4_heterogeneity_allocation(traj: pd.DataFrame, pmax_mean: Mapping[str, float], datasets: Sequence[str], *,
                                  warmup: int | None = None, t_adapt: int | None = None, t_norm: int | None = None,
                                  n_seeds: int | None = None) -> Figure:
    """Figure 4: mean H~ (top row) and mean allocated p with the mean capacity (bottom row) of hasfl.

    Two rows sharing the round axis instead of twin y axes, so every line reads against
    one axis; the warm-up is shaded and the update / renormalisation rounds are marked.
    """
    _style()
    n = max(1, len(datasets))
    fig, axes = plt.subplots(2, n, figsize=(4.8 * n, 5.6), squeeze=False, sharex="col")
    if not datasets:
        _empty(axes[0][0], "no dataset")
        _empty(axes[1][0], "no dataset")
    green, purple = "#2ca02c", "#9467bd"
    for j, dataset in enumerate(datasets):
        top, bottom = axes[0][j], axes[1][j]
        d = traj[(traj["dataset"] == dataset) & (traj["method"] == "hasfl")] if len(traj) else traj
        top.set_title(_ds(dataset))
        if d.empty:
            _empty(top)
            _empty(bottom)
            continue
        n_rounds = int(d["round"].max())
        h_line = _band(top, d, "mean_h_tilde", green, r"mean estimate $\tilde H$ over all clients (after the round)",
                       drawstyle="steps-post")
        top.set_ylabel(r"Mean estimate $\tilde H$")
        marks = _round_marks(top, n_rounds, warmup, t_adapt, t_norm, legend=True)
        _round_marks(bottom, n_rounds, warmup, t_adapt, t_norm, legend=False)
        p_line = _band(bottom, d, "avg_p", purple, "mean allocated width p of the round's participants")
        handles = [h_line, p_line]
        if dataset in pmax_mean and math.isfinite(pmax_mean[dataset]):
            handles.append(bottom.axhline(pmax_mean[dataset], color=purple, ls="--", lw=1.1,
                                          label=f"mean capacity pmax over all clients ({pmax_mean[dataset]:.3f})"))
        bottom.set_ylabel("Mean allocated width p")
        fig.align_ylabels([top, bottom])
        bottom.set_xlabel("Communication round")
        bottom.set_xlim(0.5, n_rounds + 0.5)
        _legend_below(bottom, [*handles, *marks, _band_handle(n_seeds, green)], ncol=1)
    fig.suptitle("HAS-FL: mean heterogeneity estimate and mean allocated width over rounds")
    fig.tight_layout()
    return fig


def fig5_final_allocation(clients: Mapping[tuple[str, int], pd.DataFrame], datasets: Sequence[str],
                          seeds: Sequence[int]) -> Figure:
    """Figure 5: final per-client allocation p_i (blue) vs capacity pmax_i (grey) of hasfl, dataset x seed."""
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
                ax.bar(x, df["pmax"].to_numpy(), color="0.75", width=0.8)
                ax.bar(x, df["p_final"].to_numpy(), color="#1f77b4", width=0.45)
                ax.set_ylim(0, 1.05)
                ax.set_xlabel("Client ID")
                ax.set_ylabel("Width p")
            ax.set_title(f"{_ds(dataset)}, seed {seed}", fontsize=9)
    handles = [Patch(facecolor="0.75", label=r"capacity $p^{max}_i$ (largest width the client can train)"),
               Patch(facecolor="#1f77b4", label=r"final allocated width $p_i$")]
    fig.suptitle("HAS-FL: final per-client allocated width vs capacity")
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8, frameon=False)
    return fig


def _dodge(xs: Sequence[float], ys: Sequence[float], x_span: float, y_span: float, step: float = 0.03,
           near_x: float = 0.01, near_y: float = 0.03) -> list[float]:
    """Sideways offsets for points that would hide each other: closer than ``near_x`` of the x span
    *and* ``near_y`` of the y span to another point of their group. Each such group is spread
    symmetrically by ``step`` of the x span per point (in input order); every other point stays put.
    """
    n = len(xs)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if abs(xs[i] - xs[j]) < near_x * x_span and abs(ys[i] - ys[j]) < near_y * y_span:
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    out = [0.0] * n
    for g in groups.values():
        for k, i in enumerate(sorted(g)):
            out[i] = (k - (len(g) - 1) / 2.0) * step * x_span
    return out


def fig6_frontier(runs: pd.DataFrame, datasets: Sequence[str], methods: Sequence[str], *,
                  floors: Floors | None = None, flags: FloorFlags | None = None,
                  n_seeds: int | None = None) -> Figure:
    """Figure 6: final accuracy vs average cost, as allocated and as paid.

    Top row: final accuracy vs the average width trained and uploaded ``avg_p_trained``
    (filled marker), joined to a cross at the allocated width ``avg_p`` (they differ for
    FjORD, whose clients train at pmax). Bottom row: final accuracy vs the mean upload MB
    per client-round (cost model). Mean +- sample std over the completed seeds. Points
    that would hide each other are dodged sideways; hollow markers: runs at the
    floor. ``runs`` has dataset, method, seed, status, final_acc_pct, avg_p, avg_p_trained,
    upload_mb.
    """
    _style()
    n = max(1, len(datasets))
    fig, axes = plt.subplots(2, n, figsize=(4.8 * n, 7.0), squeeze=False)
    if not datasets:
        _empty(axes[0][0], "no dataset")
        _empty(axes[1][0], "no dataset")

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
        top.set_title(_ds(dataset))
        if not pts:
            _empty(top)
            _empty(bottom)
            continue
        top.set_xlim(0.15, 1.1)
        ys = [float(p[1].mean()) for p in pts]
        y_span = (max(ys) - min(ys)) or 1.0
        dx_top = _dodge([float(p[3].mean()) for p in pts], ys, 0.95, y_span)
        mb_all = [float(p[4].mean()) for p in pts]
        mb_span = (max(mb_all) - min(mb_all)) or max(mb_all) or 1.0
        dx_bot = _dodge(mb_all, ys, mb_span * 1.1, y_span)
        for k, (method, y, xa, xt, mb) in enumerate(pts):
            color, marker = METHOD_COLORS.get(method, "k"), METHOD_MARKERS.get(method, "o")
            floor = _floor_state(flags, dataset, method)
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
            legend.setdefault(method, Line2D([], [], color=color, marker=marker, ls="none", ms=7, label=_label(method)))
        for ax in (top, bottom):
            ax.set_ylabel("Final test accuracy (%)")
            _floor_lines(ax, floors, dataset, annotate=True)
        top.set_xlabel(r"Average width trained and uploaded $\bar p$ per client-round")
        bottom.set_xlabel("Mean upload per client-round (MB, cost model)")
    extra = [Line2D([], [], color="0.3", marker="x", ls="none", ms=5, label="average width allocated (joined)")]
    if "all" in floor_states:
        extra.append(Line2D([], [], color="0.3", marker="o", mfc="white", ls="none", ms=7,
                            label="hollow: every seed at the majority-class floor"))
    if "some" in floor_states:
        extra.append(Line2D([], [], color="0.3", marker="o", mfc="0.3", mfcalt="white", fillstyle="left", ls="none",
                            ms=7, label="half-filled: some seeds at the majority-class floor"))
    extra += [Line2D([], [], color=_GREY, ls="--", lw=1.1, label="majority-class rate of the test set"),
              Line2D([], [], color=_GREY, ls=":", lw=1.1, label="chance rate (1 / classes)")] if floors else []
    extra.append(Line2D([], [], color="0.3", marker="|", ls="none", ms=9,
                        label=f"error bars: ± 1 sample std over {n_seeds or 'the'} seeds"))
    fig.suptitle("Final accuracy vs cost per client-round (the paper's accuracy-capacity frontier)")
    fig.tight_layout()
    fig.legend(handles=[*legend.values(), *extra], loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=8,
               frameon=False)
    return fig


#: Capacity tiers from small to full width: warm to cool (Okabe-Ito, distinct for colour-blind readers).
_TIER_PALETTE = ("#D55E00", "#E69F00", "#56B4E9", "#0072B2", "#009E73", "#CC79A7", "#000000")


def _tier_colors(tiers: Sequence[float]) -> dict[float, str]:
    """One colour per capacity tier (smallest first), the same in every panel."""
    levels = sorted(set(float(t) for t in tiers))
    if len(levels) > len(_TIER_PALETTE):
        pal = sns.color_palette("viridis", len(levels)).as_hex()
        return dict(zip(levels, pal, strict=True))
    return {t: _TIER_PALETTE[i] for i, t in enumerate(levels)}


def _fmt_r(r: float, low: float, high: float) -> str:
    if not math.isfinite(r):
        return "--"
    return f"{r:+.2f} [{low:+.2f}, {high:+.2f}]" if math.isfinite(low) else f"{r:+.2f}"


def fig9_estimators(points: pd.DataFrame, datasets: Sequence[str],
                    stats: Mapping[tuple[str, str], Mapping[str, float]] | None = None, *, level: float = 0.95,
                    n_runs: Mapping[str, int] | None = None) -> Figure:
    """Figure 9: every estimate (one column per E0-E3) against the true TV, one row per dataset.

    ``points``: one row per client of every hasfl run (:func:`hasfl.analysis.estimators.figure_points`);
    colour = capacity tier pmax, thin lines = least-squares fit within each tier (all seeds).
    ``stats[(dataset, estimator id)]``: Table 8's pooled row, whose r(E, pmax) and r(E, TV | pmax)
    the panel title prints. A dataset without runs, or an estimate its runs did not record, gets a
    panel that says so.
    """
    _style()
    datasets = list(datasets) or [""]
    nr, nc = len(datasets), len(ESTIMATORS)
    fig, axes = plt.subplots(nr, nc, figsize=(3.6 * nc, 3.5 * nr), squeeze=False)
    colors = _tier_colors(points["pmax"].to_numpy(float) if len(points) else [1.0])
    for i, dataset in enumerate(datasets):
        d = points[points["dataset"] == dataset] if len(points) else points
        for j, est in enumerate(ESTIMATORS):
            ax = axes[i][j]
            head = f"{_ds(dataset)}: {est.label}"
            if d.empty:
                _empty(ax, "not run")
                ax.set_title(head, fontsize=8.5)
                continue
            if est.column not in d.columns or d[est.column].isna().all():
                _empty(ax, f"not recorded by these runs\n(no column {est.column})")
                ax.set_title(head, fontsize=8.5)
                continue
            ok = d[np.isfinite(d[est.column].to_numpy(float))]
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
                ax.plot([lo, hi], [lo, hi], color=_GREY, ls=":", lw=1.0, zorder=2)
            r = (stats or {}).get((dataset, est.id))
            if r is not None:
                head += (f"\nr(E, pmax) {_fmt_r(r['r_e_pmax'], r['r_e_pmax_low'], r['r_e_pmax_high'])}"
                         f"\nr(E, TV | pmax) {_fmt_r(r['pr_e_tv_pmax'], r['pr_e_tv_pmax_low'], r['pr_e_tv_pmax_high'])}")
                if isinstance(r.get("verdicts"), str) and r["verdicts"] != "--":
                    head += f"\ncheck per run: {r['verdicts']}"
            ax.set_title(head, fontsize=8)
            ax.set_xlabel("true TV (label heterogeneity)", fontsize=8)
            ax.set_ylabel(f"{est.id} ({est.name})" + (", log scale" if log_y else ""), fontsize=8)
            ax.tick_params(labelsize=7)
    handles = [Line2D([], [], marker="o", ls="-", lw=1.2, color=c, markersize=5, label=f"capacity pmax = {t:g}")
               for t, c in colors.items()]
    runs = ", ".join(f"{v} of {_ds(k)}" for k, v in (n_runs or {}).items())
    fig.suptitle("Which estimate E follows the data (rises within each colour) and which follows capacity "
                 "(colours in separate bands)" + (f"\nClients of the HAS-FL runs (seeds: {runs}); titles: correlations "
                                                  f"pooled over the seeds with {level:.0%} intervals, and the verdicts "
                                                  "of the capacity-grouped check" if runs else ""), fontsize=10)
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=max(1, len(handles)),
               fontsize=8, frameon=False, title="colour: client capacity (largest width its device trains); "
               "line: least-squares fit within the tier", title_fontsize=8)
    return fig
