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

from hasfl.analysis.specs import DATASET_LABELS, FIGURES, METHOD_LABELS, METHOD_TABLES

__all__ = ["TABLE_TITLES", "display_table", "md_table", "report_markdown", "stale_summary", "table_markdown"]

STD_NOTE = ("Mean +- sample standard deviation (ddof = 1) over the completed seeds; accuracies and the "
            "peak-to-final delta (final - best) in percentage points.")

TABLE_TITLES = {
    "table1_cost": "Table 1 -- Per-client cost as a function of sub-model width p",
    "table2_datasets": "Table 2 -- Datasets",
    "table3_allocation": "Table 3 -- Sub-model allocation strategies",
    "table4_coverage": "Table 4 -- Coverage-guarantee ablation",
    "table5_confound": "Table 5 -- Correlations of the final estimates H~ with TV and pmax (+ fedavg control)",
    "table6_full_model": "Table 6 -- Comparison with full-model methods",
    "table7_shakespeare": "Table 7 -- Allocation strategies on Shakespeare",
    "matched_budget": "Matched budget -- HAS-FL vs random-budget, paired by seed (Section 4.4)",
    "prop3_coverage": "Proposition 3 -- never-covered coordinates per run",
    "table4b_stale_coordinates": "Table 4b -- coordinates untrained since the warm-up (Section 4.3)",
    "comparison": "Comparison with the published values (Tables 1, 3-7)",
}

TABLE_NOTES = {
    "table1_cost": "Exact counts from the models (hasfl.models): params = trainable parameters of the width-p "
                   "sub-model, MACs per sample (conv + linear), upload = float32 MB. `paper` rows are the paper's "
                   "three models; `preset` rows the preset's own model configuration.",
    "table2_datasets": "From the data stage's manifest.json summaries.",
    "table5_confound": "Per run, over the clients: Pearson r, partial r given pmax (correlation of OLS residuals), "
                       "and the OLS R^2 / adjusted R^2 of log H~ on the capacity tier (categorical), on TV and on "
                       "both. fedavg rows (equal widths) are the positive control.",
    "matched_budget": "Differences hasfl - random_budget over the seeds where both completed; Student-t interval "
                      "and paired t-test.",
    "prop3_coverage": "p_hi = largest width any client trained (clients.parquet p_max_trained); coordinates outside "
                      "the width-p_hi mask were trained by no client. prop3_holds: all of them equal init.pt.",
    "table4b_stale_coordinates": "Per run: p_hi_after_t0 = largest width any participant trained after the warm-up "
                                 "round t0 (clients.parquet p_max_trained_after_warmup); coordinates outside that "
                                 "width (stale) were trained by no one since t0. frozen_since_t0: all of them equal "
                                 "in warmup.pt and final.pt (F5). For runs capped after t0, test accuracy (%) of the "
                                 "full final model, of the same model with the stale coordinates reset to init.pt, "
                                 "and of its sub-model at width p_hi_after_t0 (stale coordinates dropped); "
                                 "acc_logged_pct is the run's own final evaluation.",
}


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


