"""F4 [Section 4.5, Table 6; image]: full-model training beats sub-model training.

final acc(fedavg) - final acc(hasfl) > ``f4_min_gap_pct`` (paired one-sided t over seeds) at the rung's horizon; a
unit with a run at the floor is withheld as "failed to train" (:func:`~hasfl.analysis.findings.endpoints.final_gate`);
the gap's trend at the end is a caveat beside it (:func:`~hasfl.analysis.findings.endpoints.gap_trend`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.findings.endpoints import (
    final_gate,
    gate_arms,
    gap_trend,
    paired_slopes,
)
from hasfl.analysis.findings.kernel import (
    IMAGE,
    T6S,
    FindingSpec,
    Settings,
    finding,
    has_runs,
    in_scope,
    left_out_note,
    paired,
    t_unit,
)

F4 = "F4"


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F4 [Section 4.5, Table 6; image]."""
    t6s = t[T6S]
    units = []
    for d in [d for d in datasets if in_scope(d, IMAGE)]:
        if not (has_runs(t6s, d, "fedavg") and has_runs(t6s, d, "hasfl")):
            continue
        p = paired(t6s, "fedavg", t6s, "hasfl", d, "final_acc_pct")
        u = t_unit(d, p.diff, st.th["f4_min_gap_pct"], True, st, {"seeds": p.seeds, "fedavg": list(p.a),
                                                                   "hasfl": list(p.b)})
        u["reason"] += left_out_note(p.left_out)
        gap_trend(u, paired_slopes(t6s, "fedavg", t6s, "hasfl", d, p.seeds), st, st.th["f4_min_gap_pct"])
        units.append(gate_arms(u, None, final_gate(d, p.seeds, [(t6s, "fedavg"), (t6s, "hasfl")]), st,
                               better="fedavg"))
    return [finding(
        F4, claim="Full-model training beats sub-model training (fedavg vs hasfl final accuracy)",
        source="Section 4.5, Table 6", scope=IMAGE, statistic="per seed: final acc(fedavg) - final acc(hasfl), points",
        test="paired one-sided t test over seeds: supported if the lower bound > margin, contradicted if the upper "
             "bound < margin, at the rung's horizon; a hasfl run at the floor (failed to train) withholds it, a fedavg "
             "run at the floor while hasfl learned contradicts the claim at this budget; the gap's "
             "trend over the last evaluations is reported beside it",
        margin_key="f4_min_gap_pct", st=st, units=units, files=[f"tables/{T6S}.parquet"],
        mde_meaning="smallest true mean gap above the margin detected with the configured power (points)",
        not_run="fedavg or hasfl not run on an image dataset")]


SPEC = FindingSpec(ids=(F4,), tables=(T6S,), methods={F4: ("fedavg", "hasfl")}, margins=("f4_min_gap_pct",),
                   evaluate=evaluate)
