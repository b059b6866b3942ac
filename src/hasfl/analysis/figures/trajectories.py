"""The line-with-band figure of paper Figures 3, 7 and 8: one panel per dataset, one mean line
over seeds with a +- sample-std band per method, over the communication rounds.

Accuracy panels get the majority-class and chance rates as reference lines; a method with
runs at the floor is dashed (all seeds) or half-filled (some) and its legend entry says in
how many seeds; a method with runs that did not complete says how many diverged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from hasfl.analysis.figures.reading import datasets_of, n_seeds_of, paths, run_floors, run_status, runs_of
from hasfl.analysis.figures.style import (
    FILL,
    FloorFlags,
    Floors,
    band,
    band_handle,
    empty_panel,
    floor_lines,
    floor_note,
    floor_state,
    legend_below,
    markevery,
    panels,
    save_figure,
    set_style,
)
from hasfl.analysis.labels import dataset_label, method_color, method_label, method_marker

__all__ = ["compute_trajectories", "trajectories", "trajectory_figure"]

_COLUMNS = ["dataset", "method", "seed", "round", "test_acc", "test_loss", "avg_p", "mean_h_tilde", "test_acc_pct"]


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
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=_COLUMNS)


def trajectory_figure(traj: pd.DataFrame, status: Mapping[tuple[str, str, int], str], datasets: Sequence[str],
                      methods: Sequence[str], y: str, ylabel: str, title: str, *, floors: Floors | None = None,
                      flags: FloorFlags | None = None, n_seeds: int | None = None) -> Figure:
    """Figures 3, 7, 8: one panel per dataset, one mean line with a seed band per method.

    Accuracy panels (``y = "test_acc_pct"``) get the floors as reference lines; methods
    with runs at the floor are dashed and say so in the legend (below each panel).
    """
    set_style()
    fig, axes = panels(len(datasets), width=4.6, height=3.4)
    if not datasets:
        empty_panel(axes[0], "no dataset")
    for ax, dataset in zip(axes, datasets, strict=False):
        handles = []
        present = [m for m in methods if len(traj) and not traj[(traj["dataset"] == dataset)
                                                                 & (traj["method"] == m)].empty]
        n_rounds = int(traj["round"].max()) if len(traj) else 1
        for i, method in enumerate(present):
            d = traj[(traj["dataset"] == dataset) & (traj["method"] == method)]
            n_div = sum(1 for (ds, m, _), s in status.items() if ds == dataset and m == method and s != "completed")
            label = (method_label(method) + (f" ({n_div} diverged)" if n_div else "")
                     + floor_note(flags, dataset, method))
            floor = floor_state(flags, dataset, method)
            handles.append(band(ax, d, y, method_color(method), label, marker=method_marker(method),
                                markevery=markevery(i, len(present), n_rounds), ls="--" if floor == "all" else "-",
                                fill=FILL[floor]))
        ax.set_title(f"{dataset_label(dataset)}")
        if not present:
            empty_panel(ax)
            continue
        ax.set_xlabel("Communication round")
        ax.set_ylabel(ylabel)
        if y == "test_acc_pct":
            handles += floor_lines(ax, floors, dataset)
        handles.append(band_handle(n_seeds))
        legend_below(ax, handles)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def compute_trajectories(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any],
                         *, y: str, ylabel: str, title: str, floor_lines_drawn: bool) -> None:
    """Read the runs' rounds.parquet / run.json (and the manifests' floors), draw ``y`` per round.

    ``floor_lines_drawn``: the majority-class and chance lines are drawn (accuracy); the
    floor flags of the runs (from the manifests) mark the methods either way.
    """
    runs = runs_of(inputs)
    floors, flags = run_floors(runs, paths(inputs, "manifests"))
    traj = trajectories({k: pd.read_parquet(f["rounds.parquet"]) for k, f in runs.items()})
    fig = trajectory_figure(traj, run_status(runs), datasets_of(params), list(params.get("methods", [])), y, ylabel,
                            title, floors=floors if floor_lines_drawn else None, flags=flags,
                            n_seeds=n_seeds_of(params))
    save_figure(fig, outputs["png"], outputs["pdf"])
