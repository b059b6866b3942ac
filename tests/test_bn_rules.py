"""Issue 37: each method evaluated with its authors' batch-norm rule (``MethodInfo.eval_bn``).

The registry field is validated and stays out of every run's identity; findings.json reads a run's final
accuracy under its method's rule from the batch-norm sensitivity's re-evaluation of the final model (the
tables' own number where the rule is the mode the run was trained under); the sensitivity section says what
each rule applied to every method alike would conclude, unit by unit, for the findings that depend on it.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from test_findings import DATASETS, SEEDS, base_tables

from hasfl import registry
from hasfl.analysis import bn_sensitivity as bns
from hasfl.analysis import findings as F
from hasfl.analysis import jobs
from hasfl.analysis.specs import resolve_thresholds
from hasfl.io import write_parquet

# --- the registry field ------------------------------------------------------------------------------


def test_eval_bn_modes_are_the_bn_modes_and_static():
    from hasfl.models.bn import BN_MODES

    assert registry.EVAL_BN_MODES == (*BN_MODES, bns.STATIC)
    assert all(info.eval_bn in registry.EVAL_BN_MODES for info in registry.METHODS.values())


def test_declared_rules_of_the_official_codes():
    rules = bns.declared_rules()
    assert (rules["fjord"], rules["heterofl"], rules["fedrolex"], rules["uniform_rolling"], rules["fedecover"],
            rules["fiarse"], rules["fedlps"], rules["shuffled"]) == ("per_width", "static", "batch", "batch", "batch",
                                                                     "batch", "batch", "batch")
    others = set(registry.METHODS) - {"heterofl", "fedrolex", "uniform_rolling", "fedecover", "fiarse", "fedlps",
                                      "shuffled"}
    assert {rules[m] for m in others} == {"per_width"}  # issue 23's rule for the paper's methods


def test_an_unknown_rule_is_refused_naming_the_method_and_the_modes():
    with pytest.raises(ValueError, match=r"'My method'.*'running_stats'.*per_width, mixed, batch, static"):
        registry.MethodInfo("x:y", "My method", "full", eval_bn="running_stats")


def test_the_rule_is_not_part_of_any_run_identity():
    """``training_fields`` does not carry it, and every method's training-code digest is the one of a registry
    whose entries all have another rule."""
    from hasfl.integrity import training_code_digest

    for info in registry.METHODS.values():
        assert "eval_bn" not in info.training_fields()
        other = dataclasses.replace(info, eval_bn="mixed" if info.eval_bn != "mixed" else "batch")
        assert other.training_fields() == info.training_fields()
    before = {(m, d): training_code_digest(m, d) for m in registry.METHODS for d in ("digits", "fashion_mnist")}
    swapped = {m: dataclasses.replace(i, eval_bn="mixed" if i.eval_bn != "mixed" else "batch")
               for m, i in registry.METHODS.items()}
    with pytest.MonkeyPatch.context() as mp:
        for m, i in swapped.items():
            mp.setitem(registry.METHODS, m, i)
        after = {(m, d): training_code_digest(m, d) for m in registry.METHODS for d in ("digits", "fashion_mnist")}
    assert after == before


# --- findings under the declared rules ------------------------------------------------------------------

#: per method: final accuracy under each mode (per_width as the tables have it), one value per seed
_PER_WIDTH = {"uniform": [60.0, 62.0, 61.0], "uniform_rolling": [70.0, 73.0, 72.0], "heterofl": [75.0, 76.0, 77.0],
              "fedrolex": [78.0, 80.0, 79.0]}
_SHIFT = {"mixed": -1.0, "batch": -30.0, "static": +0.5}


def _sens(batch: dict[str, list[float]] | None = None) -> pd.DataFrame:
    """bn_sensitivity rows of the four F9 methods on cifar10, every run trained per_width: per_width = the
    tables' value, the other modes shifted (``batch`` overridden per method)."""
    rows = []
    for m, finals in _PER_WIDTH.items():
        for i, s in enumerate(SEEDS):
            for mode in ("per_width", "mixed", "batch", "static"):
                v = finals[i] if mode == "per_width" else finals[i] + _SHIFT[mode]
                if mode == "batch" and batch and m in batch:
                    v = batch[m][i]
                rows.append({"dataset": "cifar10", "method": m, "seed": s, "status": "completed",
                             "run_mode": "per_width", "mode": mode, "final_acc_pct": v,
                             "logged_final_acc_pct": finals[i]})
    return pd.DataFrame(rows, columns=bns.COLUMNS)


