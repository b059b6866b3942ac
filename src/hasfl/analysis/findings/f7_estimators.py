"""F7-E0 ... F7-E3 [Section 5, the 'natural next step'; this project's extension; every dataset]:
does a capacity-separable estimate recover the clients' label heterogeneity?

One finding per estimator of :data:`hasfl.analysis.specs.ESTIMATORS`: the estimator recovers TV
once capacity is controlled, on the hasfl runs (sub-model widths follow capacity; the fedavg
control is reported beside it). Pooled partial r(E, TV | pmax) (Fisher z, n - 4 weights):
supported when the one-sided lower bound > 0 (a consistent data signal), contradicted when the
one-sided upper bound < ``f7_min_pr_e_tv`` (no usable signal: at most F1c's margin),
inconclusive otherwise; support takes precedence (F7-E0 reads F1c's statistic against other boundaries
and at its own family's level, so the two need not mirror each other). An estimate equal to TV on every run is a pipeline check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.findings.correlation import (
    corr_unit,
)
from hasfl.analysis.findings.f1_confound import control_beside, control_units
from hasfl.analysis.findings.kernel import (
    ALL,
    COMPLETED,
    CONTRADICTED,
    EXTENSION,
    INCONCLUSIVE,
    PIPELINE_CHECK,
    SUPPORTED,
    T5,
    T8S,
    FindingSpec,
    Settings,
    directional,
    finding,
    fmt,
    z_p,
)
from hasfl.analysis.specs import ESTIMATORS
from hasfl.analysis.stats import z_mde

F7_IDS = tuple(f"F7-{e.id}" for e in ESTIMATORS)
#: The estimates of the update divergence (E0 and its within-tier z-score E1): a "no usable signal" on them
#: is a claim about the capacity confound and needs the equal-width control to see the data.
CONFOUND_ESTIMATORS = ("E0", "E1")
#: E0's final values are Table 5's H~: its partial r given pmax is F1c's statistic.
SAME_AS_F1C = "E0"
#: Estimates fixed before round 0 (E3: the clients' reports): whether the run learned does not enter them.
FIXED_BEFORE_TRAINING = ("E3",)


def estimator_rows(t8s: pd.DataFrame, method: str, estimator: str, dataset: str) -> pd.DataFrame:
    """Table 8's completed runs of ``method`` with a finite partial r of ``estimator`` on ``dataset``."""
    if t8s is None or t8s.empty:
        return pd.DataFrame(columns=["seed", "n_clients", "pr_e_tv_pmax"])
    sel = t8s[(t8s["method"] == method) & (t8s["estimator"] == estimator) & (t8s["dataset"] == dataset)
              & (t8s["status"] == COMPLETED)]
    return sel[np.isfinite(sel["pr_e_tv_pmax"].to_numpy(dtype=np.float64))]


def equals_tv(t8s: pd.DataFrame, estimator: str) -> bool:
    """Whether estimate ``estimator`` equals TV on every hasfl run (partial r(E, TV | pmax) = 1 to 1e-9)."""
    if not len(t8s) or "estimator" not in t8s.columns:
        return False
    v = pd.to_numeric(t8s.loc[(t8s["estimator"] == estimator) & (t8s["method"] == "hasfl"), "pr_e_tv_pmax"],
                      errors="coerce").dropna()
    return bool(len(v)) and bool((v >= 1.0 - 1e-9).all())


