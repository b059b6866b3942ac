"""Table 8 (this project's extension of the paper's Section 5): each per-client estimate E0-E3 of the
hasfl, fedavg, hasfl_probe and hasfl_reported runs against TV and capacity, with the capacity-grouped
check of ``hasfl diagnose`` (permutation test within tiers), per run and pooled over seeds in Fisher's z
(:mod:`hasfl.analysis.estimators`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.analysis import estimators
from hasfl.analysis.floors import is_missing
from hasfl.analysis.inputs import flagged_metrics, run_status
from hasfl.analysis.labels import dataset_label, method_label
from hasfl.analysis.markdown import ci, md_table, num, pm, rel, results_root, source_list, write_text
from hasfl.analysis.runs import group_data_files, group_run_files, load_run_metrics
from hasfl.analysis.specs import ESTIMATORS
from hasfl.analysis.tables.base import ReportContext, table_markdown
from hasfl.io import write_parquet

PathLike = str | Path
NAME = "table8_estimators"
FIGURE = "fig9_estimators"


def job(data_clients: Sequence[PathLike], run_files: Sequence[PathLike], datasets: Sequence[str],
               methods: Sequence[str], seeds: Sequence[int], level: float, permutations: int, permutation_seed: int,
               out_parquet: PathLike, out_seeds: PathLike, out_md: PathLike,
               manifests: Sequence[PathLike] = ()) -> pd.DataFrame:
    """Table 8 (:mod:`hasfl.analysis.estimators`): per run x estimate the capacity-grouped check of
    :mod:`hasfl.analysis.diagnose` (``out_seeds``) and, pooled over seeds, per dataset x method x
    estimate (``out_parquet``).

    ``run_files``: clients.parquet, rounds.parquet and run.json of the runs of
    :data:`hasfl.analysis.specs.NAME_METHODS`; ``manifests`` (data-stage manifest.json) give the
    accuracy floors that mark the runs at the floor (NA without them).
    """
    data = {k: pd.read_parquet(f["clients.parquet"]) for k, f in group_data_files(data_clients).items()}
    runs = group_run_files(run_files)
    info: dict[tuple[str, str, int], dict[str, Any]] = {k: {"status": v} for k, v in run_status(runs).items()}
    if runs and all("rounds.parquet" in f and "run.json" in f for f in runs.values()):
        for r in flagged_metrics(load_run_metrics(runs), manifests).to_dict("records"):
            key = (r["dataset"], r["method"], int(r["seed"]))
            info[key].update(at_floor=r.get("at_floor", pd.NA), final_at_floor=r.get("final_at_floor", pd.NA))
    clients = {k: pd.read_parquet(f["clients.parquet"]) for k, f in runs.items()}
    sources = {k: f["clients.parquet"].as_posix() for k, f in runs.items()}
    alpha = 1.0 - float(level)
    per_seed = estimators.table8(data, clients, info, datasets, methods, seeds, alpha=alpha,
                                 permutations=int(permutations), seed=int(permutation_seed), sources=sources)
    pooled = estimators.pool(per_seed, float(level))
    write_parquet(pooled, out_parquet)
    write_parquet(per_seed, out_seeds)
    root = results_root(out_parquet)
    write_text(out_md, table_markdown(NAME, pooled, source_list([*data_clients, *run_files, *manifests],
                                                                           root),
                                              extra={f"Per run (`{rel(out_seeds, root)}`)": seed_display(
                                                  per_seed)}))
    return pooled


def compute(inputs: Mapping[str, Sequence[str]], outputs: Mapping[str, str], params: Mapping[str, Any]) -> None:
    """The DAG's entry: the data stage's clients tables, the runs' clients / rounds / run.json, manifests."""
    job(list(inputs["data_clients"]), list(inputs["runs"]), params["datasets"], params["methods"], params["seeds"],
        params["ci_level"], params["permutations"], params["permutation_seed"], outputs["parquet"],
        outputs["seeds"], outputs["md"], list(inputs.get("manifests", [])))


_EST_LABEL = {e.id: f"{e.id} {e.name}" for e in ESTIMATORS}


