"""The paper's claims as computed statements (findings.json).

Each finding evaluates one statistic on a set of *units* (runs or datasets), each unit
against a threshold from :data:`hasfl.analysis.specs.DEFAULT_THRESHOLDS` (config block
``analysis``). The verdict:

* ``not run`` -- no unit: the preset does not run the methods the claim needs;
* ``supported`` -- every unit passes;
* ``not supported`` -- some unit fails, or its statistic is undefined (NaN).

Findings (paper sections in brackets):

* F1a [4.4, Table 5] r(H~, pmax) <= ``f1_max_r_h_pmax`` on every hasfl run.
* F1b [4.4] adj. R^2 of log H~ on the capacity tier exceeds that on TV by more than
  ``f1_min_r2_gap`` on every hasfl run (the decomposition, no linearity assumed).
* F2a [4.3, Table 4] decay (best - final) of hasfl_nocov exceeds hasfl's by more than
  ``f2_min_decay_gap_pct`` points on every dataset.
* F2b [4.2-4.3] the same for uniform (coverage-violating) vs heterofl (full coverage).
* F3 [4.4] hasfl and random_budget final accuracies are indistinguishable: the paired
  ``ci_level`` t interval of the difference covers 0 on every dataset.
* F4 [4.5, Table 6] fedavg's mean final accuracy exceeds hasfl's by more than
  ``f4_min_gap_pct`` points on every dataset.
* F5 [3.3, Proposition 3] on every run whose largest trained width is < 1, every
  never-covered coordinate equals its initial value (within ``f5_atol``).
* F6 [4.7] positive control: r(H~, TV) > ``f6_min_r_h_tv`` on every fedavg run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

__all__ = ["VERDICTS", "evaluate_findings", "findings_frame"]

VERDICTS = ("supported", "not supported", "not run")


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _finding(fid: str, claim: str, source: str, statistic: str, rule: str, threshold: float,
             units: list[dict[str, Any]], aggregate: Callable[[list[float]], float], files: Sequence[str],
             not_run_reason: str) -> dict[str, Any]:
    """Assemble one finding from its evaluated units (each with ``value`` and ``pass``)."""
    if not units:
        verdict, reason, value = "not run", not_run_reason, math.nan
    else:
        failed = [u for u in units if u["pass"] is False]
        undefined = [u for u in units if u["pass"] is None]
        values = [u["value"] for u in units if math.isfinite(_num(u["value"]))]
        value = aggregate(values) if values else math.nan
        if failed:
            verdict = "not supported"
            reason = f"fails on {len(failed)} of {len(units)}: " + ", ".join(u["unit"] for u in failed)
        elif undefined:
            verdict = "not supported"
            reason = f"statistic undefined on {len(undefined)} of {len(units)}: " + ", ".join(u["unit"] for u in undefined)
        else:
            verdict, reason = "supported", f"holds on all {len(units)}"
    return {"id": fid, "claim": claim, "source": source, "statistic": statistic, "rule": rule,
            "threshold": threshold, "value": _clean(value), "verdict": verdict, "reason": reason,
            "n_units": len(units), "units": [{k: _clean(v) for k, v in u.items()} for u in units],
            "files": list(files)}


def _clean(v: Any) -> Any:
    """JSON-safe: NaN -> None, numpy scalars -> Python."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _check(value: float, ok: Callable[[float], bool]) -> bool | None:
    return ok(value) if math.isfinite(value) else None


def _completed(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "completed"] if len(df) else df


def _method_row(tables: Sequence[pd.DataFrame], dataset: str, method: str) -> dict[str, Any] | None:
    """The first row of ``method`` on ``dataset`` with at least one completed seed."""
    for df in tables:
        if df is None or df.empty:
            continue
        sel = df[(df["dataset"] == dataset) & (df["method"] == method) & (df["n_completed"] > 0)]
        if len(sel):
            return sel.iloc[0].to_dict()
    return None