def _write(tables: dict[str, pd.DataFrame], folder) -> dict[str, str]:
    paths = {}
    for name, df in tables.items():
        paths[name] = str(folder / f"{name}.parquet")
        write_parquet(df, paths[name])
    return paths


def _units(doc: dict, fid: str) -> dict:
    f = next(f for f in doc["findings"] if f["id"] == fid)
    return {u["unit"]: u for u in f["units"]}


def test_a_rolling_method_is_read_under_its_declared_rule(tmp_path):
    """findings.json (the DAG's job) reads uniform_rolling's and fedrolex's final accuracies under ``batch``
    and HeteroFL's under ``static`` from the sensitivity table, Uniform's (per_width, as trained) from the
    tables; a finding without a rule difference is the same bytes as without the sensitivity table."""
    paths = _write(base_tables(), tmp_path)
    rolled = {"uniform_rolling": [40.0, 41.0, 39.0]}  # batch statistics: below Uniform's prefixes
    sens = _sens(rolled)
    write_parquet(sens, tmp_path / "bn_sensitivity.parquet")
    old = jobs.job_findings(paths, DATASETS, {}, tmp_path / "old.json")
    new = jobs.job_findings(paths, DATASETS, {}, tmp_path / "new.json",
                            bn_sensitivity=tmp_path / "bn_sensitivity.parquet")
    f9b = _units(new, F.F9B)["cifar10"]
    assert f9b["final_uniform_rolling"] == rolled["uniform_rolling"] != _PER_WIDTH["uniform_rolling"]
    assert f9b["final_uniform"] == _PER_WIDTH["uniform"]  # per_width is its rule and its runs' mode: unchanged
    assert _units(old, F.F9B)["cifar10"]["final_uniform_rolling"] == _PER_WIDTH["uniform_rolling"]
    assert (_units(old, F.F9B)["cifar10"]["verdict"], f9b["verdict"]) == (F.SUPPORTED, F.CONTRADICTED)
    f9c = _units(new, F.F9C)["cifar10"]
    assert f9c["final_fedrolex"] == [v + _SHIFT["batch"] for v in _PER_WIDTH["fedrolex"]]
    assert f9c["final_heterofl"] == [v + _SHIFT["static"] for v in _PER_WIDTH["heterofl"]]
    f9b_doc = next(f for f in new["findings"] if f["id"] == F.F9B)
    assert "declared rule (uniform: per_width, uniform_rolling: batch" in f9b_doc["reason"]
    f9a_doc = next(f for f in new["findings"] if f["id"] == F.F9A)
    assert "decay is read from the accuracy curve" in f9a_doc["reason"]
    same = {f["id"]: f for f in old["findings"]}
    for f in new["findings"]:
        if f["id"] not in bns.rule_dependent(sens, bns.declared_rules()):
            assert json.dumps(f, sort_keys=True) == json.dumps(same[f["id"]], sort_keys=True), f["id"]
    # F2b compares uniform (per_width) with heterofl (static) by their decay: not changed, only annotated
    assert _units(new, "F2b")["cifar10"]["verdict"] == _units(old, "F2b")["cifar10"]["verdict"]


def test_a_trained_fedrolex_run_is_read_under_test_batch_statistics(engine_cfg, federate, digits, digits_family,
                                                                     one_thread):
    """A 2-round FedRolex run on the quick digits federation: its final model evaluated as the sensitivity job
    does under every mode; findings.json's input takes the ``batch`` evaluation, not the per-width one the run
    logged (and HeteroFL's rule ``static`` and Uniform's ``per_width`` are not applied to it)."""
    res = federate(engine_cfg(rounds=2), "fedrolex")
    state = res.final_state
    fam, bundle = digits_family, digits.bundle
    acc = {m: bns.final_accuracy(fam, bundle, state, "per_width", m) for m in ("per_width", "mixed", "batch")}
    assert acc["batch"] != acc["per_width"]
    rows = [{"dataset": "digits", "method": "fedrolex", "seed": digits.seed, "status": "completed",
             "run_mode": "per_width", "mode": m, "final_acc_pct": a, "logged_final_acc_pct": acc["per_width"]}
            for m, a in acc.items()]
    sens = pd.DataFrame(rows, columns=bns.COLUMNS)
    t4s = pd.DataFrame([{"dataset": "digits", "method": "fedrolex", "seed": digits.seed, "status": "completed",
                         "final_acc_pct": acc["per_width"]}])
    out = bns.tables_under({F.T4S: t4s}, sens, bns.declared_rules())[F.T4S]
    assert out["final_acc_pct"].tolist() == [acc["batch"]]
    assert bns.tables_under({F.T4S: t4s}, sens, "per_width")[F.T4S]["final_acc_pct"].tolist() == [acc["per_width"]]


