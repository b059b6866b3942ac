"""What each analysis output covers: light constants shared by the rules and the code.

This module imports nothing heavy (no torch, no matplotlib) because the Snakemake
rule file imports it while building the DAG.

* :data:`METHOD_TABLES` -- paper Tables 3, 4, 6 and 7: which methods, which datasets.
* :data:`FIGURES` -- paper Figures 2-8: the slug of each, the run files it reads and its caption
  (:func:`figure_caption`, the one text shown under the figure in report.md and in
  Snakemake's HTML report).
* :data:`TABLE_TITLES` / :data:`TABLE_NOTES` -- what each table is (:func:`table_caption`).
* :data:`FLOOR_TOL_PCT` -- how close to the majority-class rate a run must stay to count as
  "at the floor" (:func:`floor_tolerance_pct`).
* :data:`MARGINS` / :data:`DEFAULT_THRESHOLDS` -- every margin and test setting of the
  findings (config block ``analysis``) with its bounds.
* :data:`ESTIMATORS` -- the four per-client heterogeneity estimates every run logs (E0-E3, the
  paper's Section 5 "natural next step"), :data:`TABLE8_METHODS` / :data:`ESTIMATOR_PAIRS` -- the
  runs Table 8 and the matched-budget comparison of the estimator methods read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_THRESHOLDS",
    "MARGINS",
    "MarginSpec",
    "alpha_of",
    "FIGURES",
    "FLOOR_TOL_PCT",
    "FigureSpec",
    "figure_caption",
    "floor_tolerance_pct",
    "FLOOR_NOTE",
    "STD_NOTE",
    "TABLE_NOTES",
    "TABLE_TITLES",
    "table_caption",
    "METHOD_LABELS",
    "METHOD_TABLES",
    "MethodTableSpec",
    "NATURAL_PARTITION_DATASETS",
    "STALE_RUN_FILES",
    "STALE_TABLE",
    "BN_FINDINGS_TABLE",
    "BN_RUN_FILES",
    "BN_TABLE",
    "DATASET_LABELS",
    "ESTIMATORS",
    "ESTIMATOR_FIGURE",
    "ESTIMATOR_PAIRS",
    "EstimatorSpec",
    "MB_ESTIMATORS_TABLE",
    "TABLE8",
    "TABLE8_METHODS",
    "TABLE8_PERMUTATIONS",
    "TABLE8_PERMUTATION_SEED",
    "resolve_thresholds",
    "table_datasets",
    "table_methods",
]

#: Datasets whose clients are natural (no Dirichlet partition; paper Section 4.6).
NATURAL_PARTITION_DATASETS = frozenset({"shakespeare"})

DATASET_LABELS = {"cifar10": "CIFAR-10", "emnist": "EMNIST", "shakespeare": "Shakespeare", "digits": "Digits"}
METHOD_LABELS = {
    "hasfl": "HAS-FL", "hasfl_nocov": "HAS-FL (no coverage)", "heterofl": "HeteroFL", "fjord": "FjORD",
    "uniform": "Uniform", "random_budget": "Random-budget", "fedavg": "FedAvg", "scaffold": "SCAFFOLD",
    "fedprox": "FedProx", "hasfl_probe": "HAS-FL (probe)", "random_budget_probe": "Random-budget (probe)",
    "hasfl_reported": "HAS-FL (reported)", "random_budget_reported": "Random-budget (reported)",
}


@dataclass(frozen=True)
class EstimatorSpec:
    """One per-client heterogeneity estimate of the run's clients.parquet (final values)."""

    id: str
    name: str
    column: str
    label: str
    what: str


