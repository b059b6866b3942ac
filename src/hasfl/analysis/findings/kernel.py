"""The verdict kernel of findings.json: verdicts, kinds, scopes, the test units and a finding's assembly.

Every finding tests one claim of the paper, in the scope the paper states it, on
*units* (one per dataset, or one per run for Proposition 3). Each unit gets a
three-valued verdict and the finding combines its in-scope units:

* ``supported`` -- the confidence interval lies inside the claim's region (beyond the
  margin in the claimed direction; inside +-margin for an equivalence claim);
* ``contradicted`` -- the interval lies on the other side of the margin or, for the
  claims of "no difference" (F1c, F1d, F3), the test rejects the claim's null value
  (a significant difference contradicts "indistinguishable");
* ``inconclusive`` -- neither, or the statistic is undefined (the reason says which),
  or no unit of the paper's scope was run.

A finding is contradicted when any in-scope unit is, supported when every in-scope
unit is (and there is at least one), inconclusive otherwise (:func:`combine`). Units
outside the paper's scope are computed and reported (``in_scope: false``) but never counted.

All tests run at ``alpha = 1 - analysis.ci_level``; a one-sided bound at level
``1 - alpha`` is an end of the two-sided ``1 - 2 alpha`` interval (:class:`Settings`). Every
unit records its number of seeds / runs, its margin (config block ``analysis``, defaults
justified in docs/decisions.md) and its minimum detectable effect at ``analysis.power``.

Verdict rules that count what they test (docs/decisions.md): Holm's correction
(statsmodels' ``multipletests``) over a finding's units and over a conjunction's parts
(:func:`conjunction_unit`); a claim's unit needs ``analysis.min_seeds_for_verdict`` seeds
(:func:`seeds_gate`); a comparison with a run that failed to train is withheld and named so, and a
final-accuracy comparison is decided at the rung's horizon with the gap's trend beside it
(:mod:`hasfl.analysis.findings.endpoints`); pooled correlations are :mod:`hasfl.analysis.findings.correlation`.

A finding family (one module of this package) declares a :class:`FindingSpec`; the
ordered registry is :data:`hasfl.analysis.findings.FINDINGS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats as sps

from hasfl.analysis.artifacts import natural_partition
from hasfl.analysis.findings.claims import attribution
from hasfl.analysis.findings.multiplicity import _sf, holm, holm_step_down, t_p, z_p  # noqa: F401 (re-exported)
from hasfl.analysis.findings.verdicts import (  # noqa: F401 (re-exported: the families import them from here)
    CONTRADICTED,
    INCONCLUSIVE,
    MIXED,
    NOT_RUN,
    SPLIT,
    SUPPORTED,
    clean,
    combine,
    directional,
    equivalence,
    fmt,
    num,
    summarize,
)
from hasfl.analysis.stats import (
    paired_ci,
    t_equivalence_margin,
    t_mde,
    variance_ratio,
    variance_ratio_mde,
)

#: A finding's verdict: its units combined (:func:`combine`); ``mixed`` when some support and others contradict;
#: ``split by estimand`` when its estimands (full model, sub-models) differ; ``not run`` when no unit ran.
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, MIXED, SPLIT, NOT_RUN)
#: The rules that keep a verdict within its evidence (report.md and the results pages state them).
VERDICT_RULES = (
    "A finding with more than one estimand (F9b-F9g: the full model and the sub-models) has one verdict per estimand, "
    "each with its claim, its horizon and whose claim it is (another paper's authors only on the estimand their own "
    "code evaluates; every other estimand is this project's extension); its word is their common verdict, or **split "
    "by estimand** where they differ, and then each estimand's verdict is shown, never one word for both. Within an "
    "estimand the units (datasets, or runs for F5) are combined: **mixed** when some support and others contradict, "
    "**contradicted** when one contradicts and none supports, **supported** only when all do, **inconclusive** "
    "otherwise, **not run** when none ran. Supported-by-all is an intersection-union test: each unit at alpha, no "
    "correction; contradicted-by-any is a union, so the units' contradictions are corrected by Holm's step-down (a "
    "withdrawn one names the step that stopped); the parts of one claim (F3-shakespeare's four tests) are combined the "
    "same way. A claim's unit needs at least `analysis.min_seeds_for_verdict` seeds (2): with one it is inconclusive "
    "(\"1 seed: no seed-to-seed variance\"), a correlation over one run's clients included. Correlations are pooled "
    "over the seeds with random effects, Hartung-Knapp's interval on t with seeds - 1 df (plain where the runs weigh "
    "the same and there are 3 or more, where it is exact; floored at the random-effects se otherwise), the fixed effect "
    "beside them. A comparison of final accuracies (F3, F3-shakespeare's accuracy parts, F4, F8, F9b-F9g) is decided "
    "by its test at the rung's fixed horizon (each run's last evaluation, as the paper compares); the gap's slope over "
    "the evaluations in the last quarter of the rounds and its interval are reported beside every full-model unit, and "
    "where the interval excludes 0 the reason says the gap is still moving, without changing the verdict (a "
    "sub-model unit has no curve and says so; a longer-horizon overlay shows its value at more rounds). A run "
    "**failed to train at this budget** when its accuracy under its method's declared batch-norm rule never rose "
    "above the majority-class floor (a sub-model unit reads its sub-models' accuracy): a unit whose baseline failed is "
    "withheld and named so, with the test on the seeds that learned beside it; a unit whose claimed-better method "
    "failed while the baseline learned is contradicted at this budget; the decay claims (F2a, F2b, F2c, F9a) are "
    "withheld by a failed run. A claim that no data signal survives the capacity control (F1c supported, F7-E0 / "
    "F7-E1 contradicted) is read beside its positive control on the same dataset (F6 after Holm; E1's own fedavg "
    "value) and withheld only where that control is contradicted (the estimate shown blind at equal widths). An "
    "inconclusive unit in the claim's scope that more seeds could decide lists the seeds its test would need for the "
    "configured power at the spread observed, and their cost.")

#: What a finding is: a claim of the paper; this project's extension; a pipeline
#: check, whose outcome follows from the construction (Proposition 3 on saved states, an estimate that
#: equals TV without noise); an oracle test (allocation by the true label histogram).
PAPER_CLAIM, EXTENSION, PIPELINE_CHECK, ORACLE = "paper claim", "extension", "pipeline check", "oracle"
KINDS = (PAPER_CLAIM, EXTENSION, PIPELINE_CHECK, ORACLE)
#: The kinds whose verdicts need seed-to-seed variance (``analysis.min_seeds_for_verdict``): claims about a
#: method, which one seed cannot show; a pipeline check or an oracle follows from the construction in every run.
SEED_RULE_KINDS = (PAPER_CLAIM, EXTENSION)
#: ``gate_kind`` of a unit gated for too few seeds: more seeds lift it, so its seeds are still priced.
SEEDS_GATE = "seeds"
#: ``gate_kind`` of a unit withheld because a run failed to train at this budget
#: (:func:`hasfl.analysis.findings.endpoints.failed_gate`): evidence about the regime, not the claim.
FAILED_TO_TRAIN = "failed_to_train"

#: Scopes: which datasets a claim is stated for.
IMAGE, TEXT, ALL = "image", "text", "all"
SCOPE_TEXT = {IMAGE: "image datasets (the paper: CIFAR-10, EMNIST)",
              TEXT: "natural-partition datasets (the paper: Shakespeare)", ALL: "every dataset"}

#: The tables the findings read (file names without .parquet under tables/).
T5, T3S, T4S, T6S, T7S = ("table5_confound", "table3_allocation_seeds", "table4_coverage_seeds",
                          "table6_full_model_seeds", "table7_shakespeare_seeds")
MBS, P3, T4B = "matched_budget_seeds", "prop3_coverage", "table4b_stale_coordinates"
T8S, MBES = "table8_estimators_seeds", "matched_budget_estimators_seeds"

COMPLETED = "completed"


def finding_kind(finding: Mapping[str, Any]) -> str:
    """A finding's kind; findings.json written before kinds existed has only the ``extension`` flag."""
    return str(finding.get("kind") or (EXTENSION if finding.get("extension") else PAPER_CLAIM))


