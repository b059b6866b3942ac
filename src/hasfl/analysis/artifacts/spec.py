"""What an analysis artifact is: :class:`Artifact`, the config values it may take and the two entry
constructors (:func:`table_entry`, :func:`figure_entry`). Torch- and pandas-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PARAM_KEYS", "Artifact", "figure_entry", "method_table_entry", "table_entry"]

#: The config values an artifact may take (``Artifact.params``); analysis.smk resolves each from the
#: preset (thresholds from the config block ``analysis``; ``last_rounds``: its ``table4c_last_rounds``,
#: :data:`hasfl.analysis.specs.TABLE_SETTINGS`).
PARAM_KEYS = ("datasets", "methods", "seeds", "models", "data", "ci_level", "atol", "thresholds", "tolerance",
              "tolerances", "permutations", "permutation_seed", "comparable", "k_std", "p_min", "gamma", "warmup",
              "t_adapt", "t_norm", "attenuation", "last_rounds", "server_noise")


@dataclass(frozen=True)
class Artifact:
    """One table or figure of the analysis.

    Attributes:
        name: the file stem (``tables/<name>.parquet`` / ``.md``, ``figures/<name>.png`` / ``.pdf``;
            ``folder`` ``""``: directly in the results folder).
        kind: ``"table"`` or ``"figure"``.
        compute: ``"module:function"``, called as ``compute(inputs, outputs, params)``.
        title: the heading (tables) or the figure's title.
        note: a table's note (report.md, its .md file, the HTML report) or a figure's caption template
            (:func:`figure_caption`).
        paper: the paper's table or figure number (None: this project's own).
        methods: the paper's methods, in its order (:func:`artifact_methods` adds the registry's).
        all_methods: it reads the runs of every method the preset runs.
        datasets: ``"all"``, ``"image"`` (Dirichlet-partitioned) or ``"text"`` (natural clients).
        run_files: which files of each run folder it reads.
        manifests: data-stage manifest.json of the first seed (``"first"``), of every seed (``"all"``) or none.
        data_clients / data_tables: the data stage's clients.parquet (every dataset x seed) / its
            partition.parquet and clients.parquet.
        raw: the datasets' raw files (it evaluates models).
        published: the published values (src/hasfl/analysis/published.yaml).
        tables: other artifacts' files it reads (``<name>`` or ``<name>_seeds``).
        params: keys of :data:`PARAM_KEYS` it takes.
        seeds_file: it also writes ``<name>_seeds.parquet`` (one row per run).
        extra_outputs: further Parquet files it writes beside its own (``tables/<extra>.parquet``).
        heavy: it loads models and data (more memory; a cluster job, not a local one).
        method_table: a table of accuracy per method (its floor column feeds report.md's floor section).
        in_tables_section: report.md lists it among the tables (else it has a section of its own).
        summary: ``"module:function"`` giving report.md's own section on it (``summary(ctx)`` with a
            :class:`hasfl.analysis.tables.base.ReportContext` -> Markdown), shown before the tables
            (after them when ``summary_after``) when the table is among the report's; ``section`` is its
            heading.
        nested_only: it reads only the runs of methods with nested sub-models
            (:attr:`hasfl.registry.MethodInfo.nested`; Proposition 3's coordinate checks).
        label: its name in Snakemake's HTML report.
        results_page: its position on the results page (``hasfl results-page``; 0: not shown there);
            ``page_fallback``: the figure shown in its place when it is missing.
        per_run: ``"module:function"`` computing one run's rows from that run alone
            (:mod:`hasfl.analysis.evaluations`): the DAG then evaluates each run in a job of its own (rule
            ``evaluate``, kept in the run store), which reads the entry's ``run_files``, ``data_tables``, ``raw`` and
            the config values of ``params`` among :data:`hasfl.analysis.evaluations.PER_RUN_PARAMS`, and the table's
            job gathers the rows (``inputs["evals"]``) with the other tables and manifests it names.
    """

    name: str
    kind: str
    compute: str
    title: str
    note: str = ""
    paper: int | None = None
    methods: tuple[str, ...] = ()
    all_methods: bool = False
    datasets: str = "all"
    run_files: tuple[str, ...] = ()
    manifests: str = ""
    data_clients: bool = False
    data_tables: bool = False
    raw: bool = False
    published: bool = False
    tables: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    seeds_file: bool = False
    extra_outputs: tuple[str, ...] = ()
    heavy: bool = False
    method_table: bool = False
    in_tables_section: bool = True
    summary: str | None = None
    section: str = ""
    summary_after: bool = False
    nested_only: bool = False
    folder: str = "tables"
    label: str = ""
    results_page: int = 0
    page_fallback: str | None = None
    per_run: str | None = None

    def __post_init__(self) -> None:
        unknown = [k for k in self.params if k not in PARAM_KEYS]
        if unknown:
            raise ValueError(f"artifact '{self.name}': unknown params {unknown}; expected keys of PARAM_KEYS")
        if self.per_run is not None and (self.kind != "table" or not self.run_files):
            raise ValueError(f"artifact '{self.name}': a per-run evaluation belongs to a table that reads run files")
        if self.per_run is not None and "models" not in self.params:
            # the evaluate job hands each run its model spec from this param (hasfl.analysis.per_run.base.run_inputs)
            raise ValueError(f"artifact '{self.name}': a per-run evaluation needs 'models' among its params (each "
                             "run's model spec); expected params=(\"models\", ...)")
        if self.datasets not in ("all", "image", "text"):
            raise ValueError(f"artifact '{self.name}': datasets must be 'all', 'image' or 'text'")

    @property
    def floors(self) -> bool:
        """It reads the data-stage manifests (the accuracy floors)."""
        return bool(self.manifests)

    @property
    def caption(self) -> str:
        """A figure's caption template (its note)."""
        return self.note

    @property
    def paper_figure(self) -> int | None:
        """The paper's figure number (figures)."""
        return self.paper


def table_entry(name: str, compute: str, *, title: str, **kw: Any) -> Artifact:
    """A table's entry: its name, compute function, title and the fields of :class:`Artifact`."""
    return Artifact(name, "table", compute, title, **kw)


def method_table_entry(name: str, paper: int, title: str, methods: tuple[str, ...], datasets: str,
                       **kw: Any) -> Artifact:
    """A paper table of accuracy per method (Tables 3, 4, 6, 7): its methods and datasets, read from every
    run's rounds.parquet and run.json, with the floors of the data-stage manifests and a per-run file."""
    return table_entry(name, "hasfl.analysis.tables.method_table:compute", title=title, paper=paper, methods=methods,
                       datasets=datasets, run_files=("rounds.parquet", "run.json"), manifests="first",
                       params=("datasets", "methods", "seeds"), seeds_file=True, method_table=True, label=name, **kw)


def figure_entry(slug: str, paper: int, title: str, methods: tuple[str, ...], run_files: tuple[str, ...], caption: str,
            *, data_clients: bool = False, floors: bool = False, tables: tuple[str, ...] = (),
            params: tuple[str, ...] = (), results_page: int = 0, page_fallback: str | None = None) -> Artifact:
    """A figure's entry: ``figures/<slug>.png`` drawn by ``hasfl.analysis.figures.<slug>:compute``."""
    return Artifact(slug, "figure", f"hasfl.analysis.figures.{slug}:compute", title, caption, paper=paper,
                    methods=methods, run_files=run_files, manifests="first" if floors else "",
                    data_clients=data_clients, tables=tables, folder="figures", label=slug,
                    results_page=results_page, page_fallback=page_fallback,
                    params=("datasets", "methods", "seeds", *params))