def _method_display(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({
        "Dataset": df["dataset"].map(lambda d: DATASET_LABELS.get(d, d)),
        "Method": df["method"].map(lambda m: METHOD_LABELS.get(m, m)),
        "Status": df["status"],
        "Seeds": df["n_completed"],
        "Best acc (%)": [pm(a, b) for a, b in zip(df["best_acc_pct_mean"], df["best_acc_pct_std"], strict=True)],
        "Final acc (%)": [pm(a, b) for a, b in zip(df["final_acc_pct_mean"], df["final_acc_pct_std"], strict=True)],
        "Peak->final delta": [pm(a, b) for a, b in zip(df["delta_pct_mean"], df["delta_pct_std"], strict=True)],
        "Avg p (allocated)": [pm(a, b, 2) for a, b in zip(df["avg_p_mean"], df["avg_p_std"], strict=True)],
    })
    if "avg_p_trained_mean" in df.columns:  # costs as paid (issue 14)
        out["Avg p (trained)"] = [pm(a, b, 2) for a, b in zip(df["avg_p_trained_mean"], df["avg_p_trained_std"],
                                                              strict=True)]
        out["Upload MB / client-round"] = [pm(a, b, 3) for a, b in zip(df["upload_mb_mean"], df["upload_mb_std"],
                                                                       strict=True)]
        out["Train MMACs / sample"] = [pm(a, b, 2) for a, b in zip(df["train_mmacs_mean"], df["train_mmacs_std"],
                                                                   strict=True)]
    return out


def display_table(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The reader-facing columns of table ``name`` (the Parquet file keeps every column)."""
    if df.empty:
        return df
    if name in METHOD_TABLES:
        return _method_display(df)
    if name == "table1_cost":
        return pd.DataFrame({"Source": df["source"], "Model": df["model"], "p": df["p"].map(lambda p: f"{p:.2f}"),
                             "Params (M)": df["params_m"].map(lambda v: f"{v:.2f}"),
                             "MACs/sample (M)": df["macs_m"].map(lambda v: f"{v:.1f}"),
                             "Upload (MB)": df["upload_mb"].map(lambda v: f"{v:.2f}"), "Params": df["params"],
                             "MACs": df["macs"]})
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
    if name == "comparison":
        out = df[["table", "dataset", "method", "metric", "status", "published_mean", "published_std", "ours_mean",
                  "ours_std", "ours_n", "within", "criterion", "reason"]].copy()
        return out
    return df


def table_markdown(name: str, df: pd.DataFrame, sources: Sequence[str] = (), extra: Mapping[str, pd.DataFrame] | None = None,
                   file_name: str | None = None) -> str:
    """The Markdown rendering written beside ``tables/<name>.parquet``."""
    parts = [f"# {TABLE_TITLES.get(name, name)}\n\n"]
    parts.append(f"Data: `{file_name or f'tables/{name}.parquet'}`.")
    note = TABLE_NOTES.get(name) or (STD_NOTE if name in METHOD_TABLES else "")
    if note:
        parts.append(" " + note)
    parts.append("\n\n")
    parts.append(md_table(display_table(name, df)))
    for title, frame in (extra or {}).items():
        parts.append(f"\n## {title}\n\n{md_table(frame)}")
    if sources:
        parts.append("\n## Read from\n\n" + "\n".join(f"- `{s}`" for s in sources) + "\n")
    return "".join(parts)


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "--"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "--" if not math.isfinite(x) else f"{x:.{digits}g}"


def _findings_summary(findings: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per finding: its claim, scope, test, margin and verdict."""
    rows = []
    for f in findings:
        margin = "--" if f.get("margin") is None else f"{_num(f['margin'])} (`{f['margin_key']}`)"
        rows.append({"ID": f["id"], "Verdict": f"**{f['verdict']}**", "Claim": f["claim"], "Source": f["source"]
                     + (" [extension]" if f.get("extension") else ""), "Scope": f["scope"], "Test": f["test"],
                     "Margin": margin, "Units": f["n_units"]})
    return pd.DataFrame.from_records(rows)


def _findings_units(findings: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per finding x unit: n, estimate and interval, MDE at the configured power, verdict and why."""
    rows = []
    for f in findings:
        for u in f["units"]:
            lo, hi = u.get("low"), u.get("high")
            interval = "--" if lo is None or hi is None else f"[{_num(lo)}, {_num(hi)}]"
            rows.append({"ID": f["id"], "Unit": u["unit"], "In scope": "yes" if u.get("in_scope", True) else "no",
                         "n": "--" if u.get("n") is None else str(u["n"]), "Estimate": _num(u.get("estimate")),
                         "Interval": interval, "MDE": _num(u.get("mde")), "Verdict": u["verdict"],
                         "Why": u["reason"]})
            for part in u.get("parts", []):  # a unit tested as several claims (F3-shakespeare)
                plo, phi = part.get("low"), part.get("high")
                rows.append({"ID": f["id"], "Unit": f"{u['unit']}: {part['unit']}",
                             "In scope": "yes" if u.get("in_scope", True) else "no", "n": str(part.get("n")),
                             "Estimate": _num(part.get("estimate")),
                             "Interval": "--" if plo is None or phi is None else f"[{_num(plo)}, {_num(phi)}]",
                             "MDE": _num(part.get("mde")), "Verdict": part["verdict"], "Why": part["reason"]})
    return pd.DataFrame.from_records(rows, columns=["ID", "Unit", "In scope", "n", "Estimate", "Interval", "MDE",
                                                    "Verdict", "Why"])


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
             "points relative to the full model. ")
    if reset > full:
        text += ("The stale values do more damage than random initial values in their place would, so the ablation's "
                 "collapse is not the mechanism Section 4.3 describes (trained coordinates drifting away from random "
                 "ones): it is caused by coordinates frozen at their warm-up values.\n")
    else:
        text += ("Random initial values in their place would do at least as much damage, consistent with Section "
                 "4.3's account that the untrained width itself costs accuracy.\n")
    return text


def report_markdown(*, name: str, config_summary: Mapping[str, Any], tables: Mapping[str, pd.DataFrame],
                    comparison: pd.DataFrame, findings: Mapping[str, Any], figures: Sequence[str]) -> str:
    """report.md: findings, the tables, the comparison and the figures of one preset run.

    ``tables`` maps table names to their frames, ``figures`` lists the figure slugs
    (PNG beside the report under ``figures/``), ``findings`` is findings.json.
    """
    out = [f"# HAS-FL reproduction report -- preset `{name}`\n\n"]
    out.append("Every number below is printed from a file under this folder; each section names it. "
               "Run files: `runs/<dataset>/<method>/seed<seed>/`; data-stage files: `data/<dataset>/seed<seed>/`.\n\n")
    out.append("| Setting | Value |\n|---|---|\n")
    for k, v in config_summary.items():
        out.append(f"| {k} | {fmt(v) if not isinstance(v, (list, tuple)) else ', '.join(map(str, v))} |\n")

    items = findings["findings"]
    alpha, power = findings.get("alpha"), findings["thresholds"].get("power")
    counts = {v: sum(f["verdict"] == v for f in items) for v in findings.get("verdicts", [])}
    out.append("\n## Findings\n\nFrom `findings.json`. Each claim of the paper is tested in the scope the paper "
               f"states it, at alpha = {_num(alpha)}: **supported** when the interval lies beyond the margin (inside "
               "+-margin for claims of no difference), **contradicted** when it lies on the other side (or a claimed "
               "absence of difference is rejected), **inconclusive** otherwise -- absence of evidence is not read as "
               f"equivalence. MDE: the minimum detectable effect at {_num(power)} power for the seeds / runs at hand "
               "(its meaning per finding is in `findings.json`, `mde_meaning`). Margins: config block `analysis`, "
               "defaults justified in docs/decisions.md.\n\n")
    out.append("Verdicts: " + ", ".join(f"{k}: {v}" for k, v in counts.items()) + ".\n\n")
    out.append(md_table(_findings_summary(items)))
    out.append("\n### Per unit (dataset, or run for F5)\n\nUnits marked `In scope: no` are reported but do not count "
               "toward the verdict.\n\n")
    out.append(md_table(_findings_units(items)))
    out.append("\nSettings: " + ", ".join(f"`{k}` = {fmt(v)}" for k, v in sorted(findings["thresholds"].items())) + "\n")
    if "table4b_stale_coordinates" in tables:
        out.append("\n## What the coverage ablation shows (Table 4b)\n\nFrom `tables/table4b_stale_coordinates.parquet`."
                   "\n\n" + stale_summary(tables["table4b_stale_coordinates"]))

    out.append("\n## Tables\n\n" + STD_NOTE + "\n")
    for tname, df in tables.items():
        out.append(f"\n### {TABLE_TITLES.get(tname, tname)}\n\nFrom `tables/{tname}.parquet`.")
        if TABLE_NOTES.get(tname):
            out.append(" " + TABLE_NOTES[tname])
        out.append("\n\n" + md_table(display_table(tname, df)))

    out.append("\n## Comparison with the published values\n\nFrom `comparison.parquet`; published values from "
               "`src/hasfl/analysis/published.yaml` (typed in from the paper). `within`: ours inside the published "
               "mean ± k std (Table 1: ours rounds to the printed value).\n\n")
    if len(comparison):
        counts = comparison.groupby("status").size().to_dict()
        out.append("Rows by status: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ".\n\n")
        nc = comparison[comparison["status"] == "not comparable"]
        if len(nc):
            out.append("Not comparable (never compared):\n\n")
            for (ds, method), g in nc.groupby(["dataset", "method"], sort=True):
                out.append(f"- {ds} / {method}: {g['reason'].iloc[0]}\n")
            out.append("\n")
        t1 = comparison[comparison["table"] == 1]
        if len(t1):
            n_in = int(t1["within"].fillna(False).astype(bool).sum())
            out.append(f"Table 1 (model costs): {n_in} of {len(t1)} cells round to the printed value"
                       + ("." if n_in == len(t1) else "; the others are listed below.") + " All cells: `comparison.md`.\n\n")
        shown = comparison[(comparison["status"] != "not comparable")
                           & ((comparison["table"] != 1) | ~comparison["within"].fillna(False).astype(bool))]
        if len(shown):
            out.append(md_table(display_table("comparison", shown).drop(columns=["reason"])))
    in_paper = set(comparison.loc[comparison["table"] != 1, "dataset"]) if len(comparison) else set()
    absent = [d for d in config_summary.get("datasets", []) if d not in in_paper]
    if absent:
        out.append(f"\nNot in the paper's Tables 3-7 (nothing to compare): {', '.join(absent)}.\n")

    out.append("\n## Figures\n\n")
    for slug in figures:
        spec = FIGURES.get(slug)
        title = f"Figure {spec.paper_figure} -- {spec.title}" if spec else slug
        out.append(f"### {title}\n\n![{title}](figures/{slug}.png)\n\nFiles: `figures/{slug}.png`, "
                   f"`figures/{slug}.pdf`.\n\n")
    return "".join(out)