@dataclass(frozen=True)
class Settings:
    """The test settings of one evaluation: significance level, power and the margins."""

    alpha: float
    power: float
    th: Mapping[str, float]
    #: The horizon the tables were made at (``rounds``, ``eval_every``, ``seeds``): every verdict is at it.
    horizon: Mapping[str, Any] | None = None

    @property
    def one_sided_level(self) -> float:
        """Level of the two-sided interval whose ends are the one-sided (1 - alpha) bounds."""
        return 1.0 - 2.0 * self.alpha

    @property
    def two_sided_level(self) -> float:
        return 1.0 - self.alpha


#: One finding family's evaluation: (tables by name, the preset's datasets, settings) -> its findings.
Evaluate = Callable[[Mapping[str, pd.DataFrame], Sequence[str], Settings], list[dict[str, Any]]]


@dataclass(frozen=True)
class FindingSpec:
    """One finding family: the entry of the registry :data:`hasfl.analysis.findings.FINDINGS`.

    ``ids``: the findings it produces, in order; ``tables``: the tables ``evaluate`` reads;
    ``methods``: per id, the methods whose runs' accuracy enters it (report.md's floor notes; an
    id absent: accuracy does not enter it); ``reads``: per id whose runs are not those of ``methods``, the methods
    whose runs it reads (a page's "Reproduce a claim" counts them; an id in neither: every run of its datasets);
    ``margins``: the keys of
    :data:`hasfl.analysis.specs.MARGINS` it uses; ``optional``: evaluated only when the
    optional findings' tables are given (the estimator findings F7 / F8, Section 5).
    """

    ids: tuple[str, ...]
    tables: tuple[str, ...]
    methods: Mapping[str, tuple[str, ...]]
    margins: tuple[str, ...]
    evaluate: Evaluate
    optional: bool = False
    reads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [fid for fid in [*self.methods, *self.reads] if fid not in self.ids]
        if unknown:
            raise ValueError(f"FindingSpec {self.ids}: methods given for ids it does not produce: {unknown}")
        object.__setattr__(self, "methods", MappingProxyType({k: tuple(v) for k, v in self.methods.items()}))
        object.__setattr__(self, "reads", MappingProxyType({k: tuple(v) for k, v in self.reads.items()}))

    def runs_of(self, fid: str) -> tuple[str, ...] | None:
        """The methods whose runs finding ``fid`` reads (None: every run of its datasets)."""
        return self.reads.get(fid, self.methods.get(fid))


