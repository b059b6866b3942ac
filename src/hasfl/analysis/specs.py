"""What each analysis output covers: light constants shared by the rules and the code.

This module imports nothing heavy (no torch, no matplotlib) because the Snakemake
rule file imports it while building the DAG.

* :data:`METHOD_TABLES` -- paper Tables 3, 4, 6 and 7: which methods, which datasets.
* :data:`FIGURES` -- paper Figures 2-8: the slug of each and the run files it reads.
* :data:`DEFAULT_THRESHOLDS` -- every threshold of the findings (config block ``analysis``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_THRESHOLDS",
    "FIGURES",
    "FigureSpec",
    "METHOD_LABELS",
    "METHOD_TABLES",
    "MethodTableSpec",
    "NATURAL_PARTITION_DATASETS",
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
                    "hasfl_nocov"), ("run.json",)),
        FigureSpec("fig7_convergence_full_model", 7, "Convergence vs full-model methods",
                   ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json")),
        FigureSpec("fig8_test_loss", 8, "Test-loss trajectories",
                   ("hasfl", "fedavg", "scaffold", "fedprox"), ("rounds.parquet", "run.json")),
    )
}

#: Findings thresholds (config block ``analysis``); the one place their defaults live.
DEFAULT_THRESHOLDS: dict[str, float] = {
    # F1 (Table 5): r(H~, pmax) must be at most this on every hasfl run ("strongly negative").
    "f1_max_r_h_pmax": -0.5,
    # F1 (decomposition): adj. R^2(tier) - adj. R^2(TV) of log H~ must exceed this on every hasfl run.
    "f1_min_r2_gap": 0.0,
    # F2 (Table 4): decay(no coverage) - decay(coverage), in accuracy points, must exceed this.
    "f2_min_decay_gap_pct": 0.0,
    # F3 / matched_budget: confidence level of the paired t interval (the claim: it covers 0).
    "ci_level": 0.95,
    # F4 (Table 6): mean final acc(fedavg) - mean final acc(hasfl), in points, must exceed this.
    "f4_min_gap_pct": 0.0,
    # F5 (Proposition 3): largest |final - init| allowed on a never-covered coordinate.
    "f5_atol": 0.0,
    # F6 (Section 4.7): r(H~, TV) of every fedavg run must exceed this.
    "f6_min_r_h_tv": 0.0,
    # comparison.parquet: ours is "within" when |ours - published| <= k * published std.
    "comparison_k_std": 2.0,
}


def resolve_thresholds(overrides: Mapping[str, Any] | None = None) -> dict[str, float]:
    """:data:`DEFAULT_THRESHOLDS` updated by ``overrides`` (the config's ``analysis`` block).

    Raises:
        ValueError: naming an unknown key or a non-numeric value.
    """
    out = dict(DEFAULT_THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            raise ValueError(f"unknown config key 'analysis.{key}'; allowed keys: {', '.join(sorted(DEFAULT_THRESHOLDS))}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config key 'analysis.{key}': expected a number, got {value!r}")
        out[key] = float(value)
    if not 0.0 < out["ci_level"] < 1.0:
        raise ValueError(f"config key 'analysis.ci_level': must lie in (0, 1), got {out['ci_level']}")
    return out
