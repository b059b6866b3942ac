"""F1a-F1d [Section 4.4, Table 5]: the capacity confound of the update-divergence estimate.

Statistics per dataset on the hasfl runs of Table 5; every dataset is reported, the image
datasets are in scope:

* F1a [4.4, Table 5] pooled r(H~, pmax) < ``f1_max_r_h_pmax`` (Fisher z over the hasfl seeds).
* F1b [4.4, this project's decomposition] adj. R^2(log H~ ~ tier) - adj. R^2(log H~ ~ TV)
  > ``f1_min_r2_gap`` (one-sided t over seeds).
* F1c [4.4] pooled r(H~, TV | pmax) < ``f1c_max_pr_h_tv`` ("no data signal"); contradicted
  when significantly positive.
* F1d [4.4] pooled r(p, TV | pmax) ~ 0: TOST with margin ``f1d_equiv_pr_p_tv``;
  contradicted when the two-sided interval excludes 0. The Fisher weights count the clients free to
  move (``n_free``), and their own test (r(p, TV) among them, permutation p) is reported beside, per seed and
  pooled over the seeds by a stratified permutation test (:func:`free_clients_pooled_test`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.findings.correlation import (
    corr_directional_unit,
    corr_equivalence_unit,
    corr_not_positive_unit,
)
from hasfl.analysis.findings.kernel import (
    COMPLETED,
    CONTRADICTED,
    IMAGE,
    SUPPORTED,
    T5,
    FindingSpec,
    Settings,
    finding,
    fmt,
    gate_unit,
    holm,
    in_scope,
    num,
    t_unit,
)
from hasfl.analysis.stats import stratified_permutation_corr

F1A, F1B, F1C, F1D = "F1a", "F1b", "F1c", "F1d"
#: Random joint orderings of F1d's pooled permutation test when enumerating every one is too many (> 200,000).
PERMUTATIONS = 9999
#: How the runs' correlations are pooled (:func:`hasfl.analysis.findings.correlation.corr_unit`).
POOLING = ("random effects over the seeds, Paule-Mandel tau^2 with Hartung-Knapp's interval on t with seeds - 1 "
           "df (plain where the runs weigh the same and there are 3 or more, where it is exact; floored at the "
           "random-effects se otherwise), so the seed-to-seed variance is in the interval; the fixed effect is "
           "reported beside it")


def confound_rows(t5: pd.DataFrame, method: str, dataset: str) -> pd.DataFrame:
    """Table 5's completed runs of ``method`` on ``dataset`` (one row per seed)."""
    if t5 is None or t5.empty:
        return pd.DataFrame(columns=["seed", "n_clients"])
    return t5[(t5["method"] == method) & (t5["dataset"] == dataset) & (t5["status"] == COMPLETED)]


def datasets_with(t5: pd.DataFrame, method: str, datasets: Sequence[str]) -> list[str]:
    """The datasets of ``datasets`` on which Table 5 has a completed run of ``method``."""
    return [d for d in datasets if len(confound_rows(t5, method, d))]


def control_unit(t5: pd.DataFrame, dataset: str, st: Settings) -> dict[str, Any]:
    """The positive control on ``dataset`` (F6's unit): pooled r(H~, TV) of the fedavg runs > ``f6_min_r_h_tv``."""
    return corr_directional_unit(dataset, confound_rows(t5, "fedavg", dataset), "r_h_tv", 0, st.th["f6_min_r_h_tv"],
                                 True, st)


def control_units(t5: pd.DataFrame, datasets: Sequence[str], st: Settings) -> dict[str, dict[str, Any]]:
    """F6's units by dataset, after Holm's correction over them (as F6's own row shows them): what a claim of no
    data signal reads as its positive control."""
    units = [control_unit(t5, d, st) for d in datasets_with(t5, "fedavg", datasets)]
    holm(units, st.alpha)
    return {str(u["unit"]): u for u in units}