# --- small helpers ----------------------------------------------------------------------


def in_scope(dataset: str, scope: str) -> bool:
    natural = natural_partition(dataset)
    return scope == ALL or (scope == TEXT) == natural


# --- per-seed values ----------------------------------------------------------------------


def seed_values(df: pd.DataFrame, dataset: str, method: str, column: str) -> tuple[dict[int, float], list[int]]:
    """``({seed: value} of completed runs with a finite value, [seeds left out])``."""
    if df is None or df.empty:
        return {}, []
    sel = df[(df["dataset"] == dataset) & (df["method"] == method)]
    good, bad = {}, []
    for r in sel.to_dict("records"):
        v = num(r.get(column))
        if r.get("status", COMPLETED) == COMPLETED and math.isfinite(v):
            good[int(r["seed"])] = v
        else:
            bad.append(int(r["seed"]))
    return good, sorted(bad)


def has_runs(df: pd.DataFrame, dataset: str, method: str) -> bool:
    """Whether ``df`` has a row of ``method`` on ``dataset``."""
    return df is not None and not df.empty and bool(((df["dataset"] == dataset) & (df["method"] == method)).any())


@dataclass(frozen=True)
class Paired:
    """Per-seed values of two methods, paired by seed, and the seeds left out (not completed / NaN)."""

    seeds: list[int]
    a: np.ndarray
    b: np.ndarray
    left_out: list[int]

    @property
    def diff(self) -> np.ndarray:
        return self.a - self.b


