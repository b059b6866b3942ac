"""Batch-norm sensitivity: every run's final model under every BN mode, and what the verdicts would be.

BN running statistics never enter training, so the modes of ``model.bn_stats``
(:mod:`hasfl.models.bn`: ``per_width``, ``mixed``, ``batch``) change only how a trained model is
evaluated; every run tracks both running modes in ``final.pt``. Here each run's final global model
is evaluated on the full test set under each mode its state allows (a run trained with
``bn_stats: batch`` has no running statistics: ``batch`` only), at no training cost:

* ``bn_sensitivity.parquet``: dataset, method, seed, status, the run's own mode, mode, final
  accuracy (percent) and the logged final accuracy (run.json, the run's own mode).
* ``bn_sensitivity_findings.parquet``: each finding's verdict as findings.json has it, under each
  method's declared rule (:attr:`hasfl.registry.MethodInfo.eval_bn`, :func:`declared_rules`),
  and as it would be with every run's final accuracy taken under one mode applied to every method
  alike (the method and matched-budget seed tables' final accuracies replaced, nothing else), with
  each unit's verdict beside it. A decay (best - final over the accuracy curve) needs the whole curve,
  evaluated only under the run's own mode, so the findings that test a decay (:data:`DECAY_FINDINGS`)
  are marked "not recomputed" rather than given a verdict that mixes modes.

The declared rules (:func:`tables_under`, :func:`annotate_rules`): findings.json reads each run's final
accuracy under its method's rule: the run's own number (the tables') when the rule is the mode the run
was trained under, else this re-evaluation of its final model under the rule; a run without that
evaluation (trained with ``bn_stats: batch``, which keeps no running statistics) keeps its own, named in
the finding's reason.

The per-run rows (every final model under every mode, the ``static`` mode HeteroFL's static batch norm by the
capable clients) are :mod:`hasfl.analysis.per_run.bn_sensitivity`'s, where the modes are defined.

Models without batch norm (Shakespeare's LSTM) do not depend on the mode and are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis import findings as findings_mod
from hasfl.analysis.per_run.bn_sensitivity import (COLUMNS, EVAL_BATCH, STATIC, capable_batches, final_accuracy,
                                                   modes_of, static_statistics)
from hasfl.analysis.report import md_table, pm

__all__ = ["COLUMNS", "DECAY_FINDINGS", "EVAL_BATCH", "FINDING_COLUMNS", "STATIC", "accuracies_under",
           "annotate_rules", "capable_batches", "declared_rules", "final_accuracy", "findings_under_modes", "markdown",
           "modes_of",
           "rule_dependent", "static_statistics", "summary_frame", "tables_under"]

#: ``verdict`` / ``units``: under each method's declared rule (findings.json); ``*_under_mode``: every method
#: under ``mode``; ``rules``: the declared rules of the finding's methods where some run was trained under
#: another mode ("" when none: the finding does not depend on the declared rules)
FINDING_COLUMNS = ["finding", "verdict", "mode", "verdict_under_mode", "changed", "note", "rules", "units",
                   "units_under_mode"]
#: findings whose statistic is a decay, best - final over the accuracy curve (not recomputed)
DECAY_FINDINGS = ("F2a", "F2b", "F2c", "F9a")
#: the method seed tables and their final-accuracy column; the matched-budget tables and theirs
_METHOD_SEED_TABLES = ("table3_allocation_seeds", "table4_coverage_seeds", "table6_full_model_seeds",
                       "table7_shakespeare_seeds")


def _replaced(tables: Mapping[str, pd.DataFrame], acc: Mapping[tuple[str, str, int], float]) -> dict[str, pd.DataFrame]:
    """``tables`` with the final accuracies of the runs in ``acc`` ((dataset, method, seed) -> percent) replaced."""
    out = dict(tables)

    def look(d: str, m: str, s: Any, old: float) -> float:
        return float(acc.get((str(d), str(m), int(s)), old))

    for name in _METHOD_SEED_TABLES:
        if name in out and len(out[name]):
            df = out[name].copy()
            df["final_acc_pct"] = [look(d, m, s, v) for d, m, s, v in
                                   zip(df["dataset"], df["method"], df["seed"], df["final_acc_pct"], strict=True)]
            out[name] = learned_under_rule(df)
    return _replaced_pairs(out, look)


def learned_under_rule(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (per-seed method rows whose ``final_acc_pct`` is read under the method's rule) with ``at_floor`` -- the
    findings' "failed to train" -- true only where the run's accuracy curve never rose above the majority-class floor
    *and* its final model under the rule is not above it either: a run that learned under its method's declared
    batch-norm rule did not fail, whatever its curve under the training mode shows (FedEcover's per-width curve at the
    floor, 22.6% under its declared test-batch rule). The same rule for every method; unknown stays unknown."""
    if "at_floor" not in df.columns or not {"majority_pct", "floor_tol_pct"} <= set(df.columns):
        return df
    out = df.copy()
    level = out["majority_pct"].astype("float64") + out["floor_tol_pct"].astype("float64")
    final = out["final_acc_pct"].astype("float64")
    above = (final > level) & final.notna() & level.notna()
    flag = out["at_floor"].astype("boolean")
    out["at_floor"] = flag.mask(above & flag.fillna(False).astype(bool), False)
    return out


