"""Where a results folder keeps its finished outputs: the folder of a data stage, a run and a run's
evaluations, relative to the results folder (``<results_dir>/<name>``), and the one walker that lists them. The rules
(workflow/rules/common.smk), the session, the store, ``verify``, ``adopt``, ``gc``, the crate and the exporters list
finished folders here.

Torch-free; imports nothing of ours (tests/test_layout.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FOLDER_PATTERNS", "MANIFEST", "Folder", "data_folder", "eval_folder", "finished_folders", "kind_dir",
           "kind_root", "parse_folder", "result_folders", "run_folder"]

#: The file whose presence marks a folder finished (written last; :mod:`hasfl.integrity`).
MANIFEST = "manifest.json"

#: Where a results folder keeps its finished outputs, by kind: data stages, runs and the runs' evaluations (one folder
#: per run and table, :mod:`hasfl.analysis.evaluations`).
FOLDER_PATTERNS = {"data": "data/*/seed*", "runs": "runs/*/*/seed*", "evals": "evals/*/*/seed*/*"}


def kind_dir(kind: str) -> str:
    """The name of the folder that holds every folder of ``kind`` in a results folder (``data``, ``runs``, ``evals``):
    a string, for the rules' patterns, which Snakemake matches as written."""
    return FOLDER_PATTERNS[kind].split("/", 1)[0]


def kind_root(results: str | Path, kind: str) -> Path:
    """The folder of ``results`` that holds every folder of ``kind`` (``<results>/data``, ``runs``, ``evals``)."""
    return Path(results) / kind_dir(kind)


def data_folder(dataset: str, seed: int | str) -> str:
    """The data-stage folder of ``dataset`` x ``seed`` (``data/<dataset>/seed<s>``); with ``"{dataset}"`` and
    ``"{seed}"``, the rules' wildcard pattern."""
    return f"data/{dataset}/seed{seed}"


def run_folder(dataset: str, method: str, seed: int | str) -> str:
    """The run folder of ``method`` on ``dataset`` x ``seed`` (``runs/<dataset>/<method>/seed<s>``)."""
    return f"runs/{dataset}/{method}/seed{seed}"


def eval_folder(dataset: str, method: str, seed: int | str) -> str:
    """The folder of one run's evaluations (``evals/<dataset>/<method>/seed<s>``; one sub-folder per table)."""
    return f"evals/{dataset}/{method}/seed{seed}"


@dataclass(frozen=True)
class Folder:
    """What a results-relative folder name says (:func:`parse_folder`): its ``kind`` (``data``, ``runs``, ``evals``),
    dataset, seed, and for a run or its evaluations the method (for one evaluation, the table too)."""

    kind: str
    dataset: str
    seed: int
    method: str | None = None
    table: str | None = None

    @property
    def data(self) -> str:
        """The data-stage folder this folder's run reads (or this data stage)."""
        return data_folder(self.dataset, self.seed)

    @property
    def run(self) -> str | None:
        """The run folder of a run or its evaluations (None for a data stage)."""
        return None if self.method is None else run_folder(self.dataset, self.method, self.seed)


_NAMES = {"data": re.compile(r"data/(?P<dataset>[^/]+)/seed(?P<seed>\d+)"),
          "runs": re.compile(r"runs/(?P<dataset>[^/]+)/(?P<method>[^/]+)/seed(?P<seed>\d+)"),
          "evals": re.compile(r"evals/(?P<dataset>[^/]+)/(?P<method>[^/]+)/seed(?P<seed>\d+)(?:/(?P<table>[^/]+))?")}


def parse_folder(rel: str | Path) -> Folder | None:
    """The :class:`Folder` a results-relative folder name (``data/<d>/seed<s>``, ``runs/<d>/<m>/seed<s>``,
    ``evals/<d>/<m>/seed<s>[/<table>]``) names, None for any other name: the inverse of :func:`data_folder`,
    :func:`run_folder` and :func:`eval_folder`."""
    name = Path(rel).as_posix()
    for kind, pattern in _NAMES.items():
        hit = pattern.fullmatch(name)
        if hit:
            return Folder(kind, hit["dataset"], int(hit["seed"]), hit.groupdict().get("method"),
                          hit.groupdict().get("table"))
    return None


def result_folders(results: str | Path, kind: str) -> list[Path]:
    """The folders of ``kind`` (:data:`FOLDER_PATTERNS`) under ``results``, sorted; files there (Snakemake's
    ``.snakemake_timestamp`` in a run's evaluations folder) are none."""
    return sorted(f for f in Path(results).glob(FOLDER_PATTERNS[kind]) if f.is_dir())


def finished_folders(results: str | Path, kind: str) -> list[Path]:
    """The folders of ``kind`` under ``results`` that hold a :data:`MANIFEST` (finished), sorted."""
    return [f for f in result_folders(results, kind) if (f / MANIFEST).is_file()]
