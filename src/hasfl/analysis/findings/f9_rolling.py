"""F9a-F9d [this project's extension]: coverage without nesting, the test of the coverage thesis.

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
* F9d [every dataset] at Uniform's budget, FedEcover's cyclic sampling without replacement (the extraction built
  for coverage) raises the final accuracy: final acc(fedecover) - final acc(uniform) > ``f9_min_acc_gap_pct``
  (paired one-sided t; the same width check as F9b).

Every unit is one of *full-model* accuracy (the global model; a final accuracy read under each method's declared
batch-norm rule, :mod:`hasfl.analysis.bn_sensitivity`): FedRolex's claim is about the full model. The paper's
thesis is about the *sub-model* regime; a sub-model unit needs each run's own sub-models evaluated (a rolling
window, FedEcover's sampled units), an evaluation that does not exist yet (Table 4b evaluates only nested prefixes
and refuses these methods), so no sub-model unit is computed (:data:`SUB_MODEL_NOTE`; docs/decisions.md "F9
restated (issue 37)").

**Never learned** (issue 37): a run whose lowest round-mean training loss (``min_train_loss`` of the per-seed
tables) never goes below ``f9_learned_loss_fraction`` x ln K (K = the dataset's classes, 100 / ``chance_pct``)
never left the uniform-guess loss; a unit with such a run among its seeds is inconclusive with that reason,
never supported or contradicted (:func:`learned_gate`). Unknown (no loss or no chance rate in the table): not gated.
A final-accuracy unit (F9b-F9d) is also inconclusive when one of its runs is at the majority-class floor or still
rising at its last evaluation (:func:`~hasfl.analysis.findings.kernel.final_gate`).

Uniform's and uniform_rolling's widths are the same only when their ``p`` are; the runs' average allocated widths
are compared per seed and a unit whose widths differ is inconclusive (not the experiment). The margins (0 points)
were fixed before any rolling run (docs/decisions.md "F9").
"""

from __future__ import annotations

import math
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
    final_gate,
    finding,
    gate_unit,
    has_runs,
    in_scope,
    left_out_note,
    num,
    paired,
    t_unit,
)

F9A, F9B, F9C, F9D = "F9a", "F9b", "F9c", "F9d"
#: widths equal to this tolerance are "the same budget" (average allocated width per seed)
WIDTH_TOL = 1e-9


#: What F9 cannot measure yet (the finding's ``note`` and its test text).
SUB_MODEL_NOTE = ("full-model accuracy only: a sub-model unit (the paper's regime) needs each run's own sub-models "
                  "(rolling windows, FedEcover's sampled units) evaluated, an evaluation that does not exist yet "
                  "(Table 4b evaluates nested prefixes only)")


def learned_gate(dataset: str, seeds: Sequence[int], frames: Sequence[tuple[pd.DataFrame, str]],
                 fraction: float) -> str | None:
    """Why a unit on ``dataset`` over ``seeds`` cannot be read because one of its runs never learned, else None:
    a run of a method in ``frames`` whose ``min_train_loss`` is not below ``fraction`` x ln K, K = 100 /
    ``chance_pct`` (the dataset's classes). A run without a finite loss or chance rate is not gated (unknown)."""
    wanted = {int(s) for s in seeds}
    why: list[str] = []
    for df, method in frames:
        if df is None or df.empty or "min_train_loss" not in df.columns or "chance_pct" not in df.columns:
            continue
        sel = df[(df["dataset"] == dataset) & (df["method"] == method) & df["seed"].isin(wanted)]
        for r in sel.sort_values("seed").to_dict("records"):
            loss, chance = num(r.get("min_train_loss")), num(r.get("chance_pct"))
            if not (math.isfinite(loss) and math.isfinite(chance) and chance > 0):
                continue
            ln_k = math.log(100.0 / chance)
            if not loss < fraction * ln_k:
                why.append(f"never learned: {method} seed {int(r['seed'])}, lowest training loss {loss:.3g} vs "
                           f"ln K = {ln_k:.3g}")
    if not why:
        return None
    return ("; ".join(dict.fromkeys(why)) + f" (a run must reach a training loss below {fraction:g} ln K): a "
            "comparison with a run that never left the uniform-guess loss says nothing about its extraction")


def _gates(*why: str | None) -> str | None:
    return "; ".join(w for w in why if w) or None


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


