"""F9's sub-model unit (issue 37): tables/submodel_accuracy.parquet and the sub-model units of F9b-F9d.

The table's value for a tiny real run (2-round digits runs) is the mean over the last round's participants of a
direct evaluation of the same sub-model (its width, its window, its method's declared batch-norm rule); a
fabricated table makes the sub-model units supported / contradicted, gated as the full-model units; without the
table F9 is what it was.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from test_findings import SEEDS, S, base_tables, evaluate, replace, seeds, unit

from hasfl.analysis import bn_sensitivity as bns
from hasfl.analysis import findings as F
from hasfl.analysis.stale import evaluate_accuracy
from hasfl.analysis.per_run import submodel_accuracy as per_run_sa
from hasfl.analysis.tables import submodel_accuracy as sa
from hasfl.analysis.tables.table4c_coverage_over_time import read_ledger
from hasfl.io import write_parquet
from hasfl.models.bn import batch_statistics, model_at, split_state, state_for_mode
from hasfl.models.slicing import Window

C, I = F.CONTRADICTED, F.INCONCLUSIVE


def _ledger(res, tmp_path) -> pd.DataFrame:
    """The run's participation ledger as the table reads it (written and read back, as in the DAG)."""
    path = tmp_path / "participation.parquet"
    write_parquet(res.participation, path)
    return read_ledger(path)


def _last(led: pd.DataFrame) -> pd.DataFrame:
    return led[led["round"] == led["round"].max()]


def _direct_batch(fam, bundle, state, p: float, window: Window) -> float:
    own, _ = split_state(state)
    model = fam.build(p)
    model.load_state_dict(fam.extract(own, p, window))
    return 100.0 * evaluate_accuracy(batch_statistics(model), bundle, bns.EVAL_BATCH)


def test_a_rolling_run_is_the_mean_of_its_last_windows_under_batch_statistics(engine_cfg, federate, digits,
                                                                                digits_family, one_thread, tmp_path):
    """uniform_rolling (declared rule: batch): each last-round participant's rolling window at its shift, cut from
    the final model, evaluated with test-batch statistics; the row is their mean."""
    res = federate(engine_cfg(rounds=2), "uniform_rolling")
    led = _ledger(res, tmp_path)
    last = _last(led)
    assert set(last["window"]) == {"rolling"}
    direct = [_direct_batch(digits_family, digits.bundle, res.final_state, float(p), Window("rolling", int(s)))
              for p, s in zip(last["p_trained"], last["window_shift"], strict=True)]
    row = sa.run_row("digits", "uniform_rolling", digits.seed, "completed", digits_family, digits.bundle,
                     res.final_state, led, "batch")
    assert row["bn_used"] == "batch" and row["bn_note"] == "" and row["windows"] == "rolling"
    assert row["n_participants"] == len(last) and row["last_round"] == 2
    assert row["submodel_acc_pct"] == pytest.approx(sum(direct) / len(direct), abs=1e-9)
    assert (row["min_submodel_acc_pct"], row["max_submodel_acc_pct"]) == pytest.approx((min(direct), max(direct)))
    # per_width under a rolling window: that width's set, kept in global channel coordinates, gathered at the
    # window's channels; at shift 0 the window is the prefix, so it is what the nested path reads
    p = float(last["p_trained"].iloc[0])
    sub, why = per_run_sa._window_state(digits_family, res.final_state, p, Window("rolling", 0), "per_width")
    ref = state_for_mode(res.final_state, digits_family, p, "per_width")
    assert why == "" and set(sub) == set(ref)
    assert all(torch.equal(sub[k], ref[k]) for k in ref if k.endswith(("running_mean", "running_var")))


def test_a_fedecover_run_replays_its_sampled_windows(engine_cfg, federate, digits, digits_family, one_thread,
                                                     tmp_path):
    """fedecover (batch): the last round's sampled windows are the ledger's draws replayed from the run's seed."""
    from hasfl.models.cyclic import replay

    res = federate(engine_cfg(rounds=2), "fedecover")
    led = _ledger(res, tmp_path)
    sampled = led[led["window"] == "sampled"].sort_values("window_shift")
    windows = dict(zip(sampled["window_shift"], replay(digits_family, digits.seed, sampled["p_trained"]),
                       strict=True))
    last = _last(led)
    direct = [_direct_batch(digits_family, digits.bundle, res.final_state, float(p), windows[int(s)])
              for p, s in zip(last["p_trained"], last["window_shift"], strict=True)]
    row = sa.run_row("digits", "fedecover", digits.seed, "completed", digits_family, digits.bundle,
                     res.final_state, led, "batch")
    assert row["windows"] == "sampled" and row["bn_used"] == "batch"
    assert row["submodel_acc_pct"] == pytest.approx(sum(direct) / len(direct), abs=1e-9)


