"""Markdown renderings of the tables and the stand-alone report (report.md).

Numbers are printed from the Parquet tables only (each section names its file), so
every number in the report traces back to a file under ``results/<name>/``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hasfl.analysis.floors import floor_phrase, is_missing
from hasfl.analysis.findings import FINDINGS, PAPER_CLAIM, finding_kind
from hasfl.analysis.specs import (
    BN_FINDINGS_TABLE,
    BN_TABLE,
    DATASET_LABELS,
    ESTIMATOR_FIGURE,
    ESTIMATORS,
    FIGURES,
    MB_ESTIMATORS_TABLE,
    TABLE8,
    FLOOR_TOL_PCT,
    METHOD_LABELS,
    METHOD_TABLES,
    STD_NOTE,
    TABLE_NOTES,
    TABLE_TITLES,
    figure_caption,
)

__all__ = ["TABLE_TITLES", "comparison_overview", "display_table", "estimator_section", "floor_section", "md_table",
           "report_markdown", "stale_summary", "table8_seed_display", "table_markdown", "table_preamble"]

def fmt(v: Any, digits: int = 4) -> str:
    """One cell: NaN -> "--", bools -> yes/no, floats to ``digits`` significant digits."""
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int,)) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") in "iu"):
        return str(int(v))
    if isinstance(v, float) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "") == "f"):
        v = float(v)
        if not math.isfinite(v):
            return "--"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def pm(mean: float, std: float, decimals: int = 1) -> str:
    """``mean +- std`` with fixed decimals (std omitted when NaN, "--" when the mean is)."""
    if mean is None or not math.isfinite(float(mean)):
        return "--"
    s = f"{float(mean):.{decimals}f}"
    if std is not None and math.isfinite(float(std)):
        s += f" ± {float(std):.{decimals}f}"
    return s


def md_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``df`` (all cells through :func:`fmt`)."""
    if df.empty:
        return "_(no rows)_\n"
    cols = [str(c).replace("|", "\\|") for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def pm_sig(mean: float, std: float, sig: int = 3) -> str:
    """:func:`pm` with as many decimals as ``sig`` significant digits of the mean need (at least 2)."""
    if mean is None or not math.isfinite(float(mean)):
        return "--"
    m = abs(float(mean))
    decimals = 2 if m == 0 else max(2, sig - 1 - int(math.floor(math.log10(m))))
    return pm(mean, std, decimals)


def _floor_cell(row: Mapping[str, Any]) -> str:
    if "n_at_floor" not in row:
        return ""
    phrase = floor_phrase(row.get("n_at_floor"), row.get("n_final_at_floor"), int(row.get("n_completed", 0)))
    return f"**{phrase}**" if phrase.startswith("at floor") else phrase


def _method_display(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({
        "Dataset": df["dataset"].map(lambda d: DATASET_LABELS.get(d, d)),
        "Method": df["method"].map(lambda m: METHOD_LABELS.get(m, m)),
        "Status": df["status"],
        "Seeds": df["n_completed"],
        "Best acc (%)": [pm(a, b) for a, b in zip(df["best_acc_pct_mean"], df["best_acc_pct_std"], strict=True)],
        "Final acc (%)": [pm(a, b) for a, b in zip(df["final_acc_pct_mean"], df["final_acc_pct_std"], strict=True)],
        "Peak->final delta": [pm(a, b) for a, b in zip(df["delta_pct_mean"], df["delta_pct_std"], strict=True)],
    })
    if "n_at_floor" in df.columns:
        out["Floor"] = [_floor_cell(r) for r in df.to_dict("records")]
    out["Avg p (allocated)"] = [pm(a, b, 2) for a, b in zip(df["avg_p_mean"], df["avg_p_std"], strict=True)]
    if "avg_p_trained_mean" in df.columns:  # costs as paid
        out["Avg p (trained)"] = [pm(a, b, 2) for a, b in zip(df["avg_p_trained_mean"], df["avg_p_trained_std"],
                                                              strict=True)]
        out["Upload MB / client-round"] = [pm_sig(a, b) for a, b in zip(df["upload_mb_mean"], df["upload_mb_std"],
                                                                        strict=True)]
        out["Train MMACs / sample"] = [pm_sig(a, b) for a, b in zip(df["train_mmacs_mean"], df["train_mmacs_std"],
                                                                    strict=True)]
    return out


def _unit(full: float) -> tuple[float, str]:
    """(divisor, suffix) for counts whose largest value is ``full``: M from a million, k from a thousand."""
    if full >= 1e6:
        return 1e6, " M"
    if full >= 1e3:
        return 1e3, " k"
    return 1.0, ""


def _short(v: float) -> str:
    """3 significant digits, at least one decimal under 1000 (154.9, 39.2, 2.78, 0.0991)."""
    a = abs(v)
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}" if a else "0"


def _table1_display(df: pd.DataFrame) -> pd.DataFrame:
    """Table 1 with every model's params / MACs in the unit of its full width (k or M) and upload in MB or kB."""
    cells: dict[str, list[str]] = {"params": [], "macs": [], "upload": []}
    full = df.groupby("model")[["params", "macs", "upload_mb"]].max()
    for r in df.to_dict("records"):
        for key, col in (("params", "params"), ("macs", "macs")):
            div, suffix = _unit(float(full.at[r["model"], col]))
            cells[key].append(f"{_short(r[col] / div)}{suffix}" if div > 1 else str(int(r[col])))
        if float(full.at[r["model"], "upload_mb"]) < 0.1:
            cells["upload"].append(f"{_short(r['upload_mb'] * 1e3)} kB")
        else:
            cells["upload"].append(f"{_short(r['upload_mb'])} MB")
    return pd.DataFrame({"Source": df["source"], "Model": df["model"], "p": df["p"].map(lambda p: f"{p:.2f}"),
                         "Params": cells["params"], "MACs / sample": cells["macs"], "Upload": cells["upload"],
                         "Params (exact)": df["params"], "MACs (exact)": df["macs"]})


def _capped_only(df: pd.DataFrame, flag: str) -> tuple[pd.DataFrame, str]:
    """The rows whose ``flag`` is true, and one line counting the others per method."""
    capped = df[df[flag].astype(bool)].drop(columns=[flag])  # all "yes": the line below counts the others
    rest = df[~df[flag].astype(bool)]
    if rest.empty:
        return capped, f"All {len(df)} runs are capped."
    by = ", ".join(f"{METHOD_LABELS.get(m, m)} {len(g)}" for m, g in rest.groupby("method", sort=False))
    what = ("reached full width (p_hi = 1): no coordinate was left untrained, nothing to check" if flag == "capped"
            else "trained full width after t0: no stale coordinate, nothing to evaluate")
    return capped, (f"{len(capped)} of {len(df)} runs are capped; the other {len(rest)} {what} ({by}).")


def _matched_budget_parts(df: pd.DataFrame) -> list[tuple[str, Any]]:
    acc = df[df["metric"] == "final_acc_pct"]
    wid = df[df["metric"] == "avg_p"]

    def floors(r: Mapping[str, Any]) -> str:
        bits = []
        for m in ("hasfl", "random_budget"):
            k = r.get(f"{m}_n_at_floor")
            if not is_missing(k) and int(k):
                bits.append(f"{METHOD_LABELS[m]} {int(k)} of {int(r['n_pairs'])}")
        return ("**at floor: " + ", ".join(bits) + "**") if bits else ""

    a = pd.DataFrame({
        "Dataset": acc["dataset"].map(lambda d: DATASET_LABELS.get(d, d)), "Status": acc["status"],
        "Pairs": acc["n_pairs"], "HAS-FL (%)": acc["hasfl_mean"].map(lambda v: pm(v, math.nan, 2)),
        "Random-budget (%)": acc["random_budget_mean"].map(lambda v: pm(v, math.nan, 2)),
        "Mean diff (points)": acc["mean_diff"].map(lambda v: pm(v, math.nan, 2)),
        "SD of diffs": acc["sd_diff"].map(lambda v: pm(v, math.nan, 2)),
        "CI": [("--" if not math.isfinite(lo) else f"[{lo:.2f}, {hi:.2f}] ({lvl:.0%})")
               for lo, hi, lvl in zip(acc["ci_low"], acc["ci_high"], acc["ci_level"].fillna(0.95), strict=True)],
        "t": acc["t_stat"].map(lambda v: pm(v, math.nan, 2)), "p (paired t)": acc["p_value"].map(lambda v: _num(v)),
        "Floor": [floors(r) for r in acc.to_dict("records")],
    })
    w = pd.DataFrame({
        "Dataset": wid["dataset"].map(lambda d: DATASET_LABELS.get(d, d)), "Status": wid["status"],
        "Pairs": wid["n_pairs"], "HAS-FL avg p": wid["hasfl_mean"].map(lambda v: pm(v, math.nan, 4)),
        "Random-budget avg p": wid["random_budget_mean"].map(lambda v: pm(v, math.nan, 4)),
        "Largest abs diff": wid["max_abs_diff"].map(lambda v: "--" if not math.isfinite(v) else f"{v:.2g}"),
        "Tolerance": wid["tolerance"].map(lambda v: "--" if not math.isfinite(v) else f"{v:g}"),
        "Within tolerance": wid["within_tolerance"],
    }) if "max_abs_diff" in wid.columns else wid
    return [("Final accuracy: paired t-test (hasfl - random_budget)", a),
            ("Average allocated width: matched by construction (no test)", w)]


def display_parts(name: str, df: pd.DataFrame) -> list[tuple[str, Any]]:
    """What a reader sees of table ``name``: (subtitle, frame or paragraph) in order."""
    if df.empty:
        return [("", df)]
    if name == "matched_budget" and "check" in df.columns:
        return _matched_budget_parts(df)
    if name == MB_ESTIMATORS_TABLE and "pair" in df.columns:
        wid = df[df["metric"] == "avg_p"]
        recs = wid.to_dict("records")
        w = pd.DataFrame({
            "Dataset": [DATASET_LABELS.get(r["dataset"], r["dataset"]) for r in recs],
            "Allocating": [METHOD_LABELS.get(r["alloc_method"], r["alloc_method"]) for r in recs],
            "Status": [r["status"] for r in recs], "Pairs": [int(r["n_pairs"]) for r in recs],
            "Allocating avg p": [pm(r.get("alloc_mean"), math.nan, 4) for r in recs],
            "Control avg p": [pm(r.get("control_mean"), math.nan, 4) for r in recs],
            "Largest abs diff": [_num(r.get("max_abs_diff"), 2) for r in recs],
            "Tolerance": [_num(r.get("tolerance")) for r in recs],
            "Within tolerance": [r.get("within_tolerance") for r in recs],
        })
        return [("Final accuracy: paired t-test (allocating method - its control; F8)", _mb_estimators_display(df)),
                ("Average allocated width: matched by construction (no test)", w)]
    if name == "prop3_coverage" and "capped" in df.columns:
        shown, line = _capped_only(df, "capped")
        return [("", shown), ("", line)]
    if name == "table4b_stale_coordinates" and "capped_after_t0" in df.columns:
        shown, line = _capped_only(df, "capped_after_t0")
        return [("", shown), ("", line)]
    return [("", display_table(name, df))]


def display_table(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The reader-facing columns of table ``name`` (the Parquet file keeps every column)."""
    if df.empty:
        return df
    if name in METHOD_TABLES:
        return _method_display(df)
    if name == "table1_cost":
        return _table1_display(df)
    if name == "table2_datasets":
        out = df.copy()
        for c, label in (("majority_pct", "majority class (%)"), ("chance_pct", "chance (%)")):
            if c in out.columns:
                out[c] = out[c].map(lambda v: "--" if not math.isfinite(v) else f"{v:.2f}")
                out = out.rename(columns={c: label})
        return out
    if name == "table5_confound":
        cols = ["dataset", "seed", "method", "status", "r_h_tv", "r_h_pmax", "pr_h_tv_pmax", "pr_p_tv_pmax",
                "adj_r2_tier", "adj_r2_tv", "adj_r2_joint", "r2_tier", "r2_tv", "r2_joint"]
        out = df[cols].copy()
        for c in cols[4:]:
            out[c] = out[c].map(lambda v: "--" if not math.isfinite(v) else f"{v:.2f}")
        return out.rename(columns={"r_h_tv": "r(H~,TV)", "r_h_pmax": "r(H~,pmax)", "pr_h_tv_pmax": "r(H~,TV|pmax)",
                                   "pr_p_tv_pmax": "r(p,TV|pmax)", "adj_r2_tier": "adjR2 tier",
                                   "adj_r2_tv": "adjR2 TV", "adj_r2_joint": "adjR2 both", "r2_tier": "R2 tier",
                                   "r2_tv": "R2 TV", "r2_joint": "R2 both"})
    if name == TABLE8 and "pr_e_tv_pmax" in df.columns:
        return _table8_display(df)
    if name == MB_ESTIMATORS_TABLE and "pair" in df.columns:
        return _mb_estimators_display(df)
    if name == "comparison":
        out = df[["table", "dataset", "method", "metric", "status", "published_mean", "published_std", "ours_mean",
                  "ours_std", "ours_n", "within", "criterion", "reason"]].copy()
        return out
    return df


def _ci(r: Any, low: Any, high: Any) -> str:
    """``+0.12 [-0.05, +0.28]`` ("--" when undefined)."""
    try:
        r, low, high = float(r), float(low), float(high)
    except (TypeError, ValueError):
        return "--"
    if not math.isfinite(r):
        return "--"
    return f"{r:+.2f} [{low:+.2f}, {high:+.2f}]" if math.isfinite(low) else f"{r:+.2f}"


_EST_LABEL = {e.id: f"{e.id} {e.name}" for e in ESTIMATORS}


def _table8_display(df: pd.DataFrame) -> pd.DataFrame:
    """Table 8 pooled: one row per dataset x method x estimate."""
    def floor(r: Mapping[str, Any]) -> str:
        k = r.get("n_at_floor")
        return "" if is_missing(k) or not int(k) else f"**at floor: {int(k)} of {int(r['n_runs'])} runs**"

    recs = df.to_dict("records")
    return pd.DataFrame({
        "Dataset": [DATASET_LABELS.get(r["dataset"], r["dataset"]) for r in recs],
        "Runs of": [METHOD_LABELS.get(r["method"], r["method"]) for r in recs],
        "Estimate": [_EST_LABEL.get(r["estimator"], r["estimator"]) for r in recs],
        "Runs": [int(r["n_runs"]) if r["status"] != "not run" else "not run" for r in recs],
        "r(E,TV)": [_ci(r.get("r_e_tv"), r.get("r_e_tv_low"), r.get("r_e_tv_high")) for r in recs],
        "r(E,pmax)": [_ci(r.get("r_e_pmax"), r.get("r_e_pmax_low"), r.get("r_e_pmax_high")) for r in recs],
        "r(E,TV|pmax)": [_ci(r.get("pr_e_tv_pmax"), r.get("pr_e_tv_pmax_low"), r.get("pr_e_tv_pmax_high"))
                         for r in recs],
        "within-tier r(E,TV)": [_ci(r.get("within_r"), r.get("within_r_low"), r.get("within_r_high")) for r in recs],
        "adjR2 tier": [pm(r.get("adj_r2_tier_mean"), r.get("adj_r2_tier_std"), 2) for r in recs],
        "adjR2 TV": [pm(r.get("adj_r2_tv_mean"), r.get("adj_r2_tv_std"), 2) for r in recs],
        "Check per run": [r.get("verdicts") if isinstance(r.get("verdicts"), str) else "--" for r in recs],
        "Floor": [floor(r) for r in recs],
    })


def table8_seed_display(df: pd.DataFrame) -> pd.DataFrame:
    """Table 8 per run (the _seeds file): the statistics of each run x estimate and its check's verdict."""
    if df.empty:
        return df
    done = df[df["status"] != "not run"]
    if done.empty:
        return pd.DataFrame({"": ["no run of these methods in this preset"]})
    out = pd.DataFrame({
        "dataset": done["dataset"], "method": done["method"], "seed": done["seed"], "estimate": done["estimator"],
        "status": done["status"],
        "at floor": done["at_floor"].map(lambda v: "" if is_missing(v) else ("**yes**" if v else "no")),
    })
    for c, label in (("r_e_tv", "r(E,TV)"), ("r_e_pmax", "r(E,pmax)"), ("pr_e_tv_pmax", "r(E,TV|pmax)"),
                     ("within_r", "within-tier r"), ("adj_r2_tier", "adjR2 tier"), ("adj_r2_tv", "adjR2 TV"),
                     ("permutation_p", "perm. p")):
        out[label] = done[c].map(lambda v: "--" if not math.isfinite(v) else f"{v:.3g}" if c == "permutation_p"
                                 else f"{v:+.2f}" if not c.startswith("adj") else f"{v:.2f}")
    out["check"] = done["verdict"]
    return out.reset_index(drop=True)


def _mb_estimators_display(df: pd.DataFrame) -> pd.DataFrame:
    acc = df[df["metric"] == "final_acc_pct"]
    recs = acc.to_dict("records")

    def floors(r: Mapping[str, Any]) -> str:
        bits = []
        for side in ("alloc", "control"):
            k = r.get(f"{side}_n_at_floor")
            if not is_missing(k) and int(k):
                bits.append(f"{METHOD_LABELS.get(r[f'{side}_method'], r[f'{side}_method'])} {int(k)} of "
                            f"{int(r['n_pairs'])}")
        return ("**at floor: " + ", ".join(bits) + "**") if bits else ""

    return pd.DataFrame({
        "Dataset": [DATASET_LABELS.get(r["dataset"], r["dataset"]) for r in recs],
        "Allocating by": [f"{r['estimator']} ({METHOD_LABELS.get(r['alloc_method'], r['alloc_method'])})" for r in recs],
        "Control": [METHOD_LABELS.get(r["control_method"], r["control_method"]) for r in recs],
        "Status": [r["status"] for r in recs], "Pairs": [int(r["n_pairs"]) for r in recs],
        "Allocating (%)": [pm(r.get("alloc_mean"), math.nan, 2) for r in recs],
        "Control (%)": [pm(r.get("control_mean"), math.nan, 2) for r in recs],
        "Mean diff (points)": [pm(r.get("mean_diff"), math.nan, 2) for r in recs],
        "CI": [("--" if is_missing(r.get("ci_low")) or not math.isfinite(float(r["ci_low"]))
                else f"[{float(r['ci_low']):.2f}, {float(r['ci_high']):.2f}] ({float(r['ci_level']):.0%})")
               for r in recs],
        "p (paired t)": [_num(r.get("p_value")) for r in recs],
        "Floor": [floors(r) for r in recs],
    })


def estimator_section(tables: Mapping[str, pd.DataFrame], findings: Sequence[Mapping[str, Any]],
                      power: Any = None) -> str:
    """report.md's section on the capacity-separable estimators: what each is, Table 8 in one paragraph
    per dataset, F7 / F8 with their power, and where Figure 9 is."""
    t8 = tables.get(TABLE8)
    text = ("The paper's Section 5 asks which data statistics can still be recovered when sub-model width follows "
            "device capacity. Every run logs four per-client estimates of label heterogeneity (final values in its "
            "`clients.parquet`):\n\n")
    text += "".join(f"- **{e.id} {e.name}** (`{e.column}`): {e.what}.\n" for e in ESTIMATORS)
    text += ("\nEach is checked against the true TV with capacity held fixed, exactly as `hasfl diagnose` does "
             "(Table 8, `tables/table8_estimators.parquet`; per run `tables/table8_estimators_seeds.parquet`). The "
             "question for each estimate: does it still rise with TV among clients of the same capacity "
             "(r(E, TV | pmax) and the within-tier r), or does capacity explain it (r(E, pmax), adjusted R^2 of "
             "the tier)? The hasfl runs are the sub-model setting of the confound; the fedavg runs, where every "
             "client trains the full model, are the positive control.\n\n")
    if t8 is None or t8.empty:
        text += "Table 8 was not computed for this report.\n"
    else:
        lines = []
        for r in t8[(t8["method"] == "hasfl") & (t8["status"] != "not run")].to_dict("records"):
            lines.append(f"- {DATASET_LABELS.get(r['dataset'], r['dataset'])}, {_EST_LABEL.get(r['estimator'])}: "
                         f"r(E, pmax) {_ci(r['r_e_pmax'], r['r_e_pmax_low'], r['r_e_pmax_high'])}, r(E, TV | pmax) "
                         f"{_ci(r['pr_e_tv_pmax'], r['pr_e_tv_pmax_low'], r['pr_e_tv_pmax_high'])}, within-tier r "
                         f"{_ci(r['within_r'], r['within_r_low'], r['within_r_high'])}; check per run: "
                         f"{r['verdicts']}.")
        level = t8["ci_level"].dropna()
        text += (f"Table 8 in brief, HAS-FL runs pooled over seeds ({float(level.iloc[0]):.0%} intervals):\n\n"
                 if len(level) else "Table 8 in brief, HAS-FL runs pooled over seeds:\n\n")
        text += ("\n".join(lines) if lines else "No completed HAS-FL run.") + "\n"
        e3 = t8[(t8["estimator"] == "E3") & (t8["status"] != "not run")]
        if len(e3) and bool((e3["r_e_tv"] >= 0.9999).all()):
            text += ("\nE3 reproduces TV (r = 1.00 in every run): with exact counts (`estimators.reported.epsilon: "
                     "null`) the pooled reports are the global label distribution, so E3 is the ground truth itself. "
                     "Its F7 verdict checks the pipeline, not whether reports survive privacy noise; set "
                     "`estimators.reported.epsilon` to test that.\n")
        absent = sorted({r["method"] for r in t8.to_dict("records") if r["status"] == "not run"})
        if absent:
            text += ("\nNot run in this preset: " + ", ".join(METHOD_LABELS.get(m, m) for m in absent)
                     + " (their rows in Table 8 say \"not run\").\n")
    est = [f for f in findings if str(f.get("id", "")).startswith(("F7", "F8"))]
    if est:
        text += (f"\nFindings F7 (does the estimate recover TV once capacity is controlled? hasfl runs) and F8 (does "
                 "allocating by it beat its matched random budget?). Interval: the one-sided bounds the test uses "
                 f"(the two-sided {1 - 2 * float(findings_alpha(est)):.0%} interval); MDE at {_num(power)} power "
                 "(F7: the true partial r detected as supported; F8: the true difference in points):\n\n")
        rows = []
        for f in est:
            for u in f["units"] or [{"unit": "--", "verdict": f["verdict"], "reason": f["reason"]}]:
                lo, hi = u.get("low"), u.get("high")
                rows.append({"ID": f["id"], "Unit": u["unit"], "Estimate": _num(u.get("estimate")),
                             "Interval": "--" if lo is None or hi is None else f"[{_num(lo)}, {_num(hi)}]",
                             "MDE": _num(u.get("mde")), "Verdict": f"**{u['verdict']}**", "Why": u["reason"]})
        text += md_table(pd.DataFrame.from_records(rows))
    else:
        text += "\nF7 / F8 were not evaluated for this report.\n"
    text += (f"\nFigure 9 (`figures/{ESTIMATOR_FIGURE}.png`, below with the other figures) shows every client's "
             "estimate against its TV, coloured by capacity.\n")
    return text


def findings_alpha(items: Sequence[Mapping[str, Any]]) -> float:
    """The significance level of the findings ``items`` (0.05 when they do not say)."""
    for f in items:
        if f.get("alpha") is not None:
            return float(f["alpha"])
    return 0.05


def table_preamble(name: str, df: pd.DataFrame) -> str:
    """Text shown between a table's note and its rows (the floors of a method table's datasets)."""
    if name in METHOD_TABLES and "majority_pct" in df.columns and len(df):
        levels = []
        for dataset, g in df.groupby("dataset", sort=False):
            maj, ch, tol = (float(g[c].iloc[0]) for c in ("majority_pct", "chance_pct", "floor_tol_pct"))
            if math.isfinite(maj):
                levels.append(f"{DATASET_LABELS.get(dataset, dataset)} majority class {maj:.2f}%, chance {ch:.2f}%, "
                              f"tolerance {tol:.2g} points")
        if not levels:
            return ("Floor: unknown (the data-stage manifests predate the majority-class rate; rerun the data "
                    "stage).")
        return ("Floor: `at floor: k of n seeds` = in k of the n completed seeds the best accuracy of any round stayed "
                "within the tolerance of the test set's majority-class rate (the run never predicted better than the "
                "most common class); `ends at floor` = only the final accuracy did. Levels: " + "; ".join(levels)
                + ".")
    return ""


def table_markdown(name: str, df: pd.DataFrame, sources: Sequence[str] = (), extra: Mapping[str, pd.DataFrame] | None = None,
                   file_name: str | None = None) -> str:
    """The Markdown rendering written beside ``tables/<name>.parquet``."""
    parts = [f"# {TABLE_TITLES.get(name, name)}\n\n"]
    parts.append(f"Data: `{file_name or f'tables/{name}.parquet'}`.")
    note = TABLE_NOTES.get(name) or (STD_NOTE if name in METHOD_TABLES else "")
    if note:
        parts.append(" " + note)
    parts.append("\n\n")
    if name == "comparison":
        parts.append(comparison_overview(df) + "\n")
    pre = table_preamble(name, df)
    if pre:
        parts.append(pre + "\n\n")
    parts.append(_render_parts(display_parts(name, df), level="##"))
    for title, frame in (extra or {}).items():
        parts.append(f"\n## {title}\n\n{md_table(frame)}")
    if sources:
        parts.append("\n## Read from\n\n" + "\n".join(f"- `{s}`" for s in sources) + "\n")
    return "".join(parts)


def _render_parts(parts: Sequence[tuple[str, Any]], level: str) -> str:
    out = []
    for title, item in parts:
        if title:
            out.append(f"\n{level} {title}\n\n")
        out.append(md_table(item) if isinstance(item, pd.DataFrame) else f"\n{item}\n")
    return "".join(out)


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "--"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "--" if not math.isfinite(x) else f"{x:.{digits}g}"


def _kind_tag(f: Mapping[str, Any]) -> str:
    """`` [extension]``, `` [pipeline check]``, `` [oracle]`` after a finding's claim; nothing for a paper claim."""
    kind = finding_kind(f)
    return "" if kind == PAPER_CLAIM else f" [{kind}]"


def _findings_summary(findings: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per finding: its claim, scope, test, margin and verdict."""
    rows = []
    for f in findings:
        margin = "--" if f.get("margin") is None else f"{_num(f['margin'])} (`{f['margin_key']}`)"
        rows.append({"ID": f["id"], "Verdict": f"**{f['verdict']}**", "Claim": f["claim"], "Source": f["source"]
                     + _kind_tag(f), "Scope": f["scope"], "Test": f["test"],
                     "Margin": margin, "Units": f["n_units"]})
    return pd.DataFrame.from_records(rows)


def _findings_units(findings: Sequence[Mapping[str, Any]],
                    floor_rows: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """One row per finding x unit: n, estimate and interval, MDE at the configured power, verdict and why,
    and (``floor_rows``) which of the unit's runs are at the accuracy floor."""
    rows = []
    for f in findings:
        for u in f["units"]:
            note = u.get("floor_note") or _unit_floor_note(f["id"], str(u["unit"]), floor_rows or {})
            lo, hi = u.get("low"), u.get("high")
            interval = "--" if lo is None or hi is None else f"[{_num(lo)}, {_num(hi)}]"
            rows.append({"ID": f["id"], "Unit": u["unit"], "In scope": "yes" if u.get("in_scope", True) else "no",
                         "n": "--" if u.get("n") is None else str(u["n"]), "Estimate": _num(u.get("estimate")),
                         "Interval": interval, "MDE": _num(u.get("mde")), "Verdict": u["verdict"],
                         "Why": u["reason"], "Floor": note})
            for part in u.get("parts", []):  # a unit tested as several claims (F3-shakespeare)
                plo, phi = part.get("low"), part.get("high")
                rows.append({"ID": f["id"], "Unit": f"{u['unit']}: {part['unit']}",
                             "In scope": "yes" if u.get("in_scope", True) else "no", "n": str(part.get("n")),
                             "Estimate": _num(part.get("estimate")),
                             "Interval": "--" if plo is None or phi is None else f"[{_num(plo)}, {_num(phi)}]",
                             "MDE": _num(part.get("mde")), "Verdict": part["verdict"], "Why": part["reason"],
                             "Floor": note})
    df = pd.DataFrame.from_records(rows, columns=["ID", "Unit", "In scope", "n", "Estimate", "Interval", "MDE",
                                                  "Verdict", "Why", "Floor"])
    return df if df["Floor"].astype(bool).any() else df.drop(columns=["Floor"])


def stale_summary(df: pd.DataFrame) -> str:
    """What Table 4b implies for Section 4.3's explanation, from the table's numbers (or why there are none)."""
    if df is None or df.empty:
        return "No run in this preset (Table 4b is empty).\n"
    capped = df[df["capped_after_t0"].astype(bool) & (df["status"] == "completed")]
    if capped.empty:
        return "No completed run was capped below full width after the warm-up round t0.\n"
    lines = []
    for (dataset, method), g in capped.groupby(["dataset", "method"], sort=True):
        lines.append(f"- {DATASET_LABELS.get(dataset, dataset)} / {METHOD_LABELS.get(method, method)}: {len(g)} capped "
                     f"run(s); mean test accuracy of the full model {g['acc_full_pct'].mean():.1f}%, with the stale "
                     f"coordinates reset to init {g['acc_reset_pct'].mean():.1f}%, of the sub-model at the largest "
                     f"width trained after t0 {g['acc_sub_pct'].mean():.1f}%; stale coordinates "
                     f"{g['frac_stale'].mean():.1%} of the model, {g['frac_stale_trained_before_t0'].mean():.1%} of "
                     f"them trained before t0; unchanged since t0 in {int(g['frozen_since_t0'].sum())} of {len(g)}.")
    text = "\n".join(lines) + "\n\n"
    if "final_at_floor" in capped.columns and capped["final_at_floor"].fillna(False).astype(bool).any():
        floor = capped[capped["final_at_floor"].fillna(False).astype(bool)]
        names = ", ".join(f"{DATASET_LABELS.get(r.dataset, r.dataset)} / {METHOD_LABELS.get(r.method, r.method)} seed "
                          f"{int(r.seed)}" for r in floor.itertuples())
        text += (f"{len(floor)} of these runs ended at the majority-class floor ({names}): their three accuracies "
                 "coincide with the floor and say nothing about the stale coordinates; they are in the averages "
                 "below.\n\n")
    full_all, sub_all = float(capped["acc_full_pct"].mean()), float(capped["acc_sub_pct"].mean())
    text += (f"Over all {len(capped)} capped run(s), the model without the coordinates untrained since t0 (the "
             f"sub-model) scores {sub_all - full_all:+.1f} points relative to the full model that carries them into "
             "every prediction.\n\n")
    trained = capped[capped["frac_stale_trained_before_t0"] > 0]
    if trained.empty:
        return text + ("In every capped run the stale coordinates were never trained: they are at their random "
                       "initialization, as Section 4.3 says.\n")
    full, reset, sub = (float(trained[c].mean()) for c in ("acc_full_pct", "acc_reset_pct", "acc_sub_pct"))
    methods = ", ".join(sorted({METHOD_LABELS.get(m, m) for m in trained["method"]}))
    text += (f"Section 4.3 says the uncovered parameters \"stay at their random initialization\". In {len(trained)} "
             f"capped run(s) ({methods}) they do not: Algorithm 1's warm-up allocates p = pmax, so the top-tier "
             "clients train those coordinates before round t0 and abandon them afterwards. They are stale trained "
             "values, and Proposition 3 (stated from w(0)) holds for them only from t0 on, which is how F5 checks "
             f"them (warmup.pt vs final.pt). Averaged over these runs, resetting them to their initial values moves "
             f"test accuracy by {reset - full:+.1f} points and dropping them (the sub-model) by {sub - full:+.1f} "
             "points relative to the full model")
    n_up = int((trained["acc_reset_pct"] > trained["acc_full_pct"]).sum())
    text += f" (the reset raises accuracy in {n_up} of {len(trained)} runs). "
    if reset > full and 2 * n_up > len(trained):
        text += ("The stale values do more damage than random initial values in their place would, so the ablation's "
                 "collapse is not the mechanism Section 4.3 describes (trained coordinates drifting away from random "
                 "ones): it is caused by coordinates frozen at their warm-up values.\n")
    elif reset > full:
        text += ("On average the stale values do more damage than random initial values in their place would, but "
                 f"only in {n_up} of {len(trained)} runs: at this preset the evidence on whether the collapse comes from "
                 "coordinates frozen at their warm-up values, rather than from the untrained width as Section 4.3 "
                 "says, is mixed.\n")
    else:
        text += ("Random initial values in their place would do at least as much damage, consistent with Section "
                 "4.3's account that the untrained width itself costs accuracy.\n")
    return text


#: What each paper table reports (the comparison overview).
PAPER_TABLE_WHAT = {
    1: "per-client cost (params, MACs, upload) of the paper's three models at p = 0.25-1",
    3: "accuracy and average width of the allocation strategies",
    4: "coverage ablation: accuracy and peak-to-final decay",
    5: "correlations of the heterogeneity estimate with TV and capacity",
    6: "accuracy of HAS-FL against the full-model methods",
    7: "allocation strategies on Shakespeare",
}


def _reason_keys(reason: str, limit: int = 4) -> str:
    """The config keys a "not the paper's configuration: ..." reason names (at most ``limit``)."""
    import re

    keys = list(dict.fromkeys(re.findall(r"([A-Za-z_][\w.]*)(?:=| unset)", reason)))
    if not keys:
        return reason
    return ", ".join(keys[:limit]) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def comparison_overview(comparison: pd.DataFrame, published: pd.DataFrame | None = None) -> str:
    """Per paper table: what it reports, whether this preset's cells are comparable with it, and why not.

    Table 1's cells are a property of the model definitions and are comparable at any
    preset; a result cell (Tables 3-7) only when its (dataset, method) ran at the paper's
    configuration. No count mixes the two.
    """
    from hasfl.analysis.published import load_published

    pub = load_published() if published is None else published
    rows = []
    result_compared = 0
    for table in sorted(set(pub["table"]) | set(comparison["table"] if len(comparison) else [])):
        p_t = pub[pub["table"] == table]
        c_t = comparison[comparison["table"] == table] if len(comparison) else comparison
        paper_ds = sorted(set(p_t["dataset"]))
        names = ", ".join(DATASET_LABELS.get(d, d) for d in paper_ds)
        compared = c_t[c_t["status"] == "compared"] if len(c_t) else c_t
        judged = compared[compared["within"].notna()] if len(compared) else compared
        n_in = int(judged["within"].astype(bool).sum()) if len(judged) else 0
        if table == 1:
            verdict = "yes, at any preset: a property of the model definitions, not of training"
        else:
            result_compared += len(compared)
            why = []
            missing = [d for d in paper_ds if d not in set(c_t["dataset"] if len(c_t) else [])]
            if missing:
                why.append("not run at this preset: " + ", ".join(DATASET_LABELS.get(d, d) for d in missing))
            nc = c_t[c_t["status"] == "not comparable"] if len(c_t) else c_t
            for dataset, g in (nc.groupby("dataset", sort=True) if len(nc) else []):
                why.append(f"{DATASET_LABELS.get(dataset, dataset)} run with another configuration "
                           f"({_reason_keys(str(g['reason'].iloc[0]))})")
            other = c_t[~c_t["status"].isin(["compared", "not comparable"])] if len(c_t) else c_t
            if len(other):
                why.append(", ".join(f"{k}: {len(g)} cells" for k, g in other.groupby("status", sort=True)))
            verdict = ("yes" if len(compared) else "no") + (f" ({len(compared)} cells); " if len(compared) else "; ")
            verdict += "; ".join(why) if why else "every cell"
            verdict = verdict.rstrip("; ")
        rows.append({"Paper table": str(table), "Reports": PAPER_TABLE_WHAT.get(int(table), ""),
                     "Paper's datasets": names, "Comparable at this preset": verdict,
                     "Cells compared": str(len(compared)),
                     "Within the published range": (f"{n_in} of {len(judged)}" if len(judged) else "--")})
    text = ("Which of the paper's numbers this preset can be held against, table by table. \"Within\": ours inside "
            "the published mean ± k std (Table 1: ours rounds to the printed value).\n\n")
    text += md_table(pd.DataFrame.from_records(rows))
    if result_compared == 0:
        text += ("\nAt this preset no result of the paper (Tables 3-7: accuracies, widths, correlations) is comparable "
                 "with ours: the agreement in Table 1 shows that the models are built as the paper describes, not "
                 "that its results reproduce.\n")
    else:
        text += (f"\n{result_compared} result cells (Tables 3-7) ran at the paper's configuration and are compared "
                 "below; Table 1's agreement is about the models only.\n")
    return text


def _floor_rows(tables: Mapping[str, pd.DataFrame]) -> dict[tuple[str, str], dict[str, Any]]:
    """One method-table row per (dataset, method) with a known floor flag, plus the tables it is in."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for tname in METHOD_TABLES:
        df = tables.get(tname)
        if df is None or df.empty or "n_at_floor" not in df.columns:
            continue
        for r in df.to_dict("records"):
            if r["status"] == "not run" or int(r["n_completed"]) == 0 or is_missing(r["n_at_floor"]):
                continue
            entry = seen.setdefault((r["dataset"], r["method"]), {**r, "tables": []})
            entry["tables"].append(str(int(r["table"])))
    return seen


#: The methods whose runs each finding compares (for the floor note of its units; FindingSpec.methods).
FINDING_METHODS = {fid: methods for spec in FINDINGS for fid, methods in spec.methods.items()}


def _unit_floor_note(fid: str, unit: str, rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """"FedAvg 3 of 3" for the runs of finding ``fid``'s unit that are at the floor ("" when none)."""
    if fid not in FINDING_METHODS:  # F5 is structural (coordinates vs init): accuracy does not enter it
        return ""
    dataset = unit.split("/")[0]
    methods = FINDING_METHODS[fid]
    notes = []
    for m in methods:
        r = rows.get((dataset, m))
        if r is not None and int(r["n_at_floor"]):
            notes.append(f"{METHOD_LABELS.get(m, m)} {int(r['n_at_floor'])} of {int(r['n_completed'])}")
    return ("**at floor: " + ", ".join(notes) + "**") if notes else ""


def floor_section(tables: Mapping[str, pd.DataFrame]) -> str:
    """report.md's "Runs at the floor": every (dataset, method) with a seed at (or ending at) the floor."""
    seen = _floor_rows(tables)
    known = bool(seen)
    rows = [e for e in seen.values()
            if int(e["n_at_floor"]) or (not is_missing(e["n_final_at_floor"]) and int(e["n_final_at_floor"]))]
    tol = ", ".join(sorted({f"{float(e['floor_tol_pct']):.2g}" for e in seen.values()
                            if math.isfinite(float(e["floor_tol_pct"]))})) or f"{FLOOR_TOL_PCT:g}"
    text = ("A run is **at the floor** when its best test accuracy over every evaluated round stays within "
            f"{tol} points (or one test example) of the majority-class rate of the test set: it never predicted "
            "better than always answering the most common class. Such a run learned nothing the tables can "
            "compare; its accuracy, its gap to other methods and any finding resting on it describe a failure to "
            "train, not the method. Every table and figure marks these runs (`at floor: k of n seeds`; in the "
            "figures dashed curves and hollow markers when every seed is at the floor, half-filled markers when "
            "some are). Floors per dataset: Table 2.\n\n")
    if not known:
        return text + ("Unknown at this run: the data-stage manifests predate the majority-class rate (rerun the "
                       "data stage).\n")
    if not rows:
        return text + "No run is at the floor or ends there.\n"
    out = pd.DataFrame({
        "Dataset": [DATASET_LABELS.get(e["dataset"], e["dataset"]) for e in rows],
        "Method": [METHOD_LABELS.get(e["method"], e["method"]) for e in rows],
        "Never above the floor": [f"**{int(e['n_at_floor'])} of {int(e['n_completed'])} seeds**"
                                  if int(e["n_at_floor"]) else "0" for e in rows],
        "Ends at the floor": [f"{int(e['n_final_at_floor'])} of {int(e['n_completed'])} seeds"
                              if not is_missing(e["n_final_at_floor"]) else "--" for e in rows],
        "Best acc (%)": [pm(e["best_acc_pct_mean"], e["best_acc_pct_std"], 2) for e in rows],
        "Final acc (%)": [pm(e["final_acc_pct_mean"], e["final_acc_pct_std"], 2) for e in rows],
        "Majority class (%)": [f"{float(e['majority_pct']):.2f}" for e in rows],
        "Chance (%)": [f"{float(e['chance_pct']):.2f}" for e in rows],
        "In tables": [", ".join(e["tables"]) for e in rows],
    })
    return text + md_table(out)


def report_markdown(*, name: str, config_summary: Mapping[str, Any], tables: Mapping[str, pd.DataFrame],
                    comparison: pd.DataFrame, findings: Mapping[str, Any], figures: Sequence[str],
                    figure_context: Mapping[str, Any] | None = None, published: pd.DataFrame | None = None) -> str:
    """report.md: findings, the tables, the comparison and the figures of one preset run.

    ``tables`` maps table names to their frames, ``figures`` lists the figure slugs
    (PNG beside the report under ``figures/``), ``findings`` is findings.json,
    ``figure_context`` the numbers the captions quote (:func:`hasfl.analysis.specs.figure_caption`).
    """
    out = [f"# HAS-FL reproduction report -- preset `{name}`\n\n"]
    out.append("Every number below is printed from a file under this folder; each section names it. "
               "Run files: `runs/<dataset>/<method>/seed<seed>/`; data-stage files: `data/<dataset>/seed<seed>/`.\n\n")
    out.append("| Setting | Value |\n|---|---|\n")
    for k, v in config_summary.items():
        out.append(f"| {k} | {fmt(v) if not isinstance(v, (list, tuple)) else ', '.join(map(str, v))} |\n")

    out.append("\n## Runs at the floor\n\nFrom the method tables (`tables/table{3,4,6,7}_*.parquet`, columns "
               "`n_at_floor`, `n_final_at_floor`).\n\n" + floor_section(tables))

    items = findings["findings"]
    alpha, power = findings.get("alpha"), findings["thresholds"].get("power")
    counts = {v: sum(f["verdict"] == v for f in items) for v in findings.get("verdicts", [])}
    out.append("\n## Findings\n\nFrom `findings.json`. Each claim of the paper is tested in the scope the paper "
               f"states it, at alpha = {_num(alpha)}: **supported** when the interval lies beyond the margin (inside "
               "+-margin for claims of no difference), **contradicted** when it lies on the other side (or a claimed "
               "absence of difference is rejected), **inconclusive** otherwise -- absence of evidence is not read as "
               f"equivalence. MDE: the minimum detectable effect at {_num(power)} power for the seeds / runs at hand "
               "(its meaning per finding is in `findings.json`, `mde_meaning`). Margins: config block `analysis`, "
               "defaults justified in docs/decisions.md. A claim tagged [extension] is this project's own question, "
               "[pipeline check] one whose outcome follows from the construction (it checks the code, not the method), "
               "[oracle] an allocation by the true label histogram.\n\n")
    out.append("Verdicts: " + ", ".join(f"{k}: {v}" for k, v in counts.items()) + ".\n\n")
    out.append(md_table(_findings_summary(items)))
    units = _findings_units(items, _floor_rows(tables))
    out.append("\n### Per unit (dataset, or run for F5)\n\nUnits marked `In scope: no` are reported but do not count "
               "toward the verdict."
               + (" `Floor`: runs the unit compares that never rose above the majority-class rate (section \"Runs "
                  "at the floor\"); a verdict on them says nothing about the method." if "Floor" in units.columns
                  else "") + "\n\n")
    out.append(md_table(units))
    out.append("\nSettings: " + ", ".join(f"`{k}` = {fmt(v)}" for k, v in sorted(findings["thresholds"].items())) + "\n")
    if "table4b_stale_coordinates" in tables:
        out.append("\n## What the coverage ablation shows (Table 4b)\n\nFrom `tables/table4b_stale_coordinates.parquet`."
                   "\n\n" + stale_summary(tables["table4b_stale_coordinates"]))

    if TABLE8 in tables or any(str(f.get("id", "")).startswith("F7") for f in items):
        out.append("\n## Capacity-separable estimators (Table 8, F7, F8, Figure 9)\n\n"
                   + estimator_section(tables, items, power))
    if BN_TABLE in tables:
        from hasfl.analysis.bn_sensitivity import markdown as bn_markdown

        out.append(f"\n## Batch-norm sensitivity\n\nFrom `tables/{BN_TABLE}.parquet` and "
                   f"`tables/{BN_FINDINGS_TABLE}.parquet`. "
                   + bn_markdown(tables[BN_TABLE], tables.get(BN_FINDINGS_TABLE, pd.DataFrame()), level="##"))
    out.append("\n## Tables\n\n" + STD_NOTE + "\n")
    for tname, df in tables.items():
        if tname in (BN_TABLE, BN_FINDINGS_TABLE):
            continue  # shown in its own section above
        out.append(f"\n### {TABLE_TITLES.get(tname, tname)}\n\nFrom `tables/{tname}.parquet`.")
        if TABLE_NOTES.get(tname):
            out.append(" " + TABLE_NOTES[tname])
        pre = table_preamble(tname, df)
        out.append("\n\n" + (pre + "\n\n" if pre else "") + _render_parts(display_parts(tname, df), level="####"))

    out.append("\n## Comparison with the published values\n\nFrom `comparison.parquet` (every cell: `comparison.md`); "
               "published values from `src/hasfl/analysis/published.yaml` (typed in from the paper).\n\n")
    out.append(comparison_overview(comparison, published))
    if len(comparison):
        t1 = comparison[comparison["table"] == 1]
        off = t1[~t1["within"].fillna(False).astype(bool)] if len(t1) else t1
        if len(off):
            out.append("\nTable 1 cells that do not round to the printed value:\n\n"
                       + md_table(display_table("comparison", off).drop(columns=["reason"])))
        shown = comparison[(comparison["status"] == "compared") & (comparison["table"] != 1)]
        if len(shown):
            out.append("\nResult cells compared (paper configuration):\n\n"
                       + md_table(display_table("comparison", shown).drop(columns=["reason"])))
    in_paper = set(comparison.loc[comparison["table"] != 1, "dataset"]) if len(comparison) else set()
    absent = [d for d in config_summary.get("datasets", []) if d not in in_paper]
    if absent:
        out.append(f"\nNot in the paper's Tables 3-7 (nothing to compare): "
                   f"{', '.join(DATASET_LABELS.get(d, d) for d in absent)}.\n")

    out.append("\n## Figures\n\nEach caption says what is plotted and what every line, band and marker means.\n\n")
    ctx = {"n_seeds": len(config_summary.get("seeds", []) or []) or None, **dict(figure_context or {})}
    for slug in figures:
        spec = FIGURES.get(slug)
        title = f"Figure {spec.paper_figure} -- {spec.title}" if spec else slug
        caption = figure_caption(slug, ctx) if spec else ""
        out.append(f"### {title}\n\n![{title}](figures/{slug}.png)\n\n")
        if caption:
            out.append(f"*Figure {spec.paper_figure}.* {caption}\n\n")
        out.append(f"Files: `figures/{slug}.png`, `figures/{slug}.pdf`.\n\n")
    return "".join(out)