def _acc_unit(t4s: pd.DataFrame, ma: str, db: pd.DataFrame, mb: str, d: str, st: Settings, budget: str | None,
              frac: float) -> dict[str, Any]:
    """final acc(ma) - final acc(mb) > ``f9_min_acc_gap_pct`` on ``d``, gated by the budget and "never learned"."""
    q = paired(t4s, ma, db, mb, d, "final_acc_pct")
    u = t_unit(d, q.diff, st.th["f9_min_acc_gap_pct"], True, st,
               {"seeds": q.seeds, f"final_{ma}": list(q.a), f"final_{mb}": list(q.b), "accuracy": "full model"})
    u["reason"] += left_out_note(q.left_out)
    return gate_unit(u, _gates(budget, learned_gate(d, q.seeds, [(t4s, ma), (db, mb)], frac),
                               final_gate(d, q.seeds, [(t4s, ma), (db, mb)], st.th["rising_min_gain_pct"])))


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F9a [image], F9b, F9c and F9d [every dataset]."""
    t4s = t[T4S]
    m_decay = st.th["f9_min_decay_gap_pct"]
    frac = st.th["f9_learned_loss_fraction"]
    decay_units, acc_units, rolex_units, ecover_units = [], [], [], []
    for d in datasets:
        uni = _uniform_table(t, d)
        if has_runs(uni, d, "uniform") and has_runs(t4s, d, "uniform_rolling"):
            budget = _same_widths(uni, "uniform", t4s, "uniform_rolling", d)
            if in_scope(d, IMAGE):
                p = paired(uni, "uniform", t4s, "uniform_rolling", d, "delta_pct", transform=decay)
                u = t_unit(d, p.diff, m_decay, True, st, {"seeds": p.seeds, "decay_uniform": list(p.a),
                                                           "decay_uniform_rolling": list(p.b),
                                                           "accuracy": "full model"})
                u["reason"] += left_out_note(p.left_out)
                gate = decay_gate(d, p.seeds, [(uni, "uniform")], [(uni, "uniform"), (t4s, "uniform_rolling")])
                learned = learned_gate(d, p.seeds, [(uni, "uniform"), (t4s, "uniform_rolling")], frac)
                decay_units.append(gate_unit(u, _gates(budget, gate, learned)))
            acc_units.append(_acc_unit(t4s, "uniform_rolling", uni, "uniform", d, st, budget, frac))
        if has_runs(uni, d, "uniform") and has_runs(t4s, d, "fedecover"):
            ecover_units.append(_acc_unit(t4s, "fedecover", uni, "uniform", d, st,
                                          _same_widths(uni, "uniform", t4s, "fedecover", d), frac))
        if has_runs(t4s, d, "fedrolex") and has_runs(t4s, d, "heterofl"):
            rolex_units.append(_acc_unit(t4s, "fedrolex", t4s, "heterofl", d, st,
                                         _same_widths(t4s, "fedrolex", t4s, "heterofl", d), frac))
    files = [f"tables/{T3S}.parquet", f"tables/{T4S}.parquet", f"tables/{T7S}.parquet"]
    test = ("paired one-sided t test over seeds: supported if the lower bound > margin, contradicted if the upper "
            "bound < margin; inconclusive when the two runs of a seed allocate different average widths, or when a "
            "run never learned (lowest round-mean training loss not below `f9_learned_loss_fraction` x ln K); "
            "a final-accuracy unit (F9b-F9d) also when a run is at the floor or still rising at its last evaluation "
            "(`rising_min_gain_pct`); "
            + SUB_MODEL_NOTE)
    thesis = "Sections 4.2-4.3 (the coverage thesis), this project's extension"
    parts = (  # id, claim, source, scope, statistic, extra test text, margin, units, what was not run
        (F9A, "At Uniform's budget, rolling sub-models (full coverage at the same widths) remove Uniform's "
              "peak-to-final decay", thesis, IMAGE,
         "per seed: decay(uniform) - decay(uniform_rolling), decay = best - final (points)",
         "; a Uniform seed at the majority-class floor or peaking at its last evaluation (as F2b)",
         "f9_min_decay_gap_pct", decay_units, "uniform or uniform_rolling not run on an image dataset"),
        (F9B, "At Uniform's budget, rolling sub-models reach a higher final accuracy than Uniform's prefixes", thesis,
         ALL, "per seed: final acc(uniform_rolling) - final acc(uniform), full model, points", "",
         "f9_min_acc_gap_pct", acc_units, "uniform or uniform_rolling not run"),
        (F9C, "FedRolex beats HeteroFL at the same (static, pmax) widths",
         "Alam et al. 2022 (FedRolex); Sections 4.2-4.3, this project's extension", ALL,
         "per seed: final acc(fedrolex) - final acc(heterofl), full model, points", "", "f9_min_acc_gap_pct",
         rolex_units, "fedrolex or heterofl not run"),
        (F9D, "At Uniform's budget, FedEcover's cyclic sampling without replacement (coverage by design) reaches a "
              "higher final accuracy than Uniform's prefixes",
         "FedEcover (ICDE 2025); Sections 4.2-4.3, this project's extension", ALL,
         "per seed: final acc(fedecover) - final acc(uniform), full model, points", "", "f9_min_acc_gap_pct",
         ecover_units, "uniform or fedecover not run"),
    )
    out = []
    for fid, claim, source, scope, statistic, more, margin, units, not_run in parts:
        f = finding(fid, claim=claim, source=source, scope=scope, statistic=statistic, test=test + more,
                    margin_key=margin, st=st, units=units, files=files, extension=True,
                    mde_meaning="smallest true mean gap above the margin detected with the configured power (points)",
                    not_run=not_run)
        f["note"] = SUB_MODEL_NOTE
        out.append(f)
    return out

SPEC = FindingSpec(
    ids=(F9A, F9B, F9C, F9D), tables=(T3S, T4S, T7S),
    methods={F9A: ("uniform", "uniform_rolling"), F9B: ("uniform", "uniform_rolling"),
             F9C: ("fedrolex", "heterofl"), F9D: ("uniform", "fedecover")},
    margins=("f9_min_decay_gap_pct", "f9_min_acc_gap_pct", "f9_learned_loss_fraction", "rising_min_gain_pct"), evaluate=evaluate)
