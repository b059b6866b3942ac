"""The look every paper figure (Figures 2-9) shares: theme, output files, panels, the accuracy
floors, seed bands and sideways dodging.

Importing this module selects matplotlib's Agg backend before pyplot is imported, so every
figure module imports it first. Conventions:

* one colour and one marker shape per method, from the registry (:mod:`hasfl.analysis.labels`);
* accuracy panels carry the test set's majority-class rate (grey dashed) and chance rate (grey
  dotted) when the floors are known (:func:`floor_lines`);
* a method whose runs are all at the floor (:mod:`hasfl.analysis.floors`) is drawn dashed with
  hollow markers (curves) or hollow (points), one with some runs at the floor with half-filled
  markers (:data:`FILL`), and its legend entry says in how many seeds (:func:`floor_note`);
* seed bands are mean +- sample std over seeds (:func:`band`); legends sit outside the data;
* :func:`save_figure` writes PNG and PDF atomically without timestamps, so equal inputs give
  byte-identical files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.transforms import offset_copy  # noqa: E402

from hasfl.io import atomic_path  # noqa: E402

__all__ = [
    "FILL",
    "GREY",
    "WARMUP",
    "FloorFlags",
    "Floors",
    "band",
    "band_handle",
    "dodge",
    "empty_panel",
    "floor_lines",
    "floor_note",
    "floor_state",
    "legend_below",
    "markevery",
    "panels",
    "save_figure",
    "set_style",
]

#: Floors of a dataset: {"majority_pct", "chance_pct", "floor_tol_pct"} (hasfl.analysis.floors).
Floors = Mapping[str, Mapping[str, float]]
#: Runs at the floor per (dataset, method): (seeds at the floor, seeds with a known flag).
FloorFlags = Mapping[tuple[str, str], tuple[int, int]]

#: Reference lines and notes (the floors).
GREY = "0.45"
#: Warm-up shading (Figure 4).
WARMUP = "#f6ebc8"
#: Marker fill per floor state: hollow when every seed is at the floor, half-filled when some are.
FILL = {"all": "none", "some": "left", "": "full"}


def set_style() -> None:
    """The seaborn paper theme and fixed output settings (called by every figure before drawing)."""
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


def empty_panel(ax: plt.Axes, text: str = "not run") -> None:
    """A panel without data: ``text`` in its middle, no ticks."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def panels(n: int, width: float = 4.2, height: float = 3.2) -> tuple[Figure, list[plt.Axes]]:
    """One row of ``n`` (at least one) panels of ``width`` x ``height`` inches."""
    n = max(1, n)
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])


def floor_note(flags: FloorFlags | None, dataset: str, method: str) -> str:
    """" (at floor, k of n seeds)" for a method with runs at the floor, else ""."""
    k, n = (flags or {}).get((dataset, method), (0, 0))
    return f" (at floor, {k} of {n} seeds)" if k else ""


def floor_state(flags: FloorFlags | None, dataset: str, method: str) -> str:
    """"all" (every seed at the floor), "some" or "" (none, or unknown)."""
    k, n = (flags or {}).get((dataset, method), (0, 0))
    return "" if not k else ("all" if k == n else "some")


def floor_lines(ax: plt.Axes, floors: Floors | None, dataset: str, annotate: bool = False) -> list[Line2D]:
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
    handles = [ax.axhline(maj, color=GREY, ls="--", lw=1.1, zorder=1.5,
                          label=f"majority-class rate ({maj:.1f}%)")]
    if math.isfinite(chance):
        span = max(hi, maj) - min(lo, maj)
        if chance >= min(lo, maj) - 0.15 * span:
            handles.append(ax.axhline(chance, color=GREY, ls=":", lw=1.1, zorder=1.5,
                                      label=f"chance rate ({chance:.1f}%)"))
        else:
            handles.append(Line2D([], [], color=GREY, ls=":", lw=1.1,
                                  label=f"chance rate ({chance:.1f}%, below the axis)"))
    if annotate:
        off = "" if len(handles) < 2 or handles[1].axes is ax else f" (chance {chance:.1f}%, below the axis)"
        ax.annotate(f"majority class {maj:.1f}%{off}", (1.0, maj), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                    textcoords="offset points", ha="right", va="bottom", fontsize=6.5, color=GREY)
    return handles


def legend_below(ax: plt.Axes, handles: Sequence, ncol: int = 2, fontsize: float = 7) -> None:
    """The legend under the panel, outside the data."""
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-34 if ax.get_xlabel() else -20, units="points")
    ax.legend(handles=list(handles), fontsize=fontsize, loc="upper center", bbox_to_anchor=(0.5, 0.0),
              bbox_transform=below, ncol=ncol, frameon=False)


def band_handle(n_seeds: int | None, color: str = "0.5") -> Patch:
    """The legend entry that says what the shaded seed band is."""
    who = f"{n_seeds} seeds" if n_seeds else "seeds"
    return Patch(facecolor=color, alpha=0.25, lw=0, label=f"shaded: ± 1 sample std over {who}")


def band(ax: plt.Axes, d: pd.DataFrame, y: str, color: str, label: str, *, marker: str | None = None,
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


def markevery(i: int, k: int, n_rounds: int) -> tuple[int, int]:
    """Markers every ``step`` rounds, method ``i`` of ``k`` offset so coinciding curves show every marker."""
    step = max(k, n_rounds // 6)
    return (int(i * step // max(1, k)), int(step))


def dodge(xs: Sequence[float], ys: Sequence[float], x_span: float, y_span: float, step: float = 0.03,
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