def control_beside(unit: dict[str, Any], control: Mapping[str, Any] | None, claim: str,
                   label: str = "positive control F6 here (after Holm)") -> dict[str, Any]:
    """A claim of no data signal (F1c supported, F7-E0 / F7-E1 contradicted) read beside its positive control on the
    same dataset (``control``: F6's unit after Holm). Only a control shown blind (contradicted: the estimate does not
    track TV even at equal widths) withholds the claim: there its absence says nothing about capacity. A control that
    is merely inconclusive does not veto (that gate withheld 58-82% of 3-seed pools where the control truly works,
    r 0.3-0.4; this one withholds at most alpha there, :func:`hasfl.analysis.calibration.control_gate_rates`); its
    value and verdict are reported beside the claim (``control``), so a reader sees what it could show. ``label``: what
    the control is (F6's unit, or F7-E1's own fedavg value)."""
    if control is None:
        unit["control"] = None
        unit["reason"] += "; no fedavg run on this dataset: the positive control (F6) is not run, reported as such"
        return unit
    c = {k: control.get(k) for k in ("estimate", "low", "high", "n", "verdict")}
    unit["control"] = c
    said = f"{label}: {fmt(c['estimate'])} [{fmt(c['low'])}, {fmt(c['high'])}] {c['verdict']}"
    if c["verdict"] == CONTRADICTED:
        return gate_unit(unit, f"{said}: the estimate is shown blind to the data even with equal widths, so {claim} "
                               "says nothing about capacity")
    if c["verdict"] != SUPPORTED:
        said += " (not shown to see the data at equal widths: read this verdict beside it)"
    unit["reason"] += f"; {said}"
    return unit


