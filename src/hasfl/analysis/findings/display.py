"""How report.md shows findings.json: one row per finding, one row per finding x unit, and which of a
unit's runs are at the accuracy floor (each finding's methods: :attr:`FindingSpec.methods`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis.findings import FINDING_METHODS, PAPER_CLAIM, finding_kind
from hasfl.analysis.labels import method_label
from hasfl.analysis.markdown import interval, num

__all__ = ["FINDING_METHODS", "kind_tag", "seeds_cell", "summary_frame", "unit_floor_note", "units_frame"]


def seeds_cell(u: Mapping[str, Any]) -> str:
    """An inconclusive unit's seeds for the configured power at the observed spread and what the extra seeds
    cost, e.g. ``7 (+4, 0.09 job-h)``; ``failed to train`` where a run failed to train at this budget, ``gated``
    where more seeds would not help otherwise (a blind control, widths that differ); "" for a decided unit."""
    if u.get("verdict") != "inconclusive":
        return ""
    if u.get("gate_kind") == "failed_to_train":
        return "failed to train"
    if u.get("gate"):
        return "gated"
    if u.get("seeds_needed") is None:
        return "> 100 or undefined"
    cost = f", {u['extra_job_hours']:.2g} job-h" if u.get("extra_job_hours") is not None else ""
    extra = f" (+{u['extra_seeds']}{cost})" if u.get("extra_seeds") is not None else ""
    return f"{u['seeds_needed']}{extra}"


def kind_tag(f: Mapping[str, Any]) -> str:
    """`` [extension]``, `` [pipeline check]``, `` [oracle]`` after a finding's claim; nothing for a paper claim."""
    kind = finding_kind(f)
    return "" if kind == PAPER_CLAIM else f" [{kind}]"


def summary_frame(findings: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per finding: its claim, scope, test, margin and verdict."""
    rows = []
    for f in findings:
        margin = "--" if f.get("margin") is None else f"{num(f['margin'])} (`{f['margin_key']}`)"
        rows.append({"ID": f["id"], "Verdict": f"**{f['verdict']}**", "Claim": f["claim"], "Source": f["source"]
                     + kind_tag(f), "Scope": f["scope"], "Test": f["test"],
                     "Margin": margin, "Units": f["n_units"]})
    return pd.DataFrame.from_records(rows)


def units_frame(findings: Sequence[Mapping[str, Any]],
                    floor_rows: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """One row per finding x unit: n, estimate and interval, MDE at the configured power, verdict and why,
    and (``floor_rows``) which of the unit's runs are at the accuracy floor."""
    rows = []
    for f in findings:
        for u in f["units"]:
            note = u.get("floor_note") or unit_floor_note(f["id"], str(u["unit"]), floor_rows or {})
            rows.append({"ID": f["id"], "Unit": u["unit"], "Estimand": _estimand_label(f, u),
                         "In scope": "yes" if u.get("in_scope", True) else "no",
                         "n": "--" if u.get("n") is None else str(u["n"]), "Estimate": num(u.get("estimate")),
                         "Interval": interval(u.get("low"), u.get("high")), "MDE": num(u.get("mde")), "Verdict": u["verdict"],
                         "Seeds for power": seeds_cell(u), "Why": u["reason"], "Floor": note})
            for part in u.get("parts", []):  # a unit tested as several claims (F3-shakespeare)
                rows.append({"ID": f["id"], "Unit": f"{u['unit']}: {part['unit']}", "Estimand": _estimand_label(f, u),
                             "In scope": "yes" if u.get("in_scope", True) else "no", "n": str(part.get("n")),
                             "Estimate": num(part.get("estimate")),
                             "Interval": interval(part.get("low"), part.get("high")),
                             "MDE": num(part.get("mde")), "Verdict": part["verdict"], "Seeds for power": "",
                             "Why": part["reason"], "Floor": note})
    df = pd.DataFrame.from_records(rows, columns=["ID", "Unit", "Estimand", "In scope", "n", "Estimate", "Interval",
                                                  "MDE", "Verdict", "Seeds for power", "Why", "Floor"])
    if not df["Estimand"].astype(bool).any():  # every finding has one estimand: no column to read
        df = df.drop(columns=["Estimand"])
    return df if df["Floor"].astype(bool).any() else df.drop(columns=["Floor"])


def _estimand_label(f: Mapping[str, Any], u: Mapping[str, Any]) -> str:
    """The label of the estimand ``u`` belongs to, when ``f`` has more than one ("" otherwise)."""
    ests = f.get("estimands") or []
    if len(ests) < 2:
        return ""
    return next((str(e.get("label") or e.get("estimand")) for e in ests if e.get("estimand") == u.get("estimand")), "")




def unit_floor_note(fid: str, unit: str, rows: Mapping[tuple[str, str], Mapping[str, Any]]) -> str:
    """"FedAvg 3 of 3" for the runs of finding ``fid``'s unit that are at the floor ("" when none)."""
    if fid not in FINDING_METHODS:  # F5 is structural (coordinates vs init): accuracy does not enter it
        return ""
    dataset = unit.split("/")[0]
    methods = FINDING_METHODS[fid]
    notes = []
    for m in methods:
        r = rows.get((dataset, m))
        if r is not None and int(r["n_at_floor"]):
            notes.append(f"{method_label(m)} {int(r['n_at_floor'])} of {int(r['n_completed'])}")
    return ("**at floor: " + ", ".join(notes) + "**") if notes else ""