def paired(da: pd.DataFrame, ma: str, db: pd.DataFrame, mb: str, dataset: str, col_a: str,
           col_b: str | None = None, transform: Callable[[float], float] = lambda v: v) -> Paired:
    """``col_a`` of method ``ma`` in ``da`` and ``col_b`` (default ``col_a``) of ``mb`` in ``db`` on ``dataset``."""
    a, bad_a = seed_values(da, dataset, ma, col_a)
    b, bad_b = seed_values(db, dataset, mb, col_b or col_a)
    seeds = sorted(set(a) & set(b))
    left = sorted((set(a) | set(b) | set(bad_a) | set(bad_b)) - set(seeds))
    return Paired(seeds, np.array([transform(a[s]) for s in seeds], dtype=np.float64),
                  np.array([transform(b[s]) for s in seeds], dtype=np.float64), left)


def gate_unit(unit: dict[str, Any], why: str | None, st: Settings | None = None) -> dict[str, Any]:
    """``unit`` made inconclusive by ``why`` (its statistics kept, its test's reading after the reason); a reason
    that carries runs that failed to train (:class:`hasfl.analysis.findings.endpoints.Reason`) marks the unit
    ``gate_kind = "failed_to_train"``, lists them (``failed_runs``) and, with ``st``, reports beside it the same
    test on the seeds whose runs all learned (:func:`learned_seeds`), scoped to those seeds."""
    if why:
        unit.update(gate=why, verdict=INCONCLUSIVE, reason=f"{why} (the test alone: {unit['verdict']} -- "
                                                           f"{unit['reason']})")
        runs = getattr(why, "runs", ())
        if runs:
            unit["gate_kind"] = FAILED_TO_TRAIN
            unit["failed_runs"] = [dict(r) for r in runs]
            if st is not None:
                learned_seeds(unit, st)
    return unit


def learned_seeds(unit: dict[str, Any], st: Settings) -> dict[str, Any]:
    """Beside a unit withheld for runs that failed to train: the same one-sided t test (:func:`t_unit`, its margin
    and direction) on the seeds none of whose runs failed, as ``learned_seeds`` (its seeds, n, estimate, interval,
    verdict and reason) and a sentence in the reason. It is scoped to those seeds (a claim about the runs that
    learned at this budget), never the unit's verdict. Nothing when the unit is not a t unit or fewer than 2 seeds
    learned."""
    seeds, values = unit.get("seeds"), unit.get("values")
    if not seeds or values is None or "direction" not in unit or len(seeds) != len(values):
        return unit
    failed = {int(r["seed"]) for r in unit.get("failed_runs") or []}
    keep = [i for i, s in enumerate(seeds) if int(s) not in failed]
    if len(keep) < 2:
        return unit
    sub = t_unit(str(unit["unit"]), np.array([values[i] for i in keep], dtype=np.float64), float(unit["margin"]),
                 unit["direction"] == "above", st)
    kept = [int(seeds[i]) for i in keep]
    unit["learned_seeds"] = {k: sub[k] for k in ("n", "estimate", "low", "high", "verdict", "reason")} | {
        "seeds": kept}
    unit["reason"] += (f"; on the {len(kept)} seeds whose runs learned (seeds {', '.join(map(str, kept))}; scoped to "
                       f"them, not this unit's verdict): {sub['verdict']} -- {sub['reason']}")
    return unit


def left_out_note(left: Sequence[int]) -> str:
    return f"; seeds left out (not completed or NaN): {', '.join(map(str, left))}" if left else ""


# --- a conjunction (p-values and Holm's correction: hasfl.analysis.findings.multiplicity) ----------------