def free_clients_pooled_test(rows: pd.DataFrame) -> dict[str, Any] | None:
    """F1d's free clients pooled over the seeds by their own test (:func:`hasfl.analysis.stats.stratified_permutation_corr`:
    TV permuted among each seed's free clients, the statistic ``sum((n_i - 1) r_i)``): the exact counterpart of the
    pooled Fisher z whose weights count the free clients. None when Table 5 carries no free clients' values."""
    if not {"p_free", "tv_free"} <= set(rows.columns) or not len(rows):
        return None
    strata = [(np.asarray(p, dtype=np.float64), np.asarray(tv, dtype=np.float64))
              for p, tv in zip(rows["p_free"], rows["tv_free"], strict=True)
              if not (np.isscalar(p) or p is None or np.isscalar(tv) or tv is None)]
    res = stratified_permutation_corr(strata, n_perm=PERMUTATIONS, seed=0)
    return {"r": num(res.r), "p_perm": num(res.p), "exact": res.exact, "n_seeds": res.n_strata, "n": res.n}


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F1a-F1d [Section 4.4, Table 5]: per dataset, every dataset reported, image datasets in scope."""
    t5 = t[T5]
    files = [f"tables/{T5}.parquet"]
    ds = datasets_with(t5, "hasfl", datasets)
    scope = {d: in_scope(d, IMAGE) for d in ds}
    controls = control_units(t5, datasets, st)
    out = []
    units = [dict(corr_directional_unit(d, confound_rows(t5, "hasfl", d), "r_h_pmax", 0, st.th["f1_max_r_h_pmax"],
                                        False, st), in_scope=scope[d]) for d in ds]
    out.append(finding(
        F1A, claim="Update divergence tracks capacity: r(H~, pmax) is strongly negative", source="Section 4.4, Table 5",
        scope=IMAGE, statistic="r(H~, pmax) over the clients of each hasfl run, pooled over seeds (Fisher z; " + POOLING + ")",
        test="one-sided z test on the pooled Fisher z: supported if the upper bound < margin, contradicted if the "
             "lower bound > margin", margin_key="f1_max_r_h_pmax", st=st, units=units, files=files,
        mde_meaning="true pooled r at which the test returns supported with the configured power",
        not_run="no completed hasfl run on an image dataset"))
    units = []
    for d in ds:
        rows = confound_rows(t5, "hasfl", d)
        gap = (rows["adj_r2_tier"].to_numpy(float) - rows["adj_r2_tv"].to_numpy(float))
        keep = np.isfinite(gap)
        units.append(dict(t_unit(d, gap[keep], st.th["f1_min_r2_gap"], True, st,
                                 {"seeds": [int(s) for s in rows["seed"].to_numpy()[keep]]}), in_scope=scope[d]))
    out.append(finding(
        F1B, claim="Capacity tier explains more variance of log H~ than TV does (no linearity assumed)",
        source="Section 4.4 (this project's decomposition of Table 5)", scope=IMAGE,
        statistic="adj. R^2(log H~ ~ C(tier)) - adj. R^2(log H~ ~ TV) per hasfl run",
        test="one-sided t test over seeds: supported if the lower bound > margin, contradicted if the upper bound "
             "< margin", margin_key="f1_min_r2_gap", st=st, units=units, files=files,
        mde_meaning="smallest true mean gap above the margin detected with the configured power",
        not_run="no completed hasfl run on an image dataset", extension=True))
    units = []
    for d in ds:
        u = dict(corr_not_positive_unit(d, confound_rows(t5, "hasfl", d), "pr_h_tv_pmax", st.th["f1c_max_pr_h_tv"],
                                        st), in_scope=scope[d])
        units.append(control_beside(u, controls.get(d), "its absence of a data signal") if u["verdict"] == SUPPORTED
                     else u)
    out.append(finding(
        F1C, claim="Once capacity is controlled no data signal remains: r(H~, TV | pmax) is near zero or negative",
        source="Section 4.4, Table 5", scope=IMAGE,
        statistic="partial r(H~, TV | pmax) per hasfl run, pooled over seeds (Fisher z, n - 4 weights; " + POOLING + ")",
        test="supported if the one-sided upper bound < margin, the positive control F6 on the same dataset (after "
             "Holm) reported beside it and withholding it only where F6 is contradicted (an estimate shown blind at "
             "equal widths says nothing about capacity); contradicted if the one-sided lower bound > 0 "
             "(a consistent positive data signal); contradiction takes precedence",
        margin_key="f1c_max_pr_h_tv", st=st, units=units, files=files,
        mde_meaning="true pooled partial r at or below which the test returns supported with the configured power",
        not_run="no completed hasfl run on an image dataset"))
    units = []
    for d in ds:
        rows = confound_rows(t5, "hasfl", d)
        # Eq. 6 pins the capped tiers: only the clients free to move can carry r(p, TV | pmax), so the Fisher
        # weights count them (n_free - 4 per run), not every client; a table without n_free: all clients
        size = "n_free" if "n_free" in rows.columns and rows["n_free"].notna().all() else "n_clients"
        u = dict(corr_equivalence_unit(d, rows, "pr_p_tv_pmax", st.th["f1d_equiv_pr_p_tv"], st, size=size),
                 in_scope=scope[d], dof_from=size)
        if "n_free" in rows.columns:
            free = [int(v) for v in rows["n_free"].fillna(0)]
            u["n_free"] = free
            u["reason"] += (f"; clients free to move (final width below their cap) per seed: {free} of "
                            f"{[int(v) for v in rows['n_clients']]}")
        if "r_p_tv_free" in rows.columns:  # the free clients' own test, beside the pooled one
            own = {str(int(s)): {"n": int(n) if pd.notna(n) else None, "r": num(r), "p_perm": num(pp)}
                   for s, n, r, pp in zip(rows["seed"], rows.get("n_free", [None] * len(rows)), rows["r_p_tv_free"],
                                          rows.get("p_perm_free", [math.nan] * len(rows)), strict=True)}
            u["free_clients_test"] = own
            u["reason"] += ("; among the free clients r(p, TV) and its two-sided permutation p per seed: "
                            + ", ".join(f"seed {k}: r = {fmt(v['r'])}, p = {fmt(v['p_perm'])}" for k, v in own.items()))
        pooled = free_clients_pooled_test(rows)
        if pooled is not None:
            u["free_clients_pooled_test"] = pooled
            how = "exact over every joint ordering" if pooled["exact"] else f"{PERMUTATIONS} random joint orderings"
            u["reason"] += (f"; pooled over the seeds by their stratified permutation test (TV permuted among each "
                            f"seed's free clients, {how}): r = {fmt(pooled['r'])}, two-sided p = {fmt(pooled['p_perm'])}"
                            f" ({pooled['n_seeds']} seed(s), {pooled['n']} free clients)")
        units.append(u)
    out.append(finding(
        F1D, claim="The allocations do not track true heterogeneity: r(p, TV | pmax) ~ 0", source="Section 4.4, Table 5",
        scope=IMAGE, statistic="partial r(p_final, TV | pmax) per hasfl run, pooled over seeds (Fisher z; " + POOLING + ")",
        test="equivalence (TOST): supported if the 1 - 2 alpha interval lies inside +-margin; contradicted if the "
             "1 - alpha interval excludes 0; contradiction takes precedence; the Fisher weights count "
             "the clients free to move (n_free - 4 per run: the only ones that can carry the correlation, since "
             "Eq. 6 pins the capped tiers), and their own test (r(p, TV) among them, exact permutation p) is "
             "reported beside it, per seed and pooled over the seeds (a stratified permutation test: TV permuted "
             "among each seed's free clients)",
        margin_key="f1d_equiv_pr_p_tv", st=st, units=units, files=files,
        mde_meaning="minimum detectable |r| of the two-sided test (see min_equivalence_margin per unit)",
        not_run="no completed hasfl run on an image dataset"))
    return out


SPEC = FindingSpec(
    ids=(F1A, F1B, F1C, F1D), tables=(T5,),
    methods={F1A: ("hasfl",), F1B: ("hasfl",), F1C: ("hasfl",), F1D: ("hasfl",)},
    margins=("f1_max_r_h_pmax", "f1_min_r2_gap", "f1c_max_pr_h_tv", "f1d_equiv_pr_p_tv"), evaluate=evaluate)