def _decay_units(tables: Sequence[pd.DataFrame], datasets: Sequence[str], without: str, with_: str,
                 gap_min: float) -> list[dict[str, Any]]:
    units = []
    for dataset in datasets:
        a, b = _method_row(tables, dataset, without), _method_row(tables, dataset, with_)
        if a is None or b is None:
            continue
        decay_without, decay_with = -_num(a["delta_pct_mean"]), -_num(b["delta_pct_mean"])
        gap = decay_without - decay_with
        units.append({"unit": dataset, "value": gap, f"decay_{without}": decay_without, f"decay_{with_}": decay_with,
                      "pass": _check(gap, lambda g: g > gap_min)})
    return units


def evaluate_findings(*, table3: pd.DataFrame, table4: pd.DataFrame, table6: pd.DataFrame, table7: pd.DataFrame,
                      table5: pd.DataFrame, matched: pd.DataFrame, prop3: pd.DataFrame,
                      datasets: Sequence[str], thresholds: Mapping[str, float]) -> list[dict[str, Any]]:
    """All findings, in order F1a ... F6 (see the module docstring)."""
    th = thresholds
    out = []

    # F1: hasfl rows of Table 5.
    h5 = _completed(table5[table5["method"] == "hasfl"]) if len(table5) else table5
    units = [{"unit": f"{r['dataset']}/seed{r['seed']}", "value": _num(r["r_h_pmax"]),
              "pass": _check(_num(r["r_h_pmax"]), lambda v: v <= th["f1_max_r_h_pmax"])} for r in h5.to_dict("records")]
    out.append(_finding(
        "F1a", "Update divergence tracks capacity: r(H~, pmax) is strongly negative on every hasfl run",
        "Section 4.4, Table 5", "r(H~, pmax) over the clients of each hasfl run (value: the largest)",
        "r(H~, pmax) <= threshold on every run", th["f1_max_r_h_pmax"], units, max,
        ["tables/table5_confound.parquet"], "no completed hasfl run"))
    units = []
    for r in h5.to_dict("records"):
        gap = _num(r["adj_r2_tier"]) - _num(r["adj_r2_tv"])
        units.append({"unit": f"{r['dataset']}/seed{r['seed']}", "value": gap, "adj_r2_tier": _num(r["adj_r2_tier"]),
                      "adj_r2_tv": _num(r["adj_r2_tv"]), "pass": _check(gap, lambda g: g > th["f1_min_r2_gap"])})
    out.append(_finding(
        "F1b", "Capacity tier explains more variance of log H~ than TV does (no linearity assumed)",
        "Section 4.4 (decomposition)", "adj. R^2(log H~ ~ C(tier)) - adj. R^2(log H~ ~ TV) per hasfl run (value: the smallest)",
        "gap > threshold on every run", th["f1_min_r2_gap"], units, min,
        ["tables/table5_confound.parquet"], "no completed hasfl run"))

    # F2: peak-to-final decay with vs without coverage.
    out.append(_finding(
        "F2a", "Without the coverage guarantee the peak-to-final decay is larger (hasfl_nocov vs hasfl)",
        "Section 4.3, Table 4", "decay(hasfl_nocov) - decay(hasfl), decay = best - final, points (value: the smallest)",
        "gap > threshold on every dataset", th["f2_min_decay_gap_pct"],
        _decay_units([table4], datasets, "hasfl_nocov", "hasfl", th["f2_min_decay_gap_pct"]), min,
        ["tables/table4_coverage.parquet"], "hasfl_nocov or hasfl not run"))
    out.append(_finding(
        "F2b", "A coverage-violating static policy decays more than a fully covering one (uniform vs heterofl)",
        "Sections 4.2-4.3, Tables 3, 4, 7", "decay(uniform) - decay(heterofl), points (value: the smallest)",
        "gap > threshold on every dataset", th["f2_min_decay_gap_pct"],
        _decay_units([table3, table7, table4], datasets, "uniform", "heterofl", th["f2_min_decay_gap_pct"]), min,
        ["tables/table3_allocation.parquet", "tables/table7_shakespeare.parquet", "tables/table4_coverage.parquet"],
        "uniform or heterofl not run"))

    # F3: matched budget.
    units = []
    mb = matched[(matched["metric"] == "final_acc_pct") & (matched["status"] != "not run")] if len(matched) else matched
    for r in mb.to_dict("records"):
        covers = r.get("ci_covers_zero")
        covers = None if covers is None or (isinstance(covers, float) and math.isnan(covers)) or covers is pd.NA else bool(covers)
        units.append({"unit": r["dataset"], "value": _num(r["p_value"]), "mean_diff": _num(r["mean_diff"]),
                      "ci_low": _num(r["ci_low"]), "ci_high": _num(r["ci_high"]), "n_pairs": int(r["n_pairs"]),
                      "pass": covers})
    out.append(_finding(
        "F3", "HAS-FL and the matched-budget random control reach indistinguishable final accuracy",
        "Section 4.4", f"paired t-test p-value of final acc(hasfl) - final acc(random_budget) (value: the smallest); "
                       f"the {th['ci_level']:.0%} paired t interval",
        f"the {th['ci_level']:.0%} interval covers 0 (p >= {1 - th['ci_level']:.2g}) on every dataset", th["ci_level"],
        units, min, ["tables/matched_budget.parquet"], "hasfl or random_budget not run"))

    # F4: full model vs sub-model.
    units = []
    for dataset in datasets:
        a, b = _method_row([table6], dataset, "fedavg"), _method_row([table6], dataset, "hasfl")
        if a is None or b is None:
            continue
        gap = _num(a["final_acc_pct_mean"]) - _num(b["final_acc_pct_mean"])
        units.append({"unit": dataset, "value": gap, "fedavg_final_acc_pct": _num(a["final_acc_pct_mean"]),
                      "hasfl_final_acc_pct": _num(b["final_acc_pct_mean"]),
                      "pass": _check(gap, lambda g: g > th["f4_min_gap_pct"])})
    out.append(_finding(
        "F4", "Full-model training beats sub-model training (fedavg vs hasfl final accuracy)",
        "Section 4.5, Table 6", "mean final acc(fedavg) - mean final acc(hasfl), points (value: the smallest)",
        "gap > threshold on every dataset", th["f4_min_gap_pct"], units, min,
        ["tables/table6_full_model.parquet"], "fedavg or hasfl not run"))

    # F5: Proposition 3.
    units = []
    capped = prop3[prop3["capped"]] if len(prop3) else prop3
    for r in capped.to_dict("records"):
        n_changed = int(r["n_never_covered_changed"])
        units.append({"unit": f"{r['dataset']}/{r['method']}/seed{r['seed']}", "value": n_changed,
                      "p_hi": _num(r["p_hi"]), "n_never_covered": int(r["n_never_covered"]),
                      "max_abs_change": _num(r["max_abs_change_never_covered"]), "pass": n_changed == 0})
    out.append(_finding(
        "F5", "Proposition 3: with every client capped below full width, never-covered coordinates stay at init",
        "Section 3.3, Proposition 3",
        f"never-covered coordinates with |final - init| > {th['f5_atol']:g} per capped run (value: the largest)",
        "no such coordinate on every capped run", th["f5_atol"], units, max,
        ["tables/prop3_coverage.parquet"], "no run capped every client below full width"))

    # F6: positive control.
    f5 = _completed(table5[table5["method"] == "fedavg"]) if len(table5) else table5
    units = [{"unit": f"{r['dataset']}/seed{r['seed']}", "value": _num(r["r_h_tv"]),
              "pass": _check(_num(r["r_h_tv"]), lambda v: v > th["f6_min_r_h_tv"])} for r in f5.to_dict("records")]
    out.append(_finding(
        "F6", "Positive control: with equal widths (fedavg) the estimate correlates positively with TV",
        "Section 4.7", "r(H~, TV) over the clients of each fedavg run (value: the smallest)",
        "r(H~, TV) > threshold on every run", th["f6_min_r_h_tv"], units, min,
        ["tables/table5_confound.parquet"], "no completed fedavg run"))
    return out


def findings_frame(findings: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The findings as a table (for the report): id, claim, statistic, value, rule, threshold, verdict, reason."""
    cols = ["id", "claim", "statistic", "value", "rule", "threshold", "verdict", "reason"]
    return pd.DataFrame.from_records([{c: f[c] for c in cols} for f in findings], columns=cols)
