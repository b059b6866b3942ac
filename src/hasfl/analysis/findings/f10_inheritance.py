"""F10a / F10b [Section 4.7, "Who Inherits the Confound?"]: the two populations the paper divides the literature into.

Section 4.7: methods that infer data properties from client updates "while holding model size fixed are
unaffected"; "they lose that meaning the moment sub-model width varies with device capacity: a quarter-width client
mechanically produces smaller, differently oriented updates regardless of its data", so for methods that size or
shape sub-models "any data-property inference drawn from their updates mixes data with capacity". Every run logs the
paper's update-divergence estimate E0 whatever method trained it (Table 10, :mod:`hasfl.analysis.tables.
table10_inheritance`), so both halves are tested per method a folder ran, pooled over its seeds as F1a is:

* **F10a** (sub-model methods: runs whose clients' final widths are not all the full model's): E0 is coupled to
  capacity, r(E0, pmax) != 0. Supported when the two-sided interval of the pooled r excludes 0; contradicted when it
  covers 0 and the TOST interval lies inside +-``f10_equiv_r_e_pmax`` (shown uncoupled); one unit per dataset x
  method.
* **F10b** (equal-width methods: every client trains the full model): E0 is not coupled to capacity, r(E0, pmax)
  ~ 0. TOST at +-``f10_equiv_r_e_pmax``, contradicted when the two-sided interval excludes 0 (as F1d).

Every unit also reports, beside its verdict, the pooled r(E0, TV | pmax): the data signal left once capacity is
held fixed (what "mixes data with capacity" asks of the other half); it decides nothing. F6 is the positive
control that E0 sees the data at equal widths. Scope: every dataset (the section's claim is not restricted to the
image datasets of Table 5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.confound import EQUAL_WIDTHS, SUB_MODEL
from hasfl.analysis.findings.correlation import corr_coupled_unit, corr_equivalence_unit, corr_unit
from hasfl.analysis.findings.f1_confound import POOLING
from hasfl.analysis.findings.kernel import ALL, COMPLETED, FindingSpec, Settings, finding, fmt

F10A, F10B = "F10a", "F10b"
#: The table both read (per run of every method: E0's correlations, the method's population).
T10 = "table10_inheritance"


def _rows(t10: pd.DataFrame | None, population: str) -> dict[tuple[str, str], pd.DataFrame]:
    """The completed runs of each (dataset, method) of ``population``, in table order."""
    if t10 is None or t10.empty:
        return {}
    sel = t10[(t10["population"] == population) & (t10["status"] == COMPLETED)]
    return {(str(d), str(m)): g for (d, m), g in sel.groupby(["dataset", "method"], sort=False)}


def _beside(unit: dict[str, Any], rows: pd.DataFrame, st: Settings) -> dict[str, Any]:
    """The unit with the pooled r(E0, TV | pmax) reported beside its verdict (``data_signal``)."""
    signal = corr_unit(unit["unit"], rows, "pr_h_tv_pmax", 1, st)
    unit["data_signal"] = {k: signal[k] for k in ("estimate", "two_sided_low", "two_sided_high", "two_sided_level")}
    unit["reason"] += (f"; beside it, the data signal once capacity is held fixed, pooled r(E0, TV | pmax) = "
                       f"{fmt(signal['estimate'])} [{fmt(signal['two_sided_low'])}, {fmt(signal['two_sided_high'])}] "
                       f"({signal['two_sided_level']:.0%})")
    return unit


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F10a and F10b, one unit per dataset x method of their population (datasets in ``datasets`` order)."""
    t10 = t.get(T10)
    margin = float(st.th["f10_equiv_r_e_pmax"])
    files = [f"tables/{T10}.parquet"]
    order = {d: i for i, d in enumerate(datasets)}
    out = []
    for fid, population, unit_of, claim, statistic, test in (
        (F10A, SUB_MODEL, corr_coupled_unit,
         "Methods whose sub-model widths follow capacity inherit the confound: their update-divergence estimate E0 is "
         "coupled to capacity, r(E0, pmax) != 0",
         "r(E0, pmax) over the clients of each run of a sub-model method, pooled over seeds (Fisher z; " + POOLING
         + "); one unit per dataset and method",
         "supported if the two-sided interval excludes 0 (coupled); contradicted if it covers 0 and the TOST "
         "interval (1 - 2 alpha) lies inside +-margin (shown uncoupled); the pooled r(E0, TV | pmax) reported beside"),
        (F10B, EQUAL_WIDTHS, corr_equivalence_unit,
         "Methods that hold model size fixed are unaffected: at equal widths E0 is not coupled to capacity, "
         "r(E0, pmax) ~ 0",
         "r(E0, pmax) over the clients of each run of an equal-width method, pooled over seeds (Fisher z; " + POOLING
         + "); one unit per dataset and method",
         "equivalence (TOST): supported if the 1 - 2 alpha interval lies inside +-margin; contradicted if the "
         "two-sided interval excludes 0; the pooled r(E0, TV | pmax) reported beside"),
    ):
        groups = sorted(_rows(t10, population).items(), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][1]))
        units = [_beside(dict(unit_of(f"{d}/{m}", rows, "r_h_pmax", margin, st), method=m), rows, st)
                 for (d, m), rows in groups if d in order]
        out.append(finding(
            fid, claim=claim, source="Section 4.7", scope=ALL, statistic=statistic, test=test,
            margin_key="f10_equiv_r_e_pmax", st=st, units=units, files=files,
            mde_meaning="minimum detectable |r| of the two-sided test",
            not_run=f"no completed run of {'a sub-model' if population == SUB_MODEL else 'an equal-width'} method "
                    f"(or no {T10} table)"))
    return out


#: Reads Table 10 when given (:data:`hasfl.analysis.findings.OPTIONAL_TABLES`: the workflow always gives it; a
#: caller without it gets both findings as not run). No accuracy enters them, so no method is listed.
SPEC = FindingSpec(ids=(F10A, F10B), tables=(), methods={}, margins=("f10_equiv_r_e_pmax",), evaluate=evaluate)
