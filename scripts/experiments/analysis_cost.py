#!/usr/bin/env python3
"""What the analysis jobs that evaluate every run's final model cost at the paper's shapes (issue 47, point 4).

What it measures: per dataset of the paper preset (config.yaml: CIFAR-10 and EMNIST with the paper's CNN at
full width, and Shakespeare's LSTM), on random data of the registry's real shapes and sizes
(:class:`hasfl.registry.DatasetFacts`), a random final state of the run's shapes with its per-width and mixed
batch-norm sets (the keys of :mod:`hasfl.models.bn`), the data stage's own partition and clients tables
(:func:`hasfl.data.stage.build_tables`: the paper's 20 clients, Dirichlet alpha 0.3, tiers 0.25 / 0.5 / 0.75 / 1.0
with counts 5 / 10 / 3 / 2) and a participation ledger in the format of participation.parquet (the engine's
participant schedule :func:`hasfl.fl.sampling.participant_schedule`, 200 rounds x 10 participants, each
client's width from the pre-flight's width model of its method), the time of the same library calls the
analysis jobs make, one thread (the analysis rules declare no ``threads``: Snakemake runs them with one,
``OMP_NUM_THREADS=1``):

* ``bn_sensitivity``: :func:`hasfl.analysis.bn_sensitivity.final_accuracy` of the final model under each mode of
  :func:`~hasfl.analysis.bn_sensitivity.modes_of` (``static`` included: the statistics pass over the train data
  of the clients allowed width 1, then the evaluation), and once per dataset x seed the static mode's
  :func:`~hasfl.analysis.bn_sensitivity.capable_batches` (with the Parquet reads of the job);
* the static statistics pass alone (:func:`~hasfl.analysis.bn_sensitivity.static_statistics`) at every tier width;
* ``submodel_accuracy``: :func:`hasfl.analysis.tables.submodel_accuracy.run_row` of one run of each method the
  table evaluates (its last round's sub-models under the method's declared rule, HeteroFL's ``static`` with the
  job's per-run cache of capable batches);
* ``table4b_stale_coordinates``: :func:`hasfl.analysis.stale.stale_row` of a capped run (three evaluations) and of
  an uncapped one (the F5 check only), with the loads of its three states;
* ``table4c_coverage_over_time``: :func:`hasfl.analysis.tables.table4c_coverage_over_time.run_rows` on the
  ledger (read with ``read_ledger``), with the load of init.pt.

Evaluations are linear in the number of samples, so they run on a fraction f of the test set (``--test-samples``)
and of every client's train rows (the same fraction, client by client); each measured time T is scaled as
T0 + (T - T0) / f, T0 the same call on an empty test set and an empty partition (the model building and
slicing that do not scale). The best of ``--repeats`` timings counts. It then prices the paper preset: per table,
the runs it reads (the artifact registry's methods x seeds x datasets) times the per-run cost, in CPU hours at
one thread, beside the pre-flight's training estimate (:func:`hasfl.dag.preflight.estimate` at its FALLBACK
rates, the reference 2-core VM). The JSON (``--json``) holds every number; ``--doc`` renders the Markdown
page from it (``--from-json`` renders a saved JSON without measuring).

Result: docs/analysis-cost.md, with the machine and date it ran on (rendered from the JSON; no number is kept here).

Run: ``python scripts/experiments/analysis_cost.py [--datasets cifar10 emnist shakespeare] [--test-samples 1024]
[--repeats 2] [--rounds 200] [--json PATH] [--doc PATH]``; prints the JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: the tables this script prices (the analysis jobs that evaluate final models or replay ledgers)
TABLES = ("bn_sensitivity", "submodel_accuracy", "table4b_stale_coordinates", "table4c_coverage_over_time")
SEED = 42
EXAMPLE_COMMAND = ("python scripts/experiments/analysis_cost.py --json analysis-cost.json "
                   "--doc docs/analysis-cost.md")


# --- timing -----------------------------------------------------------------------------------------------
def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """(the shortest of ``repeats`` wall times of ``fn()``, its last result). The analysis keeps every model's test
    count per process (:func:`hasfl.analysis.stale.evaluate_accuracy`: one forward per distinct model), so the
    count is forgotten before each call: each timing is a real evaluation."""
    from hasfl.analysis import stale

    times, out = [], None
    for _ in range(max(1, repeats)):
        stale._COUNTS.clear()
        tic = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - tic)
    return min(times), out


def scaled(measured: float, fixed: float, f: float) -> float:
    """Full-size seconds of a call that took ``measured`` on a fraction ``f`` of the samples and ``fixed``
    on none: the fixed part once, the rest divided by ``f``."""
    return fixed + max(measured - fixed, 0.0) / f


def timing(measured: float, fixed: float, f: float) -> dict[str, float]:
    return {"measured_s": measured, "fixed_s": fixed, "full_s": scaled(measured, fixed, f)}


# --- the synthetic inputs -------------------------------------------------------------------------------
def paper_spec(dataset: str) -> dict[str, Any]:
    """Shape, classes, sizes (the registry's facts) and normalisation of ``dataset``."""
    from hasfl.bench.workload import PAPER_DATA
    from hasfl.registry import DATASETS

    facts = DATASETS[dataset].facts
    spec = dict(PAPER_DATA[dataset])
    spec.update(shape=tuple(facts.shape), classes=int(facts.classes), train=int(facts.train), test=int(facts.test))
    return spec


def method_widths(config: Mapping[str, Any], method: str, pmax: Sequence[float]) -> list[float]:
    """Each client's trained width under ``method`` (the pre-flight's width model of its cost rule)."""
    from hasfl.dag.preflight import _method_widths

    return [float(q) for _, q in _method_widths(method, config, list(pmax))]


def ledger_frame(config: Mapping[str, Any], widths: Sequence[float], n_train: Sequence[int], rounds: int,
                 seed: int = SEED) -> pd.DataFrame:
    """participation.parquet of a run: the engine's S(t) for ``rounds`` rounds, each participant at its width."""
    from hasfl.fl.records import PARTICIPATION_COLUMNS
    from hasfl.fl.sampling import participant_schedule

    fed = config["federation"]
    rows = []
    for t, chosen in enumerate(participant_schedule(seed, int(fed["clients"]), int(fed["clients_per_round"]), rounds)):
        for c in chosen:
            p = float(widths[int(c)])
            rows.append({"round": t + 1, "client_id": int(c), "p": p, "p_trained": p, "window": "prefix",
                         "window_shift": 0, "samples": int(n_train[int(c)]), "steps": 1, "local_loss": 1.0,
                         "upload_mb": 0.0, "train_mmacs": 0.0, "h_hat": math.nan, "h_tilde": 1.0})
    df = pd.DataFrame(rows, columns=list(PARTICIPATION_COLUMNS))
    return df.astype({"round": "int64", "client_id": "int64", "window_shift": "int64", "samples": "int64",
                      "steps": "int64"})


def final_state(family: Any, trained: Sequence[float]) -> dict[str, Any]:
    """A random global state of ``family`` as final.pt holds it: the model's state dict and, for a model with batch
    norm, the per-width sets of every trained width below full and the mixed sets (:mod:`hasfl.models.bn`)."""
    import torch

    from hasfl.models.bn import STATS, bn_layers, counts_key, mixed_key, width_key

    torch.manual_seed(0)
    full = family.build(1.0)
    state = {k: v.detach().clone() for k, v in full.state_dict().items()}
    layers = bn_layers(full)
    for k in state:
        if k.endswith(".running_var"):
            state[k] = torch.rand_like(state[k]) + 0.5
        elif k.endswith(".running_mean"):
            state[k] = torch.randn_like(state[k]) * 0.1
    if not layers:
        return state
    counts = {layer: sorted({bn_layers(family.build(p))[layer] for p in trained} | {c}) for layer, c in layers.items()}
    for layer, c_full in layers.items():
        state[counts_key(layer)] = torch.tensor(counts[layer], dtype=torch.int64)
        for c in counts[layer]:
            if c < c_full:
                state[width_key(layer, c, "running_mean")] = torch.randn(c) * 0.1
                state[width_key(layer, c, "running_var")] = torch.rand(c) + 0.5
        for s in STATS:
            state[mixed_key(layer, s)] = torch.rand(c_full) + (0.5 if s == "running_var" else 0.0)
    return state


def subsample(partition: pd.DataFrame, f: float) -> pd.DataFrame:
    """``partition`` with each client's first round(f n) train rows (at least one), in the same format."""
    train = partition[partition["split"] == "train"]
    keep = [g.iloc[:max(1, round(f * len(g)))] for _, g in train.groupby("client_id", sort=True)]
    return pd.concat([*keep, partition[partition["split"] != "train"]], ignore_index=True)[list(partition.columns)]


# --- one dataset ------------------------------------------------------------------------------------------
def measure_dataset(config: Mapping[str, Any], dataset: str, test_samples: int, repeats: int, rounds: int,
                    work: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Every per-run cost of ``dataset`` (see the module doc)."""
    import torch

    from hasfl.analysis import bn_sensitivity as bns
    from hasfl.analysis import stale
    from hasfl.analysis.coverage import load_global_state, load_state, non_finite
    from hasfl.analysis.tables import submodel_accuracy as sub
    from hasfl.analysis.tables import table4c_coverage_over_time as t4c
    from hasfl.bench.workload import synthetic_bundle
    from hasfl.config import data_config
    from hasfl.dag.preflight import forward_macs
    from hasfl.data.partition import assign_capacities
    from hasfl.data.stage import build_tables
    from hasfl.io import write_parquet
    from hasfl.models import family_from_config
    from hasfl.models.bn import bn_layers, model_at, split_state
    from hasfl.registry import METHODS

    spec = paper_spec(dataset)
    dp = config["dataset_params"][dataset]
    model_cfg, batch_size = dict(dp["model"]), int(dp["optim"]["batch_size"])
    image = spec["task"] == "image"
    n_test = min(int(test_samples), spec["test"])
    f = n_test / spec["test"]
    log(f"{dataset}: {spec['train']:,} train / {spec['test']:,} test samples, measured on {n_test:,} test "
        f"(f = {f:.4g})")
    cpu = torch.device("cpu")
    bundle = synthetic_bundle(dataset, spec["train"] if image else 1, n_test, cpu, spec=spec)
    empty = dataclasses.replace(bundle, test_x=bundle.test_x[:0], test_y=bundle.test_y[:0])
    family = family_from_config(model_cfg, spec["shape"], spec["classes"])
    run_mode = str(model_cfg.get("bn_stats", "per_width"))
    has_bn = bool(bn_layers(family.build(1.0)))
    out: dict[str, Any] = {"dataset": dataset, "task": spec["task"], "arch": model_cfg["arch"], "model": model_cfg,
                           "train": spec["train"], "test": spec["test"], "shape": list(spec["shape"]),
                           "classes": spec["classes"], "batch_size": batch_size, "batch_norm": has_bn,
                           "forward_mmacs_per_sample": forward_macs(model_cfg, spec["shape"], spec["classes"],
                                                                    1.0) / 1e6,
                           "test_measured": n_test, "f": f, "seed": SEED}

    # the data stage's tables (image datasets: the real Dirichlet partition of the full train labels)
    d = work / dataset
    d.mkdir(parents=True, exist_ok=True)
    cap = config["capacity"]
    if image:
        partition, clients = build_tables(bundle, data_config(config, dataset), SEED)
        part_f = subsample(partition, f)
        for name, df in (("partition_full.parquet", partition), ("partition.parquet", part_f),
                         ("partition_empty.parquet", part_f.iloc[:0]), ("clients.parquet", clients)):
            write_parquet(df, d / name)
        n_train = clients["n_train"].tolist()
    else:
        clients = pd.DataFrame({"client_id": np.arange(int(config["federation"]["clients"]), dtype=np.int64),
                                "pmax": assign_capacities(cap["tiers"], cap["counts"], SEED, shuffle=cap["shuffle"])})
        partition = part_f = None
        n_train = [spec["train"] // len(clients)] * len(clients)
    pmax = [float(p) for p in clients["pmax"]]

    # the runs' widths, ledgers and saved states
    methods = list(config["methods"])
    widths = {m: method_widths(config, m, pmax) for m in methods}
    trained = sorted({q for w in widths.values() for q in w})
    state = final_state(family, trained)
    own, extra = split_state(state)
    torch.save(state, d / "final.pt")
    torch.manual_seed(1)
    init = family.build(1.0).state_dict()
    torch.save(init, d / "init.pt")
    torch.save(own, d / "warmup.pt")
    ledgers = {}
    for m in methods:
        path = d / f"participation-{m}.parquet"
        write_parquet(ledger_frame(config, widths[m], n_train, rounds), path)
        ledgers[m] = path
    out["methods"] = {m: {"widths": sorted(set(widths[m])), "max_width": max(widths[m])} for m in methods}

    t_load, _ = best_of(lambda: load_global_state(str(d / "final.pt")), repeats)
    t_load_model, _ = best_of(lambda: load_state(str(d / "init.pt")), repeats)
    out["load_final_s"], out["load_state_s"] = t_load, t_load_model

    # the capable clients of each tier width: real and measured train samples
    tiers = sorted({float(t) for t in cap["tiers"]})
    if image:
        def capable_n(part: pd.DataFrame, p: float) -> int:
            ids = set(int(c) for c, q in zip(clients["client_id"], clients["pmax"], strict=True) if float(q) >= p)
            return int(((part["split"] == "train") & part["client_id"].isin(ids)).sum())

        out["capable"] = {str(p): {"clients": int((clients["pmax"] >= p).sum()), "samples": capable_n(partition, p),
                                   "measured": capable_n(part_f, p)} for p in tiers}
        for v in out["capable"].values():
            v["ratio_to_f"] = (v["measured"] / v["samples"]) / f if v["samples"] else math.nan

    def tables_of(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        return pd.read_parquet(d / name), pd.read_parquet(d / "clients.parquet")

    def batches_at(p: float, name: str = "partition.parquet") -> list[Any]:
        part, cl = tables_of(name)
        return bns.capable_batches(bundle, part, cl, p, batch_size)

    # bn_sensitivity: every mode of the final model; the static mode's batches once per dataset x seed
    if has_bn:
        log(f"{dataset}: bn_sensitivity")
        batches1 = batches_at(1.0)
        t_cap, _ = best_of(lambda: batches_at(1.0), repeats)
        t_cap0, _ = best_of(lambda: batches_at(1.0, "partition_empty.parquet"), repeats)
        fixed, _ = best_of(lambda: bns.final_accuracy(family, empty, state, run_mode, run_mode), repeats)
        modes = {}
        for mode in bns.modes_of(run_mode):
            if mode == bns.STATIC:
                t, _ = best_of(lambda: bns.final_accuracy(family, bundle, state, run_mode, mode, batches1), repeats)
                modes[mode] = timing(t, fixed, f)
            else:
                t, _ = best_of(lambda mode=mode: bns.final_accuracy(family, bundle, state, run_mode, mode), repeats)
                t0, _ = best_of(lambda mode=mode: bns.final_accuracy(family, empty, state, run_mode, mode), repeats)
                modes[mode] = timing(t, t0, f)
            log(f"  {mode}: {modes[mode]['measured_s']:.2f} s measured, {modes[mode]['full_s']:.1f} s full size")
        out["bn_sensitivity"] = {"run_mode": run_mode, "modes": modes,
                                 "capable_batches": timing(t_cap, t_cap0, f),
                                 "per_run_s": t_load + sum(v["full_s"] for v in modes.values())}
        # the static statistics pass alone, at every tier width (scaled by its own sample ratio)
        log(f"{dataset}: static statistics passes")
        passes = {}
        for p in tiers:
            batches = batches_at(p)
            t, _ = best_of(lambda p=p, batches=batches: bns.static_statistics(model_at(family, p, state, run_mode),
                                                                              batches), repeats)
            t0, _ = best_of(lambda p=p: bns.static_statistics(model_at(family, p, state, run_mode), []), repeats)
            c = out["capable"][str(p)]
            passes[str(p)] = {**timing(t, t0, c["measured"] / c["samples"]), "samples": c["samples"]}
        out["static_pass"] = passes

    # submodel_accuracy: one run of each method the table evaluates
    log(f"{dataset}: submodel_accuracy")

    def static_for(name: str) -> Callable[[float], list[Any]]:
        cache: dict[float, list[Any]] = {}  # the job's per-run cache (hasfl.analysis.tables.submodel_accuracy.job)

        def static_batches(p: float) -> list[Any]:
            if partition is None:
                raise ValueError("no static batches for a dataset without a partition")
            if p not in cache:
                cache[p] = batches_at(p, name)
            return cache[p]

        return static_batches

    subs = {}
    for m in table_methods("submodel_accuracy", config):
        rule = METHODS[m].eval_bn
        ledger = t4c.read_ledger(ledgers[m])
        t, row = best_of(lambda m=m, rule=rule, ledger=ledger: sub.run_row(
            dataset, m, SEED, "completed", family, bundle, state, ledger, rule, static_for("partition.parquet")),
            repeats)
        t0, _ = best_of(lambda m=m, rule=rule, ledger=ledger: sub.run_row(
            dataset, m, SEED, "completed", family, empty, state, ledger, rule, static_for("partition_empty.parquet")),
            repeats)
        _, held = sub.last_round_submodels(family, ledger, SEED)
        subs[m] = {"rule": rule, "bn_used": row["bn_used"], "widths": sorted({p for p, _ in held}),
                   "n_submodels": int(row["n_submodels"]), **timing(t, t0, f)}
        subs[m]["per_run_s"] = t_load + subs[m]["full_s"]
        log(f"  {m}: widths {subs[m]['widths']}, {t:.2f} s measured, {subs[m]['full_s']:.1f} s full size")
    out["submodel_accuracy"] = subs

    # table4b: the F5 check of every nested run; three evaluations of a capped one
    log(f"{dataset}: table4b_stale_coordinates")
    warm = load_state(str(d / "warmup.pt"))

    def loads_4b() -> Any:
        fin, fin_bn = split_state(load_global_state(str(d / "final.pt")))
        w = load_state(str(d / "warmup.pt"))
        load_state(str(d / "init.pt"))
        return non_finite({"warmup.pt": w, "final.pt": {**fin, **fin_bn}})

    t_loads, _ = best_of(loads_4b, repeats)

    def stale_call(p_hi: float, b: Any, evaluate: bool) -> Any:
        return stale.stale_row(init=init, warmup=warm, final=own, family=family, p_hi_after_t0=p_hi, bundle=b,
                               evaluate=evaluate, atol=0.0, final_bn=extra, bn_mode=run_mode)

    t_unc, _ = best_of(lambda: stale_call(1.0, None, False), repeats)
    capped = {}
    for m in table_methods("table4b_stale_coordinates", config):
        p_hi = out["methods"][m]["max_width"]
        if p_hi >= 1.0:
            continue
        t, _ = best_of(lambda p_hi=p_hi: stale_call(p_hi, bundle, True), repeats)
        t0, _ = best_of(lambda p_hi=p_hi: stale_call(p_hi, empty, True), repeats)
        capped[m] = {"p_hi_after_t0": p_hi, **timing(t, t0, f)}
        capped[m]["per_run_s"] = t_loads + capped[m]["full_s"]
        log(f"  {m} (capped at {p_hi}): {t:.2f} s measured, {capped[m]['full_s']:.1f} s full size")
    out["table4b_stale_coordinates"] = {"loads_s": t_loads, "uncapped_s": t_unc, "uncapped_per_run_s": t_loads + t_unc,
                                        "capped": capped}

    # table4c: the replay of the ledger (a run of varied widths and one of full width)
    log(f"{dataset}: table4c_coverage_over_time")
    from hasfl.models.partition import parameter_shapes

    shapes = parameter_shapes(family)
    summary = {"t0": int(config["hasfl"]["warmup"]), "status": "completed", "rounds_completed": rounds}
    last_k = int(config["analysis"]["table4c_last_rounds"])
    preset_rounds = int(config["federation"]["rounds"])
    replays = {}
    for kind, m in (("sub-width", "hasfl"), ("full-width", "fedavg")):
        if m not in ledgers:
            continue

        def replay(m: str = m) -> Any:
            load_state(str(d / "init.pt"))
            return t4c.run_rows(dataset, m, SEED, t4c.read_ledger(ledgers[m]), summary, family, shapes, last_k)

        t, _ = best_of(replay, repeats)
        replays[kind] = {"ledger_of": m, "rounds_measured": rounds, "rounds_preset": preset_rounds,
                         "measured_s": t, "full_s": t * preset_rounds / rounds}
        log(f"  {kind} ({m}): {t:.2f} s for {rounds} rounds")
    out["table4c_coverage_over_time"] = replays

    # checks: linear in the samples; two threads
    if image:
        log(f"{dataset}: checks")
        two = dataclasses.replace(bundle, test_x=torch.cat([bundle.test_x, bundle.test_x]),
                                  test_y=torch.cat([bundle.test_y, bundle.test_y]))
        t1 = out["bn_sensitivity"]["modes"][run_mode]["measured_s"]
        fixed = out["bn_sensitivity"]["modes"][run_mode]["fixed_s"]
        t2, _ = best_of(lambda: bns.final_accuracy(family, two, state, run_mode, run_mode), repeats)
        threads = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            tt, _ = best_of(lambda: bns.final_accuracy(family, bundle, state, run_mode, run_mode), repeats)
        finally:
            torch.set_num_threads(threads)
        out["checks"] = {"linearity": {"samples": [n_test, 2 * n_test], "seconds": [t1, t2],
                                       "ratio": (t2 - fixed) / max(t1 - fixed, 1e-9)},
                         "threads": {"threads": [threads, 2], "seconds": [t1, tt], "speedup": t1 / tt}}
    return out


def table_methods(name: str, config: Mapping[str, Any]) -> list[str]:
    """The preset's methods whose runs table ``name`` reads (as workflow/rules/analysis.smk picks them)."""
    from hasfl.analysis.artifacts import TABLES as ARTS
    from hasfl.analysis.artifacts import artifact_methods
    from hasfl.registry import METHODS

    art = ARTS[name]
    methods = list(config["methods"]) if art.all_methods else list(artifact_methods(art))
    if art.nested_only:
        methods = [m for m in methods if METHODS[m].nested]
    return [m for m in methods if m in config["methods"]]


# --- the paper preset -------------------------------------------------------------------------------------
def extrapolate(config: Mapping[str, Any], per: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """CPU seconds of each table at the paper preset: its runs x their per-run cost, per dataset."""
    from hasfl.analysis.artifacts import TABLES as ARTS
    from hasfl.analysis.artifacts import table_datasets

    seeds = len(config["seeds"])
    out: dict[str, Any] = {"seeds": seeds, "tables": {}}
    for name in TABLES:
        methods = table_methods(name, config)
        rows = {}
        for d in table_datasets(ARTS[name], config["datasets"]):
            m = per.get(d)
            if m is None:
                rows[d] = {"runs": len(methods) * seeds, "seconds": None, "note": "not measured"}
                continue
            if name == "bn_sensitivity":
                if not m["batch_norm"]:
                    rows[d] = {"runs": len(methods) * seeds, "evaluated": 0, "seconds": 0.0,
                               "note": "no batch norm: not evaluated"}
                    continue
                b = m["bn_sensitivity"]
                s = len(methods) * seeds * b["per_run_s"] + seeds * b["capable_batches"]["full_s"]
                rows[d] = {"runs": len(methods) * seeds, "evaluated": len(methods) * seeds, "seconds": s,
                           "per_run_s": b["per_run_s"]}
            elif name == "submodel_accuracy":
                sub = m["submodel_accuracy"]
                s = seeds * sum(sub[x]["per_run_s"] for x in methods)
                rows[d] = {"runs": len(methods) * seeds, "evaluated": len(methods) * seeds, "seconds": s,
                           "per_run_s": {x: sub[x]["per_run_s"] for x in methods}}
            elif name == "table4b_stale_coordinates":
                t = m[name]
                capped = [x for x in methods if x in t["capped"]]
                s = seeds * (sum(t["capped"][x]["per_run_s"] for x in capped)
                             + (len(methods) - len(capped)) * t["uncapped_per_run_s"])
                rows[d] = {"runs": len(methods) * seeds, "evaluated": len(capped) * seeds, "seconds": s,
                           "capped_methods": capped,
                           "per_run_s": {**{x: t["capped"][x]["per_run_s"] for x in capped},
                                         "uncapped": t["uncapped_per_run_s"]}}
            else:
                r = m[name]
                full = [x for x in methods if m["methods"][x]["widths"] == [1.0]]
                per_run = {"sub-width": r["sub-width"]["full_s"] + m["load_state_s"],
                           "full-width": r.get("full-width", r["sub-width"])["full_s"] + m["load_state_s"]}
                s = seeds * ((len(methods) - len(full)) * per_run["sub-width"] + len(full) * per_run["full-width"])
                rows[d] = {"runs": len(methods) * seeds, "evaluated": len(methods) * seeds, "seconds": s,
                           "per_run_s": per_run}
        known = [r["seconds"] for r in rows.values() if r["seconds"] is not None]
        out["tables"][name] = {"methods": methods, "datasets": rows, "seconds": sum(known),
                               "complete": len(known) == len(rows)}
    out["seconds"] = sum(t["seconds"] for t in out["tables"].values())
    out["complete"] = all(t["complete"] for t in out["tables"].values())
    return out


def training_estimate(config: Mapping[str, Any]) -> dict[str, Any]:
    """The pre-flight's training estimate of the preset at its FALLBACK rates (the reference 2-core VM, one
    thread per job), --cores 2 on a 2-core machine."""
    from hasfl.dag.preflight import FALLBACK, estimate

    est = estimate(config, 2, FALLBACK, machine_cores=2)
    return {"rates": {k: FALLBACK[k] for k in ("device_name", "threads", "cnn_gmacs", "lstm_gmacs",
                                               "step_overhead_s", "source")},
            "train_jobs": est["train_jobs"], "train_job_hours": est["train_job_hours"],
            "per_dataset_job_hours": est["per_dataset_job_hours"], "wall_hours": est["wall_hours"],
            "longest_job_hours": est["longest_job_hours"], "cores": 2}


def machine() -> dict[str, Any]:
    import torch

    from hasfl.device import cpu_model

    return {"cpu": cpu_model(), "cores": os.cpu_count() or 1, "torch": torch.__version__,
            "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "python": platform.python_version(), "loadavg_start": list(os.getloadavg())}


def measure(datasets: Sequence[str], test_samples: int, repeats: int, rounds: int | None,
            log: Callable[[str], None], threads: int = 1) -> dict[str, Any]:
    import torch

    from hasfl.config import load_config

    tic = time.perf_counter()
    torch.set_num_threads(threads)  # the analysis rules' threads (Snakemake's default: 1, OMP_NUM_THREADS=1)
    config = load_config()
    rounds = int(rounds or config["federation"]["rounds"])
    info = machine()
    per = {}
    with tempfile.TemporaryDirectory(prefix="analysis-cost-") as tmp:
        for d in datasets:
            per[d] = measure_dataset(config, d, test_samples, repeats, rounds, Path(tmp), log)
    info["loadavg_end"] = list(os.getloadavg())
    return {"what": "analysis cost at paper shape (issue 47, point 4)",
            "date": dt.datetime.now().isoformat(timespec="seconds"),
            "settings": {"datasets": list(datasets), "test_samples": test_samples, "repeats": repeats,
                         "threads": threads,
                         "rounds": rounds, "seed": SEED, "preset": config["name"],
                         "preset_datasets": list(config["datasets"]), "preset_methods": list(config["methods"]),
                         "preset_seeds": list(config["seeds"]), "clients": int(config["federation"]["clients"]),
                         "clients_per_round": int(config["federation"]["clients_per_round"]),
                         "preset_rounds": int(config["federation"]["rounds"]),
                         "tiers": list(config["capacity"]["tiers"]), "counts": list(config["capacity"]["counts"])},
            "machine": info, "datasets": per, "extrapolation": extrapolate(config, per),
            "training": training_estimate(config), "elapsed_s": time.perf_counter() - tic}


# --- the page ---------------------------------------------------------------------------------------------
def _s(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "--"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if x < 10 else f"{x:.1f}"


def _h(seconds: float) -> str:
    return f"{seconds / 3600:,.1f}" if seconds >= 360 else f"{seconds / 3600:.2g}"


def render(data: Mapping[str, Any], command: str = EXAMPLE_COMMAND) -> str:
    """The Markdown page of a measurement's JSON (every number from ``data``)."""
    st, mc, per, ex, tr = (data["settings"], data["machine"], data["datasets"], data["extrapolation"],
                           data["training"])
    ds = list(per)
    lines = ["# Analysis cost at paper shape", "",
             f"What the analysis jobs that evaluate every run's final model cost on this 2-core CPU at the paper "
             f"preset's shapes (issue 47, point 4), measured {data['date']} by "
             "`scripts/experiments/analysis_cost.py` (every number below comes from its JSON output).", "",
             "## What was measured", "",
             f"Per dataset ({', '.join(ds)}): random data of the registry's real shapes and sizes, a random final "
             "state of the paper model with its per-width and mixed batch-norm sets, the data stage's own partition "
             f"and clients tables (`hasfl.data.stage.build_tables`, seed {st['seed']}: {st['clients']} clients, "
             f"tiers {st['tiers']} x {st['counts']}) and participation ledgers of {st['rounds']} rounds x "
             f"{st['clients_per_round']} participants (the engine's participant schedule, each client at the width "
             f"the pre-flight's width model gives its method). Timed at {mc['threads']} torch thread(s) (the "
             "analysis rules declare no `threads`: Snakemake runs them with one), best of "
             f"{st['repeats']}: the library calls of the jobs -- `hasfl.analysis.bn_sensitivity.final_accuracy` "
             "per batch-norm mode and `hasfl.analysis.bn_sensitivity.capable_batches` (bn_sensitivity), "
             "`hasfl.analysis.bn_sensitivity.static_statistics` per width, "
             "`hasfl.analysis.tables.submodel_accuracy.run_row` (submodel_accuracy), "
             "`hasfl.analysis.stale.stale_row` (table4b_stale_coordinates) and "
             "`hasfl.analysis.tables.table4c_coverage_over_time.run_rows` (table4c_coverage_over_time), with "
             "the loads of the run files each reads.", "",
             "**Scaled.** Evaluations and statistics passes are linear in the samples, so they ran on a fraction "
             "f of the test set and of every client's train rows and were scaled as T0 + (T - T0) / f (T0: the same "
             "call without samples, the model building and slicing):", "",
             "| dataset | test samples | measured | f | train rows measured / real, over f (per width) |",
             "|---|---|---|---|---|"]
    for d, m in per.items():
        cap = m.get("capable")
        ratio = ", ".join(f"p {p}: {v['ratio_to_f']:.3f}" for p, v in cap.items()) if cap else "-- (no static pass)"
        lines.append(f"| {d} | {m['test']:,} | {m['test_measured']:,} | {m['f']:.4g} | {ratio} |")
    rr = {m["table4c_coverage_over_time"]["sub-width"]["rounds_measured"] for m in per.values()}
    lines += ["", ("Table 4c's replays ran at the preset's " + f"{st['preset_rounds']} rounds (not scaled)."
                   if rr == {st["preset_rounds"]} else
                   f"Table 4c's replays ran at {sorted(rr)} rounds and were scaled linearly to the preset's "
                   f"{st['preset_rounds']}."), ""]
    checks = {d: m["checks"] for d, m in per.items() if "checks" in m}
    if checks:
        lines.append("Linearity check (full-width evaluation at n and 2n test samples, time beyond T0): "
                     + "; ".join(f"{d} x{c['linearity']['ratio']:.2f}" for d, c in checks.items()) + ".")
        lines.append("")
    lines += ["## Machine", "",
              f"{mc['cpu']}, {mc['cores']} cores; torch {mc['torch']}, ATen CPU capability "
              f"{mc['aten_cpu_capability']}; {mc['threads']} torch thread(s) during the measurement; "
              f"Python {mc['python']}. Load average {[round(x, 2) for x in mc['loadavg_start']]} at the start, "
              f"{[round(x, 2) for x in mc['loadavg_end']]} at the end; the script took "
              f"{data['elapsed_s']:.0f} s.", ""]
    if checks:
        lines += ["Two threads instead of one (the full-width evaluation): "
                  + "; ".join(f"{d} x{c['threads']['speedup']:.2f} faster" for d, c in checks.items())
                  + ". Every analysis job runs on `hasfl.analysis.jobs.ANALYSIS_THREADS` thread(s) "
                  "(`fixed_threads`; before it, a job forked from the warm worker used every core and a SLURM job "
                  "one, found by this measurement).", ""]

    lines += ["## Seconds per run, full size", "", "| evaluation | " + " | ".join(ds) + " |",
              "|---|" + "---|" * len(ds)]

    def row(label: str, get: Callable[[Mapping[str, Any]], Any]) -> None:
        vals = []
        for d in ds:
            try:
                v = get(per[d])
            except (KeyError, TypeError):
                v = None
            vals.append(v if isinstance(v, str) else _s(v))
        lines.append(f"| {label} | " + " | ".join(vals) + " |")

    row("forward MMAC per sample, full width", lambda m: m["forward_mmacs_per_sample"])
    row("effective GMAC/s of the full-width evaluation",
        lambda m: m["test"] * m["forward_mmacs_per_sample"] / 1e3
        / m["bn_sensitivity"]["modes"][m["bn_sensitivity"]["run_mode"]]["full_s"])
    row("load final.pt", lambda m: m["load_final_s"])
    modes = next((list(m["bn_sensitivity"]["modes"]) for m in per.values() if "bn_sensitivity" in m), [])
    for mode in modes:
        row(f"bn_sensitivity: mode `{mode}`" + (" (statistics pass + evaluation)" if mode == "static" else ""),
            lambda m, mode=mode: m["bn_sensitivity"]["modes"][mode]["full_s"])
    row("**bn_sensitivity: one run**", lambda m: m["bn_sensitivity"]["per_run_s"] if m["batch_norm"]
        else "not evaluated (no batch norm)")
    row("bn_sensitivity: static batches, once per dataset x seed", lambda m: m["bn_sensitivity"]["capable_batches"]
        ["full_s"])
    tiers = next((list(m["static_pass"]) for m in per.values() if "static_pass" in m), [])
    for p in tiers:
        row(f"static statistics pass at width {p}", lambda m, p=p: f"{_s(m['static_pass'][p]['full_s'])} "
            f"({m['static_pass'][p]['samples']:,} samples)")
    sub_methods = list(dict.fromkeys(x for m in per.values() for x in m["submodel_accuracy"]))
    for x in sub_methods:
        row(f"**submodel_accuracy: one {x} run**", lambda m, x=x: f"{_s(m['submodel_accuracy'][x]['per_run_s'])} "
            f"(widths {', '.join(f'{w:g}' for w in m['submodel_accuracy'][x]['widths'])}; "
            f"{m['submodel_accuracy'][x]['bn_used']})")
    capped = list(dict.fromkeys(x for m in per.values() for x in m["table4b_stale_coordinates"]["capped"]))
    for x in capped:
        row(f"**table4b: one capped {x} run** (3 evaluations)",
            lambda m, x=x: f"{_s(m['table4b_stale_coordinates']['capped'][x]['per_run_s'])} "
            f"(p_hi {m['table4b_stale_coordinates']['capped'][x]['p_hi_after_t0']:g})")
    row("**table4b: one uncapped run** (F5 check only)", lambda m: m["table4b_stale_coordinates"]["uncapped_per_run_s"])
    for kind in ("sub-width", "full-width"):
        row(f"**table4c: one run**, {kind} ledger", lambda m, kind=kind: m["table4c_coverage_over_time"][kind]
            ["full_s"] + m["load_state_s"])
    lines.append("")

    lines += ["## The paper preset", "",
              f"Preset `{st['preset']}`: {len(st['preset_datasets'])} datasets x {len(st['preset_methods'])} methods "
              f"x {len(st['preset_seeds'])} seeds. Each table's per-run part runs inside one `evaluate` job per run (rule "
              f"`evaluate`: every table's rows of that run, kept in the run store beside it); summed over the runs each "
              f"table reads (the artifact registry's methods), CPU hours at {mc['threads']} thread(s) on this "
              "machine:", "",
              "| table | runs read (per dataset) | runs evaluated | " + " | ".join(f"{d} h" for d in
                                                                                st["preset_datasets"]) + " | total h |",
              "|---|---|---|" + "---|" * len(st["preset_datasets"]) + "---|"]
    for name, t in ex["tables"].items():
        cells = []
        for d in st["preset_datasets"]:
            r = t["datasets"].get(d)
            cells.append("--" if r is None else ("not measured" if r["seconds"] is None else _h(r["seconds"])))
        first = next(iter(t["datasets"].values()), {"runs": 0})
        evaluated = ", ".join(f"{d} {r.get('evaluated', '--')}" for d, r in t["datasets"].items())
        note = ""
        if name == "table4b_stale_coordinates":
            caps = next((r.get("capped_methods") for r in t["datasets"].values() if r.get("capped_methods")), [])
            note = f" (capped: {', '.join(caps)})" if caps else ""
        lines.append(f"| {name} | {first['runs']} ({len(t['methods'])} methods x {ex['seeds']} seeds) | "
                     f"{evaluated}{note} | " + " | ".join(cells) + f" | **{_h(t['seconds'])}** |")
    total = ex["seconds"]
    lines += ["", f"**Analysis, these four tables: {_h(total)} CPU hours** at {mc['threads']} thread(s)"
              + ("" if ex["complete"] else " (datasets not measured are left out)") + ": an upper bound, as the evaluate job of a run computes each distinct model's forward once for all its "
              "tables (`hasfl.analysis.stale.evaluate_accuracy`), timed here per table. These hours spread over the "
              "runs' evaluate jobs (as many in parallel as --cores, GPU slots or a cluster allow); the pre-flight "
              "prices them from the model's forward seconds measured on the machine (`python -m "
              "hasfl.bench.calibrate --forward`).", "",
              f"**Training** (the pre-flight, `hasfl.dag.preflight.estimate` at its FALLBACK rates -- "
              f"{tr['rates']['device_name']}, {tr['rates']['threads']} thread per job, "
              f"{tr['rates']['cnn_gmacs']} / {tr['rates']['lstm_gmacs']} GMAC/s CNN / LSTM): "
              f"{tr['train_jobs']} jobs, **{tr['train_job_hours']:,.0f} job-hours** ("
              + ", ".join(f"{d} {h:,.0f} h" for d, h in tr["per_dataset_job_hours"].items())
              + f"), {tr['wall_hours']:,.0f} h of wall on --cores {tr['cores']}.", "",
              f"**Analysis / training: {total / 3600 / tr['train_job_hours']:.2%}** of the training job-hours "
              f"(the pre-flight's rates are training rates measured under load; this machine evaluated at the "
              f"effective GMAC/s of the table above).", "",
              "## Caveats", "",
              "- One run per method and dataset was measured (seed "
              f"{st['seed']}'s partition and last round); every seed is priced at it. The sub-model widths of the last "
              "round and the capped runs of Table 4b (p_hi = the largest width the width model gives the method) come "
              "from the pre-flight's width model (`hasfl.dag.preflight.estimate`'s cost rules), not from trained runs.",
              "- Not measured: loading the raw datasets (once per job), the findings recomputation of bn_sensitivity "
              "(tables only, no model), Parquet and Markdown writing.",
              "- The static mode's batches are rebuilt per run and width by submodel_accuracy and once per dataset x "
              "seed by bn_sensitivity, as the jobs do.", "",
              "## Regenerate", "", "```", command, "```",
              "", "(`--from-json PATH --doc docs/analysis-cost.md` re-renders a saved JSON without measuring.)", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["cifar10", "emnist", "shakespeare"])
    ap.add_argument("--test-samples", type=int, default=1024,
                    help="test samples evaluated (the same fraction of every client's train rows); scaled up")
    ap.add_argument("--repeats", type=int, default=2, help="timings per call; the best counts")
    ap.add_argument("--rounds", type=int, default=None, help="ledger rounds (default: the preset's; scaled up)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the analysis rules': 1)")
    ap.add_argument("--json", type=Path, default=None, help="write the JSON here")
    ap.add_argument("--doc", type=Path, default=None, help="render the Markdown page here")
    ap.add_argument("--from-json", type=Path, default=None, help="render this JSON instead of measuring")
    args = ap.parse_args(argv)
    if args.from_json is not None:
        data = json.loads(args.from_json.read_text())
    else:
        data = measure(args.datasets, args.test_samples, args.repeats, args.rounds,
                       lambda s: print(s, file=sys.stderr, flush=True), args.threads)
        data["command"] = " ".join(["python", "scripts/experiments/analysis_cost.py", *(argv or sys.argv[1:])])
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    if args.doc is not None:
        args.doc.parent.mkdir(parents=True, exist_ok=True)
        args.doc.write_text(render(data, data.get("command", EXAMPLE_COMMAND)))
    json.dump(data, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
