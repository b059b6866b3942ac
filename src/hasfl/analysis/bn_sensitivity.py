"""Batch-norm sensitivity: every run's final model under every BN mode, and what the verdicts would be.

BN running statistics never enter training, so the modes of ``model.bn_stats``
(:mod:`hasfl.models.bn`: ``per_width``, ``mixed``, ``batch``) change only how a trained model is
evaluated; every run tracks both running modes in ``final.pt``. Here each run's final global model
is evaluated on the full test set under each mode its state allows (a run trained with
``bn_stats: batch`` has no running statistics: ``batch`` only), at no training cost:

* ``bn_sensitivity.parquet``: dataset, method, seed, status, the run's own mode, mode, final
  accuracy (percent) and the logged final accuracy (run.json, the run's own mode).
* ``bn_sensitivity_findings.parquet``: each finding's verdict as findings.json has it and as it
  would be with every run's final accuracy taken under another mode (the method and matched-budget
  seed tables' final accuracies replaced, nothing else). A decay (best - final over the accuracy
  curve) needs the whole curve, evaluated only under the run's own mode, so the findings that test
  a decay (F2a, F2b, F2c) are marked "not recomputed" rather than given a verdict that mixes modes.

A fourth mode is evaluated here only, never in training: ``static``, HeteroFL's static batch norm
done by clients (its official code: ``src/models/conv.py``, ``BatchNorm2d(momentum=None,
track_running_stats=track)``; ``src/test_classifier_fed.py``, ``running(dataset['train'], model)``
before ``test``): the statistics of the evaluated model recomputed by a forward pass, in training
mode and without gradients, over the train data of every client whose cap allows the evaluated
width (pmax = 1 for the full model), in batches of the dataset's local batch size, averaged over
the batches as ``momentum=None`` does. HeteroFL makes that pass over the whole train set on the
server; here only clients that may run the model make it, so no cap is broken.

Models without batch norm (Shakespeare's LSTM) do not depend on the mode and are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from hasfl.analysis import findings as findings_mod
from hasfl.analysis.report import md_table, pm

__all__ = ["COLUMNS", "DECAY_FINDINGS", "EVAL_BATCH", "FINDING_COLUMNS", "STATIC", "capable_batches",
           "findings_under_modes", "markdown", "modes_of", "static_statistics", "summary_frame"]

COLUMNS = ["dataset", "method", "seed", "status", "run_mode", "mode", "final_acc_pct", "logged_final_acc_pct"]
#: the evaluation-only mode (HeteroFL's static batch norm by the capable clients; see the module doc)
STATIC = "static"
FINDING_COLUMNS = ["finding", "verdict", "mode", "verdict_under_mode", "changed", "note"]
#: findings whose statistic is a decay, best - final over the accuracy curve (not recomputed)
DECAY_FINDINGS = ("F2a", "F2b", "F2c")
#: test-set batch of the ``batch`` mode (the engine's evaluation batch when BN uses batch statistics,
#: hasfl.fl.runtime.Evaluator.BATCH): with batch statistics the batch changes the result
EVAL_BATCH = 2048
#: the method seed tables and their final-accuracy column; the matched-budget tables and theirs
_METHOD_SEED_TABLES = ("table3_allocation_seeds", "table4_coverage_seeds", "table6_full_model_seeds",
                       "table7_shakespeare_seeds")


def modes_of(run_mode: str) -> tuple[str, ...]:
    """The modes a run trained under ``run_mode`` can be evaluated in (its own first; ``static`` last)."""
    from hasfl.models.bn import BN_MODES

    if run_mode == "batch":
        return ("batch",)
    return (run_mode, *(m for m in BN_MODES if m != run_mode), STATIC)


def static_statistics(model: Any, batches: Sequence[Any]) -> Any:
    """``model`` with the running statistics of every BN layer recomputed over ``batches`` (inputs),
    each batch weighing the same (``momentum=None``, HeteroFL's static batch norm); in eval mode."""
    import torch

    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for x in batches:
            if len(x) > 1:  # batch norm cannot normalise a single sample in training mode
                model(x)
    return model.eval()


def capable_batches(bundle: Any, partition: pd.DataFrame, clients: pd.DataFrame, p: float,
                    batch_size: int) -> list[Any]:
    """The train inputs of every client whose cap allows width ``p`` (pmax >= p), client by client in
    order of id, in batches of ``batch_size`` (the order the samples have in the partition)."""
    import torch

    capable = sorted(int(c) for c, q in zip(clients["client_id"], clients["pmax"], strict=True) if float(q) >= p)
    rows = partition[(partition["split"] == "train") & partition["client_id"].isin(capable)]
    out = []
    for _, g in rows.groupby("client_id", sort=True):
        idx = torch.tensor(g["sample_index"].to_numpy())
        for s in range(0, len(idx), batch_size):
            out.append(bundle.inputs(bundle.train_x[idx[s:s + batch_size]]))
    return out


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
            out[name] = df
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


def findings_under_modes(sens: pd.DataFrame, tables: Mapping[str, pd.DataFrame], datasets: Sequence[str],
                         thresholds: Mapping[str, Any]) -> pd.DataFrame:
    """Per finding and mode other than the runs' own: the verdict with the final accuracies of that mode."""
    base = {f["id"]: f["verdict"] for f in findings_mod.evaluate_findings(tables, datasets=datasets,
                                                                          thresholds=thresholds)}
    rows: list[dict[str, Any]] = []
    own = set(sens["run_mode"]) if len(sens) else set()
    others = [m for m in dict.fromkeys(sens["mode"]) if m not in own] if len(sens) else []  # static included
    for mode in others:
        sub = sens[sens["mode"] == mode]
        acc = {(str(d), str(m), int(s)): float(a) for d, m, s, a in
               zip(sub["dataset"], sub["method"], sub["seed"], sub["final_acc_pct"], strict=True)
               if math.isfinite(float(a))}
        alt = {f["id"]: f["verdict"] for f in findings_mod.evaluate_findings(_replaced(tables, acc), datasets=datasets,
                                                                             thresholds=thresholds)}
        for fid, verdict in base.items():
            if fid in DECAY_FINDINGS:
                rows.append({"finding": fid, "verdict": verdict, "mode": mode, "verdict_under_mode": None,
                             "changed": None, "note": "not recomputed: a decay (best - final) needs the accuracy "
                                                      "curve, evaluated under the run's own mode only"})
                continue
            rows.append({"finding": fid, "verdict": verdict, "mode": mode, "verdict_under_mode": alt[fid],
                         "changed": alt[fid] != verdict, "note": ""})
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
    lines = []
    for fid, g in verdicts.groupby("finding", sort=False):
        verdict = g["verdict"].iloc[0]
        bits = []
        for r in g.itertuples():
            if r.verdict_under_mode is None or (isinstance(r.verdict_under_mode, float)
                                                and math.isnan(r.verdict_under_mode)):
                bits.append(f"{r.mode}: not recomputed")
            else:
                bits.append(f"{r.mode}: {r.verdict_under_mode}" + (" (**changes**)" if bool(r.changed) else ""))
        note = next((n for n in g["note"] if n), "")
        lines.append(f"- **{fid}** ({verdict}): " + "; ".join(bits) + (f" -- {note}" if note else ""))
    n_changed = int(verdicts["changed"].fillna(False).astype(bool).sum())
    parts.append("\n".join(lines) + f"\n\n{n_changed} verdict(s) change under another mode.\n")
    return "".join(parts)