#: The four estimates every run logs (docs/decisions.md "Capacity-separable estimators").
ESTIMATORS: tuple[EstimatorSpec, ...] = (
    EstimatorSpec("E0", "update", "h_tilde_final", "E0 update divergence",
                  "the paper's estimate: divergence of the client's sub-model update from the aggregate on the "
                  "coordinates it trained (Eq. 4), smoothed over rounds (Eq. 5)"),
    EstimatorSpec("E1", "within_tier", "est_within_tier_final", "E1 within-tier z-score",
                  "E0 with the capacity tiers taken out: the z-score of log E0 among the clients of the same "
                  "capacity pmax (centred per tier, so it cannot order clients across tiers)"),
    EstimatorSpec("E2", "probe", "est_probe_final", "E2 fixed-width probe",
                  "Eqs. 4-5 on probe updates that every participant trains at one fixed width (the smallest "
                  "tier by default), so every client is measured with the same sub-model"),
    EstimatorSpec("E3", "reported", "est_reported", "E3 reported labels",
                  "total-variation distance of the label histogram each client reports once to the pooled "
                  "reports (exact counts by default; Laplace noise with estimators.reported.epsilon)"),
)

#: Runs whose estimates Table 8 reads: the sub-model method (hasfl), the equal-width positive control
#: (fedavg), and the methods that allocate by E2 / E3 when the preset runs them.
TABLE8_METHODS = ("hasfl", "fedavg", "hasfl_probe", "hasfl_reported")
#: Allocation by a capacity-separable estimator vs its matched random-budget control (F8):
#: (pair name, allocating method, control, the estimator it allocates by).
ESTIMATOR_PAIRS = (("probe", "hasfl_probe", "random_budget_probe", "E2"),
                   ("reported", "hasfl_reported", "random_budget_reported", "E3"))
TABLE8 = "table8_estimators"
MB_ESTIMATORS_TABLE = "matched_budget_estimators"
ESTIMATOR_FIGURE = "fig9_estimators"
#: Permutation test within capacity tiers (hasfl.analysis.diagnose): permutations per run and
#: estimator, and the fixed seed they are drawn from (p-values resolve to 1/1000).
TABLE8_PERMUTATIONS = 999
TABLE8_PERMUTATION_SEED = 0


@dataclass(frozen=True)
class MethodTableSpec:
    """One accuracy table of the paper: its methods and which datasets it covers.

    ``datasets`` is ``"image"`` (every preset dataset but the natural-partition ones),
    ``"text"`` (only those) or ``"all"``.
    """

    name: str
    paper_table: int
    title: str
    methods: tuple[str, ...]
    datasets: str


METHOD_TABLES: dict[str, MethodTableSpec] = {
    s.name: s
    for s in (
        MethodTableSpec("table3_allocation", 3, "Sub-model allocation strategies", ("hasfl", "fjord", "uniform"), "image"),
        MethodTableSpec("table4_coverage", 4, "Coverage-guarantee ablation", ("hasfl", "hasfl_nocov", "heterofl"), "all"),
        MethodTableSpec("table6_full_model", 6, "Comparison with full-model methods",
                        ("fedavg", "scaffold", "fedprox", "hasfl", "random_budget"), "all"),
        MethodTableSpec("table7_shakespeare", 7, "Allocation strategies on Shakespeare", ("hasfl", "fjord", "uniform"), "text"),
    )
}


def table_datasets(spec: MethodTableSpec, datasets: Sequence[str]) -> list[str]:
    """The preset datasets ``spec`` covers, in preset order."""
    if spec.datasets == "all":
        return list(datasets)
    natural = spec.datasets == "text"
    return [d for d in datasets if (d in NATURAL_PARTITION_DATASETS) == natural]


def table_methods(spec: MethodTableSpec, methods: Sequence[str]) -> list[str]:
    """The methods of ``spec`` the preset runs (the others are reported as "not run")."""
    return [m for m in spec.methods if m in methods]


#: Section 4.3 coverage ablation, what the stale coordinates do: name and run files.
STALE_TABLE = "table4b_stale_coordinates"
STALE_RUN_FILES = ("clients.parquet", "init.pt", "warmup.pt", "final.pt", "run.json")

#: Batch-norm sensitivity (hasfl.analysis.bn_sensitivity): every run's final model under every BN mode
#: (the table), and each finding's verdict under the other modes (its companion Parquet file).
BN_TABLE = "bn_sensitivity"
BN_FINDINGS_TABLE = "bn_sensitivity_findings"
BN_RUN_FILES = ("final.pt", "run.json")


#: A run is *at the floor* when its best test accuracy over all evaluated rounds stays within
#: this many percentage points of the test set's majority-class rate (and at least one test
#: example above it): it never learned more than the class frequencies. docs/decisions.md
#: ("Runs at the floor") justifies the value.
FLOOR_TOL_PCT = 0.5


