"""F3 [Section 4.4, Table 6; image] and F3-shakespeare [Section 4.6, Table 7]: the allocation
is no better than its matched budget.

* F3 [4.4; image] final acc(hasfl) - final acc(random_budget): TOST with margin
  ``f3_equiv_margin_pct`` on the paired per-seed differences; contradicted when the
  two-sided interval excludes 0, at the rung's horizon; withheld as "failed to train" when a run is at the floor
  (:func:`~hasfl.analysis.findings.endpoints.paired_final_gate`); the gap's trend is a caveat beside it
  (:func:`~hasfl.analysis.findings.endpoints.gap_trend`).
* F3-shakespeare [4.6; Shakespeare] HAS-FL is the weakest of HAS-FL / FjORD / Uniform
  (paired gaps > ``f3s_min_acc_gap_pct``) while training the widest sub-models (paired
  gaps of the trained width > ``f3s_min_p_gap``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.findings.endpoints import (
    final_gate,
    gap_trend,
    paired_final_gate,
    pair_slopes,
    paired_slopes,
)
from hasfl.analysis.findings.kernel import (
    IMAGE,
    MBS,
    T7S,
    TEXT,
    FindingSpec,
    Settings,
    conjunction_unit,
    finding,
    gate_unit,
    has_runs,
    in_scope,
    left_out_note,
    num,
    paired,
    t_equivalence_unit,
    t_unit,
)

F3, F3_SHAKESPEARE = "F3", "F3-shakespeare"


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F3 [Section 4.4; image] and F3-shakespeare [Section 4.6]."""
    mbs, t7s = t[MBS], t[T7S]
    units = []
    for d in [d for d in datasets if in_scope(d, IMAGE)]:
        rows = mbs[(mbs["dataset"] == d)] if len(mbs) else mbs
        if not len(rows):
            continue
        ok = rows[rows["paired"].astype(bool)]
        diff = ok["diff_final_acc_pct"].to_numpy(dtype=np.float64)
        keep = np.isfinite(diff)
        left = sorted(set(int(s) for s in rows["seed"]) - set(int(s) for s in ok["seed"].to_numpy()[keep]))
        u = t_equivalence_unit(d, diff[keep], st.th["f3_equiv_margin_pct"], st,
                               {"seeds": [int(s) for s in ok["seed"].to_numpy()[keep]]})
        u["reason"] += left_out_note(left)
        gap_trend(u, pair_slopes(ok[keep], "hasfl", "random_budget"), st, st.th["f3_equiv_margin_pct"], tost=True)
        u = gate_unit(u, paired_final_gate(ok[keep], (("hasfl", "hasfl"), ("random_budget", "random_budget"))))
        units.append(u)
    out = [finding(
        F3, claim="HAS-FL and the matched-budget random control reach indistinguishable final accuracy",
        source="Section 4.4, Table 6", scope=IMAGE,
        statistic="per seed: final acc(hasfl) - final acc(random_budget), points",
        test="TOST on the paired differences: supported if the 1 - 2 alpha interval lies inside +-margin; "
             "contradicted if the 1 - alpha interval excludes 0 (precedence); inconclusive otherwise, at the rung's "
             "horizon; withheld (failed to train) when a run is at the floor; the gap's trend is reported beside it",
        margin_key="f3_equiv_margin_pct", st=st, units=units, files=[f"tables/{MBS}.parquet"],
        mde_meaning="minimum detectable difference of the two-sided test at the configured power (points); "
                    "min_equivalence_margin per unit: the smallest margin a TOST reaches",
        not_run="hasfl or random_budget not run on an image dataset")]
    units = []
    m_acc, m_p = st.th["f3s_min_acc_gap_pct"], st.th["f3s_min_p_gap"]
    for d in [d for d in datasets if in_scope(d, TEXT)]:
        if not all(has_runs(t7s, d, m) for m in ("hasfl", "fjord", "uniform")):
            continue
        missing = [c for c in ("avg_p_trained",) if c not in t7s.columns]
        if missing:
            raise ValueError(f"findings: tables/{T7S}.parquet lacks {missing} (the width trained and uploaded); "
                             "rerun the training jobs and Table 7")
        parts = []
        for other in ("fjord", "uniform"):
            p = paired(t7s, other, t7s, "hasfl", d, "final_acc_pct")
            u = t_unit(f"final acc({other}) - final acc(hasfl)", p.diff, m_acc, True, st, {"seeds": p.seeds})
            u["reason"] += left_out_note(p.left_out)
            gap_trend(u, paired_slopes(t7s, other, t7s, "hasfl", d, p.seeds), st, m_acc)
            parts.append(gate_unit(u, final_gate(d, p.seeds, [(t7s, other), (t7s, "hasfl")]), st))
        for other in ("fjord", "uniform"):  # Table 7's Avg. p is the width allocated; trained width beside it
            p = paired(t7s, "hasfl", t7s, other, d, "avg_p")
            trained = paired(t7s, "hasfl", t7s, other, d, "avg_p_trained")
            u = t_unit(f"allocated width(hasfl) - allocated width({other})", p.diff, m_p, True, st,
                       {"seeds": p.seeds, "trained_width_diff": list(trained.diff)})
            u["reason"] += left_out_note(p.left_out)
            parts.append(u)
        # the claim needs all four parts: Holm over the parts, then every part must hold
        units.append(conjunction_unit(d, parts, st, {
            "mde": max((u["mde"] for u in parts[:2] if math.isfinite(num(u["mde"]))), default=math.nan)}))
    out.append(finding(
        F3_SHAKESPEARE, claim="On Shakespeare HAS-FL is the weakest of HAS-FL, FjORD and Uniform while using the most "
                              "capacity", source="Section 4.6, Table 7", scope=TEXT,
        statistic="per seed: final acc(FjORD or Uniform) - final acc(HAS-FL) (points) and the allocated width "
                  "Avg. p (HAS-FL) - (FjORD or Uniform), as Table 7 reports capacity; the width trained and uploaded "
                  "(FjORD trains at pmax) beside it in each part (trained_width_diff)",
        test="four paired one-sided t tests over seeds, each supported if its lower bound > margin and contradicted "
             "if its upper bound < margin, then Holm's correction over the four parts; the unit is supported only if "
             "all four are after it, contradicted if one is; an accuracy part with a run at the floor is withheld "
             "(failed to train); each accuracy part's gap trend is reported beside it",
        margin_key="f3s_min_acc_gap_pct", st=st, units=units, files=[f"tables/{T7S}.parquet"],
        mde_meaning="the larger minimum detectable accuracy gap of the two accuracy tests (points); per part in "
                    "units[].parts", not_run="hasfl, fjord or uniform not run on a natural-partition dataset"))
    return out


SPEC = FindingSpec(
    ids=(F3, F3_SHAKESPEARE), tables=(MBS, T7S),
    methods={F3: ("hasfl", "random_budget"), F3_SHAKESPEARE: ("hasfl", "fjord", "uniform")},
    margins=("f3_equiv_margin_pct", "f3s_min_acc_gap_pct", "f3s_min_p_gap"), evaluate=evaluate)
