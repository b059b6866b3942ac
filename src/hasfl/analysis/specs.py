"""What each analysis output covers: light constants shared by the rules and the code.

This module imports nothing heavy (no torch, no matplotlib) because the Snakemake
rule file imports it while building the DAG.

* :data:`METHOD_TABLES` -- paper Tables 3, 4, 6 and 7: which methods, which datasets.
* :data:`FIGURES` -- paper Figures 2-8: the slug of each and the run files it reads.
* :data:`MARGINS` / :data:`DEFAULT_THRESHOLDS` -- every margin and test setting of the
  findings (config block ``analysis``) with its bounds.
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
    "FigureSpec",
    "METHOD_LABELS",
    "METHOD_TABLES",
    "MethodTableSpec",
    "NATURAL_PARTITION_DATASETS",
    "STALE_RUN_FILES",
    "STALE_TABLE",
    "DATASET_LABELS",
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
    "fedprox": "FedProx",
}


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


#: Section 4.3 coverage ablation, what the stale coordinates do (issue 14): name and run files.
STALE_TABLE = "table4b_stale_coordinates"
STALE_RUN_FILES = ("clients.parquet", "init.pt", "warmup.pt", "final.pt", "run.json")


@dataclass(frozen=True)
class FigureSpec:
    """One paper figure: file slug, the methods whose runs it reads, which run files."""

    slug: str
    paper_figure: int
    title: str
    methods: tuple[str, ...]
    run_files: tuple[str, ...]
    data_clients: bool = False


FIGURES: dict[str, FigureSpec] = {
    s.slug: s
    for s in (
        FigureSpec("fig2_allocation_rule", 2, "HAS-FL allocation rule", (), ()),
        FigureSpec("fig3_convergence_allocation", 3, "Convergence of allocation strategies",
                   ("hasfl", "fjord", "uniform"), ("rounds.parquet", "run.json")),
        FigureSpec("fig4_heterogeneity_allocation", 4, "Mean heterogeneity estimate and allocation",
                   ("hasfl",), ("rounds.parquet",), data_clients=True),
        FigureSpec("fig5_final_allocation", 5, "Final per-client allocation vs capacity", ("hasfl",), ("clients.parquet",)),
        FigureSpec("fig6_frontier", 6, "Accuracy-capacity frontier",
                   ("fedavg", "scaffold", "fedprox", "hasfl", "random_budget", "fjord", "heterofl", "uniform",
                    "hasfl_nocov"), ("rounds.parquet", "run.json")),
        FigureSpec("fig7_convergence_full_model", 7, "Convergence vs full-model methods",
                   ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json")),
        FigureSpec("fig8_test_loss", 8, "Test-loss trajectories",
                   ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json")),
    )
}

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
