"""F8-probe, F8-reported [Section 4.4's matched-budget control applied to E2 / E3; this project's
extension of Section 5; every dataset]: allocating by the estimator beats its matched random budget.

Per-seed final acc (hasfl_probe - random_budget_probe), resp. reported: supported when the
one-sided lower bound > 0; contradicted when the one-sided upper bound < 0 (worse) or the TOST
of F3 shows equivalence within +-``f3_equiv_margin_pct``; inconclusive otherwise; a significant
positive difference takes precedence over equivalence (as in F3, a significant difference is not
"indistinguishable"), at the rung's horizon. A run at the floor withholds the unit as "failed to train"
(:func:`~hasfl.analysis.findings.endpoints.paired_final_gate`); the gap's trend is a caveat beside it. A pair whose estimate equals TV on
every run (F7) allocates by the true label histogram: an oracle test.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.findings.f7_estimators import equals_tv
from hasfl.analysis.findings.endpoints import (
    gap_trend,
    pair_slopes,
    paired_final_gate,
)
from hasfl.analysis.findings.kernel import (
    ALL,
    CONTRADICTED,
    EXTENSION,
    INCONCLUSIVE,
    MBES,
    ORACLE,
    SUPPORTED,
    T8S,
    FindingSpec,
    Settings,
    finding,
    fmt,
    gate_unit,
    left_out_note,
    t_blocked,
    tost_fields,
)
from hasfl.analysis.specs import ESTIMATOR_PAIRS

F8_IDS = tuple(f"F8-{pair}" for pair, *_ in ESTIMATOR_PAIRS)


def t_beats_unit(name: str, values: np.ndarray, margin: float, st: Settings,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """F8: one-sided t test of mean > 0 (supported), of mean < 0 or TOST at +-margin (contradicted)."""
    import scipy.stats as sps

    unit, eq, _ = tost_fields(name, values, margin, st, extra, two_sided_mde=False)
    p_one = float(sps.t.sf(eq.t_stat, eq.n - 1)) if eq.n >= 2 and math.isfinite(eq.t_stat) else math.nan
    unit["p_value_one_sided"] = p_one
    blocked = t_blocked(eq.n, eq.sd_diff)
    if blocked:
        unit.update(verdict=INCONCLUSIVE, reason=blocked)
        return unit
    low, high = eq.ci_low, eq.ci_high
    if low > 0.0:
        v, why = SUPPORTED, f"lower bound {fmt(low)} > 0 (one-sided p = {fmt(p_one)}): beats its control"
    elif high < 0.0:
        v, why = CONTRADICTED, f"upper bound {fmt(high)} < 0: worse than its control"
    elif -margin < low and high < margin:
        v, why = CONTRADICTED, (f"the TOST interval [{fmt(low)}, {fmt(high)}] lies inside +-{fmt(margin)}: "
                                "equivalent to its control, does not beat it")
    else:
        v, why = INCONCLUSIVE, (f"the interval [{fmt(low)}, {fmt(high)}] contains 0 and is not inside "
                                f"+-{fmt(margin)}")
    unit.update(verdict=v, reason=(f"{why} (n = {eq.n}; {st.power:.0%} power needs a true difference >= "
                                   f"{fmt(unit['mde'])} for supported; smallest margin a TOST reaches at that power "
                                   f"if the true difference is 0: {fmt(unit['min_equivalence_margin'])})"))
    return unit


def floor_list(flags: Sequence[Any], seeds: Sequence[int]) -> list[int]:
    """The seeds whose flag is set (NA / None: not at the floor)."""
    return [int(s) for s, f in zip(seeds, flags, strict=True) if f is not None and f is not pd.NA and bool(f)]


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F8-probe, F8-reported [Section 4.4's control applied to E2 / E3; every dataset]. A pair whose estimate
    equals TV on every run (Table 8's per-seed rows) allocates by the true label histogram: an oracle test."""
    mbes, t8s = t[MBES], t[T8S]
    out = []
    margin_key = "f3_equiv_margin_pct"
    for pair, alloc, control, est in ESTIMATOR_PAIRS:
        units = []
        rows_all = mbes[mbes["pair"] == pair] if len(mbes) and "pair" in mbes.columns else pd.DataFrame()
        for d in datasets:
            rows = rows_all[rows_all["dataset"] == d] if len(rows_all) else rows_all
            if not len(rows):
                continue
            ok = rows[rows["paired"].astype(bool)]
            diff = ok["diff_final_acc_pct"].to_numpy(dtype=np.float64)
            keep = np.isfinite(diff)
            seeds = [int(s) for s in ok["seed"].to_numpy()[keep]]
            left = sorted(set(int(s) for s in rows["seed"]) - set(seeds))
            extra: dict[str, Any] = {"seeds": seeds}
            notes = []
            for col, m in (("alloc_at_floor", alloc), ("control_at_floor", control)):
                if col in ok.columns:
                    at = floor_list(list(ok[col].to_numpy()[keep]), seeds)
                    extra[f"{col}_seeds"] = at
                    if at:
                        notes.append(f"{m} {len(at)} of {len(seeds)}")
            u = t_beats_unit(d, diff[keep], st.th[margin_key], st, extra)
            u["reason"] += left_out_note(left)
            if notes:
                u["floor_note"] = "**at floor: " + ", ".join(notes) + "**"
                u["reason"] += "; runs at the accuracy floor: " + ", ".join(notes)
            gap_trend(u, pair_slopes(ok[keep], "alloc", "control"), st, st.th[margin_key], tost=True)
            units.append(gate_unit(u, paired_final_gate(ok[keep], (("alloc", alloc), ("control", control)))))
        out.append(finding(
            f"F8-{pair}", claim=f"Allocating by {est} ({alloc}) beats its matched random budget ({control})",
            source="Section 4.4's matched-budget control applied to this project's estimator methods (extension)",
            scope=ALL, statistic=f"per seed: final acc({alloc}) - final acc({control}), points",
            test="paired t over seeds: supported if the one-sided lower bound > 0; contradicted if the one-sided "
                 "upper bound < 0 or the TOST interval (1 - 2 alpha) lies inside +-margin (F3's margin); a "
                 "significant positive difference takes precedence; inconclusive otherwise, at the rung's horizon; "
                 "withheld (failed to train) when a run is at the floor; the gap's trend is reported beside it",
            margin_key=margin_key, st=st, units=units, files=[f"tables/{MBES}.parquet"],
            mde_meaning="smallest true mean difference detected as 'beats' with the configured power (points); "
                        "min_equivalence_margin per unit: the smallest margin a TOST reaches",
            not_run=f"{alloc} or {control} not run in this preset", extension=True,
            kind=ORACLE if equals_tv(t8s, est) else EXTENSION))
    return out


#: No methods: each unit carries its own floor note (``floor_note``, the pair's runs).
SPEC = FindingSpec(ids=F8_IDS, tables=(MBES, T8S),
                   methods={f"F8-{pair}": (alloc, control) for pair, alloc, control, _e in ESTIMATOR_PAIRS},
                   margins=("f3_equiv_margin_pct",), evaluate=evaluate, optional=True)