def test_a_nested_run_uses_its_declared_rule_per_width_and_static(engine_cfg, federate, digits, digits_family,
                                                                  one_thread, tmp_path):
    """uniform (per_width): the prefix at each participant's width with that width's statistics; heterofl's rule
    (static) on the same run: the statistics recomputed over the train data of the clients allowed that width."""
    res = federate(engine_cfg(rounds=2), "heterofl")
    led = _ledger(res, tmp_path)
    last = _last(led)
    assert set(last["window"]) == {"prefix"}
    fam, bundle, state = digits_family, digits.bundle, res.final_state
    per_width = [100.0 * evaluate_accuracy(model_at(fam, float(p), state, "per_width"), bundle)
                 for p in last["p_trained"]]
    row = sa.run_row("digits", "heterofl", digits.seed, "completed", fam, bundle, state, led, "per_width")
    assert row["bn_used"] == "per_width"
    assert row["submodel_acc_pct"] == pytest.approx(sum(per_width) / len(per_width), abs=1e-9)
    bs = int(engine_cfg()["dataset_params"]["digits"]["optim"]["batch_size"])

    def batches(p: float):
        return bns.capable_batches(bundle, digits.partition, digits.clients, p, bs)

    static = [100.0 * evaluate_accuracy(bns.static_statistics(model_at(fam, float(p), state, "per_width"),
                                                              batches(float(p))), bundle)
              for p in last["p_trained"]]
    row = sa.run_row("digits", "heterofl", digits.seed, "completed", fam, bundle, state, led, "static", batches)
    assert row["bn_used"] == "static" and row["bn_rule"] == "static"
    assert row["submodel_acc_pct"] == pytest.approx(sum(static) / len(static), abs=1e-9)
    # a run not completed keeps its row, without accuracies
    row = sa.run_row("digits", "heterofl", digits.seed, "diverged", fam, bundle, None, led, "static", batches)
    assert row["status"] == "diverged" and pd.isna(row["submodel_acc_pct"])


# --- the F9 sub-model units on fabricated tables ----------------------------------------------------------


def sub_table(values: dict[str, list[float]], dataset: str = "cifar10") -> pd.DataFrame:
    rows = [{"dataset": dataset, "method": m, "seed": s, "status": "completed", "submodel_acc_pct": v[i]}
            for m, v in values.items() for i, s in enumerate(SEEDS)]
    return pd.DataFrame(rows)


_SUPPORTS = {"uniform": [55, 56, 57], "uniform_rolling": [60, 63, 61], "fedecover": [65, 66, 68],
             "heterofl": [50, 52, 51], "fedrolex": [58, 57, 59]}
_CONTRADICTS = {"uniform": [55, 56, 57], "uniform_rolling": [20, 22, 21], "fedecover": [30, 31, 29],
                "heterofl": [50, 52, 51], "fedrolex": [30, 28, 31]}


@pytest.mark.parametrize(("values", "verdict"), [(_SUPPORTS, S), (_CONTRADICTS, C)])
def test_the_sub_model_units_are_read_from_the_table(values, verdict):
    t = base_tables()
    t[F.OPTIONAL_TABLES[0]] = sub_table(values)
    f = evaluate(t)
    for fid, ma, mb in ((F.F9B, "uniform_rolling", "uniform"), (F.F9C, "fedrolex", "heterofl"),
                        (F.F9D, "fedecover", "uniform")):
        u = unit(f[fid], "cifar10/sub-model")
        assert u["accuracy"] == "sub-model" and u["verdict"] == verdict, (fid, u["reason"])
        assert u[f"submodel_{ma}"] == [float(x) for x in values[ma]]
        assert u[f"submodel_{mb}"] == [float(x) for x in values[mb]]
        assert unit(f[fid], "cifar10")["accuracy"] == "full model"  # the full-model unit beside it, unchanged
        assert "tables/submodel_accuracy.parquet" in f[fid]["files"] and "sub-model" in f[fid]["note"]
    # no sub-model unit on shakespeare (no runs in the table) and none in F9a (a decay)
    assert [u["unit"] for u in f[F.F9A]["units"]] == ["cifar10"]
    assert "shakespeare/sub-model" not in {u["unit"] for u in f[F.F9B]["units"]}
    # supported full-model units and contradicted sub-model ones: two estimands, each its own verdict, and the
    # finding's word only where they agree (before: one "mixed" pooled over them like datasets)
    assert f[F.F9B]["verdict"] == (S if verdict == S else F.SPLIT)
    est = {e["estimand"]: e for e in f[F.F9B]["estimands"]}
    assert est["full-model"]["verdict"] == S and est["sub-model"]["verdict"] == verdict
    assert est["sub-model"]["units"] == ["cifar10/sub-model"] and est["full-model"]["units"] == ["cifar10", "shakespeare"]