def _table8_display(df: pd.DataFrame) -> pd.DataFrame:
    """Table 8 pooled: one row per dataset x method x estimate."""
    def floor(r: Mapping[str, Any]) -> str:
        k = r.get("n_at_floor")
        return "" if is_missing(k) or not int(k) else f"**at floor: {int(k)} of {int(r['n_runs'])} runs**"

    recs = df.to_dict("records")
    return pd.DataFrame({
        "Dataset": [dataset_label(r["dataset"]) for r in recs],
        "Runs of": [method_label(r["method"]) for r in recs],
        "Estimate": [_EST_LABEL.get(r["estimator"], r["estimator"]) for r in recs],
        "Runs": [int(r["n_runs"]) if r["status"] != "not run" else "not run" for r in recs],
        "r(E,TV)": [ci(r.get("r_e_tv"), r.get("r_e_tv_low"), r.get("r_e_tv_high")) for r in recs],
        "r(E,pmax)": [ci(r.get("r_e_pmax"), r.get("r_e_pmax_low"), r.get("r_e_pmax_high")) for r in recs],
        "r(E,TV|pmax)": [ci(r.get("pr_e_tv_pmax"), r.get("pr_e_tv_pmax_low"), r.get("pr_e_tv_pmax_high"))
                         for r in recs],
        "within-tier r(E,TV)": [ci(r.get("within_r"), r.get("within_r_low"), r.get("within_r_high")) for r in recs],
        "adjR2 tier": [pm(r.get("adj_r2_tier_mean"), r.get("adj_r2_tier_std"), 2) for r in recs],
        "adjR2 TV": [pm(r.get("adj_r2_tv_mean"), r.get("adj_r2_tv_std"), 2) for r in recs],
        "Check per run": [r.get("verdicts") if isinstance(r.get("verdicts"), str) else "--" for r in recs],
        "Floor": [floor(r) for r in recs],
    })


def seed_display(df: pd.DataFrame) -> pd.DataFrame:
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


def display(df: pd.DataFrame) -> list[tuple[str, Any]]:
    """Table 8 pooled, one row per dataset x method x estimate."""
    return [("", _table8_display(df))] if "pr_e_tv_pmax" in df.columns else [("", df)]


def estimator_section(tables: Mapping[str, pd.DataFrame], findings: Sequence[Mapping[str, Any]],
                      power: Any = None) -> str:
    """report.md's section on the capacity-separable estimators: what each is, Table 8 in one paragraph
    per dataset, F7 / F8 with their power, and where Figure 9 is."""
    t8 = tables.get(NAME)
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
            lines.append(f"- {dataset_label(r['dataset'])}, {_EST_LABEL.get(r['estimator'])}: "
                         f"r(E, pmax) {ci(r['r_e_pmax'], r['r_e_pmax_low'], r['r_e_pmax_high'])}, r(E, TV | pmax) "
                         f"{ci(r['pr_e_tv_pmax'], r['pr_e_tv_pmax_low'], r['pr_e_tv_pmax_high'])}, within-tier r "
                         f"{ci(r['within_r'], r['within_r_low'], r['within_r_high'])}; check per run: "
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
            text += ("\nNot run in this preset: " + ", ".join(method_label(m) for m in absent)
                     + " (their rows in Table 8 say \"not run\").\n")
    est = [f for f in findings if str(f.get("id", "")).startswith(("F7", "F8"))]
    if est:
        text += (f"\nFindings F7 (does the estimate recover TV once capacity is controlled? hasfl runs) and F8 (does "
                 "allocating by it beat its matched random budget?). Interval: the one-sided bounds the test uses "
                 f"(the two-sided {1 - 2 * float(findings_alpha(est)):.0%} interval); MDE at {num(power)} power "
                 "(F7: the true partial r detected as supported; F8: the true difference in points):\n\n")
        rows = []
        for f in est:
            for u in f["units"] or [{"unit": "--", "verdict": f["verdict"], "reason": f["reason"]}]:
                lo, hi = u.get("low"), u.get("high")
                rows.append({"ID": f["id"], "Unit": u["unit"], "Estimate": num(u.get("estimate")),
                             "Interval": "--" if lo is None or hi is None else f"[{num(lo)}, {num(hi)}]",
                             "MDE": num(u.get("mde")), "Verdict": f"**{u['verdict']}**", "Why": u["reason"]})
        text += md_table(pd.DataFrame.from_records(rows))
    else:
        text += "\nF7 / F8 were not evaluated for this report.\n"
    text += (f"\nFigure 9 (`figures/{FIGURE}.png`, below with the other figures) shows every client's "
             "estimate against its TV, coloured by capacity.\n")
    return text


def findings_alpha(items: Sequence[Mapping[str, Any]]) -> float:
    """The significance level of the findings ``items`` (0.05 when they do not say)."""
    for f in items:
        if f.get("alpha") is not None:
            return float(f["alpha"])
    return 0.05


def summary(ctx: ReportContext) -> str:
    """report.md's section on the capacity-separable estimators."""
    return estimator_section(ctx.tables, ctx.findings, ctx.power)
