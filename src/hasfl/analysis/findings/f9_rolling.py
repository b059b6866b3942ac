"""F9a, F9b, F9c [this project's extension]: coverage without nesting, the test of the coverage thesis.

The paper's mechanism claim (Sections 4.2-4.3) is that *coverage* decides: Uniform decays because its cap strands
the outer channels at their last trained or initial values (Proposition 3). Rolling windows (FedRolex, Alam et al.
2022) give full coverage at the same widths and cost, so the thesis predicts:

* F9a [image] at Uniform's budget, rolling windows remove Uniform's decay:
  decay(uniform) - decay(uniform_rolling) > ``f9_min_decay_gap_pct`` (paired one-sided t over seeds, decay = best -
  final, as F2b; the same floor / never-peaked gate on Uniform's runs).
* F9b [every dataset] at Uniform's budget, rolling windows raise the final accuracy:
  final acc(uniform_rolling) - final acc(uniform) > ``f9_min_acc_gap_pct`` (paired one-sided t).
* F9c [every dataset] FedRolex beats HeteroFL at equal widths (Alam et al.'s claim):
  final acc(fedrolex) - final acc(heterofl) > ``f9_min_acc_gap_pct`` (paired one-sided t).

Uniform's and uniform_rolling's widths are the same only when their ``p`` are; the runs' average allocated widths
are compared per seed and a unit whose widths differ is inconclusive (not the experiment). The margins (0 points)
were fixed before any rolling run (docs/decisions.md "F9").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.findings.kernel import (
    ALL,
    IMAGE,
    T3S,
    T4S,
    T7S,
    FindingSpec,
    Settings,
    decay_gate,
    finding,
    gate_unit,
    has_runs,
    in_scope,
    left_out_note,
    paired,
    t_unit,
)

F9A, F9B, F9C = "F9a", "F9b", "F9c"
#: widths equal to this tolerance are "the same budget" (average allocated width per seed)
WIDTH_TOL = 1e-9


def decay(delta_pct: float) -> float:
    """Peak-to-final decay from the method tables' delta (final - best)."""
    return -delta_pct


def _uniform_table(t: Mapping[str, pd.DataFrame], dataset: str) -> pd.DataFrame:
    """Uniform's seeds: Table 3 on image datasets, Table 7 on natural-partition ones."""
    return t[T3S] if in_scope(dataset, IMAGE) else t[T7S]


def _same_widths(ua: pd.DataFrame, ma: str, ub: pd.DataFrame, mb: str, dataset: str) -> str | None:
    """Why the two methods' runs are not at the same budget (per seed average allocated width), else None."""
    if "avg_p" not in ua.columns or "avg_p" not in ub.columns:
        return None
    w = paired(ua, ma, ub, mb, dataset, "avg_p")
    bad = [s for s, a, b in zip(w.seeds, w.a, w.b, strict=True) if abs(a - b) > WIDTH_TOL]
    if not bad:
        return None
    return (f"{ma} and {mb} allocate different average widths in seeds {', '.join(map(str, bad))} (their p differ): "
            "not the same budget")


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F9a [image], F9b and F9c [every dataset]."""
    t4s = t[T4S]
    m_decay, m_acc = st.th["f9_min_decay_gap_pct"], st.th["f9_min_acc_gap_pct"]
    decay_units, acc_units, rolex_units = [], [], []
    for d in datasets:
        uni = _uniform_table(t, d)
        if has_runs(uni, d, "uniform") and has_runs(t4s, d, "uniform_rolling"):
            budget = _same_widths(uni, "uniform", t4s, "uniform_rolling", d)
            if in_scope(d, IMAGE):
                p = paired(uni, "uniform", t4s, "uniform_rolling", d, "delta_pct", transform=decay)
                u = t_unit(d, p.diff, m_decay, True, st, {"seeds": p.seeds, "decay_uniform": list(p.a),
                                                           "decay_uniform_rolling": list(p.b)})
                u["reason"] += left_out_note(p.left_out)
                gate = decay_gate(d, p.seeds, [(uni, "uniform")], [(uni, "uniform"), (t4s, "uniform_rolling")])
                decay_units.append(gate_unit(u, budget or gate))
            q = paired(t4s, "uniform_rolling", uni, "uniform", d, "final_acc_pct")
            u = t_unit(d, q.diff, m_acc, True, st, {"seeds": q.seeds, "final_uniform_rolling": list(q.a),
                                                     "final_uniform": list(q.b)})
            u["reason"] += left_out_note(q.left_out)
            acc_units.append(gate_unit(u, budget))
        if has_runs(t4s, d, "fedrolex") and has_runs(t4s, d, "heterofl"):
            r = paired(t4s, "fedrolex", t4s, "heterofl", d, "final_acc_pct")
            u = t_unit(d, r.diff, m_acc, True, st, {"seeds": r.seeds, "final_fedrolex": list(r.a),
                                                     "final_heterofl": list(r.b)})
            u["reason"] += left_out_note(r.left_out)
            rolex_units.append(gate_unit(u, _same_widths(t4s, "fedrolex", t4s, "heterofl", d)))
    files = [f"tables/{T3S}.parquet", f"tables/{T4S}.parquet", f"tables/{T7S}.parquet"]
    test = ("paired one-sided t test over seeds: supported if the lower bound > margin, contradicted if the upper "
            "bound < margin; inconclusive when the two runs of a seed allocate different average widths")
    thesis = "Sections 4.2-4.3 (the coverage thesis), this project's extension"
    parts = (  # id, claim, source, scope, statistic, extra test text, margin, units, what was not run
        (F9A, "At Uniform's budget, rolling sub-models (full coverage at the same widths) remove Uniform's "
              "peak-to-final decay", thesis, IMAGE,
         "per seed: decay(uniform) - decay(uniform_rolling), decay = best - final (points)",
         ", a Uniform seed at the majority-class floor or peaking at its last evaluation (as F2b)",
         "f9_min_decay_gap_pct", decay_units, "uniform or uniform_rolling not run on an image dataset"),
        (F9B, "At Uniform's budget, rolling sub-models reach a higher final accuracy than Uniform's prefixes", thesis,
         ALL, "per seed: final acc(uniform_rolling) - final acc(uniform), points", "", "f9_min_acc_gap_pct",
         acc_units, "uniform or uniform_rolling not run"),
        (F9C, "FedRolex beats HeteroFL at the same (static, pmax) widths",
         "Alam et al. 2022 (FedRolex); Sections 4.2-4.3, this project's extension", ALL,
         "per seed: final acc(fedrolex) - final acc(heterofl), points", "", "f9_min_acc_gap_pct", rolex_units,
         "fedrolex or heterofl not run"),
    )
    return [finding(fid, claim=claim, source=source, scope=scope, statistic=statistic, test=test + more,
                    margin_key=margin, st=st, units=units, files=files, extension=True,
                    mde_meaning="smallest true mean gap above the margin detected with the configured power (points)",
                    not_run=not_run)
            for fid, claim, source, scope, statistic, more, margin, units, not_run in parts]

SPEC = FindingSpec(
    ids=(F9A, F9B, F9C), tables=(T3S, T4S, T7S),
    methods={F9A: ("uniform", "uniform_rolling"), F9B: ("uniform", "uniform_rolling"),
             F9C: ("fedrolex", "heterofl")},
    margins=("f9_min_decay_gap_pct", "f9_min_acc_gap_pct"), evaluate=evaluate)
