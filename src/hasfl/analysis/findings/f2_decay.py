"""F2a, F2a-spread, F2b [Sections 4.2-4.3, Table 4; image], F2c [Section 4.6; Shakespeare]: decay
without the coverage guarantee.

* F2a [4.3, Table 4; image] decay(hasfl_nocov) - decay(hasfl) > ``f2_min_decay_gap_pct``
  (paired one-sided t over seeds; decay = best - final).
* F2a-spread [4.3; image] sd(final, hasfl_nocov) / sd(final, hasfl) > ``f2_min_spread_ratio``
  (F interval of the variance ratio).
* F2b [4.2-4.3; image] decay(uniform) - decay(heterofl) > ``f2_min_decay_gap_pct`` (paired).
* F2c [4.6; Shakespeare] Uniform does not collapse: its decline best - final < ``f2c_max_decline_pct``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.findings.endpoints import (
    decay_gate,
)
from hasfl.analysis.findings.kernel import (
    IMAGE,
    T3S,
    T4S,
    T7S,
    TEXT,
    FindingSpec,
    Settings,
    finding,
    gate_unit,
    has_runs,
    in_scope,
    left_out_note,
    paired,
    seed_values,
    spread_unit,
    t_unit,
)

F2A, F2A_SPREAD, F2B, F2C = "F2a", "F2a-spread", "F2b", "F2c"


def decay(delta_pct: float) -> float:
    """Peak-to-final decay from Table 4's delta."""
    return -delta_pct  # delta = final - best <= 0; decay = best - final >= 0


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F2a, F2a-spread, F2b [Sections 4.2-4.3, Table 4; image], F2c [Section 4.6; Shakespeare]."""
    t3s, t4s, t7s = t[T3S], t[T4S], t[T7S]
    image = [d for d in datasets if in_scope(d, IMAGE)]
    margin = st.th["f2_min_decay_gap_pct"]
    out = []
    units, spread = [], []
    for d in image:
        if not (has_runs(t4s, d, "hasfl_nocov") and has_runs(t4s, d, "hasfl")):
            continue
        p = paired(t4s, "hasfl_nocov", t4s, "hasfl", d, "delta_pct", transform=decay)
        extra = {"seeds": p.seeds, "decay_hasfl_nocov": list(p.a), "decay_hasfl": list(p.b)}
        u = t_unit(d, p.diff, margin, True, st, extra)
        u["reason"] += left_out_note(p.left_out)
        units.append(gate_unit(u, decay_gate(d, p.seeds, [(t4s, "hasfl_nocov"), (t4s, "hasfl")]), st))
        q = paired(t4s, "hasfl_nocov", t4s, "hasfl", d, "final_acc_pct")
        s = spread_unit(d, q.a, q.b, st.th["f2_min_spread_ratio"], st,
                        {"seeds": q.seeds, "final_hasfl_nocov": list(q.a), "final_hasfl": list(q.b)})
        s["reason"] += left_out_note(q.left_out)
        spread.append(s)
    files4 = [f"tables/{T4S}.parquet"]
    out.append(finding(
        F2A, claim="Without the coverage guarantee the peak-to-final decay is larger (hasfl_nocov vs hasfl)",
        source="Section 4.3, Table 4", scope=IMAGE,
        statistic="per seed: decay(hasfl_nocov) - decay(hasfl), decay = best - final accuracy (points)",
        test="paired one-sided t test over seeds: supported if the lower bound > margin, contradicted if the upper "
             "bound < margin; withheld (failed to train) when a seed of either method is at the majority-class "
             "floor", margin_key="f2_min_decay_gap_pct", st=st, units=units,
        files=files4,
        mde_meaning="smallest true mean gap above the margin detected with the configured power (points)",
        not_run="hasfl_nocov or hasfl not run on an image dataset"))
    out.append(finding(
        F2A_SPREAD, claim="Without the coverage guarantee the seed-to-seed spread of final accuracy grows "
                          "('roughly doubles')", source="Section 4.3, Table 4", scope=IMAGE,
        statistic="sd over seeds of final accuracy, hasfl_nocov / hasfl",
        test="F test of the variance ratio (one-sided bounds of the sd ratio): supported if the lower bound > margin, "
             "contradicted if the upper bound < margin", margin_key="f2_min_spread_ratio", st=st, units=spread,
        files=files4, mde_meaning="true sd ratio at which the test returns supported with the configured power",
        not_run="hasfl_nocov or hasfl not run on an image dataset"))
    units = []
    for d in image:
        if not (has_runs(t3s, d, "uniform") and has_runs(t4s, d, "heterofl")):
            continue
        p = paired(t3s, "uniform", t4s, "heterofl", d, "delta_pct", transform=decay)
        u = t_unit(d, p.diff, margin, True, st, {"seeds": p.seeds, "decay_uniform": list(p.a),
                                                  "decay_heterofl": list(p.b)})
        u["reason"] += left_out_note(p.left_out)
        gate = decay_gate(d, p.seeds, [(t3s, "uniform"), (t4s, "heterofl")])
        units.append(gate_unit(u, gate, st))
    out.append(finding(
        F2B, claim="A coverage-violating static policy decays more than a fully covering one (uniform vs heterofl)",
        source="Sections 4.2-4.3, Tables 3-4", scope=IMAGE,
        statistic="per seed: decay(uniform) - decay(heterofl), points",
        test="paired one-sided t test over seeds (as F2a); withheld (failed to train) when a seed is at the "
             "floor", margin_key="f2_min_decay_gap_pct", st=st, units=units,
        files=[f"tables/{T3S}.parquet", f"tables/{T4S}.parquet"],
        mde_meaning="smallest true mean gap above the margin detected with the configured power (points)",
        not_run="uniform or heterofl not run on an image dataset"))
    units = []
    for d in [d for d in datasets if in_scope(d, TEXT)]:
        if not has_runs(t7s, d, "uniform"):
            continue
        vals, left = seed_values(t7s, d, "uniform", "delta_pct")
        seeds = sorted(vals)
        u = t_unit(d, np.array([decay(vals[s]) for s in seeds]), st.th["f2c_max_decline_pct"], False, st,
                   {"seeds": seeds, "best_acc_pct": [seed_values(t7s, d, "uniform", "best_acc_pct")[0].get(s)
                                                     for s in seeds]})
        u["reason"] += left_out_note(left)
        units.append(gate_unit(u, decay_gate(d, seeds, [(t7s, "uniform")]), st))
    out.append(finding(
        F2C, claim="Uniform does not collapse on Shakespeare although it caps every client at half width",
        source="Sections 4.3 and 4.6, Table 7", scope=TEXT,
        statistic="per seed: Uniform's decline best - final accuracy (points)",
        test="one-sided t test over seeds: supported if the upper bound < margin, contradicted if the lower bound "
             "> margin; withheld (failed to train) when a seed is at the floor (a run that never rose cannot show "
             "that it does not collapse)", margin_key="f2c_max_decline_pct", st=st, units=units, files=[f"tables/{T7S}.parquet"],
        mde_meaning="smallest true distance below the margin detected with the configured power (points)",
        not_run="uniform not run on a natural-partition dataset"))
    return out


SPEC = FindingSpec(
    ids=(F2A, F2A_SPREAD, F2B, F2C), tables=(T3S, T4S, T7S),
    methods={F2A: ("hasfl_nocov", "hasfl"), F2A_SPREAD: ("hasfl_nocov", "hasfl"), F2B: ("uniform", "heterofl"),
             F2C: ("uniform",)},
    margins=("f2_min_decay_gap_pct", "f2_min_spread_ratio", "f2c_max_decline_pct"), evaluate=evaluate)