def conjunction_unit(name: str, parts: list[dict[str, Any]], st: Settings,
                     extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A unit that is the conjunction of several tests (``parts``, e.g. F3-shakespeare's four): supported only if
    every part is (an intersection-union test: each part at alpha, no correction), contradicted if one is (a union:
    the parts' contradictions corrected by Holm, :func:`holm` with ``what = "parts"``), via :func:`combine` with
    ``conjunction``; the reason names each part whose contradiction Holm's correction withdrew."""
    holm(parts, st.alpha, "parts")
    verdict = combine([u["verdict"] for u in parts], conjunction=True)
    failed = [u["unit"] for u in parts if u.get("holm") is False]
    reason = "; ".join(f"{u['unit']}: {u['verdict']}" for u in parts)
    if failed:
        reason = (f"after Holm's correction of the contradictions over the {len(parts)} parts, {', '.join(failed)} "
                  f"{'is' if len(failed) == 1 else 'are'} no longer significant; " + reason)
    return {"unit": name, "n": min((int(u.get("n") or 0) for u in parts), default=0), "verdict": verdict,
            "reason": reason, "parts": parts, **(extra or {})}


def seeds_gate(unit: Mapping[str, Any], min_seeds: float) -> str | None:
    """Why a claim's unit has too few seeds for a verdict, else None: its ``n`` (seeds; runs for a pooled
    correlation) below ``analysis.min_seeds_for_verdict``. One run's clients give a correlation an interval, but
    not the seed-to-seed variance a claim about the method needs."""
    n = int(unit.get("n") or 0)
    if n >= min_seeds:
        return None
    return f"{n} seed{'s' if n != 1 else ''}: no seed-to-seed variance" if n <= 1 else \
        f"{n} seeds: fewer than analysis.min_seeds_for_verdict = {min_seeds:g}"


# --- unit evaluators ------------------------------------------------------------------------


def t_blocked(n: int, sd: float, values: np.ndarray | None = None, margin: float | None = None) -> str | None:
    """Why a t interval over ``n`` seeds with sample sd ``sd`` gives no verdict, else None; with ``values`` and
    ``margin`` a degenerate interval says what the equal values are and on which side of the margin they lie."""
    if n < 2:
        return f"{n} seed(s): a t interval needs at least 2"
    if not sd > 0:
        if values is not None and len(values) and margin is not None:
            v = float(values[0])
            side = "below" if v < margin else "above" if v > margin else "at"
            return (f"all {n} values are {fmt(v)} ({side} the margin {fmt(margin)}): no seed-to-seed variation, so "
                    "the t interval is degenerate and the test cannot bound the mean")
        return "no seed-to-seed variation: the t interval is degenerate"
    return None


def tost_fields(name: str, values: np.ndarray, margin: float, st: Settings, extra: Mapping[str, Any] | None, *,
                two_sided_mde: bool) -> tuple[dict[str, Any], Any, Any]:
    """The fields the paired-difference units with a TOST share (F3, F8): the one-sided (TOST) and
    two-sided intervals of mean(values), power and ``extra``; and the two intervals (the caller adds
    its p-value and verdict)."""
    eq = paired_ci(values, np.zeros_like(values), st.one_sided_level)
    two = paired_ci(values, np.zeros_like(values), st.two_sided_level)
    unit: dict[str, Any] = {
        "unit": name, "n": eq.n, "estimate": eq.mean_diff, "sd": eq.sd_diff, "low": eq.ci_low, "high": eq.ci_high,
        "interval_level": st.one_sided_level, "two_sided_low": two.ci_low, "two_sided_high": two.ci_high,
        "two_sided_level": st.two_sided_level, "margin": margin,
        "mde": t_mde(eq.n, eq.sd_diff, st.alpha, st.power, two_sided=two_sided_mde),
        "min_equivalence_margin": t_equivalence_margin(eq.n, eq.sd_diff, st.alpha, st.power),
        "values": [float(v) for v in values], **(extra or {})}
    return unit, eq, two


def t_unit(name: str, values: np.ndarray, margin: float, above: bool, st: Settings,
           extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One-sided t test of mean(values) beyond ``margin`` (supported) or on its other side (contradicted)."""
    ci = paired_ci(values, np.zeros_like(values), st.one_sided_level)
    unit: dict[str, Any] = {"unit": name, "n": ci.n, "estimate": ci.mean_diff, "sd": ci.sd_diff,
                            "low": ci.ci_low, "high": ci.ci_high, "interval_level": st.one_sided_level,
                            "margin": margin, "direction": "above" if above else "below",
                            "mde": t_mde(ci.n, ci.sd_diff, st.alpha, st.power),
                            "values": [float(v) for v in values], **(extra or {})}
    unit["p_supported"], unit["p_contradicted"] = t_p(ci.mean_diff, ci.sd_diff, ci.n, margin, above)
    blocked = t_blocked(ci.n, ci.sd_diff, values, margin)
    if blocked:
        unit.update(verdict=INCONCLUSIVE, reason=blocked)
    else:
        v, why = directional(ci.ci_low, ci.ci_high, margin, above)
        unit.update(verdict=v, reason=f"{why} (n = {ci.n}; minimum detectable distance from the margin at "
                                      f"{st.power:.0%} power: {fmt(unit['mde'])})")
    return unit


def t_equivalence_unit(name: str, values: np.ndarray, margin: float, st: Settings,
                       extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """TOST at ``margin`` plus the two-sided test of 0 on the paired differences ``values``."""
    unit, eq, two = tost_fields(name, values, margin, st, extra, two_sided_mde=True)
    unit["p_value"] = two.p_value
    lo_p = t_p(eq.mean_diff, eq.sd_diff, eq.n, -margin, True)[0]
    hi_p = t_p(eq.mean_diff, eq.sd_diff, eq.n, margin, False)[0]
    unit["p_supported"], unit["p_contradicted"] = max(lo_p, hi_p), float(two.p_value)
    blocked = t_blocked(eq.n, eq.sd_diff)
    if blocked:
        unit.update(verdict=INCONCLUSIVE, reason=blocked)
    else:
        v, why = equivalence(eq.ci_low, eq.ci_high, two.ci_low, two.ci_high, margin)
        unit.update(verdict=v, reason=(f"{why} (n = {eq.n}; minimum detectable difference at {st.power:.0%} power: "
                                       f"{fmt(unit['mde'])}; smallest margin a TOST reaches at that power if the "
                                       f"true difference is 0: {fmt(unit['min_equivalence_margin'])})"))
    return unit


def spread_unit(name: str, a: np.ndarray, b: np.ndarray, margin: float, st: Settings,
                extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """F test of the variance ratio: sd(a) / sd(b) beyond ``margin`` (F2a-spread)."""
    vr = variance_ratio(a, b, st.one_sided_level)
    mde = margin * variance_ratio_mde(vr.n_a, vr.n_b, st.alpha, st.power)
    unit: dict[str, Any] = {"unit": name, "n": min(vr.n_a, vr.n_b), "estimate": vr.ratio, "sd_a": vr.sd_a,
                            "sd_b": vr.sd_b, "low": vr.low, "high": vr.high, "interval_level": st.one_sided_level,
                            "margin": margin, "mde": mde, **(extra or {})}
    if not math.isfinite(vr.ratio):
        unit.update(verdict=INCONCLUSIVE, reason="spread undefined (fewer than 2 seeds, or no spread with coverage)")
        return unit
    f_stat = (vr.ratio / margin) ** 2
    unit["p_supported"] = float(sps.f.sf(f_stat, vr.n_a - 1, vr.n_b - 1))
    unit["p_contradicted"] = float(sps.f.cdf(f_stat, vr.n_a - 1, vr.n_b - 1))
    v, why = directional(vr.low, vr.high, margin, True)
    unit.update(verdict=v, reason=f"{why} (n = {unit['n']} seeds each; {st.power:.0%} power needs a true sd ratio "
                                  f">= {fmt(mde)})")
    return unit


# --- assembling a finding ---------------------------------------------------------------------


@dataclass(frozen=True)
class Estimand:
    """What one verdict of a finding is about: the full model's accuracy, the sub-models' (F9), or the finding's one
    statistic. ``key``: the units' ``estimand`` field; ``label``: what the page calls it; ``claim``: the claim as it
    reads for this estimand; ``attribution``: whose claim it is, only as :data:`hasfl.analysis.findings.claims.
    AUTHOR_CLAIMS` records it (:func:`~hasfl.analysis.findings.claims.attribution`: the authors' estimand, with the
    sentence cited in docs/decisions.md), else None (the finding's own kind: the paper's claim or this project's
    extension)."""

    key: str
    label: str
    claim: str
    attribution: str | None = None


#: The estimand of a finding with one statistic.
CLAIM_ESTIMAND = "claim"
#: An estimand's ``attribution`` when no other authors' claim is about it: this project's question, or the paper's.
EXTENSION_ATTRIBUTION, PAPER_ATTRIBUTION = "this project's extension", "the paper"


def estimand_entry(fid: str, e: Estimand, units: Sequence[Mapping[str, Any]], kind: str, st: Settings,
                   not_run: str, conjunction: bool = False) -> dict[str, Any]:
    """One estimand's verdict: its in-scope units combined (:func:`combine`, as parts of one claim with
    ``conjunction``; Holm over its units' contradictions already applied), its claim, whose claim it is, its horizon
    (``st.horizon``) and its reason."""
    inside = [u for u in units if u.get("in_scope", True)]
    verdict = NOT_RUN if not inside else combine([u["verdict"] for u in inside], conjunction)
    who = attribution(fid, e.key, e.attribution)
    return {"estimand": e.key, "label": e.label, "claim": e.claim,
            "attribution": who or (EXTENSION_ATTRIBUTION if kind != PAPER_CLAIM else PAPER_ATTRIBUTION),
            "verdict": verdict, "units": [u["unit"] for u in inside], "horizon": dict(st.horizon or {}),
            "reason": (f"not run: {not_run}" if not inside else
                       "; ".join(f"{u['unit']}: {u['verdict']} -- {u['reason']}" for u in inside))}


def finding(fid: str, *, claim: str, source: str, scope: str, statistic: str, test: str, margin_key: str | None,
            st: Settings, units: list[dict[str, Any]], files: Sequence[str], mde_meaning: str,
            not_run: str, extension: bool = False, kind: str | None = None,
            conjunction: bool = False, estimands: Sequence[Estimand] = ()) -> dict[str, Any]:
    """One finding of findings.json. Each estimand (``estimands``; one, the claim's statistic, by default) is its own
    verdict: its units (``unit["estimand"]``) corrected among themselves (Holm over their contradictions) and
    combined (:func:`combine`) over those in scope. The finding's ``verdict`` is their summary
    (:func:`~hasfl.analysis.findings.verdicts.summarize`): their common verdict, :data:`SPLIT` where they differ
    (each estimand's is then what the page shows), :data:`NOT_RUN` where no unit ran."""
    kind = kind or (EXTENSION if extension else PAPER_CLAIM)
    ests = list(estimands) or [Estimand(CLAIM_ESTIMAND, "", claim)]
    keys = [e.key for e in ests]
    for u in units:
        u.setdefault("in_scope", True)
        u.setdefault("estimand", keys[0])
        if u["estimand"] not in keys:
            raise ValueError(f"finding {fid}: unit {u['unit']} has estimand {u['estimand']!r}, not one of {keys}")
    if kind in SEED_RULE_KINDS:
        for u in units:  # before Holm: a unit without seed-to-seed variance is no test to correct for
            why = seeds_gate(u, st.th.get("min_seeds_for_verdict", 2.0)) if int(u.get("n") or 0) >= 1 else None
            if why and not u.get("gate"):
                gate_unit(u, why)
                u["gate_kind"] = SEEDS_GATE
    entries = []
    for e in ests:
        own = [u for u in units if u["estimand"] == e.key]
        if not conjunction:  # the parts of a conjunction must all hold: Holm runs over their contradictions only
            holm([u for u in own if u["in_scope"]], st.alpha)
        entries.append(estimand_entry(fid, e, own, kind, st, not_run, conjunction))
    inside = [u for u in units if u["in_scope"]]
    verdict = summarize([x["verdict"] for x in entries])
    if not inside:
        reason = f"not run: {not_run}"
    elif len(entries) > 1:
        reason = "; ".join(f"{x['label']}: {x['verdict']}" for x in entries if x["verdict"] != NOT_RUN) + " -- " + \
            "; ".join(f"{u['unit']}: {u['verdict']} -- {u['reason']}" for u in inside)
    else:
        reason = "; ".join(f"{u['unit']}: {u['verdict']} -- {u['reason']}" for u in inside)
    margin = st.th[margin_key] if margin_key else None
    return clean({
        "id": fid, "claim": claim, "source": source, "scope": SCOPE_TEXT.get(scope, scope), "extension": extension,
        "kind": kind, "statistic": statistic, "test": test,
        "margin_key": f"analysis.{margin_key}" if margin_key else None,
        "margin": margin, "alpha": st.alpha, "power": st.power, "verdict": verdict, "reason": reason,
        "estimands": entries, "horizon": dict(st.horizon or {}),
        "n_units": len(inside), "n_per_unit": {u["unit"]: u.get("n") for u in inside},
        "mde": {u["unit"]: u.get("mde") for u in inside}, "mde_meaning": mde_meaning,
        "units": units, "files": list(files)})