def floor_tolerance_pct(test_size: int | None) -> float:
    """The floor tolerance in points: :data:`FLOOR_TOL_PCT`, or one test example if that is more."""
    one_example = 100.0 / test_size if test_size else 0.0
    return max(FLOOR_TOL_PCT, one_example)


@dataclass(frozen=True)
class FigureSpec:
    """One paper figure: file slug, the methods whose runs it reads, which run files, its caption.

    ``floors``: the figure plots accuracy (or the runs' losses) and needs the data-stage
    manifests for the majority-class and chance rates. ``caption`` is a template for
    :func:`figure_caption` (plain text, also valid reStructuredText).
    """

    slug: str
    paper_figure: int
    title: str
    methods: tuple[str, ...]
    run_files: tuple[str, ...]
    caption: str
    data_clients: bool = False
    floors: bool = False


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

FIGURES: dict[str, FigureSpec] = {
    s.slug: s
    for s in (
        FigureSpec(
            "fig2_allocation_rule", 2, "HAS-FL allocation rule", (), (),
            "The allocation rule of HAS-FL (Definition 2) at this preset's settings, not a result of training: the "
            "width a client is allocated, p = min(pmax, p_min + gamma H / H_bar), against its heterogeneity estimate "
            "relative to the population mean, H / H_bar, for three capacities pmax (the largest width the client's "
            "device can train). The width grows linearly with the estimate and stops at the client's capacity. "
            "Dashed line: p_min = {p_min}; gamma = {gamma}. Not shown: the coverage guarantee, which keeps the "
            "highest-capacity clients at full width."),
        FigureSpec(
            "fig3_convergence_allocation", 3, "Convergence of allocation strategies",
            ("hasfl", "fjord", "uniform"), ("rounds.parquet", "run.json"),
            "Test accuracy after every evaluated round of the three sub-model allocation strategies, one panel per "
            "dataset: HAS-FL (allocation by heterogeneity estimate and capacity), FjORD (random capacity tier) and "
            "Uniform (p = min(0.5, pmax) for every client). " + _BAND + _FLOOR_LINES + _FLOOR_LABEL + _MARKERS
            + "The paper (Section 4.2, CIFAR-10 and EMNIST, 200 rounds) reports HAS-FL and FjORD indistinguishable "
            "and Uniform falling from its peak; this preset's datasets, models and rounds differ, so the curves "
            "show this preset's behaviour, not a reproduction of the paper's numbers.",
            floors=True),
        FigureSpec(
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
            data_clients=True),
        FigureSpec(
            "fig5_final_allocation", 5, "Final per-client allocation vs capacity", ("hasfl",), ("clients.parquet",),
            "Final allocation of every client in the HAS-FL runs, one panel per dataset and seed. Grey bar: the "
            "client's capacity pmax (the largest width its device can train); blue bar: the width HAS-FL allocated "
            "to it after the last reallocation. Where the blue bar fills the grey one the client sits at its "
            "capacity. Clients are in ID order; capacities are assigned per seed. The paper (Section 4.4) reports "
            "that the allocations follow the capacity tiers rather than the clients' data."),
        FigureSpec(
            "fig6_frontier", 6, "Accuracy-capacity frontier",
            ("fedavg", "scaffold", "fedprox", "hasfl", "random_budget", "fjord", "heterofl", "uniform",
             "hasfl_nocov"), ("rounds.parquet", "run.json"),
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
            floors=True),
        FigureSpec(
            "fig7_convergence_full_model", 7, "Convergence vs full-model methods",
            ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json"),
            "Test accuracy after every evaluated round of HAS-FL (sub-models, about half the width on average) and "
            "of three full-model methods: FedAvg, SCAFFOLD (control variates) and FedProx (proximal term), one "
            "panel per dataset. " + _BAND + _FLOOR_LINES + _FLOOR_LABEL + _MARKERS
            + "The paper (Section 4.5) reports full-model training above HAS-FL on CIFAR-10 and EMNIST; this "
            "preset's datasets, models and rounds differ.",
            floors=True),
        FigureSpec(
            "fig8_test_loss", 8, "Test-loss trajectories",
            ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json"),
            "Test loss (mean cross-entropy on the test set) after every evaluated round of the methods of Figure 7, "
            "one panel per dataset. " + _BAND + _FLOOR_LABEL.replace("best accuracy", "best test accuracy")
            + _MARKERS + "A loss that falls while the accuracy stays at the floor means the model is learning the "
            "class frequencies, not the task.",
            floors=True),
        FigureSpec(
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
            data_clients=True),
    )
}


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