def _replaced_pairs(tables: dict[str, pd.DataFrame], look: Any) -> dict[str, pd.DataFrame]:
    """The matched-budget tables' final accuracies (and differences) read through ``look``."""
    out = tables
    mb = out.get("matched_budget_seeds")
    if mb is not None and len(mb) and {"hasfl_final_acc_pct", "random_budget_final_acc_pct"} <= set(mb.columns):
        df = mb.copy()
        for m in ("hasfl", "random_budget"):
            df[f"{m}_final_acc_pct"] = [look(d, m, s, v) for d, s, v in
                                        zip(df["dataset"], df["seed"], df[f"{m}_final_acc_pct"], strict=True)]
        df["diff_final_acc_pct"] = df["hasfl_final_acc_pct"] - df["random_budget_final_acc_pct"]
        out["matched_budget_seeds"] = df
    mbe = out.get("matched_budget_estimators_seeds")
    if mbe is not None and len(mbe) and {"alloc_final_acc_pct", "control_final_acc_pct"} <= set(mbe.columns):
        df = mbe.copy()
        for side in ("alloc", "control"):
            df[f"{side}_final_acc_pct"] = [look(d, m, s, v) for d, m, s, v in
                                           zip(df["dataset"], df[f"{side}_method"], df["seed"],
                                               df[f"{side}_final_acc_pct"], strict=True)]
        df["diff_final_acc_pct"] = df["alloc_final_acc_pct"] - df["control_final_acc_pct"]
        out["matched_budget_estimators_seeds"] = df
    return out


Rule = str | Mapping[str, str]
RunKey = tuple[str, str, int]


def declared_rules() -> dict[str, str]:
    """Method -> the batch-norm rule its authors evaluate with (:attr:`hasfl.registry.MethodInfo.eval_bn`)."""
    from hasfl.registry import METHODS

    return {m: info.eval_bn for m, info in METHODS.items()}


def _rule_of(rule: Rule, method: str, run_mode: str) -> str:
    """The mode ``method``'s run is read under: ``rule`` itself (one mode for every method), or the method's
    entry of the map (a method it does not name: the run's own mode)."""
    return rule if isinstance(rule, str) else str(rule.get(method, run_mode))


def accuracies_under(sens: pd.DataFrame, rule: Rule) -> tuple[dict[RunKey, float], list[tuple[RunKey, str, str]]]:
    """(final accuracy under its rule of every run whose rule is not the mode it was trained under, from
    ``sens``; the completed runs without an evaluation under their rule, as (run, its own mode, the rule)).
    A run whose rule is its own mode is left out: its tables' number (the logged one) stands unchanged."""
    acc: dict[RunKey, float] = {}
    missing: list[tuple[RunKey, str, str]] = []
    if not len(sens):
        return acc, missing
    for (d, m, s), g in sens.groupby(["dataset", "method", "seed"], sort=True):
        key = (str(d), str(m), int(s))
        run_mode = str(g["run_mode"].iloc[0])
        want = _rule_of(rule, key[1], run_mode)
        if want == run_mode:
            continue
        v = g.loc[g["mode"] == want, "final_acc_pct"].astype(float)
        v = v[v.notna()]
        if len(v):
            acc[key] = float(v.iloc[0])
        elif (g["status"] == "completed").any():
            missing.append((key, run_mode, want))
    return acc, missing


def tables_under(tables: Mapping[str, pd.DataFrame], sens: pd.DataFrame, rule: Rule) -> dict[str, pd.DataFrame]:
    """``tables`` with each run's final accuracy read under ``rule`` (one mode, or method -> mode)."""
    return _replaced(tables, accuracies_under(sens, rule)[0])


