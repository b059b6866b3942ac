"""Light constants of the analysis shared by the rules and the code (the artifacts themselves are
declared in :mod:`hasfl.analysis.artifacts`).

This module imports nothing heavy (no torch, no matplotlib) because the Snakemake
rule file imports it while building the DAG.

* :data:`ESTIMATORS` -- the four per-client heterogeneity estimates every run logs (E0-E3, the
  paper's Section 5 "natural next step"), :data:`TABLE8_METHODS` / :data:`ESTIMATOR_PAIRS` -- the
  runs Table 8 and the matched-budget comparison of the estimator methods read.
* :data:`FLOOR_TOL_PCT` -- how close to the majority-class rate a run must stay to count as
  "at the floor" (:func:`floor_tolerance_pct`).
* :data:`MARGINS` / :data:`DEFAULT_THRESHOLDS` -- every margin and test setting of the
  findings (config block ``analysis``) with its bounds.
* :data:`TABLE_SETTINGS` -- the integer keys of the same block that a table reads, not a finding
  (Table 4c's ``table4c_last_rounds``), resolved by :func:`resolve_table_settings`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hasfl.removed_keys import ANALYSIS as ANALYSIS_REMOVED

__all__ = [
    "DEFAULT_THRESHOLDS",
    "ESTIMATORS",
    "ESTIMATOR_PAIRS",
    "FLOOR_TOL_PCT",
    "MARGINS",
    "TABLE8_METHODS",
    "TABLE8_PERMUTATIONS",
    "TABLE8_PERMUTATION_SEED",
    "TABLE_SETTINGS",
    "FINAL_ENDPOINT_EVALS",
    "REMOVED_KEYS",
    "TREND_FRACTION",
    "TREND_MIN_EVALS",
    "EstimatorSpec",
    "MarginSpec",
    "TableSetting",
    "alpha_of",
    "floor_tolerance_pct",
    "nested_scope_note",
    "resolve_table_settings",
    "resolve_thresholds",
]

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
#: Permutation test within capacity tiers (hasfl.analysis.diagnose): permutations per run and
#: estimator, and the fixed seed they are drawn from (p-values resolve to 1/1000).
TABLE8_PERMUTATIONS = 999
TABLE8_PERMUTATION_SEED = 0


#: The trend window of a final-accuracy comparison (pre-registered in docs/preregistration.md before the
#: pages it decides were regenerated): the evaluations in the last :data:`TREND_FRACTION` of a run's rounds, at
#: least :data:`TREND_MIN_EVALS` of them. Each run's least-squares slope of test accuracy on the round there
#: (``tail_slope_pct``, points per round; :func:`hasfl.analysis.runs.run_metrics`) gives, per seed, the slope of
#: the gap between two methods (the difference of their slopes: least squares is linear in the curve), read as a
#: caveat beside the fixed-horizon test, never as a gate.
TREND_FRACTION = 0.25
TREND_MIN_EVALS = 3
#: A final-accuracy comparison's endpoint: each run's last evaluation (the paper's "final accuracy", the mean
#: over seeds at the horizon; k = 1, not a mean of the last k evaluations).
FINAL_ENDPOINT_EVALS = 1

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
        MarginSpec("min_seeds_for_verdict", 2.0, 1.0, 1000.0, False, False,
                   "a paper claim's or extension's unit with fewer seeds (runs) than this is inconclusive: one seed has "
                   "no seed-to-seed variance"),
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
        MarginSpec("f9_min_decay_gap_pct", 0.0, -100.0, 100.0, False, False,
                   "F9a: decay(uniform) - decay(uniform_rolling) must exceed this (points)"),
        MarginSpec("f9_min_acc_gap_pct", 0.0, -100.0, 100.0, False, False,
                   "F9b-F9g: final acc(rolling, sampled or masked) - final acc(prefix) must exceed this (points)"),
        MarginSpec("f10_equiv_r_e_pmax", 0.36, 0.0, 1.0, True, True,
                   "F10a/F10b: a method's pooled r(E0, pmax) inside +-this is shown uncoupled from capacity "
                   "(F1d's margin)"),
        MarginSpec("f7_min_pr_e_tv", 0.36, 0.0, 1.0, True, True,
                   "F7: a usable data signal: pooled r(E, TV | pmax) of an estimator at least this (F1c's margin)"),
        MarginSpec("comparison_k_std", 2.0, 0.0, 10.0, True, False,
                   "comparison.parquet: ours is 'within' when |ours - published| <= k * published std"),
    )
}

#: Defaults of the config block ``analysis`` (derived from :data:`MARGINS`).
DEFAULT_THRESHOLDS: dict[str, float] = {k: m.default for k, m in MARGINS.items()}


@dataclass(frozen=True)
class TableSetting:
    """One integer key of the config block ``analysis`` that a table reads (not a finding's margin, so not in
    findings.json's thresholds): default, smallest admissible value, meaning. The schema
    (workflow/schemas/config.schema.json) carries the same type and bound."""

    key: str
    default: int
    low: int
    meaning: str

    def check(self, value: Any) -> str | None:
        """None when ``value`` is admissible (an integer >= ``low``; a bool is no integer), else the reason."""
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected an integer >= {self.low}, got {value!r}"
        if value < self.low:
            return f"must be >= {self.low}, got {value!r}"
        return None


#: The tables' keys of the config block ``analysis`` (after the margins in config.yaml and the schema).
TABLE_SETTINGS: dict[str, TableSetting] = {
    s.key: s
    for s in (
        TableSetting("table4c_last_rounds", 10, 1,
                     "Table 4c: its coverage columns count the coordinates trained in the last k rounds "
                     "of each run (all rounds when a run has fewer)"),
    )
}


def resolve_table_settings(block: Mapping[str, Any] | None = None) -> dict[str, int]:
    """The :data:`TABLE_SETTINGS` of the config's ``analysis`` block (``block``; its margins are ignored), with
    their defaults where it has none.

    Raises:
        ValueError: naming the key of a value that is not an integer within its bound.
    """
    out = {k: s.default for k, s in TABLE_SETTINGS.items()}
    for key, value in (block or {}).items():
        if key in TABLE_SETTINGS:
            problem = TABLE_SETTINGS[key].check(value)
            if problem is not None:
                raise ValueError(f"config key 'analysis.{key}': {problem}")
            out[key] = int(value)
    return out


#: Keys of the block ``analysis`` that were removed, with what replaced them (a clear error, not "unknown key").
REMOVED_KEYS = ANALYSIS_REMOVED


def resolve_thresholds(overrides: Mapping[str, Any] | None = None) -> dict[str, float]:
    """:data:`DEFAULT_THRESHOLDS` updated by ``overrides`` (the config's ``analysis`` block; its
    :data:`TABLE_SETTINGS` are skipped, :func:`resolve_table_settings` resolves them).

    Raises:
        ValueError: naming an unknown key, a non-numeric value, a NaN / infinite value
            or one outside its bounds (:class:`MarginSpec`).
    """
    out = dict(DEFAULT_THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key in TABLE_SETTINGS:  # a table's setting, not a margin: resolve_table_settings checks it
            continue
        if key in REMOVED_KEYS:
            raise ValueError(f"config key 'analysis.{key}': {REMOVED_KEYS[key]}")
        if key not in MARGINS:
            raise ValueError(f"unknown config key 'analysis.{key}'; allowed keys: "
                             f"{', '.join(sorted([*MARGINS, *TABLE_SETTINGS]))}")
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


def nested_scope_note() -> str:
    """What Proposition 3's checks (F5, the Proposition 3 table, Table 4b) leave out, from the registry: the methods
    whose sub-models are not nested prefixes (:attr:`hasfl.registry.MethodInfo.nested`), e.g. rolling windows."""
    from hasfl.registry import METHODS

    labels = [f"{info.label} ({name})" for name, info in METHODS.items() if not info.nested]
    if not labels:
        return "Nested methods only (every method of the registry is nested)."
    return (f"Nested methods only: {', '.join(labels)} train sub-models that are not prefixes (rolling windows), so a "
            "coordinate outside a width mask may have been trained; their runs are not checked here (their coverage "
            "per round is Table 4c).")
