"""The file contract as a per-run evaluation reads it: which run or data stage a path belongs to, its files grouped
by run, a JSON file, the data-stage manifests' summaries and the preset's model spec per dataset.

Layout (``<results>`` = ``<results_dir>/<name>``):

* ``<results>/data/<dataset>/seed<seed>/{partition,clients}.parquet, manifest.json``
* ``<results>/runs/<dataset>/<method>/seed<seed>/{rounds,clients}.parquet, init.pt, final.pt, run.json``

Imports nothing of the analysis (:mod:`hasfl.analysis.per_run`): the code of every evaluation's store key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RunKey", "group_data_files", "group_run_files", "manifest_summaries", "parse_data_path", "parse_run_path",
           "preset_models", "read_json"]

PathLike = str | Path
RunKey = tuple[str, str, int]  # (dataset, method, seed)

_RUN_RE = re.compile(r"runs/(?P<dataset>[^/]+)/(?P<method>[^/]+)/seed(?P<seed>\d+)/(?P<file>[^/]+)$")
_DATA_RE = re.compile(r"data/(?P<dataset>[^/]+)/seed(?P<seed>\d+)/(?P<file>[^/]+)$")


def parse_run_path(path: str | Path) -> tuple[RunKey, str]:
    """``((dataset, method, seed), file name)`` of a training-stage file path."""
    m = _RUN_RE.search(Path(path).as_posix())
    if m is None:
        raise ValueError(f"'{path}' is not a run file (expected .../runs/<dataset>/<method>/seed<seed>/<file>)")
    return (m["dataset"], m["method"], int(m["seed"])), m["file"]


def parse_data_path(path: str | Path) -> tuple[tuple[str, int], str]:
    """``((dataset, seed), file name)`` of a data-stage file path."""
    m = _DATA_RE.search(Path(path).as_posix())
    if m is None:
        raise ValueError(f"'{path}' is not a data-stage file (expected .../data/<dataset>/seed<seed>/<file>)")
    return (m["dataset"], int(m["seed"])), m["file"]


def group_run_files(paths: Iterable[str | Path]) -> dict[RunKey, dict[str, Path]]:
    """Run files grouped by run: ``{(dataset, method, seed): {file name: path}}``."""
    out: dict[RunKey, dict[str, Path]] = {}
    for p in paths:
        key, name = parse_run_path(p)
        out.setdefault(key, {})[name] = Path(p)
    return dict(sorted(out.items()))


def group_data_files(paths: Iterable[str | Path]) -> dict[tuple[str, int], dict[str, Path]]:
    """Data-stage files grouped: ``{(dataset, seed): {file name: path}}``."""
    out: dict[tuple[str, int], dict[str, Path]] = {}
    for p in paths:
        key, name = parse_data_path(p)
        out.setdefault(key, {})[name] = Path(p)
    return dict(sorted(out.items()))


def read_json(path: str | Path) -> dict[str, Any]:
    """A JSON file's content (a mapping)."""
    return json.loads(Path(path).read_text())


def manifest_summaries(manifests: Sequence[PathLike]) -> dict[str, list[dict[str, Any]]]:
    """Dataset -> the ``summary`` block of each of its data-stage manifests."""
    out: dict[str, list[dict[str, Any]]] = {}
    for (dataset, _seed), files in group_data_files(manifests).items():
        out.setdefault(dataset, []).append(read_json(files["manifest.json"])["summary"])
    return out


def preset_models(manifests: Sequence[PathLike], models: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{dataset: {model, in_shape, num_classes}}`` from the manifests and the config model blocks."""
    summaries = manifest_summaries(manifests)
    out = {}
    for dataset, model in models.items():
        if dataset not in summaries:
            raise ValueError(f"no data-stage manifest for dataset '{dataset}' among the inputs")
        s = summaries[dataset][0]
        out[dataset] = {"model": dict(model), "in_shape": list(s["input_shape"]), "num_classes": int(s["classes"])}
    return out
