"""The analysis artifacts: every table and figure declared once, in one registry.

Each :class:`Artifact` names its file, what it reads (run files of which methods, data-stage files,
other tables), the config values it takes (:data:`PARAM_KEYS`, resolved by the workflow), its
compute function (``"module:function"``, one module per artifact under :mod:`hasfl.analysis.tables`
and :mod:`hasfl.analysis.figures`), its title and note or caption, and where report.md shows it.
``workflow/rules/analysis.smk`` generates one rule per artifact from :data:`ARTIFACTS` and one glue
script runs any of them (:func:`hasfl.analysis.run.run_artifact`); report.md and the results page
assemble from the registry, so no table name is written in their code.

Adding a table: its module (``compute(inputs, outputs, params)`` writing ``outputs["parquet"]`` and
``outputs["md"]``, and ``display(df)`` for report.md) and one :func:`_table` entry below. Adding a
figure: its module (``compute`` writing ``outputs["png"]`` / ``outputs["pdf"]``) and one
:func:`_figure` entry. A method whose registry entry (:attr:`hasfl.registry.MethodInfo.shown_in`)
names an artifact is shown in it after the paper's methods (:func:`artifact_methods`).

Torch- and pandas-free: the Snakefile imports this module while it builds the DAG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hasfl.analysis.specs import ESTIMATOR_PAIRS, FLOOR_TOL_PCT, TABLE8_METHODS
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
    "figure_caption",
    "natural_partition",
    "seed_tables",
    "table_caption",
    "table_datasets",
    "table_methods",
]

#: The config values an artifact may take (``Artifact.params``); analysis.smk resolves each from the
#: preset (thresholds from the config block ``analysis``).
PARAM_KEYS = ("datasets", "methods", "seeds", "models", "data", "ci_level", "atol", "thresholds", "tolerance",
              "tolerances", "permutations", "permutation_seed", "comparable", "k_std", "p_min", "gamma", "warmup",
              "t_adapt", "t_norm")

#: The tables findings.json reads (hasfl.analysis.findings: each finding's tables); the batch-norm
#: sensitivity recomputes the findings from the same files.
FINDING_TABLES = ("table5_confound", "prop3_coverage", "table4b_stale_coordinates", "table3_allocation_seeds",
                  "table4_coverage_seeds", "table6_full_model_seeds", "table7_shakespeare_seeds",
                  "matched_budget_seeds", "table8_estimators_seeds", "matched_budget_estimators_seeds")


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

    def __post_init__(self) -> None:
        unknown = [k for k in self.params if k not in PARAM_KEYS]
        if unknown:
            raise ValueError(f"artifact '{self.name}': unknown params {unknown}; expected keys of PARAM_KEYS")
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


def _table(name: str, compute: str, *, title: str, **kw: Any) -> Artifact:
    return Artifact(name, "table", compute, title, **kw)


def _figure(slug: str, paper: int, title: str, methods: tuple[str, ...], run_files: tuple[str, ...], caption: str,
            *, data_clients: bool = False, floors: bool = False, tables: tuple[str, ...] = (),
            params: tuple[str, ...] = ()) -> Artifact:
    return Artifact(slug, "figure", f"hasfl.analysis.figures.{slug}:compute", title, caption, paper=paper,
                    methods=methods, run_files=run_files, manifests="first" if floors else "",
                    data_clients=data_clients, tables=tables, folder="figures", label=slug,
                    params=("datasets", "methods", "seeds", *params))


_BAND = ("Lines: mean over the {n_seeds} seeds; shaded band: plus or minus one sample standard deviation over "
         "the seeds (the seed-to-seed spread, not a confidence interval). ")
_FLOOR_LINES = ("Grey dashed line: the majority-class rate of the test set (always predicting its most common "
                "class); grey dotted line: the chance rate (1 / number of classes). ")
_FLOOR_LABEL = ("A legend entry ending in \"at floor, k of n seeds\" marks a method whose best accuracy in any round "
                "stayed within {floor_tol} points of the majority-class rate in k of its n seeds: those runs learned "
                "nothing beyond the class frequencies. Dashed curve with hollow markers: every seed at the floor; "
                "half-filled markers: some seeds. ")
_MARKERS = ("Each method has its own marker shape, placed on different rounds for different methods, so that "
            "coinciding curves stay visible. ")


_FIGURES: tuple[Artifact, ...] = (
    _figure(
        "fig2_allocation_rule", 2, "HAS-FL allocation rule", (), (),
        "The allocation rule of HAS-FL (Definition 2) at this preset's settings, not a result of training: the "
        "width a client is allocated, p = min(pmax, p_min + gamma H / H_bar), against its heterogeneity estimate "
        "relative to the population mean, H / H_bar, for three capacities pmax (the largest width the client's "
        "device can train). The width grows linearly with the estimate and stops at the client's capacity. "
        "Dashed line: p_min = {p_min}; gamma = {gamma}. Not shown: the coverage guarantee, which keeps the "
        "highest-capacity clients at full width.",
        params=("p_min", "gamma")),
    _figure(
        "fig3_convergence_allocation", 3, "Convergence of allocation strategies",
        ("hasfl", "fjord", "uniform"), ("rounds.parquet", "run.json"),
        "Test accuracy after every evaluated round of the three sub-model allocation strategies, one panel per "
        "dataset: HAS-FL (allocation by heterogeneity estimate and capacity), FjORD (random capacity tier) and "
        "Uniform (p = min(0.5, pmax) for every client). " + _BAND + _FLOOR_LINES + _FLOOR_LABEL + _MARKERS
        + "The paper (Section 4.2, CIFAR-10 and EMNIST, 200 rounds) reports HAS-FL and FjORD indistinguishable "
        "and Uniform falling from its peak; this preset's datasets, models and rounds differ, so the curves "
        "show this preset's behaviour, not a reproduction of the paper's numbers.",
        floors=True),
    _figure(
        "fig4_heterogeneity_allocation", 4, "Mean heterogeneity estimate and allocation",
        ("hasfl",), ("rounds.parquet",),
        "What HAS-FL's estimator and allocation do over the rounds, one column per dataset. Top: the smoothed "
        "heterogeneity estimate H~ (Eq. 5) averaged over all clients. Bottom: the mean allocated width p of the "
        "round's participants; dashed: the mean capacity pmax over all clients, the width every client would "
        "get at its cap. " + _BAND + "Grey shading at the left: the warm-up, rounds 1 to t0 = {warmup}, in "
        "which every client trains at its capacity and the estimate is not updated. After it the estimate is "
        "updated, and the widths reallocated, only every T_adapt = {t_adapt} rounds (thin vertical lines), so "
        "the estimate moves in steps; every T_norm = {t_norm} rounds it is rescaled to mean 1 (dotted vertical "
        "lines), which makes it fall back. The mean width moves from round to round even between "
        "reallocations because a different subset of clients takes part in each round.",
        data_clients=True, params=("warmup", "t_adapt", "t_norm")),
    _figure(
        "fig5_final_allocation", 5, "Final per-client allocation vs capacity", ("hasfl",), ("clients.parquet",),
        "Final allocation of every client in the HAS-FL runs, one panel per dataset and seed. Grey bar: the "
        "client's capacity pmax (the largest width its device can train); blue bar: the width HAS-FL allocated "
        "to it after the last reallocation. Where the blue bar fills the grey one the client sits at its "
        "capacity. Clients are in ID order; capacities are assigned per seed. The paper (Section 4.4) reports "
        "that the allocations follow the capacity tiers rather than the clients' data."),
    _figure(
        "fig6_frontier", 6, "Accuracy-capacity frontier",
        ("fedavg", "scaffold", "fedprox", "hasfl", "random_budget", "fjord", "heterofl", "uniform",
         "hasfl_nocov"), (),
        "Final test accuracy of every method against what it costs a client, one column per dataset. Top: "
        "against the average width trained and uploaded per client-round (filled marker); a cross joined to it "
        "by a thin line marks the average width allocated, which differs only for FjORD (its clients train at "
        "their capacity and distil the allocated width). Bottom: against the mean upload per client-round in "
        "MB (cost model of Table 1). Error bars: plus or minus one sample standard deviation over the "
        "{n_seeds} seeds, on both axes. Hollow marker: in every seed the method never rose more than {floor_tol} "
        "points above the majority-class rate (grey dashed line; dotted: chance rate); half-filled: in some "
        "seeds. Points that would "
        "hide each other (same cost, nearly the same accuracy: e.g. the full-model methods at width 1) are spread "
        "sideways by 3% of the axis width per point; that offset is not part of the data.",
        tables=("table3_allocation_seeds", "table4_coverage_seeds", "table6_full_model_seeds",
                "table7_shakespeare_seeds")),
    _figure(
        "fig7_convergence_full_model", 7, "Convergence vs full-model methods",
        ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json"),
        "Test accuracy after every evaluated round of HAS-FL (sub-models, about half the width on average) and "
        "of three full-model methods: FedAvg, SCAFFOLD (control variates) and FedProx (proximal term), one "
        "panel per dataset. " + _BAND + _FLOOR_LINES + _FLOOR_LABEL + _MARKERS
        + "The paper (Section 4.5) reports full-model training above HAS-FL on CIFAR-10 and EMNIST; this "
        "preset's datasets, models and rounds differ.",
        floors=True),
    _figure(
        "fig8_test_loss", 8, "Test-loss trajectories",
        ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json"),
        "Test loss (mean cross-entropy on the test set) after every evaluated round of the methods of Figure 7, "
        "one panel per dataset. " + _BAND + _FLOOR_LABEL.replace("best accuracy", "best test accuracy")
        + _MARKERS + "A loss that falls while the accuracy stays at the floor means the model is learning the "
        "class frequencies, not the task.",
        floors=True),
    _figure(
        "fig9_estimators", 9, "Which estimate tracks the data and which tracks capacity",
        ("hasfl",), ("clients.parquet", "run.json"),
        "This project's extension (the paper's Section 5 asks which data statistics can be recovered when "
        "sub-model width varies with the device). Every point is one client of a HAS-FL run (all {n_seeds} "
        "seeds in one panel): horizontal axis, the client's true label heterogeneity (total-variation "
        "distance of its label distribution from the global one, computed from the partition); vertical "
        "axis, one estimate of it, one column per estimate and one row per dataset. E0: the paper's update "
        "divergence (Eqs. 4-5); E1: E0 standardised within each capacity tier; E2: the same divergence "
        "measured on probe updates of one fixed width for every client; E3: the distance of the label "
        "histogram the client reports. Colour: the client's capacity pmax (the largest width its device "
        "can train). Thin lines: least-squares fit within each capacity tier. How to read it: an estimate "
        "that tracks capacity separates the colours into horizontal bands whatever the truth; one that "
        "tracks the data rises from left to right within every colour. Panel titles: r(E, pmax) and the "
        "partial correlation r(E, TV | pmax), pooled over the seeds in Fisher's z, with their {ci_level} "
        "intervals, and how many runs the capacity-grouped check (a permutation test of TV within the "
        "capacity tiers, as hasfl diagnose does) calls confounded, data signal or inconclusive: the same "
        "numbers as Table 8. E0 and E2 are drawn on a log scale; in the E3 panel the dotted diagonal is "
        "E3 = TV (with exact label counts the reported histograms give the truth itself).",
        data_clients=True, tables=("table8_estimators",), params=("ci_level",)),
)

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



STD_NOTE = ("Mean +- sample standard deviation (ddof = 1) over the completed seeds; accuracies and the "
            "peak-to-final delta (final - best) in percentage points.")


#: The floor column of the method tables, in one sentence.
FLOOR_NOTE = (f"Floor: in how many seeds the best accuracy of any round stayed within {FLOOR_TOL_PCT:g} points "
              "(or one test example) of the test set's majority-class rate (Table 2), i.e. the run never predicted "
              "better than the most common class.")

_TABLES: tuple[Artifact, ...] = (
    _table(
        "table1_cost", "hasfl.analysis.tables.table1_cost:compute",
        title='Table 1 -- Per-client cost as a function of sub-model width p',
        note=('Exact counts from the models (hasfl.models): params = trainable parameters of the width-p '
              'sub-model, MACs per sample (conv + linear), upload = one float32 copy of the sub-model (1 MB = 10^6 '
              'bytes); k = thousand, M = million, each model in the unit of its full width. `paper` rows are the '
              "paper's three models; `preset` rows the preset's own model configuration."),
        manifests="first",
        params=("models",),
        label="Table 1 cost",
    ),
    _table(
        "table2_datasets", "hasfl.analysis.tables.table2_datasets:compute",
        title='Table 2 -- Datasets',
        note=("From the data stage's manifest.json summaries. Majority class: accuracy of always predicting the "
              "test set's most common class; chance: 1 / classes. A run that never beats the majority class rate "
              'by more than the floor tolerance is flagged `at floor` in every table and figure.'),
        manifests="all",
        label="Table 2 datasets",
    ),
    _table(
        "table3_allocation", "hasfl.analysis.tables.method_table:compute",
        title='Table 3 -- Sub-model allocation strategies',
        paper=3,
        methods=('hasfl', 'fjord', 'uniform'),
        datasets='image',
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds"),
        seeds_file=True,
        method_table=True,
        label='table3_allocation',
    ),
    _table(
        "table4_coverage", "hasfl.analysis.tables.method_table:compute",
        title='Table 4 -- Coverage-guarantee ablation',
        paper=4,
        methods=('hasfl', 'hasfl_nocov', 'heterofl'),
        datasets='all',
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds"),
        seeds_file=True,
        method_table=True,
        label='table4_coverage',
    ),
    _table(
        "table5_confound", "hasfl.analysis.tables.table5_confound:compute",
        title='Table 5 -- Correlations of the final estimates H~ with TV and pmax (+ fedavg control)',
        note=('Per run, over the clients: Pearson r, partial r given pmax (correlation of OLS residuals), and the '
              'OLS R^2 / adjusted R^2 of log H~ on the capacity tier (categorical), on TV and on both. fedavg rows '
              '(equal widths) are the positive control.'),
        methods=("hasfl", "fedavg"),
        run_files=("clients.parquet", "run.json"),
        data_clients=True,
        params=("datasets", "methods", "seeds"),
        label="Table 5 confound",
    ),
    _table(
        "table6_full_model", "hasfl.analysis.tables.method_table:compute",
        title='Table 6 -- Comparison with full-model methods',
        paper=6,
        methods=('fedavg', 'scaffold', 'fedprox', 'hasfl', 'random_budget'),
        datasets='all',
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds"),
        seeds_file=True,
        method_table=True,
        label='table6_full_model',
    ),
    _table(
        "table7_shakespeare", "hasfl.analysis.tables.method_table:compute",
        title='Table 7 -- Allocation strategies on Shakespeare',
        paper=7,
        methods=('hasfl', 'fjord', 'uniform'),
        datasets='text',
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds"),
        seeds_file=True,
        method_table=True,
        label='table7_shakespeare',
    ),
    _table(
        "matched_budget", "hasfl.analysis.tables.matched_budget:compute",
        title='Matched budget -- HAS-FL vs random-budget, paired by seed (Section 4.4)',
        note=('Differences hasfl - random_budget over the seeds where both completed. Final accuracy: Student-t '
              'interval and paired t-test. Average width: random_budget draws its widths to match the hasfl run of '
              'the same seed, so equal widths are a property of the design, not a result; the difference is '
              'checked against the matching tolerance (`method_params.random_budget.tolerance`) and not tested.'),
        methods=("hasfl", "random_budget"),
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds", "ci_level", "tolerance"),
        seeds_file=True,
        label="Matched budget",
    ),
    _table(
        "prop3_coverage", "hasfl.analysis.tables.prop3_coverage:compute",
        title='Proposition 3 -- never-covered coordinates of the capped runs',
        note=('Only runs capped below full width are shown: p_hi = largest width any client trained '
              '(clients.parquet p_max_trained) < 1. Coordinates outside the width-p_hi mask were trained by no '
              'client; prop3_holds: all of them equal init.pt. A run with p_hi = 1 has no such coordinate and '
              'nothing to check (counted below the table; every run is in the Parquet file).'),
        all_methods=True,
        run_files=("clients.parquet", "init.pt", "final.pt", "run.json"),
        manifests="first",
        params=("models", "atol"),
        heavy=True,
        nested_only=True,
        label="Proposition 3",
    ),
    _table(
        "table4b_stale_coordinates", "hasfl.analysis.tables.table4b_stale_coordinates:compute",
        title='Table 4b -- coordinates untrained since the warm-up, capped runs (Section 4.3)',
        note=('Only runs capped after t0 are shown (every run is in the Parquet file). Per run: p_hi_after_t0 = '
              'largest width any participant trained after the warm-up round t0 (clients.parquet '
              'p_max_trained_after_warmup); coordinates outside that width (stale) were trained by no one since '
              't0. frozen_since_t0: all of them equal in warmup.pt and final.pt (F5). For runs capped after t0, '
              'test accuracy (%) of the full final model, of the same model with the stale coordinates reset to '
              'init.pt, and of its sub-model at width p_hi_after_t0 (stale coordinates dropped); acc_logged_pct is '
              "the run's own final evaluation; final_at_floor: it is within the floor tolerance of the test set's "
              'majority-class rate.'),
        all_methods=True,
        run_files=("clients.parquet", "init.pt", "warmup.pt", "final.pt", "run.json"),
        manifests="first",
        raw=True,
        params=("models", "data", "atol"),
        heavy=True,
        nested_only=True,
        summary="hasfl.analysis.tables.table4b_stale_coordinates:summary",
        section="What the coverage ablation shows (Table 4b)",
        label="Table 4b stale coordinates",
    ),
    _table(
        "table8_estimators", "hasfl.analysis.tables.table8_estimators:compute",
        title="Table 8 -- Capacity-separable estimators against TV and capacity (this project's extension)",
        note=('Per dataset, run method and estimate E (E0 update divergence, E1 its within-tier z-score, E2 '
              'fixed-width probe divergence, E3 reported label histograms), over the clients of each run and '
              "pooled over the seeds in Fisher's z (fixed effect; weights n - 3, n - 4 for the partial "
              'correlation) with intervals at the configured level: r(E, TV), r(E, pmax), partial r(E, TV | pmax), '
              'and the within-tier r(E, TV) (pooled over tiers, then seeds); adjusted R^2 of E on the capacity '
              'tier (categorical) and on TV (mean over seeds); the verdicts of the capacity-grouped check (hasfl '
              'diagnose: permutation test of TV within tiers) per run. hasfl runs: sub-model widths follow '
              'capacity; fedavg runs: every client trains the full model (the positive control). Per-run rows in '
              'the _seeds file.'),
        methods=TABLE8_METHODS,
        run_files=("clients.parquet", "rounds.parquet", "run.json"),
        data_clients=True,
        manifests="first",
        params=("datasets", "methods", "seeds", "ci_level", "permutations", "permutation_seed"),
        seeds_file=True,
        summary="hasfl.analysis.tables.table8_estimators:summary",
        section="Capacity-separable estimators (Table 8, F7, F8, Figure 9)",
        label="Table 8 estimators",
    ),
    _table(
        "matched_budget_estimators", "hasfl.analysis.tables.matched_budget_estimators:compute",
        title=('Matched budget of the estimator methods -- allocation by E2 / E3 vs its random-budget control, '
               'paired by seed'),
        note=('Differences (allocating method - its random-budget control) over the seeds where both completed, '
              'per dataset and pair: hasfl_probe vs random_budget_probe (Eq. 6 fed by E2) and hasfl_reported vs '
              'random_budget_reported (fed by E3). Final accuracy: Student-t interval and paired t-test (F8 tests '
              'it); average width: matched by construction within method_params.<control>.tolerance, not tested.'),
        methods=tuple(m for _pair, alloc, control, _e in ESTIMATOR_PAIRS for m in (alloc, control)),
        run_files=("rounds.parquet", "run.json"),
        manifests="first",
        params=("datasets", "methods", "seeds", "ci_level", "tolerances"),
        seeds_file=True,
        label="Matched budget of the estimator methods",
    ),
    _table(
        "bn_sensitivity", "hasfl.analysis.tables.bn_sensitivity:compute",
        title='Batch-norm sensitivity -- final accuracy of every run under each BN statistics mode',
        all_methods=True,
        run_files=("final.pt", "run.json"),
        manifests="first",
        data_tables=True,
        raw=True,
        tables=FINDING_TABLES,
        extra_outputs=("bn_sensitivity_findings",),
        params=("models", "data", "datasets", "thresholds"),
        heavy=True,
        in_tables_section=False,
        summary="hasfl.analysis.tables.bn_sensitivity:summary",
        section="Batch-norm sensitivity",
        label="Batch-norm sensitivity",
    ),
    _table(
        "comparison", "hasfl.analysis.tables.comparison:compute",
        title='Comparison with the published values (Tables 1, 3-7)',
        note=("One row per published value (Tables 1, 3-7) of a dataset this preset ran: ours, the paper's, and "
              'whether ours lies within the published mean +- k std (Table 1: rounds to the printed value). Table '
              "1's model costs are comparable at any preset; the results of Tables 3-7 only where the preset ran "
              "the paper's configuration (the others are listed as not comparable, with the config keys that "
              'differ).'),
        folder="",
        published=True,
        tables=("table1_cost", "table3_allocation", "table4_coverage", "table5_confound", "table6_full_model", "table7_shakespeare"),
        params=("datasets", "comparable", "k_std"),
        in_tables_section=False,
        summary="hasfl.analysis.tables.comparison:summary",
        section="Comparison with the published values",
        summary_after=True,
        label="Comparison with the paper",
    ),
)


ARTIFACTS: dict[str, Artifact] = {a.name: a for a in (*_TABLES, *_FIGURES)}
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
    return bool(getattr(info, "natural_partition", dataset == "shakespeare"))


def table_datasets(spec: Artifact, datasets: Sequence[str]) -> list[str]:
    """The preset datasets ``spec`` covers, in preset order."""
    if spec.datasets == "all":
        return list(datasets)
    natural = spec.datasets == "text"
    return [d for d in datasets if natural_partition(d) == natural]


def table_methods(spec: Artifact, methods: Sequence[str]) -> list[str]:
    """The methods of ``spec`` the preset runs (the others are reported as "not run")."""
    return [m for m in artifact_methods(spec) if m in methods]


def seed_tables() -> list[str]:
    """The tables with a per-run companion ``<name>_seeds.parquet``."""
    return [n for n, a in TABLES.items() if a.seeds_file]


def table_caption(name: str) -> str:
    """The caption of table ``name`` in Snakemake's HTML report: its title and note."""
    art = TABLES[name]
    note = art.note or (f"{STD_NOTE} {FLOOR_NOTE}" if art.method_table else "")
    return f"{art.title}. {note}".strip()
