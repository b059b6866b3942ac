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
* F9e [every dataset] at Uniform's budget as a parameter share, FIARSE's magnitude masks (importance-aware
  extraction, Wu et al. 2024) raise the final accuracy: final acc(fiarse) - final acc(uniform) >
  ``f9_min_acc_gap_pct``.
* F9f / F9g [every dataset] at each client's capacity (p = pmax: full-capacity clients train the whole model, as
  FedEcover's and FIARSE's authors compare), FedEcover / FIARSE beat HeteroFL: final acc(m) - final acc(heterofl)
  > ``f9_min_acc_gap_pct``. Their runs are an overlay's with ``method_params.<m>.p: 1.0``
  (``presets/medium-coverage-fedecover-official.yaml``); at p = 0.5 the width check withholds them (not the same
  budget).

F9e-F9g (:data:`EXTRACTION_PAIRS`, a rule value of the pre-registration record) were fixed before any FIARSE run and
before any run of the pmax overlay.

Every F9 unit is one of *full-model* accuracy (the global model; a final accuracy read under each method's
declared batch-norm rule, :mod:`hasfl.analysis.bn_sensitivity`): FedRolex's claim is about the full model. The
paper's thesis is about the *sub-model* regime: F9b, F9c and F9d each also have a *sub-model* unit per dataset
(``<dataset>/sub-model``, ``accuracy: "sub-model"``), the same test on the sub-model accuracy of
tables/submodel_accuracy.parquet (:mod:`hasfl.analysis.tables.submodel_accuracy`: the mean test accuracy of the
sub-models the last round's participants held, at their width and window, under the method's declared rule),
with the same width and never-learned gates (docs/decisions.md "F9's sub-model unit"). That table is
optional (:data:`hasfl.analysis.findings.OPTIONAL_TABLES`): without it no sub-model unit is computed and each
finding says so (:data:`SUB_MODEL_NOTE`).

**Failed to train**: a run at the majority-class floor under its method's declared batch-norm rule (its accuracy
curve never above the class frequencies and its final model under the declared rule not above them either; a
sub-model unit reads its sub-models' accuracy). The rule reads accuracy for every method: the training-loss rule
it replaces (``f9_learned_loss_fraction``, removed) marked runs that learned under their declared rule (FedEcover at
22.6% on medium) as failed. Read as the claim's logic is (:func:`~hasfl.analysis.findings.endpoints.gate_arms`): a
failing baseline withholds the unit (beside it, the test on the seeds that learned), a failing claimed-better
method with a baseline that learned contradicts the claim *at this budget*. Unknown (no flag): not gated. Every
full-model unit is decided at the rung's fixed horizon, the gap's trend beside it
(:func:`~hasfl.analysis.findings.endpoints.gap_trend`); a sub-model unit has no curve and says so.

