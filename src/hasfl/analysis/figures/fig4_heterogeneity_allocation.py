"""Paper Figure 4: mean heterogeneity estimate H~ (top row) and mean allocated width p with the
mean capacity (bottom row) of the HAS-FL runs over the rounds, one column per dataset, with the
warm-up, the reallocation rounds and the renormalisation rounds marked.

Reads the hasfl runs' rounds.parquet and the data-stage clients.parquet of every dataset x seed
(the mean capacity); ``params``: ``warmup``, ``t_adapt``, ``t_norm`` (config block ``hasfl``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hasfl.analysis.figures.reading import datasets_of, n_seeds_of, opt_int, paths, runs_of
from hasfl.analysis.figures.style import WARMUP, band, band_handle, empty_panel, legend_below, save_figure, set_style
from hasfl.analysis.figures.trajectories import trajectories
from hasfl.analysis.labels import dataset_label
from hasfl.analysis.runs import group_data_files

__all__ = ["compute", "figure", "mean_capacity"]


def _round_marks(ax: plt.Axes, n_rounds: int, warmup: int | None, t_adapt: int | None, t_norm: int | None,
                 legend: bool) -> list:
    """Warm-up shading and the rounds whose estimate update / renormalisation the record shows.

    The engine (0-based round t) updates the estimate when t >= warmup and t % t_adapt == 0
    and renormalises it when t > 0 and t % t_norm == 0; rounds.parquet numbers round t as t + 1.
    """
    handles = []
    if warmup:
        span = ax.axvspan(0.5, warmup + 0.5, color=WARMUP, lw=0, zorder=0,
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


def figure(traj: pd.DataFrame, pmax_mean: Mapping[str, float], datasets: Sequence[str], *,
           warmup: int | None = None, t_adapt: int | None = None, t_norm: int | None = None,
           n_seeds: int | None = None) -> Figure:
    """Figure 4: mean H~ (top row) and mean allocated p with the mean capacity (bottom row) of hasfl.

    Two rows sharing the round axis instead of twin y axes, so every line reads against
    one axis; the warm-up is shaded and the update / renormalisation rounds are marked.
    ``traj``: :func:`hasfl.analysis.figures.trajectories.trajectories`; ``pmax_mean``: the
    mean capacity per dataset (:func:`mean_capacity`).
    """
    set_style()
    n = max(1, len(datasets))
    fig, axes = plt.subplots(2, n, figsize=(4.8 * n, 5.6), squeeze=False, sharex="col")
    if not datasets:
        empty_panel(axes[0][0], "no dataset")
        empty_panel(axes[1][0], "no dataset")
    green, purple = "#2ca02c", "#9467bd"
    for j, dataset in enumerate(datasets):
        top, bottom = axes[0][j], axes[1][j]
        d = traj[(traj["dataset"] == dataset) & (traj["method"] == "hasfl")] if len(traj) else traj
        top.set_title(dataset_label(dataset))
        if d.empty:
            empty_panel(top)
            empty_panel(bottom)
            continue
        n_rounds = int(d["round"].max())
        h_line = band(top, d, "mean_h_tilde", green, r"mean estimate $\tilde H$ over all clients (after the round)",
                      drawstyle="steps-post")
        top.set_ylabel(r"Mean estimate $\tilde H$")
        marks = _round_marks(top, n_rounds, warmup, t_adapt, t_norm, legend=True)
        _round_marks(bottom, n_rounds, warmup, t_adapt, t_norm, legend=False)
        p_line = band(bottom, d, "avg_p", purple, "mean allocated width p of the round's participants")
        handles = [h_line, p_line]
        if dataset in pmax_mean and math.isfinite(pmax_mean[dataset]):
            handles.append(bottom.axhline(pmax_mean[dataset], color=purple, ls="--", lw=1.1,
                                          label=f"mean capacity pmax over all clients ({pmax_mean[dataset]:.3f})"))
        bottom.set_ylabel("Mean allocated width p")
        fig.align_ylabels([top, bottom])
        bottom.set_xlabel("Communication round")
        bottom.set_xlim(0.5, n_rounds + 0.5)
        legend_below(bottom, [*handles, *marks, band_handle(n_seeds, green)], ncol=1)
    fig.suptitle("HAS-FL: mean heterogeneity estimate and mean allocated width over rounds")
    fig.tight_layout()
    return fig


def mean_capacity(data_clients: Sequence[str]) -> dict[str, float]:
    """Per dataset, the mean over its seeds of the mean capacity pmax of the data stage's clients."""
    pmax: dict[str, list[float]] = {}
    for (dataset, _seed), f in group_data_files(data_clients).items():
        pmax.setdefault(dataset, []).append(float(pd.read_parquet(f["clients.parquet"])["pmax"].mean()))
    return {d: sum(v) / len(v) for d, v in pmax.items()}


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """Write Figure 4 to ``outputs["png"]`` / ``outputs["pdf"]`` from ``inputs["runs"]`` (rounds.parquet)
    and ``inputs["data_clients"]``."""
    traj = trajectories({k: pd.read_parquet(f["rounds.parquet"]) for k, f in runs_of(inputs).items()})
    fig = figure(traj, mean_capacity(paths(inputs, "data_clients")), datasets_of(params),
                 warmup=opt_int(params, "warmup"), t_adapt=opt_int(params, "t_adapt"), t_norm=opt_int(params, "t_norm"),
                 n_seeds=n_seeds_of(params))
    save_figure(fig, outputs["png"], outputs["pdf"])
