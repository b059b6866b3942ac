"""The analysis artifacts: every table and figure declared once, in one registry.

Each :class:`Artifact` names its file, what it reads (run files of which methods, data-stage files,
other tables), the config values it takes (:data:`PARAM_KEYS`, resolved by the workflow), its
compute function (``"module:function"``, one module per artifact under :mod:`hasfl.analysis.tables`
and :mod:`hasfl.analysis.figures`), its title and note or caption, and where report.md shows it.
``workflow/rules/analysis.smk`` generates one rule per artifact from :data:`ARTIFACTS` and one glue
script runs any of them (:func:`hasfl.analysis.jobs.run_artifact`); report.md assembles from the
registry, so no table name is written in its code.

Adding a table: its module (``compute(inputs, outputs, params)`` writing ``outputs["parquet"]`` and
``outputs["md"]``, and ``display(df)`` for report.md) and one :func:`table_entry` in
:mod:`~hasfl.analysis.artifacts.table_entries`. Adding a figure: its module (``compute`` writing
``outputs["png"]`` / ``outputs["pdf"]``) and one :func:`figure_entry` in
:mod:`~hasfl.analysis.artifacts.figure_entries`. The entries' shape is :mod:`~hasfl.analysis.artifacts.spec`. A method whose registry entry (:attr:`hasfl.registry.MethodInfo.shown_in`)
names an artifact is shown in it after the paper's methods (:func:`artifact_methods`).

Torch- and pandas-free: the Snakefile imports this module while it builds the DAG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hasfl.analysis.artifacts.figure_entries import FIGURE_ENTRIES
from hasfl.analysis.artifacts.spec import PARAM_KEYS, Artifact, figure_entry, table_entry
from hasfl.analysis.artifacts.table_entries import FINDING_TABLES, FLOOR_NOTE, STD_NOTE, TABLE_ENTRIES
from hasfl.analysis.specs import FLOOR_TOL_PCT
from hasfl.registry import DATASETS, METHODS

__all__ = [
    "ARTIFACTS",
    "FIGURES",
    "FINDING_TABLES",
    "FLOOR_NOTE",
    "METHOD_TABLES",
    "PARAM_KEYS",
    "STD_NOTE",
    "TABLES",
    "Artifact",
    "artifact_methods",
    "figure_entry",
    "figure_caption",
    "natural_partition",
    "run_tables",
    "table_caption",
    "table_datasets",
    "table_entry",
    "table_methods",
]

ARTIFACTS: dict[str, Artifact] = {a.name: a for a in (*TABLE_ENTRIES, *FIGURE_ENTRIES)}
#: The tables, in report order (report.md's table section, the comparison's inputs), and the figures.
TABLES: dict[str, Artifact] = {n: a for n, a in ARTIFACTS.items() if a.kind == "table"}
FIGURES: dict[str, Artifact] = {n: a for n, a in ARTIFACTS.items() if a.kind == "figure"}
#: Paper Tables 3, 4, 6, 7: accuracy per method.
METHOD_TABLES: dict[str, Artifact] = {n: a for n, a in TABLES.items() if a.method_table}


def artifact_methods(art: Artifact) -> tuple[str, ...]:
    """The methods ``art`` shows: the paper's, then every registry method whose entry names it
    (:attr:`hasfl.registry.MethodInfo.shown_in`), in registry order."""
    extra = tuple(m for m, info in METHODS.items() if art.name in info.shown_in and m not in art.methods)
    return (*art.methods, *extra)


def natural_partition(dataset: str) -> bool:
    """The dataset's clients are natural (no Dirichlet partition; paper Section 4.6)."""
    info = DATASETS.get(dataset)
    return info is not None and info.natural_partition


def table_datasets(spec: Artifact, datasets: Sequence[str]) -> list[str]:
    """The preset datasets ``spec`` covers, in preset order."""
    if spec.datasets == "all":
        return list(datasets)
    natural = spec.datasets == "text"
    return [d for d in datasets if natural_partition(d) == natural]


def run_tables(dataset: str, method: str, datasets: Sequence[str], methods: Sequence[str]) -> list[str]:
    """The tables with a per-run evaluation (:attr:`Artifact.per_run`) that read the run of ``method`` on ``dataset``
    in a preset of ``datasets`` x ``methods``, in registry order: the evaluate job of that run (rule ``evaluate``) and
    the pre-flight's price of it."""
    out = []
    for name, art in ARTIFACTS.items():
        if not art.per_run or dataset not in table_datasets(art, datasets) or method not in methods:
            continue
        readers = methods if art.all_methods else artifact_methods(art)
        if method in readers and (not art.nested_only or (method in METHODS and METHODS[method].nested)):
            out.append(name)
    return out


def table_methods(spec: Artifact, methods: Sequence[str]) -> list[str]:
    """The methods of ``spec`` the preset runs (the others are reported as "not run")."""
    return [m for m in artifact_methods(spec) if m in methods]


def table_caption(name: str) -> str:
    """The caption of table ``name`` in Snakemake's HTML report: its title and note."""
    art = TABLES[name]
    note = art.note or (f"{STD_NOTE} {FLOOR_NOTE}" if art.method_table else "")
    return f"{art.title}. {note}".strip()


def figure_caption(slug: str, context: Mapping[str, Any] | None = None) -> str:
    """The caption of figure ``slug`` with the preset's numbers filled in.

    ``context`` may give ``n_seeds``, ``p_min``, ``gamma``, ``warmup``, ``t_adapt``,
    ``t_norm``, ``floor_tol`` and ``ci_level`` (written as a percentage); a missing one is written
    as its symbol (``ci_level``: 95%).
    """
    ctx: dict[str, Any] = {"n_seeds": "n", "p_min": "p_min", "gamma": "gamma", "warmup": "t0 (hasfl.warmup)",
                           "t_adapt": "hasfl.t_adapt", "t_norm": "hasfl.t_norm", "floor_tol": f"{FLOOR_TOL_PCT:g}",
                           "ci_level": "95%"}
    given = dict(context or {})
    ctx.update({k: (f"{v:g}" if isinstance(v, float) else v) for k, v in given.items() if v is not None})
    if isinstance(given.get("ci_level"), (int, float)):
        ctx["ci_level"] = f"{float(given['ci_level']):.0%}"
    return FIGURES[slug].caption.format_map(ctx)