**Estimands.** The full-model and sub-model units are separate verdicts of each finding (:data:`FULL`, :data:`SUB`),
each attributed to other authors only where :data:`hasfl.analysis.findings.claims.AUTHOR_CLAIMS` records their claim
on it (FedRolex's and FedEcover's on the full model, FIARSE's on the sub-models).

Uniform's and uniform_rolling's widths are the same only when their ``p`` are; the runs' average allocated widths
are compared per seed and a unit whose widths differ is inconclusive (not the experiment). The margins (0 points)
were fixed before any rolling run (docs/decisions.md "F9").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.findings.endpoints import (
    NO_TREND_SUBMODEL,
    failed_gate,
    gate_arms,
    gap_trend,
    join_reasons,
    paired_slopes,
)
from hasfl.analysis.findings.claims import ESTIMANDS, attribution
from hasfl.analysis.findings.kernel import (
    ALL,
    IMAGE,
    T3S,
    T4S,
    T7S,
    Estimand,
    FindingSpec,
    Settings,
    finding,
    gate_unit,
    has_runs,
    in_scope,
    left_out_note,
    num,
    paired,
    t_unit,
)

F9A, F9B, F9C, F9D, F9E, F9F, F9G = "F9a", "F9b", "F9c", "F9d", "F9e", "F9f", "F9g"
#: The extraction comparisons FIARSE and FedEcover's own setting add (finding, method, against): each final acc(method) - final acc(against) >
#: ``f9_min_acc_gap_pct``, a full-model and a sub-model unit per dataset, gated like F9b-F9d. A rule value of the
#: pre-registration record (docs/preregistration.md), fixed before their runs.
EXTRACTION_PAIRS = (("F9e", "fiarse", "uniform"), ("F9f", "fedecover", "heterofl"), ("F9g", "fiarse", "heterofl"))
#: widths equal to this tolerance are "the same budget" (average allocated width per seed)
WIDTH_TOL = 1e-9


#: The sub-model accuracy table (optional: :data:`hasfl.analysis.findings.OPTIONAL_TABLES`) and its column.
SUBMODEL_TABLE = "submodel_accuracy"
SUBMODEL_COL = "submodel_acc_pct"
#: What F9 cannot measure without that table (the finding's ``note`` and its test text).
SUB_MODEL_NOTE = ("full-model accuracy only: the sub-model units (the paper's regime) need "
                  f"tables/{SUBMODEL_TABLE}.parquet (each run's last-round sub-models evaluated), not given")
#: F9a's note when the sub-model table is given (a decay needs the accuracy curve: no sub-model unit).
F9A_SUB_NOTE = ("full-model decay only: a decay is read from the full model's accuracy curve; F9b-F9d have sub-model "
                "units")
#: The note and test text when the sub-model units are computed.
SUB_MODEL_READ = ("units `<dataset>` compare full-model accuracy; units `<dataset>/sub-model` the mean test accuracy "
                  "of the sub-models the last round's participants held (their width and window, cut from the final "
                  f"model, each method's declared batch-norm rule; tables/{SUBMODEL_TABLE}.parquet), same test and "
                  "gates")


def _sub_floor(sub: pd.DataFrame, tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """``sub`` with ``submodel_at_floor``: a run's sub-model accuracy at most its dataset's majority-class rate plus
    the floor tolerance (from the method tables' floor columns; NA where unknown). The sub-model unit reads its own
    evidence: the sub-models' accuracy against the floor, not the full model's."""
    floors: dict[str, float] = {}
    for t in tables:
        if t is None or t.empty or "majority_pct" not in t.columns or "floor_tol_pct" not in t.columns:
            continue
        for r in t.dropna(subset=["majority_pct", "floor_tol_pct"]).to_dict("records"):
            floors.setdefault(str(r["dataset"]), float(r["majority_pct"]) + float(r["floor_tol_pct"]))
    out = sub.copy()
    flags = [pd.NA if str(d) not in floors or not math.isfinite(num(a)) else bool(num(a) <= floors[str(d)])
             for d, a in zip(out["dataset"], out[SUBMODEL_COL], strict=True)]
    out["submodel_at_floor"] = pd.Series(flags, index=out.index, dtype="boolean")
    return out


def _gates(*why: str | None) -> str | None:
    return join_reasons(*why)


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


#: F9's estimands: the global model's accuracy and the mean accuracy of the sub-models the last round's participants
#: held. Whose claim each is for a finding: :data:`hasfl.analysis.findings.claims.AUTHOR_CLAIMS`.
FULL, SUB = "full-model", "sub-model"


def _acc_unit(t4s: pd.DataFrame, ma: str, db: pd.DataFrame, mb: str, d: str, st: Settings,
              budget: str | None) -> dict[str, Any]:
    """final acc(ma) - final acc(mb) > ``f9_min_acc_gap_pct`` on ``d`` (``ma`` the method claimed better), gated by
    the budget and read asymmetrically where a run failed to train (:func:`gate_arms`)."""
    q = paired(t4s, ma, db, mb, d, "final_acc_pct")
    u = t_unit(d, q.diff, st.th["f9_min_acc_gap_pct"], True, st,
               {"seeds": q.seeds, f"final_{ma}": list(q.a), f"final_{mb}": list(q.b), "accuracy": "full model",
                "estimand": FULL})
    u["reason"] += left_out_note(q.left_out)
    gap_trend(u, paired_slopes(t4s, ma, db, mb, d, q.seeds), st, st.th["f9_min_acc_gap_pct"])
    return gate_arms(u, budget, failed_gate(d, q.seeds, [(t4s, ma), (db, mb)]), st, better=ma)


def _sub_unit(sub: pd.DataFrame, ma: str, mb: str, d: str, st: Settings, budget: str | None) -> dict[str, Any] | None:
    """The sub-model unit of ``ma`` vs ``mb`` on ``d``: sub-model acc(ma) - sub-model acc(mb) > ``f9_min_acc_gap_pct``
    from ``sub`` (:data:`SUBMODEL_TABLE`, with :func:`_sub_floor`'s flag), withheld for a width mismatch (``budget``),
    a run that failed to train read from sub-model evidence (its sub-models' accuracy under the declared rule at the
    floor) as :func:`gate_arms` reads it; None when ``sub`` has no run of either method on ``d``. No trend is read
    (:data:`NO_TREND_SUBMODEL`, said in the reason)."""
    if not (has_runs(sub, d, ma) and has_runs(sub, d, mb)):
        return None
    q = paired(sub, ma, sub, mb, d, SUBMODEL_COL)
    u = t_unit(f"{d}/sub-model", q.diff, st.th["f9_min_acc_gap_pct"], True, st,
               {"seeds": q.seeds, f"submodel_{ma}": list(q.a), f"submodel_{mb}": list(q.b), "accuracy": "sub-model",
                "estimand": SUB})
    u["reason"] += left_out_note(q.left_out) + f"; no trend read: {NO_TREND_SUBMODEL}"
    u["gap_trend"] = {"read": "none", "moving": None, "why": NO_TREND_SUBMODEL}
    own = failed_gate(d, q.seeds, [(sub, ma), (sub, mb)], floor_column="submodel_at_floor")
    return gate_arms(u, budget, own, st, better=ma)


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F9a [image], F9b, F9c and F9d [every dataset]; with :data:`SUBMODEL_TABLE` in ``t``, F9b-F9d's sub-model
    units beside the full-model ones."""
    t4s = t[T4S]
    sub = t.get(SUBMODEL_TABLE)
    if sub is not None and not sub.empty and "status" in sub.columns:
        sub = _sub_floor(sub[sub["status"] == "completed"], [t[T3S], t4s, t[T7S]])

    def with_sub(units: list[dict[str, Any]], ma: str, db: pd.DataFrame, mb: str, d: str,
                 budget: str | None) -> None:
        if sub is not None:
            u = _sub_unit(sub, ma, mb, d, st, budget)
            if u is not None:
                units.append(u)
    m_decay = st.th["f9_min_decay_gap_pct"]
    decay_units, acc_units, rolex_units, ecover_units = [], [], [], []
    pair_units: dict[str, list[dict[str, Any]]] = {fid: [] for fid, _, _ in EXTRACTION_PAIRS}
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
                learned = failed_gate(d, p.seeds, [(uni, "uniform"), (t4s, "uniform_rolling")])
                decay_units.append(gate_unit(u, _gates(budget, learned), st))
            acc_units.append(_acc_unit(t4s, "uniform_rolling", uni, "uniform", d, st, budget))
            with_sub(acc_units, "uniform_rolling", uni, "uniform", d, budget)
        if has_runs(uni, d, "uniform") and has_runs(t4s, d, "fedecover"):
            budget = _same_widths(uni, "uniform", t4s, "fedecover", d)
            ecover_units.append(_acc_unit(t4s, "fedecover", uni, "uniform", d, st, budget))
            with_sub(ecover_units, "fedecover", uni, "uniform", d, budget)
        if has_runs(t4s, d, "fedrolex") and has_runs(t4s, d, "heterofl"):
            budget = _same_widths(t4s, "fedrolex", t4s, "heterofl", d)
            rolex_units.append(_acc_unit(t4s, "fedrolex", t4s, "heterofl", d, st, budget))
            with_sub(rolex_units, "fedrolex", t4s, "heterofl", d, budget)
        for fid, m, against in EXTRACTION_PAIRS:
            other = uni if against == "uniform" else t4s
            if has_runs(other, d, against) and has_runs(t4s, d, m):
                budget = _same_widths(other, against, t4s, m, d)
                pair_units[fid].append(_acc_unit(t4s, m, other, against, d, st, budget))
                with_sub(pair_units[fid], m, other, against, d, budget)
    files = [f"tables/{T3S}.parquet", f"tables/{T4S}.parquet", f"tables/{T7S}.parquet"]
    note = SUB_MODEL_NOTE if sub is None else SUB_MODEL_READ
    if sub is not None:
        files.append(f"tables/{SUBMODEL_TABLE}.parquet")
    test = ("paired one-sided t test over seeds at the rung's horizon: supported if the lower bound > margin, "
            "contradicted if the upper bound < margin; inconclusive when the two runs of a seed allocate different "
            "average widths; a run at the majority-class floor under its declared batch-norm rule failed to train (a "
            "sub-model unit reads its sub-models' accuracy): a failing baseline withholds the unit, a failing "
            "claimed-better method contradicts the claim at this budget; a full-model unit's gap trend is reported "
            "beside it; the full-model and sub-model units are separate verdicts (estimands); " + note)
    thesis = "Sections 4.2-4.3 (the coverage thesis), this project's extension"
    sub_stat = "" if sub is None else " (`<dataset>/sub-model` units: the same difference of sub-model accuracy)"
    parts = (  # id, claim, source, scope, statistic, extra test text, margin, units, what was not run
        (F9A, "At Uniform's budget, rolling sub-models (full coverage at the same widths) remove Uniform's "
              "peak-to-final decay", thesis, IMAGE,
         "per seed: decay(uniform) - decay(uniform_rolling), decay = best - final (points)",
         "; a decay unit is withheld by the same failed-to-train rule (as F2b)",
         "f9_min_decay_gap_pct", decay_units, "uniform or uniform_rolling not run on an image dataset"),
        (F9B, "At Uniform's budget, rolling sub-models reach a higher final accuracy than Uniform's prefixes", thesis,
         ALL, "per seed: final acc(uniform_rolling) - final acc(uniform), full model, points" + sub_stat, "",
         "f9_min_acc_gap_pct", acc_units, "uniform or uniform_rolling not run"),
        (F9C, "FedRolex beats HeteroFL at the same (static, pmax) widths",
         "Alam et al. 2022 (FedRolex) on the full model (their code evaluates the global model); on the sub-models "
         "this project's extension (Sections 4.2-4.3)", ALL,
         "per seed: final acc(fedrolex) - final acc(heterofl), full model, points" + sub_stat, "", "f9_min_acc_gap_pct",
         rolex_units, "fedrolex or heterofl not run"),
        (F9D, "At Uniform's budget, FedEcover's cyclic sampling without replacement (coverage by design) reaches a "
              "higher final accuracy than Uniform's prefixes",
         "Sections 4.2-4.3, this project's extension (FedEcover's extraction at Uniform's budget, a setting its "
         "authors never ran)", ALL,
         "per seed: final acc(fedecover) - final acc(uniform), full model, points" + sub_stat, "", "f9_min_acc_gap_pct",
         ecover_units, "uniform or fedecover not run"),
        (F9E, "At Uniform's budget as a parameter share, FIARSE's importance-aware magnitude masks reach a higher "
              "final accuracy than Uniform's prefixes",
         "Sections 4.2-4.3, this project's extension (FIARSE's masks at Uniform's budget, a setting its authors "
         "never ran)", ALL,
         "per seed: final acc(fiarse) - final acc(uniform), full model, points" + sub_stat, "", "f9_min_acc_gap_pct",
         pair_units[F9E], "uniform or fiarse not run"),
        (F9F, "At each client's capacity, FedEcover's cyclic sampling beats HeteroFL's prefixes (its authors' "
              "comparison)",
         "FedEcover (ICDE 2025) on the full model (their code reports the global model's test accuracy); on the "
         "sub-models this project's extension", ALL,
         "per seed: final acc(fedecover) - final acc(heterofl), full model, points" + sub_stat, "",
         "f9_min_acc_gap_pct", pair_units[F9F], "fedecover or heterofl not run"),
        (F9G, "At each client's capacity, FIARSE's magnitude masks beat HeteroFL's prefixes (its authors' comparison)",
         "Wu et al. 2024 (FIARSE) on the sub-models (their code tests the global model masked at each size); on "
         "the full model this project's extension", ALL,
         "per seed: final acc(fiarse) - final acc(heterofl), full model, points" + sub_stat, "",
         "f9_min_acc_gap_pct", pair_units[F9G], "fiarse or heterofl not run"),
    )
    out = []
    for fid, claim, source, scope, statistic, more, margin, units, not_run in parts:
        what = {FULL: "the global model's accuracy", SUB: "the accuracy of the sub-models the clients hold"}
        ests = tuple(Estimand(key, label, f"{claim}: {what[key]}", attribution(fid, key))
                     for key, label in ESTIMANDS.get(fid, ()))
        f = finding(fid, claim=claim, source=source, scope=scope, statistic=statistic, test=test + more,
                    margin_key=margin, st=st, units=units, files=files, extension=True,
                    mde_meaning="smallest true mean gap above the margin detected with the configured power (points)",
                    not_run=not_run, estimands=ests)
        f["note"] = note if fid != F9A or sub is None else F9A_SUB_NOTE
        out.append(f)
    return out


SPEC = FindingSpec(
    ids=(F9A, F9B, F9C, F9D, F9E, F9F, F9G), tables=(T3S, T4S, T7S),
    methods={F9A: ("uniform", "uniform_rolling"), F9B: ("uniform", "uniform_rolling"),
             F9C: ("fedrolex", "heterofl"), F9D: ("uniform", "fedecover"),
             **{fid: tuple(sorted((m, against))) for fid, m, against in EXTRACTION_PAIRS}},
    margins=("f9_min_decay_gap_pct", "f9_min_acc_gap_pct"), evaluate=evaluate)