#: Titles and notes of the tables (report.md, the table .md files and Snakemake's HTML report).
STD_NOTE = ("Mean +- sample standard deviation (ddof = 1) over the completed seeds; accuracies and the "
            "peak-to-final delta (final - best) in percentage points.")

TABLE_TITLES = {
    "table1_cost": "Table 1 -- Per-client cost as a function of sub-model width p",
    "table2_datasets": "Table 2 -- Datasets",
    "table3_allocation": "Table 3 -- Sub-model allocation strategies",
    "table4_coverage": "Table 4 -- Coverage-guarantee ablation",
    "table5_confound": "Table 5 -- Correlations of the final estimates H~ with TV and pmax (+ fedavg control)",
    "table6_full_model": "Table 6 -- Comparison with full-model methods",
    "table7_shakespeare": "Table 7 -- Allocation strategies on Shakespeare",
    "matched_budget": "Matched budget -- HAS-FL vs random-budget, paired by seed (Section 4.4)",
    "prop3_coverage": "Proposition 3 -- never-covered coordinates of the capped runs",
    "table4b_stale_coordinates": "Table 4b -- coordinates untrained since the warm-up, capped runs (Section 4.3)",
    "bn_sensitivity": "Batch-norm sensitivity -- final accuracy of every run under each BN statistics mode",
    "comparison": "Comparison with the published values (Tables 1, 3-7)",
    "table8_estimators": "Table 8 -- Capacity-separable estimators against TV and capacity (this project's extension)",
    "matched_budget_estimators": "Matched budget of the estimator methods -- allocation by E2 / E3 vs its "
                                 "random-budget control, paired by seed",
}