def test_the_sub_model_unit_has_the_full_model_units_gates():
    """A baseline whose sub-models are at the floor (their accuracy under the declared rule: the sub-model unit's own
    evidence) and unequal widths withhold the sub-model unit; a training loss at ln K no longer does (the loss rule is
    gone); the sub-model unit reads no full-model curve (issue 45 point 2) and says so in its reason."""
    t = base_tables()
    t[F.OPTIONAL_TABLES[0]] = sub_table({**_CONTRADICTS, "uniform": [55, 9, 57]})
    for name in (F.T3S, F.T4S):
        t[name] = t[name].assign(majority_pct=10.0, floor_tol_pct=0.5)
    t = replace(t, F.T4S, "cifar10", "fedecover", seeds("cifar10", "fedecover", final=[71, 72, 74],
                                                         min_loss=[1.2, 2.3, 1.1]))
    t = replace(t, F.T4S, "cifar10", "uniform_rolling", seeds("cifar10", "uniform_rolling", final=[70, 73, 72],
                                                               p_trained=[0.75] * 3))
    f = evaluate(t)
    u = unit(f[F.F9D], "cifar10/sub-model")
    assert u["verdict"] == I and "uniform seed 43 (at the majority-class floor)" in u["reason"], u["reason"]
    assert "lowest training loss" not in u["reason"]
    assert u["gap_trend"]["read"] == "none" and "final state only" in u["gap_trend"]["why"]
    assert "no trend read: sub-model accuracy is read at the final state only" in u["reason"]
    u = unit(f[F.F9B], "cifar10/sub-model")
    assert u["verdict"] == I and "different average widths" in u["reason"]


def test_without_the_table_f9_is_unchanged_and_says_so():
    f = evaluate(base_tables())
    for fid in (F.F9B, F.F9C, F.F9D):
        assert [u["unit"] for u in f[fid]["units"]] == ["cifar10"] + (["shakespeare"] if fid == F.F9B else [])
        assert "sub-model units" in f[fid]["note"] and "not given" in f[fid]["note"]


def test_the_registry_entry_reads_the_methods_of_table_4_and_uniform():
    from hasfl.analysis.artifacts import FINDING_TABLES, TABLES

    art = TABLES["submodel_accuracy"]
    assert {"hasfl", "hasfl_nocov", "heterofl", "fedrolex", "uniform_rolling", "fedecover", "fiarse", "fedlps", "shuffled",
            "uniform"} == set(art.methods)
    assert {"participation.parquet", "final.pt", "run.json"} == set(art.run_files) and art.heavy and art.data_tables
    assert "submodel_accuracy" in FINDING_TABLES and "submodel_accuracy" in F.OPTIONAL_TABLES
    assert F.table_names([*F.REQUIRED_TABLES, "submodel_accuracy"])[-1] == "submodel_accuracy"
    assert "submodel_accuracy" not in F.table_names(list(F.REQUIRED_TABLES))


def test_the_job_writes_the_table_from_run_folders(engine_cfg, federate, digits, one_thread, tmp_path):
    """The DAG's job on a run folder (participation.parquet, final.pt, run.json) and the data-stage manifest: one row
    per run with its method's declared rule, the same value as :func:`run_row`, and its Markdown."""
    from test_table4c import write_manifest

    from hasfl.config import data_config
    from hasfl.io import write_json
    from hasfl.models import family_from_config

    cfg = engine_cfg(rounds=2)
    res = federate(cfg, "uniform_rolling")
    d = tmp_path / "runs" / "digits" / "uniform_rolling" / "seed42"
    d.mkdir(parents=True)
    write_parquet(res.participation, d / "participation.parquet")
    write_json(d / "run.json", res.summary)
    torch.save(res.final_state, d / "final.pt")
    files = [str(d / n) for n in ("participation.parquet", "final.pt", "run.json")]
    model = cfg["dataset_params"]["digits"]["model"]
    dcfg = data_config(cfg, "digits")
    out = tmp_path / "tables"
    df = sa.job(files, write_manifest(tmp_path, digits), {"digits": model}, dcfg["data_dir"],
                {"digits": dcfg["dataset_params"]}, out / "submodel_accuracy.parquet", out / "submodel_accuracy.md")
    assert list(df.columns) == sa.COLUMNS and len(df) == 1
    r = df.iloc[0]
    assert (r["method"], r["bn_rule"], r["bn_used"], r["status"]) == ("uniform_rolling", "batch", "batch", "completed")
    fam = family_from_config(model, digits.bundle.input_shape, digits.bundle.num_classes)
    want = sa.run_row("digits", "uniform_rolling", 42, "completed", fam, digits.bundle, res.final_state,
                      _ledger(res, tmp_path), "batch")
    assert r["submodel_acc_pct"] == pytest.approx(want["submodel_acc_pct"], abs=1e-9)
    assert pd.read_parquet(out / "submodel_accuracy.parquet").equals(df)
    md = (out / "submodel_accuracy.md").read_text()
    assert md.startswith("# Sub-model accuracy") and "Uniform (rolling)" in md