def rule_dependent(sens: pd.DataFrame, rules: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Finding id -> {method: declared rule} of its methods that ran
    (:data:`hasfl.analysis.findings.FINDING_METHODS`), for the findings one of whose methods has a run
    trained under another mode than the method's rule (the others read every run as trained)."""
    if not len(sens):
        return {}
    modes: dict[str, set[str]] = {}
    for m, rm in zip(sens["method"], sens["run_mode"], strict=True):
        modes.setdefault(str(m), set()).add(str(rm))
    out: dict[str, dict[str, str]] = {}
    for fid, methods in findings_mod.FINDING_METHODS.items():
        ran = [m for m in methods if m in modes and m in rules]
        if any(modes[m] != {rules[m]} for m in ran):
            out[fid] = {m: rules[m] for m in ran}
    return out


def _rules_text(rules: Mapping[str, str]) -> str:
    return ", ".join(f"{m}: {r}" for m, r in rules.items())


def _own_modes(sens: pd.DataFrame) -> str:
    return ", ".join(sorted(set(map(str, sens["run_mode"])))) if len(sens) else ""


def annotate_rules(items: list[dict[str, Any]], sens: pd.DataFrame, rules: Mapping[str, str]) -> list[dict[str, Any]]:
    """findings.json's findings with the batch-norm rule each rule-dependent one (:func:`rule_dependent`) was
    read under added to its reason; the others unchanged. Final accuracies: under each method's declared rule;
    a decay: the runs' own mode for every method (only the final model is re-evaluated)."""
    dep = rule_dependent(sens, rules)
    _, missing = accuracies_under(sens, rules)
    own = _own_modes(sens)
    for f in items:
        methods = dep.get(f["id"])
        if not methods:
            continue
        if f["id"] in DECAY_FINDINGS:
            note = (f" [batch norm: the decay is read from the accuracy curve, evaluated under the runs' own mode "
                    f"({own}) for every method; the declared rules ({_rules_text(methods)}) re-evaluate only the "
                    "final model (tables/bn_sensitivity.parquet)]")
        else:
            left = [f"{d}/{m} seed {s} (trained with bn_stats: {rm}, no {want} evaluation)"
                    for (d, m, s), rm, want in missing if m in methods]
            note = (f" [batch norm: final accuracies under each method's declared rule ({_rules_text(methods)}; the "
                    f"runs were trained under {own}), the final models re-evaluated in tables/bn_sensitivity.parquet"
                    + (f"; kept under their own mode: {'; '.join(left)}" if left else "") + "]")
        f["reason"] = str(f.get("reason", "")) + note
    return items


def _unit_verdicts(f: Mapping[str, Any]) -> str:
    """``unit: verdict; ...`` of a finding's in-scope units."""
    return "; ".join(f"{u['unit']}: {u['verdict']}" for u in f.get("units") or [] if u.get("in_scope", True))


def findings_under_modes(sens: pd.DataFrame, tables: Mapping[str, pd.DataFrame], datasets: Sequence[str],
                         thresholds: Mapping[str, Any], rules: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Per finding and mode of ``sens``: the verdict under the declared ``rules`` (method -> mode; default the
    registry's, :func:`declared_rules`) as findings.json has it, and with every method's final accuracies
    under that one mode (the runs' own mode included); each with its units' verdicts."""
    rules = declared_rules() if rules is None else dict(rules)

    def verdicts(t: Mapping[str, pd.DataFrame]) -> dict[str, dict[str, Any]]:
        return {f["id"]: f for f in findings_mod.evaluate_findings(t, datasets=datasets, thresholds=thresholds)}

    base = verdicts(tables_under(tables, sens, rules))
    dep = rule_dependent(sens, rules)
    rows: list[dict[str, Any]] = []
    modes = list(dict.fromkeys(sens["mode"])) if len(sens) else []  # static included
    for mode in modes:
        alt = verdicts(tables_under(tables, sens, mode))
        for fid, f in base.items():
            row = {"finding": fid, "verdict": f["verdict"], "mode": mode, "verdict_under_mode": None,
                   "changed": None, "note": "", "rules": _rules_text(dep.get(fid, {})), "units": _unit_verdicts(f),
                   "units_under_mode": None}
            if fid in DECAY_FINDINGS:
                row["note"] = ("not recomputed: a decay (best - final) needs the accuracy curve, evaluated under "
                               "the run's own mode only")
            else:
                row.update(verdict_under_mode=alt[fid]["verdict"], changed=alt[fid]["verdict"] != f["verdict"],
                           units_under_mode=_unit_verdicts(alt[fid]))
            rows.append(row)
    df = pd.DataFrame.from_records(rows, columns=FINDING_COLUMNS)
    return df.astype({"changed": "boolean"})


def summary_frame(sens: pd.DataFrame) -> pd.DataFrame:
    """Mean +- sd over seeds of the final accuracy: one row per dataset x method, one column per mode."""
    if not len(sens):
        return pd.DataFrame(columns=["Dataset", "Method"])
    rows = []
    modes = list(dict.fromkeys(sens["mode"]))
    for (d, m), g in sens.groupby(["dataset", "method"], sort=False):
        row: dict[str, Any] = {"Dataset": d, "Method": m, "Run's mode": ", ".join(sorted(set(g["run_mode"])))}
        for mode in modes:
            v = g.loc[g["mode"] == mode, "final_acc_pct"].astype(float)
            v = v[v.notna()]
            row[mode] = pm(float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else math.nan) if len(v) else "--"
        rows.append(row)
    return pd.DataFrame(rows)


def _verdict_line(fid: str, g: pd.DataFrame, own: set[str]) -> str:
    """One finding's line: its verdict under the declared rules, then under each mode applied to every method.

    A finding that does not depend on the rules (``rules`` empty) lists the modes other than the runs' own (its
    verdict is theirs); one that does names the rules and every mode, each with its units' verdicts."""
    verdict = g["verdict"].iloc[0]
    rules = next((str(r) for r in g["rules"] if isinstance(r, str) and r), "") if "rules" in g.columns else ""
    bits = []
    for r in g.itertuples():
        if not rules and r.mode in own:
            continue
        under = r.verdict_under_mode
        if under is None or (isinstance(under, float) and math.isnan(under)):
            bits.append(f"{r.mode}: not recomputed")
            continue
        per_unit = r.units_under_mode if isinstance(r.units_under_mode, str) else ""
        units = f" ({per_unit})" if rules and per_unit else ""
        bits.append(f"{r.mode}: {under}{units}" + (" (**changes**)" if bool(r.changed) else ""))
    note = next((n for n in g["note"] if n), "")
    if not rules:
        return f"- **{fid}** ({verdict}): " + "; ".join(bits) + (f" -- {note}" if note else "")
    units = next((str(u) for u in g["units"] if isinstance(u, str) and u), "")
    units = f" -- {units}" if units else ""
    if g["verdict_under_mode"].isna().all():  # a decay: read under the runs' own mode for every method
        return (f"- **{fid}** ({verdict}{units}): the decay is read under the runs' own mode "
                f"({', '.join(sorted(own))}) "
                f"for every method; the declared rules ({rules}) and the other modes are not applied -- {note}")
    return (f"- **{fid}** ({verdict} under the declared rules {rules}{units}); every method alike under "
            + "; ".join(bits))


def markdown(sens: pd.DataFrame, verdicts: pd.DataFrame, level: str = "##") -> str:
    """The section report.md and bn_sensitivity.md show: final accuracy per mode and the verdict lines."""
    parts = ["Final accuracy (%) of every run's final global model on the full test set under each batch-norm "
             "mode (mean +- sd over seeds; `per_width`: statistics of the evaluated width from the clients that "
             "trained it, `mixed`: averaged across widths, `batch`: the test batch's own, batches of "
             f"{EVAL_BATCH}; `{STATIC}`: recomputed for the final model by a forward pass over the train data of "
             "the clients allowed to run it, pmax = 1, as HeteroFL's static batch norm, evaluation only). "
             "Trained weights are the same in every mode.\n\n"]
    parts.append(md_table(summary_frame(sens)) if len(sens) else "No run of this preset has batch norm.\n")
    if len(sens):
        own = sens[sens["mode"] == sens["run_mode"]]
        diff = (own["final_acc_pct"] - own["logged_final_acc_pct"]).abs()
        diff = diff[diff.notna()]
        if len(diff):
            parts.append(f"\nUnder the run's own mode this evaluation and the run's logged final accuracy differ by "
                         f"at most {float(diff.max()):.3g} points over {len(diff)} runs.\n")
    parts.append(f"\n{level}# Would a verdict change under another mode?\n\n")
    if not len(verdicts):
        parts.append("No other mode applies to this preset's runs.\n")
        return "".join(parts)
    own_modes = set(map(str, sens["run_mode"])) if len(sens) else set()
    dependent = [str(r) for r in verdicts.get("rules", pd.Series(dtype=object)) if isinstance(r, str) and r]
    if dependent:
        parts.append("findings.json reads each run's final accuracy under its method's declared batch-norm rule "
                     "(the registry's `eval_bn`, docs/decisions.md \"Evaluation BN rule per method\"). "
                     "A finding whose methods' rules differ from the mode their runs were trained under names the "
                     "rules, its verdict and its units' verdicts under them, then the verdict (and units) with "
                     "every method read under one mode alike; the other findings list the modes other than the "
                     "runs' own.\n\n")
    lines = [_verdict_line(str(fid), g, own_modes) for fid, g in verdicts.groupby("finding", sort=False)]
    n_changed = int(verdicts["changed"].fillna(False).astype(bool).sum())
    parts.append("\n".join(lines) + f"\n\n{n_changed} verdict(s) change under another mode.\n")
    return "".join(parts)