def recovers_unit(name: str, rows: pd.DataFrame, margin: float, st: Settings,
                  control: pd.DataFrame | None = None, gated: bool = False,
                  f6: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """F7: supported when the one-sided lower bound of the pooled partial r > 0; contradicted when the
    one-sided upper bound < margin (no usable signal); support takes precedence. ``gated`` (the estimates
    of the update divergence, E0 / E1: claims about the confound): a "contradicted" is read beside its positive
    control (:func:`~hasfl.analysis.findings.f1_confound.control_beside`) and withheld only where that control is shown
    blind: ``f6`` (F6's unit on this dataset after Holm: E0 is F6's estimate) when given, else the fedavg runs' own
    partial r of this estimate (``control``), blind when its upper bound is below F6's margin."""
    unit = corr_unit(name, rows, "pr_e_tv_pmax", 1, st)
    se, df = unit.pop("_se"), unit.pop("_df")
    shift = z_mde(se, st.alpha, st.power, df=df)
    unit["margin"] = margin
    unit["p_supported"] = z_p(unit["z"], se, 0.0, True, df)[0]
    unit["p_contradicted"] = z_p(unit["z"], se, margin, False, df)[0]
    unit["mde"] = math.tanh(shift) if math.isfinite(shift) else math.nan
    unit["mde_contradicted"] = math.tanh(math.atanh(margin) - shift) if math.isfinite(shift) else math.nan
    if control is not None and len(control):
        c = corr_unit("fedavg", control, "pr_e_tv_pmax", 1, st)
        unit["control_fedavg"] = {"estimate": c["estimate"], "low": c["low"], "high": c["high"], "n": c["n"]}
    if unit["n"] == 0:
        unit.update(verdict=INCONCLUSIVE, reason="no run with a defined partial correlation")
        return unit
    low, high = unit["low"], unit["high"]
    if low > 0.0:
        v = SUPPORTED
        why = f"lower bound {fmt(low)} > 0: a consistent data signal once capacity is controlled"
        if high < margin:
            why += f" (weak: the upper bound {fmt(high)} is below the usable margin {fmt(margin)} too)"
    elif high < margin:
        v, why = CONTRADICTED, f"upper bound {fmt(high)} < margin {fmt(margin)}: no usable data signal"
    else:
        v, why = INCONCLUSIVE, f"interval [{fmt(low)}, {fmt(high)}] contains 0 and the margin {fmt(margin)}"
    ctl = unit.get("control_fedavg")
    ctl_txt = (f"; fedavg control (equal widths): {fmt(ctl['estimate'])} [{fmt(ctl['low'])}, {fmt(ctl['high'])}]"
               if ctl else "")
    unit.update(verdict=v, reason=f"{why} (pooled over {unit['n']} hasfl run(s), {unit['n_clients']} clients; "
                                  f"{st.power:.0%} power needs a true r >= {fmt(unit['mde'])} for supported, "
                                  f"<= {fmt(unit['mde_contradicted'])} for contradicted{ctl_txt})")
    if v == CONTRADICTED and gated:
        label = "positive control F6 here (after Holm)"
        if f6 is None and ctl:  # F6's test (directional at its margin) on this estimate's own fedavg value
            f6 = {**ctl, "verdict": directional(ctl["low"], ctl["high"], st.th["f6_min_r_h_tv"], True)[0]}
            label = "positive control here (the fedavg runs' own value of this estimate)"
        control_beside(unit, f6, "its absence of a usable signal", label)
    return unit


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F7-E0 ... F7-E3 [Section 5; every dataset]: per estimator, the hasfl runs' pooled partial r(E, TV | pmax)."""
    t8s = t[T8S]
    controls = control_units(t[T5], datasets, st)
    out = []
    margin_key = "f7_min_pr_e_tv"
    for e in ESTIMATORS:
        units = []
        for d in datasets:
            rows = estimator_rows(t8s, "hasfl", e.id, d)
            if not len(rows):
                continue
            units.append(recovers_unit(d, rows, st.th[margin_key], st, estimator_rows(t8s, "fedavg", e.id, d),
                                       gated=e.id in CONFOUND_ESTIMATORS,
                                       f6=controls.get(d) if e.id == SAME_AS_F1C else None))
        note = (" E1 is centred within each tier by construction: its partial r given pmax is its within-tier "
                "signal." if e.id == "E1" else "")
        exact = equals_tv(t8s, e.id)
        if exact:
            note += (" On every run E equals TV (partial r = 1): reported label histograms without noise "
                     "(estimators.reported.epsilon null) give TV by construction, so this checks the pipeline, "
                     "not a data signal.")
            for u in units:
                if u.get("verdict") == SUPPORTED:
                    u["reason"] = u["reason"].replace("a consistent data signal once capacity is controlled",
                                                      "E equals TV by construction (a pipeline check)")
        out.append(finding(
            f"F7-{e.id}", claim=f"{e.label} recovers the clients' label heterogeneity once capacity is controlled",
            source="Section 5 (the 'natural next step'; this project's extension)", scope=ALL,
            statistic=f"partial r({e.id}, TV | pmax) over the clients of each hasfl run ({e.column}), pooled over "
                      "seeds (Fisher z, n - 4 weights, random effects over the seeds with Hartung-Knapp's interval, the fixed effect beside it); the fedavg runs' value is reported as the equal-width "
                      "control." + note,
            test="one-sided z test on the pooled Fisher z: supported if the lower bound > 0; contradicted if the "
                 "upper bound < margin (no usable data signal; for E0 / E1 read beside the positive control, F6 "
                 "after Holm for E0 and the fedavg runs' own value for E1, and withheld only where it is shown "
                 "blind); support takes precedence",
            margin_key=margin_key, st=st, units=units, files=[f"tables/{T8S}.parquet"],
            mde_meaning="true pooled partial r at which the test returns supported with the configured power "
                        "(mde_contradicted per unit: the true r at or below which it returns contradicted)",
            not_run="no completed hasfl run with this estimate", extension=True,
            kind=PIPELINE_CHECK if exact else EXTENSION))
        if e.id == SAME_AS_F1C:  # partial r(H~, TV | pmax) of the hasfl runs: F1c's statistic
            out[-1]["same_statistic_as"] = "F1c"
            out[-1]["statistic"] += (" The same statistic as F1c (Table 5's pr_h_tv_pmax), tested against other "
                                     "boundaries at another family's level (F7's units are corrected over its "
                                     "datasets, F1c's over the image datasets): the two verdicts need not mirror "
                                     "each other.")
    return out


SPEC = FindingSpec(
    ids=F7_IDS, tables=(T5, T8S),
    methods={f"F7-{e.id}": ("hasfl",) for e in ESTIMATORS if e.id not in FIXED_BEFORE_TRAINING},
    margins=("f7_min_pr_e_tv",), evaluate=evaluate, optional=True,
    reads={f"F7-{e.id}": ("hasfl",) for e in ESTIMATORS if e.id in FIXED_BEFORE_TRAINING})