TABLE_NOTES = {
    "comparison": "One row per published value (Tables 1, 3-7) of a dataset this preset ran: ours, the paper's, "
                  "and whether ours lies within the published mean +- k std (Table 1: rounds to the printed "
                  "value). Table 1's model costs are comparable at any preset; the results of Tables 3-7 only where "
                  "the preset ran the paper's configuration (the others are listed as not comparable, with the "
                  "config keys that differ).",
    "table1_cost": "Exact counts from the models (hasfl.models): params = trainable parameters of the width-p "
                   "sub-model, MACs per sample (conv + linear), upload = one float32 copy of the sub-model "
                   "(1 MB = 10^6 bytes); k = thousand, M = million, each model in the unit of its full width. "
                   "`paper` rows are the paper's three models; `preset` rows the preset's own model configuration.",
    "table2_datasets": "From the data stage's manifest.json summaries. Majority class: accuracy of always predicting "
                       "the test set's most common class; chance: 1 / classes. A run that never beats the majority "
                       "class rate by more than the floor tolerance is flagged `at floor` in every table and figure.",
    "table5_confound": "Per run, over the clients: Pearson r, partial r given pmax (correlation of OLS residuals), "
                       "and the OLS R^2 / adjusted R^2 of log H~ on the capacity tier (categorical), on TV and on "
                       "both. fedavg rows (equal widths) are the positive control.",
    "matched_budget": "Differences hasfl - random_budget over the seeds where both completed. Final accuracy: "
                      "Student-t interval and paired t-test. Average width: random_budget draws its widths to match "
                      "the hasfl run of the same seed, so equal widths are a property of the design, not a result; "
                      "the difference is checked against the matching tolerance "
                      "(`method_params.random_budget.tolerance`) and not tested.",
    "prop3_coverage": "Only runs capped below full width are shown: p_hi = largest width any client trained "
                      "(clients.parquet p_max_trained) < 1. Coordinates outside the width-p_hi mask were trained by no "
                      "client; prop3_holds: all of them equal init.pt. A run with p_hi = 1 has no such coordinate and "
                      "nothing to check (counted below the table; every run is in the Parquet file).",
    "table8_estimators": "Per dataset, run method and estimate E (E0 update divergence, E1 its within-tier z-score, "
                         "E2 fixed-width probe divergence, E3 reported label histograms), over the clients of each "
                         "run and pooled over the seeds in Fisher's z (fixed effect; weights n - 3, n - 4 for the "
                         "partial correlation) with intervals at the configured level: r(E, TV), r(E, pmax), partial "
                         "r(E, TV | pmax), and the within-tier r(E, TV) (pooled over tiers, then seeds); adjusted "
                         "R^2 of E on the capacity tier (categorical) and on TV (mean over seeds); the verdicts of "
                         "the capacity-grouped check (hasfl diagnose: permutation test of TV within tiers) per run. "
                         "hasfl runs: sub-model widths follow capacity; fedavg runs: every client trains the full "
                         "model (the positive control). Per-run rows in the _seeds file.",
    "matched_budget_estimators": "Differences (allocating method - its random-budget control) over the seeds where "
                                 "both completed, per dataset and pair: hasfl_probe vs random_budget_probe (Eq. 6 fed "
                                 "by E2) and hasfl_reported vs random_budget_reported (fed by E3). Final accuracy: "
                                 "Student-t interval and paired t-test (F8 tests it); average width: matched by "
                                 "construction within method_params.<control>.tolerance, not tested.",
    "table4b_stale_coordinates": "Only runs capped after t0 are shown (every run is in the Parquet file). Per run: "
                                 "p_hi_after_t0 = largest width any participant trained after the warm-up "
                                 "round t0 (clients.parquet p_max_trained_after_warmup); coordinates outside that "
                                 "width (stale) were trained by no one since t0. frozen_since_t0: all of them equal "
                                 "in warmup.pt and final.pt (F5). For runs capped after t0, test accuracy (%) of the "
                                 "full final model, of the same model with the stale coordinates reset to init.pt, "
                                 "and of its sub-model at width p_hi_after_t0 (stale coordinates dropped); "
                                 "acc_logged_pct is the run's own final evaluation; final_at_floor: it is within "
                                 "the floor tolerance of the test set's majority-class rate.",
}


def table_caption(name: str) -> str:
    """The caption of table ``name`` in Snakemake's HTML report: its title and note."""
    note = TABLE_NOTES.get(name) or (f"{STD_NOTE} {FLOOR_NOTE}" if name in METHOD_TABLES else "")
    return f"{TABLE_TITLES.get(name, name)}. {note}".strip()


#: The floor column of the method tables, in one sentence.
FLOOR_NOTE = (f"Floor: in how many seeds the best accuracy of any round stayed within {FLOOR_TOL_PCT:g} points "
              "(or one test example) of the test set's majority-class rate (Table 2), i.e. the run never predicted "
              "better than the most common class.")


@dataclass(frozen=True)
class MarginSpec:
    """One key of the config block ``analysis``: default, admissible open/closed bounds, meaning.

    The defaults and their justification from the paper's numbers are in
    docs/decisions.md ("Findings: three-valued verdicts"); the schema
    (workflow/schemas/config.schema.json) carries the same bounds.
    """

    key: str
    default: float
    low: float
    high: float
    low_open: bool
    high_open: bool
    meaning: str

    def check(self, value: float) -> str | None:
        """None when ``value`` is admissible, else the reason."""
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        lo_bad = value <= self.low if self.low_open else value < self.low
        hi_bad = value >= self.high if self.high_open else value > self.high
        if lo_bad or hi_bad:
            lb, hb = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"must lie in {lb}{self.low:g}, {self.high:g}{hb}, got {value!r}"
        return None


