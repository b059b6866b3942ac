"""The paper's claims as tests that can fail (findings.json).

Every finding tests one claim of the paper, in the scope the paper states it, on units with a
three-valued verdict (supported / contradicted / inconclusive) combined over the in-scope units;
the verdict rules, settings and test units are the kernel, :mod:`~hasfl.analysis.findings.kernel`.

One module per finding family, each declaring a :class:`~hasfl.analysis.findings.kernel.FindingSpec`
(ids, tables read, methods, margin keys of :data:`hasfl.analysis.specs.MARGINS`, evaluate);
:data:`FINDINGS` is their order in findings.json, from which every id and table list here is
derived. Paper sections in brackets; the statistics and margins are in each module:

* :mod:`~hasfl.analysis.findings.f1_confound` -- F1a-F1d [4.4, Table 5]: H~ tracks capacity, not data.
* :mod:`~hasfl.analysis.findings.f2_decay` -- F2a, F2a-spread, F2b [4.2-4.3, Table 4], F2c [4.6]:
  decay without the coverage guarantee.
* :mod:`~hasfl.analysis.findings.f3_matched_budget` -- F3 [4.4], F3-shakespeare [4.6, Table 7]: no better
  than its matched budget.
* :mod:`~hasfl.analysis.findings.f4_full_model` -- F4 [4.5, Table 6]: full-model training wins.
* :mod:`~hasfl.analysis.findings.f5_stale` -- F5 [3.3, Proposition 3]: untrained coordinates stay put.
* :mod:`~hasfl.analysis.findings.f6_control` -- F6 [4.7, this project's extension]: the positive control.
* :mod:`~hasfl.analysis.findings.f10_inheritance` -- F10a, F10b [4.7]: who inherits the confound (E0 coupled to
  capacity for every sub-model method, not for the equal-width ones), from Table 10 (every run logs E0).
* :mod:`~hasfl.analysis.findings.f9_rolling` -- F9a-F9g [4.2-4.3, this project's extension]: coverage
  without nesting (rolling windows and FedEcover's cyclic sampling at Uniform's budget; FedRolex vs HeteroFL),
  full-model accuracy, a run that never learned gating its unit. Not run without those methods.

The estimator findings (this project's extension of Section 5; ``optional``: evaluated when their
tables, :data:`ESTIMATOR_TABLES`, are given -- the workflow always gives them):

* :mod:`~hasfl.analysis.findings.f7_estimators` -- F7-E0 ... F7-E3: each estimate recovers TV once
  capacity is controlled.
* :mod:`~hasfl.analysis.findings.f8_estimator_budget` -- F8-probe, F8-reported: allocating by E2 / E3
  beats its matched random budget.

A new finding: one module declaring its ``SPEC`` and one entry in :data:`FINDINGS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.findings import (
    f1_confound,
    f2_decay,
    f3_matched_budget,
    f4_full_model,
    f5_stale,
    f6_control,
    f7_estimators,
    f10_inheritance,
    f8_estimator_budget,
    f9_rolling,
)
from hasfl.analysis.findings.f1_confound import F1A, F1B, F1C, F1D
from hasfl.analysis.findings.f2_decay import F2A, F2A_SPREAD, F2B, F2C
from hasfl.analysis.findings.f3_matched_budget import F3, F3_SHAKESPEARE
from hasfl.analysis.findings.f4_full_model import F4
from hasfl.analysis.findings.f5_stale import F5
from hasfl.analysis.findings.f6_control import F6
from hasfl.analysis.findings.f7_estimators import F7_IDS
from hasfl.analysis.findings.f8_estimator_budget import F8_IDS
from hasfl.analysis.findings.f9_rolling import F9A, F9B, F9C, F9D, F9E, F9F, F9G
from hasfl.analysis.findings.f10_inheritance import F10A, F10B
from hasfl.analysis.findings.kernel import (
    CONTRADICTED,
    EXTENSION,
    INCONCLUSIVE,
    KINDS,
    MBES,
    MBS,
    MIXED,
    NOT_RUN,
    ORACLE,
    P3,
    PAPER_CLAIM,
    PIPELINE_CHECK,
    SPLIT,
    SUPPORTED,
    T3S,
    T4B,
    T4S,
    T5,
    T6S,
    T7S,
    T8S,
    VERDICT_RULES,
    VERDICTS,
    FindingSpec,
    Settings,
    combine,
    finding_kind,
)
from hasfl.analysis.findings.seeds import annotate as annotate_seeds
from hasfl.analysis.specs import alpha_of

__all__ = [
    "ALL_FINDING_IDS",
    "CONTRADICTED",
    "ESTIMATOR_FINDING_IDS",
    "ESTIMATOR_TABLES",
    "EXTENSION",
    "F1A",
    "F1B",
    "F1C",
    "F1D",
    "F2A",
    "F2A_SPREAD",
    "F2B",
    "F2C",
    "F3",
    "F3_SHAKESPEARE",
    "F4",
    "F5",
    "F6",
    "F10A",
    "F10B",
    "F7_IDS",
    "F8_IDS",
    "F9A",
    "F9B",
    "F9C",
    "F9D",
    "F9E",
    "F9F",
    "F9G",
    "FINDINGS",
    "FINDING_METHODS",
    "FINDING_RUNS",
    "FINDING_IDS",
    "FindingSpec",
    "INCONCLUSIVE",
    "MIXED",
    "NOT_RUN",
    "SPLIT",
    "KINDS",
    "MBES",
    "MBS",
    "ORACLE",
    "P3",
    "T4B",
    "PAPER_CLAIM",
    "PIPELINE_CHECK",
    "OPTIONAL_TABLES",
    "REQUIRED_TABLES",
    "SUPPORTED",
    "Settings",
    "T3S",
    "T4S",
    "T5",
    "T6S",
    "T7S",
    "T8S",
    "VERDICT_RULES",
    "VERDICTS",
    "alpha_of",
    "combine",
    "evaluate_findings",
    "finding_kind",
    "table_names",
]

#: The finding families in findings.json order (paper findings, then the optional estimator findings).
FINDINGS: tuple[FindingSpec, ...] = (
    f1_confound.SPEC,
    f2_decay.SPEC,
    f3_matched_budget.SPEC,
    f4_full_model.SPEC,
    f5_stale.SPEC,
    f6_control.SPEC,
    f10_inheritance.SPEC,
    f9_rolling.SPEC,
    f7_estimators.SPEC,
    f8_estimator_budget.SPEC,
)
#: The methods whose runs each finding compares (report.md's floor notes; what its extra seeds cost).
FINDING_METHODS = {fid: methods for spec in FINDINGS for fid, methods in spec.methods.items()}
#: The methods whose runs each finding reads, where they are known (a page's "Reproduce a claim"; a finding absent
#: reads every run of its datasets: F10a / F10b, every method's E0).
FINDING_RUNS = {fid: spec.runs_of(fid) for spec in FINDINGS for fid in spec.ids if spec.runs_of(fid) is not None}


def _ordered_union(groups: Sequence[Sequence[str]], exclude: Sequence[str] = ()) -> tuple[str, ...]:
    return tuple(dict.fromkeys(x for g in groups for x in g if x not in exclude))


#: The paper's findings F1-F6 (always evaluated).
FINDING_IDS: tuple[str, ...] = tuple(fid for s in FINDINGS if not s.optional for fid in s.ids)
#: The estimator findings: F7 per estimator (E0-E3), F8 per allocating pair (probe, reported).
ESTIMATOR_FINDING_IDS: tuple[str, ...] = tuple(fid for s in FINDINGS if s.optional for fid in s.ids)
ALL_FINDING_IDS: tuple[str, ...] = (*FINDING_IDS, *ESTIMATOR_FINDING_IDS)
#: Tables findings.json is computed from (file names without .parquet under tables/).
REQUIRED_TABLES: tuple[str, ...] = _ordered_union([s.tables for s in FINDINGS if not s.optional])
#: Tables of the estimator findings F7 / F8 (all or none).
ESTIMATOR_TABLES: tuple[str, ...] = _ordered_union([s.tables for s in FINDINGS if s.optional], REQUIRED_TABLES)
#: Tables a finding reads when given, each on its own (F9's sub-model unit, :data:`f9_rolling.SUBMODEL_TABLE`;
#: without it F9 has no sub-model unit and says so). The workflow gives them.
OPTIONAL_TABLES: tuple[str, ...] = (f9_rolling.SUBMODEL_TABLE, f10_inheritance.T10)


def table_names(available: Sequence[str]) -> list[str]:
    """The tables findings.json reads among ``available`` (names): every required one, the estimator tables when
    one of them is there (:func:`evaluate_findings` then asks for all), each optional one that is there."""
    have = set(available)
    est = list(ESTIMATOR_TABLES) if have & set(ESTIMATOR_TABLES) else []
    return [*REQUIRED_TABLES, *est, *(n for n in OPTIONAL_TABLES if n in have)]


def evaluate_findings(tables: Mapping[str, pd.DataFrame], *, datasets: Sequence[str],
                      thresholds: Mapping[str, float],
                      seed_hours: Mapping[str, Mapping[str, float]] | None = None,
                      horizon: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """All findings, in the order of :data:`FINDING_IDS` (see the module docstring), followed by
    F7 / F8 (:data:`ESTIMATOR_FINDING_IDS`) when ``tables`` holds :data:`ESTIMATOR_TABLES`.

    ``tables`` maps every name of :data:`REQUIRED_TABLES` (and optionally of
    :data:`ESTIMATOR_TABLES`, all or none) to its frame; ``seed_hours`` (dataset -> method -> job-hours per
    seed) prices the seeds each inconclusive unit needs (:mod:`hasfl.analysis.findings.seeds`).

    Raises:
        ValueError: naming a missing table.
    """
    missing = [n for n in REQUIRED_TABLES if n not in tables]
    given = [n for n in ESTIMATOR_TABLES if n in tables]
    if given:
        missing += [n for n in ESTIMATOR_TABLES if n not in tables]
    if missing:
        raise ValueError(f"findings: missing table(s) {', '.join(missing)}")
    st = Settings(alpha=alpha_of(thresholds), power=float(thresholds["power"]), th=thresholds, horizon=horizon)
    out: list[dict[str, Any]] = []
    for spec in FINDINGS:
        if spec.optional and not given:
            continue
        items = spec.evaluate(tables, datasets, st)
        got = [f["id"] for f in items]
        assert got == list(spec.ids), (spec.ids, got)
        out += items
    annotate_seeds(out, st, FINDING_METHODS, seed_hours)  # every inconclusive unit: the seeds it would take
    return out
