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
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats as sps

from hasfl.analysis.artifacts import natural_partition
from hasfl.analysis.findings.multiplicity import _sf, decisive_p, holm, holm_step_down, t_p, z_p  # noqa: F401 (re-exported)
from hasfl.analysis.findings.verdicts import (  # noqa: F401 (re-exported: the families import them from here)
    CONTRADICTED,
    INCONCLUSIVE,
    MIXED,
    SUPPORTED,
    clean,
    combine,
    directional,
    equivalence,
    fmt,
    num,
)
from hasfl.analysis.stats import (
    paired_ci,
    t_equivalence_margin,
    t_mde,
    variance_ratio,
    variance_ratio_mde,
)

#: A finding's verdict: its units combined (:func:`combine`); ``mixed`` when some support and others contradict.
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, MIXED)
#: The rules that keep a verdict within its evidence (report.md and the results pages state them).
VERDICT_RULES = (
    "A finding's units (datasets, or runs for F5) are combined: **mixed** when some support and others contradict "
    "(one dataset does not override another), **contradicted** when one contradicts and none supports, "
    "**supported** only when all do, **inconclusive** otherwise; the parts of one claim (F3-shakespeare's four "
    "tests, F5's runs) must all hold, so one contradicted part contradicts it, and a conjunction's parts are "
    "corrected among themselves (Holm over its parts) before they are combined. A claim's unit (a paper claim or an "
    "extension) needs at least `analysis.min_seeds_for_verdict` seeds (2): with one it is inconclusive (\"1 seed: no "
    "seed-to-seed variance\"), a correlation over one run's clients included. Correlations are pooled over the "
    "seeds with random effects (Hartung-Knapp's interval, t on seeds - 1 df), the fixed effect beside them. "
    "A comparison of final accuracies (F3, F3-shakespeare's accuracy parts, F4, F8, F9b-F9g) is decided by its test "
    "at the rung's fixed horizon (each run's last evaluation, as the paper compares); the gap's slope over the "
    "evaluations in the last quarter of the rounds is reported beside it, and where its interval excludes 0 the "
    "reason says the gap is still moving (the ranking at convergence may differ) without changing the verdict "
    "(sub-model units have no curve: they say so). A unit with a run that **failed to train at this budget** (at "
    "the majority-class floor; for F9 also a training loss never below `analysis.f9_learned_loss_fraction` x ln K; a "
    "sub-model unit reads its sub-models' accuracy) is withheld and named so: at this rung that is evidence about "
    "the regime, not about the claim; the decay claims (F2a, F2b, F2c, F9a) follow the same rule. A claim that no "
    "data signal survives the capacity control (F1c supported, F7-E0 / F7-E1 contradicted) is withheld when the "
    "positive control on the same dataset (fedavg, equal widths) does not show that the estimate sees the data. "
    "Within a finding the units are corrected for multiplicity (Holm's step-down at alpha over its units); F7-E0 is "
    "F1c's statistic read by the mirror rule (F1c contradicted exactly when F7-E0 is supported). An inconclusive "
    "unit in the claim's scope that more seeds could decide (not one withheld because a run failed to train, nor "
    "one with a blind positive control) lists the seeds its test would need for the configured power at the spread observed, at Holm's level "
    "alpha / k, and their cost.")

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
    id absent: accuracy does not enter it); ``margins``: the keys of
    :data:`hasfl.analysis.specs.MARGINS` it uses; ``optional``: evaluated only when the
    optional findings' tables are given (the estimator findings F7 / F8, Section 5).
    """

    ids: tuple[str, ...]
    tables: tuple[str, ...]
    methods: Mapping[str, tuple[str, ...]]
    margins: tuple[str, ...]
    evaluate: Evaluate
    optional: bool = False

    def __post_init__(self) -> None:
        unknown = [fid for fid in self.methods if fid not in self.ids]
        if unknown:
            raise ValueError(f"FindingSpec {self.ids}: methods given for ids it does not produce: {unknown}")
        object.__setattr__(self, "methods", MappingProxyType({k: tuple(v) for k, v in self.methods.items()}))


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


def gate_unit(unit: dict[str, Any], why: str | None) -> dict[str, Any]:
    """``unit`` made inconclusive by ``why`` (its statistics kept, its test's reading after the reason); a reason
    that carries runs that failed to train (:class:`hasfl.analysis.findings.endpoints.Reason`) marks the unit
    ``gate_kind = "failed_to_train"`` and lists them (``failed_runs``)."""
    if why:
        unit.update(gate=why, verdict=INCONCLUSIVE, reason=f"{why} (the test alone: {unit['verdict']} -- "
                                                           f"{unit['reason']})")
        runs = getattr(why, "runs", ())
        if runs:
            unit["gate_kind"] = FAILED_TO_TRAIN
            unit["failed_runs"] = [dict(r) for r in runs]
    return unit


def left_out_note(left: Sequence[int]) -> str:
    return f"; seeds left out (not completed or NaN): {', '.join(map(str, left))}" if left else ""


# --- a conjunction (p-values and Holm's correction: hasfl.analysis.findings.multiplicity) ----------------


def conjunction_unit(name: str, parts: list[dict[str, Any]], st: Settings,
                     extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A unit that is the conjunction of several tests (``parts``, e.g. F3-shakespeare's four): Holm over
    the parts (:func:`holm`, ``what = "parts"``), then supported only if every part is, contradicted if one is
    (:func:`combine` with ``conjunction``); the reason names each part that Holm's correction failed."""
    holm(parts, st.alpha, "parts")
    verdict = combine([u["verdict"] for u in parts], conjunction=True)
    failed = [u["unit"] for u in parts if u.get("holm") is False]
    reason = "; ".join(f"{u['unit']}: {u['verdict']}" for u in parts)
    if failed:
        reason = (f"after Holm's correction over the {len(parts)} parts, {', '.join(failed)} "
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


def t_blocked(n: int, sd: float) -> str | None:
    """Why a t interval over ``n`` seeds with sample sd ``sd`` gives no verdict, else None."""
    if n < 2:
        return f"{n} seed(s): a t interval needs at least 2"
    if not sd > 0:
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
                            "margin": margin, "mde": t_mde(ci.n, ci.sd_diff, st.alpha, st.power),
                            "values": [float(v) for v in values], **(extra or {})}
    unit["p_supported"], unit["p_contradicted"] = t_p(ci.mean_diff, ci.sd_diff, ci.n, margin, above)
    blocked = t_blocked(ci.n, ci.sd_diff)
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


def finding(fid: str, *, claim: str, source: str, scope: str, statistic: str, test: str, margin_key: str | None,
            st: Settings, units: list[dict[str, Any]], files: Sequence[str], mde_meaning: str,
            not_run: str, extension: bool = False, kind: str | None = None,
            conjunction: bool = False) -> dict[str, Any]:
    """One finding of findings.json: its units combined (:func:`combine`) over those in scope."""
    inside = [u for u in units if u.get("in_scope", True)]
    for u in units:
        u.setdefault("in_scope", True)
    if (kind or (EXTENSION if extension else PAPER_CLAIM)) in SEED_RULE_KINDS:
        for u in units:  # before Holm: a unit without seed-to-seed variance is no test to correct for
            why = seeds_gate(u, st.th.get("min_seeds_for_verdict", 2.0)) if int(u.get("n") or 0) >= 1 else None
            if why and not u.get("gate"):
                gate_unit(u, why)
                u["gate_kind"] = SEEDS_GATE
    if not conjunction:  # the parts of a conjunction must all hold: no family of alternatives to correct for
        holm(inside, st.alpha)
    verdict = combine([u["verdict"] for u in inside], conjunction)
    if not inside:
        reason = f"not run: {not_run}"
    else:
        reason = "; ".join(f"{u['unit']}: {u['verdict']} -- {u['reason']}" for u in inside)
    margin = st.th[margin_key] if margin_key else None
    return clean({
        "id": fid, "claim": claim, "source": source, "scope": SCOPE_TEXT.get(scope, scope), "extension": extension,
        "kind": kind or (EXTENSION if extension else PAPER_CLAIM),
        "statistic": statistic, "test": test, "margin_key": f"analysis.{margin_key}" if margin_key else None,
        "margin": margin, "alpha": st.alpha, "power": st.power, "verdict": verdict, "reason": reason,
        "n_units": len(inside), "n_per_unit": {u["unit"]: u.get("n") for u in inside},
        "mde": {u["unit"]: u.get("mde") for u in inside}, "mde_meaning": mde_meaning,
        "units": units, "files": list(files)})
