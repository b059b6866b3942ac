"""F5 [Section 3.3, Proposition 3]: coordinates no participant trains stay where training left them.

On every capped run, the coordinates no participant trained are unchanged (|change| <=
``f5_atol``): never covered -> init.pt = final.pt; untrained after t0 -> warmup.pt = final.pt
(units: runs; exact, no sampling). A pipeline check: the outcome follows from the construction.

Runs that cannot show it are left out, counted and named in the reason: a run whose ``status``
in either table is not completed (the tables write why: diverged, never passed t0 =
``hasfl.warmup``; :func:`hasfl.analysis.coverage.left_out_reason`), one of Table 4b with no client
trained after t0 (``p_hi_after_t0 = 0``: warmup.pt is final.pt), and one whose compared coordinates
have a non-finite change (a NaN is never a moved coordinate). With every run left out F5 is
inconclusive, with that reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.findings.kernel import (
    ALL,
    COMPLETED,
    CONTRADICTED,
    INCONCLUSIVE,
    P3,
    PIPELINE_CHECK,
    SUPPORTED,
    T4B,
    FindingSpec,
    Settings,
    finding,
    fmt,
    num,
)
from hasfl.analysis.specs import nested_scope_note

F5 = "F5"


def evaluate(t: Mapping[str, pd.DataFrame], datasets: Sequence[str], st: Settings) -> list[dict[str, Any]]:
    """F5 [Section 3.3, Proposition 3]: every capped run, from init (never covered) and from t0 (untrained
    after t0); every run is a unit whatever its dataset (``datasets`` is not used)."""
    p3, t4b = t[P3], t[T4B]
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    left: dict[tuple[str, str, int], list[str]] = {}  # run -> why it is left out

    def key_of(r: Mapping[str, Any]) -> tuple[str, str, int]:
        return str(r["dataset"]), str(r["method"]), int(r["seed"])

    def unit(r: Mapping[str, Any]) -> dict[str, Any]:
        key = key_of(r)
        return runs.setdefault(key, {"unit": f"{key[0]}/{key[1]}/seed{key[2]}", "n": 1, "checks": [], "mde": None})

    def leave_out(r: Mapping[str, Any], why: str) -> None:
        reasons = left.setdefault(key_of(r), [])
        if why not in reasons:
            reasons.append(why)

    for df in (p3, t4b):
        for r in df.to_dict("records") if len(df) and "status" in df.columns else []:
            if str(r["status"]) != COMPLETED:
                leave_out(r, str(r["status"]))
    for r in t4b.to_dict("records") if len(t4b) else []:
        # nobody trained after t0 (tables written before the status said so): the check from t0 is vacuous
        if key_of(r) not in left and num(r.get("p_hi_after_t0")) <= 0.0:
            leave_out(r, f"never passed t0 = {fmt(num(r.get('t0')))} (no client trained after it)")
    for r in (p3[p3["capped"].astype(bool)] if len(p3) else p3).to_dict("records"):
        unit(r)["checks"].append({
            "check": "never covered: init.pt -> final.pt", "p_hi": num(r["p_hi"]),
            "n_coords": int(r["n_never_covered"]), "n_changed": int(r["n_never_covered_changed"]),
            "max_abs_change": num(r["max_abs_change_never_covered"])})
    for r in (t4b[t4b["capped_after_t0"].astype(bool)] if len(t4b) else t4b).to_dict("records"):
        unit(r)["checks"].append({
            "check": f"untrained after t0 = {int(r['t0'])}: warmup.pt -> final.pt", "p_hi": num(r["p_hi_after_t0"]),
            "n_coords": int(r["n_stale"]), "n_changed": int(r["n_stale_changed"]),
            "max_abs_change": num(r["max_abs_change_stale"])})
    for key, u in runs.items():  # a NaN (or infinite) change is no evidence that a coordinate moved
        for c in u["checks"]:
            if key not in left and c["n_coords"] > 0 and not math.isfinite(c["max_abs_change"]):
                leave_out({"dataset": key[0], "method": key[1], "seed": key[2]},
                          f"non-finite values ({c['check'].split(':')[0]})")
    units = []
    for key in sorted(runs):
        if key in left:
            continue
        u = runs[key]
        moved = [c for c in u["checks"] if c["n_changed"] > 0]
        u["estimate"] = sum(c["n_changed"] for c in u["checks"])
        if moved:
            u.update(verdict=CONTRADICTED, reason="; ".join(
                f"{c['check']}: {c['n_changed']} of {c['n_coords']} coordinates moved (max |change| "
                f"{fmt(c['max_abs_change'])})" for c in moved))
        else:
            u.update(verdict=SUPPORTED, reason="; ".join(f"{c['check']}: all {c['n_coords']} unchanged"
                                                         for c in u["checks"]))
        units.append(u)
    names = "; ".join(f"{d}/{m}/seed{s}: {', '.join(left[(d, m, s)])}" for d, m, s in sorted(left))
    note = f"{len(left)} run(s) left out (they cannot show Proposition 3): {names}"
    out = finding(
        F5, claim="Proposition 3: coordinates no participant trains stay at the value they had when training on them "
                  "stopped (at init.pt if never covered)", source="Section 3.3, Proposition 3; Section 4.3",
        scope=ALL, statistic="coordinates outside the largest trained width whose value changed (|change| > f5_atol), "
                             "per capped run",
        test="exact comparison of saved states on every capped run (max p_max_trained < 1: init.pt vs final.pt; "
             "max p_max_trained_after_warmup < 1: warmup.pt vs final.pt). " + nested_scope_note(),
        margin_key="f5_atol", st=st, units=units,
        files=[f"tables/{P3}.parquet", f"tables/{T4B}.parquet"],
        mde_meaning="none: an exact, deterministic check (no sampling error)",
        not_run="no run capped every client below full width", kind=PIPELINE_CHECK,
        conjunction=True)  # one moved coordinate contradicts it
    if left:  # only then: findings.json is unchanged when every run is read
        out["left_out"] = [{"unit": f"{d}/{m}/seed{s}", "reason": ", ".join(left[(d, m, s)])}
                           for d, m, s in sorted(left)]
        if not out["n_units"]:  # runs were made but none can be read: no test, yet not "not run"
            out["verdict"] = INCONCLUSIVE
            for e in out["estimands"]:
                e["verdict"] = INCONCLUSIVE
        if not _all_runs(t) - left.keys():
            out["reason"] = f"every run is left out, so none can show Proposition 3: {note}"
        else:
            out["reason"] += f"; {note}"
    return [out]


def _all_runs(t: Mapping[str, pd.DataFrame]) -> set[tuple[str, str, int]]:
    """Every run of the two tables."""
    return {(str(r["dataset"]), str(r["method"]), int(r["seed"])) for name in (P3, T4B) if len(t[name])
            for r in t[name][["dataset", "method", "seed"]].to_dict("records")}


#: No methods: F5 is structural (coordinates vs init), accuracy does not enter it.
SPEC = FindingSpec(ids=(F5,), tables=(P3, T4B), methods={}, margins=("f5_atol",), evaluate=evaluate)