#: The config block ``analysis``: every margin and test setting of the findings (one place).
MARGINS: dict[str, MarginSpec] = {
    m.key: m
    for m in (
        MarginSpec("ci_level", 0.95, 0.5, 1.0, True, True,
                   "confidence level; every test runs at alpha = 1 - ci_level (one-sided bounds: the "
                   "two-sided 1 - 2 alpha interval)"),
        MarginSpec("power", 0.8, 0.0, 1.0, True, True, "power at which minimum detectable effects are reported"),
        MarginSpec("f1_max_r_h_pmax", -0.5, -1.0, 1.0, True, True,
                   "F1a: pooled r(H~, pmax) must lie below this ('strongly negative')"),
        MarginSpec("f1_min_r2_gap", 0.0, -1.0, 1.0, False, False,
                   "F1b: adj. R^2(tier) - adj. R^2(TV) of log H~ must exceed this"),
        MarginSpec("f1c_max_pr_h_tv", 0.36, 0.0, 1.0, False, True,
                   "F1c: pooled r(H~, TV | pmax) must lie below this ('not positive')"),
        MarginSpec("f1d_equiv_pr_p_tv", 0.36, 0.0, 1.0, True, True,
                   "F1d: equivalence margin of pooled r(p, TV | pmax) ('~ 0')"),
        MarginSpec("f2_min_decay_gap_pct", 0.0, -100.0, 100.0, False, False,
                   "F2a/F2b: decay without coverage - decay with coverage must exceed this (points)"),
        MarginSpec("f2_min_spread_ratio", 1.0, 0.0, 100.0, True, False,
                   "F2a-spread: sd(final, no coverage) / sd(final, coverage) must exceed this"),
        MarginSpec("f2c_max_decline_pct", 6.0, 0.0, 100.0, True, False,
                   "F2c: Uniform's peak-to-final decline on Shakespeare must stay below this (points)"),
        MarginSpec("f3_equiv_margin_pct", 2.0, 0.0, 100.0, True, False,
                   "F3: equivalence margin of final acc(hasfl) - final acc(random_budget) (points)"),
        MarginSpec("f3s_min_acc_gap_pct", 0.0, -100.0, 100.0, False, False,
                   "F3-shakespeare: final acc(other) - final acc(hasfl) must exceed this (points)"),
        MarginSpec("f3s_min_p_gap", 0.0, -1.0, 1.0, False, False,
                   "F3-shakespeare: trained width(hasfl) - trained width(other) must exceed this"),
        MarginSpec("f4_min_gap_pct", 0.0, -100.0, 100.0, False, False,
                   "F4: final acc(fedavg) - final acc(hasfl) must exceed this (points)"),
        MarginSpec("f5_atol", 0.0, 0.0, 1.0, False, False,
                   "F5: largest |change| allowed on a coordinate no participant trained (0 = bit-identical)"),
        MarginSpec("f6_min_r_h_tv", 0.0, -1.0, 1.0, True, True,
                   "F6: pooled r(H~, TV) of the fedavg runs must exceed this"),
        MarginSpec("f7_min_pr_e_tv", 0.36, 0.0, 1.0, True, True,
                   "F7: a usable data signal: pooled r(E, TV | pmax) of an estimator at least this (F1c's margin)"),
        MarginSpec("comparison_k_std", 2.0, 0.0, 10.0, True, False,
                   "comparison.parquet: ours is 'within' when |ours - published| <= k * published std"),
    )
}

#: Defaults of the config block ``analysis`` (derived from :data:`MARGINS`).
DEFAULT_THRESHOLDS: dict[str, float] = {k: m.default for k, m in MARGINS.items()}


def resolve_thresholds(overrides: Mapping[str, Any] | None = None) -> dict[str, float]:
    """:data:`DEFAULT_THRESHOLDS` updated by ``overrides`` (the config's ``analysis`` block).

    Raises:
        ValueError: naming an unknown key, a non-numeric value, a NaN / infinite value
            or one outside its bounds (:class:`MarginSpec`).
    """
    out = dict(DEFAULT_THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key not in MARGINS:
            raise ValueError(f"unknown config key 'analysis.{key}'; allowed keys: {', '.join(sorted(MARGINS))}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config key 'analysis.{key}': expected a number, got {value!r}")
        out[key] = float(value)
    for key, value in out.items():
        problem = MARGINS[key].check(value)
        if problem is not None:
            raise ValueError(f"config key 'analysis.{key}': {problem}")
    return out


def alpha_of(thresholds: Mapping[str, float]) -> float:
    """The significance level of every finding: ``1 - ci_level``."""
    return 1.0 - float(thresholds["ci_level"])
