"""What a figure module reads from the ``inputs`` / ``params`` of its ``compute`` (Figures 2-9).

``inputs`` maps ``"runs"`` (run files ``.../runs/<dataset>/<method>/seed<s>/<file>``),
``"manifests"`` (data-stage manifest.json, for the accuracy floors), ``"data_clients"``
(data-stage clients.parquet) and a table's name (e.g. ``"table8_estimators"``) to lists of
paths. The helpers here only read: the floors, flags and statuses come from
:mod:`hasfl.analysis.inputs` (as the tables read them), the run files from :mod:`hasfl.analysis.runs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis.inputs import dataset_floors, flagged_metrics, run_status
from hasfl.analysis.runs import RunKey, group_run_files, load_run_metrics
from hasfl.errors import HasflError

__all__ = ["FigureInputError", "datasets_of", "floor_flags", "n_seeds_of", "opt_int", "paths", "read_table",
           "run_floors", "run_status", "runs_of", "seeds_of"]

Inputs = Mapping[str, Sequence[str]]


class FigureInputError(HasflError, ValueError):
    """A figure's inputs lack a file it reads (the message names the figure and the input)."""


def paths(inputs: Inputs, key: str) -> list[str]:
    """The paths under ``key`` (none when the figure was given none)."""
    return [str(p) for p in inputs.get(key, ())]


def runs_of(inputs: Inputs) -> dict[RunKey, dict[str, Path]]:
    """The run files grouped by run, ``{(dataset, method, seed): {file name: path}}``."""
    return group_run_files(paths(inputs, "runs"))


def floor_flags(metrics: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """``{(dataset, method): (completed runs at the floor, completed runs with a known flag)}`` of rows
    that carry ``status`` and ``at_floor`` (per-run metrics flagged by :func:`hasfl.analysis.floors.add_floor_flags`,
    or a method table's per-seed rows); empty without the flag."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    if metrics.empty or "at_floor" not in metrics.columns:
        return out
    done = metrics[(metrics["status"] == "completed") & metrics["at_floor"].notna()]
    for (dataset, method), g in done.groupby(["dataset", "method"], sort=True):
        out[(dataset, method)] = (int(g["at_floor"].astype(bool).sum()), int(len(g)))
    return out


def read_table(inputs: Inputs, name: str, figure: str) -> pd.DataFrame:
    """Table ``name`` (its one parquet file among the inputs).

    Raises:
        FigureInputError: when the inputs do not give exactly one file for ``name``.
    """
    given = paths(inputs, name)
    if len(given) != 1:
        raise FigureInputError(f"{figure}: expected one file for the table '{name}' among the inputs, got "
                               f"{len(given)} (inputs: {', '.join(sorted(inputs)) or 'none'})")
    return pd.read_parquet(given[0])


def run_floors(runs: Mapping[RunKey, Mapping[str, Path]], manifests: Sequence[str]
               ) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], tuple[int, int]]]:
    """The accuracy floors of the manifests' datasets and, per (dataset, method), how many of the
    completed runs are at the floor; no flags without floors or when a run lacks rounds.parquet /
    run.json."""
    floors = dataset_floors(manifests) if manifests else {}
    complete = all("rounds.parquet" in f and "run.json" in f for f in runs.values())
    flags = floor_flags(flagged_metrics(load_run_metrics(runs), manifests)) if floors and complete else {}
    return floors, flags


def datasets_of(params: Mapping[str, Any]) -> list[str]:
    """``params["datasets"]`` (the preset's datasets, in order)."""
    return list(params.get("datasets", []))


def seeds_of(params: Mapping[str, Any]) -> list[int]:
    """``params["seeds"]`` as integers."""
    return [int(s) for s in params.get("seeds", [])]


def n_seeds_of(params: Mapping[str, Any]) -> int | None:
    """``params["n_seeds"]`` (else the number of seeds); None when there are none."""
    n = params.get("n_seeds")
    return int(n) if n else (len(seeds_of(params)) or None)


def opt_int(params: Mapping[str, Any], key: str) -> int | None:
    """``params[key]`` as an integer, None when absent or null."""
    return int(params[key]) if params.get(key) is not None else None