def test_a_run_without_an_evaluation_under_its_rule_keeps_its_own_and_is_named():
    sens = _sens()
    sens = sens[~((sens["method"] == "fedrolex") & (sens["seed"] == 43) & (sens["mode"] == "batch"))]
    acc, missing = bns.accuracies_under(sens, bns.declared_rules())
    assert ("cifar10", "fedrolex", 43) not in acc and acc[("cifar10", "fedrolex", 42)] == 78.0 + _SHIFT["batch"]
    assert ("cifar10", "uniform", 42) not in acc  # its rule is its mode: the tables' number stands
    assert missing == [(("cifar10", "fedrolex", 43), "per_width", "batch")]
    items = F.evaluate_findings(bns.tables_under(base_tables(), sens, bns.declared_rules()), datasets=DATASETS,
                                thresholds=resolve_thresholds({}))
    bns.annotate_rules(items, sens, bns.declared_rules())
    f9c = next(f for f in items if f["id"] == F.F9C)
    assert ("kept under their own mode: cifar10/fedrolex seed 43 (trained with bn_stats: per_width, no batch"
            in f9c["reason"])


# --- the sensitivity lines -------------------------------------------------------------------------------


def _lines(md: str) -> dict[str, str]:
    return {ln.split("**")[1]: ln for ln in md.splitlines() if ln.startswith("- **")}


def test_the_f9_lines_give_every_rule_unit_by_unit_and_follow_the_rule_map():
    t, th = base_tables(), resolve_thresholds({})
    sens = _sens({"uniform_rolling": [40.0, 41.0, 39.0]})
    v = bns.findings_under_modes(sens, t, DATASETS, th)
    assert set(v["mode"]) == {"per_width", "mixed", "batch", "static"}
    f9b = v[v["finding"] == F.F9B].set_index("mode")
    # declared: uniform_rolling under batch contradicts on cifar10; shakespeare (no batch norm) supports
    assert (f9b["verdict"] == F.MIXED).all() and (f9b["units"] == "cifar10: contradicted; shakespeare: supported").all()
    assert f9b.loc["per_width", "verdict_under_mode"] == F.SUPPORTED and bool(f9b.loc["per_width", "changed"])
    # batch for every method alike: Uniform's prefixes fall too (-30), the rolling windows are above them
    assert f9b.loc["batch", "verdict_under_mode"] == F.SUPPORTED and bool(f9b.loc["batch", "changed"])
    line = _lines(bns.markdown(sens, v))[F.F9B]
    assert line.startswith("- **F9b** (mixed under the declared rules uniform: per_width, uniform_rolling: batch -- "
                           "cifar10: contradicted; shakespeare: supported); every method alike under per_width: "
                           "supported (cifar10: supported; shakespeare: supported) (**changes**); mixed: ")
    assert "; batch: supported (cifar10: supported; shakespeare: supported) (**changes**); static: " in line
    assert "F9a" in _lines(bns.markdown(sens, v)) and "not recomputed" in _lines(bns.markdown(sens, v))["F9a"]
    # another rule map: everyone per_width -> F9 no longer depends on the rules, its line changes
    flat = {m: "per_width" for m in registry.METHODS}
    w = bns.findings_under_modes(sens, t, DATASETS, th, rules=flat)
    line2 = _lines(bns.markdown(sens, w))[F.F9B]
    assert line2 != line and line2 == "- **F9b** (supported): mixed: supported; batch: supported; static: supported"
