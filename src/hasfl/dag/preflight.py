"""Pre-flight: what a DAG run will cost on this machine, said before any job starts.

The Snakefile prints one block for every run: the jobs, the training work from the cost model
(Table 1's multiply-accumulates per sample of each method's widths, every round's local steps
and evaluations), this machine's measured throughput (:mod:`hasfl.bench.calibrate`, measured
once per machine and cached), and the resulting job-hours and wall time at the given
``--cores``. On a machine without a GPU a run whose estimate exceeds the config key
``execution.max_cpu_wall_hours`` (the paper preset: thousands of CPU hours) stops there, naming the way to
proceed deliberately.

The estimate is deliberately simple: local steps x (a fixed per-step cost + 3 x forward MACs /
rate) + evaluations x forward MACs / rate; FedProx, SCAFFOLD and the E2 probes are counted as
plain steps. It is right to a factor of about 2 (docs/guide/run.md "Speed and precision" compares it with measured
runs), which is what deciding where to run needs.

Torch-free: the model costs are computed analytically here (tests/test_preflight.py checks them
against :meth:`hasfl.models.ModelFamily.cost`), the throughput is read from the cache or measured
in a subprocess.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
from dataclasses import replace
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from hasfl.cache import CACHE, cached_measurement
from hasfl.device import cpu_model, devices, kernel_pin, listed_gpus, probe_path, resolve
from hasfl.errors import HasflError
from hasfl.registry import DATASETS, METHODS

__all__ = ["analysis_jobs", "cached_measurement", "device_of", "estimate", "evaluation_seconds", "forward_macs",
           "forward_speeds", "hardware", "parameter_count", "render", "reused", "runs_jobs", "seed_hours", "throughput"]

CALIBRATION = 2  # the calibration's version: a new one measures again
#: Used when the calibration cannot run (no torch, a failure): this project's 2-core AMD EPYC VM,
#: 1 thread, measured 2026-11-30 with hasfl.bench.calibrate under load (conservative).
FALLBACK = {"device": "cpu", "device_name": "reference 2-core VM", "threads": 1, "step_overhead_s": 0.0033,
            "cnn_gmacs": 7.4, "lstm_gmacs": 6.1, "lstm_timestep_s": 0.0, "source": "fallback"}
def _width(p: float, size: int) -> int:
    """Algorithm 2's ceil(p C) (as hasfl.models.slicing.width)."""
    return max(1, math.ceil(p * size - 1e-9))


def forward_macs(model: Mapping[str, Any], shape: Sequence[int], classes: int, p: float) -> int:
    """Forward MACs per sample of the width-``p`` model of config block ``model`` (Table 1's count)."""
    if model["arch"] == "lstm":
        h, total, fan_in = _width(p, int(model["hidden"])), 0, int(model["embed_dim"])
        for _ in range(int(model["layers"])):
            total += int(shape[0]) * 4 * h * (fan_in + h)
            fan_in = h
        return total + h * int(classes)
    chans = [_width(p, int(c)) for c in model["channels"]]
    c_in, hgt, wid = int(shape[0]), int(shape[1]), int(shape[2])
    total = 0
    for i, c in enumerate(chans):
        total += hgt * wid * c * c_in * 9
        c_in = c
        if i in set(model["pool_after"]):
            hgt, wid = hgt // 2, wid // 2
    hidden, pool = _width(p, int(model["hidden"])), int(model["pool_out"])
    return total + c_in * pool * pool * hidden + hidden * int(classes)


def _facts(dataset: str, params: Mapping[str, Any], manifest: Mapping[str, Any] | None) -> dict[str, Any]:
    """Shape, classes, train and test sizes: from a data-stage manifest when there is one."""
    if manifest is not None:
        s = manifest["summary"]
        return {"shape": tuple(s["input_shape"]), "classes": s["classes"], "train": s["train_size"],
                "test": s["test_size"]}
    facts = DATASETS[dataset].facts
    f: dict[str, Any] = {"shape": facts.shape, "classes": facts.classes, "train": facts.train, "test": facts.test}
    if params.get("train_per_class"):  # a class-balanced subsample (fashion_mnist)
        f["train"] = min(f["train"], int(params["train_per_class"]) * int(f["classes"]))
    if f["test"] == 0 and "test_fraction" in params:  # the test set is split off the training set (digits)
        f["test"] = round(f["train"] * params["test_fraction"])
        f["train"] -= f["test"]
    if "seq_len" in params:  # character windows of natural clients (shakespeare)
        seq, frac, cap = int(params["seq_len"]), float(params["train_fraction"]), params["max_chars_per_role"]
        f["shape"] = (seq,)
        if cap is not None:  # 20 roles (top_roles) cut to cap characters, windows of seq characters
            roles = int(params["top_roles"])
            f["train"] = roles * max(0, int(cap * frac) - seq)
            f["test"] = roles * max(0, int(cap * (1 - frac)) - seq)
    return f


def _fixed_width(method: str, config: Mapping[str, Any]) -> float:
    """The width ``method_params.<method>.p`` of a method of the ``fixed`` cost rule. A method without a
    ``method_params`` block has none (as the job's config slice gives it, :func:`hasfl.config.run_config`), so
    a missing block or ``p`` is named, not a ``KeyError``."""
    block = (config.get("method_params") or {}).get(method)
    if block is None:
        raise HasflError(f"config key 'method_params.{method}' is missing: method {method!r} is priced and trained at "
                         f"its fixed width (registry cost rule 'fixed'); expected 'method_params: {{{method}: "
                         f"{{p: <width in (0, 1]>}}}}' in the config (and in workflow/schemas/config.schema.json)")
    if "p" not in block:
        raise HasflError(f"config key 'method_params.{method}.p' is missing: method {method!r} is priced and "
                         f"trained at this fixed width (registry cost rule 'fixed'); expected a width in (0, 1]")
    return float(block["p"])


def _method_widths(method: str, config: Mapping[str, Any], pmax: Sequence[float]) -> list[tuple[float, float]]:
    """(allocated, trained) width per client, roughly, for the cost estimate: the method's registry
    rule (:data:`hasfl.registry.COST_RULES`)."""
    rule = METHODS[method].cost
    if rule == "full":
        return [(1.0, 1.0)] * len(pmax)
    if rule == "capacity":
        return [(p, p) for p in pmax]
    if rule == "fixed":
        u = _fixed_width(method, config)
        return [(min(u, p), min(u, p)) for p in pmax]
    h = config["hasfl"]
    eq6 = [min(p, h["p_min"] + h["gamma"]) for p in pmax]
    if rule == "allocation_rule":
        return [(q, q) for q in eq6]
    top = max(pmax)  # allocation_rule_covered: the coverage guarantee keeps the top tier at full width
    return [(p if p == top else q, p if p == top else q) for p, q in zip(pmax, eq6, strict=True)]


#: Seconds of one evaluate job besides its evaluations (a process forked from the warm worker, Snakemake's
#: bookkeeping, reading the run, loading the dataset): the quick preset's 54 jobs from an empty analysis on an idle
#: 2-core machine took 19 s of wall at 2 at a time, 21.5 s of it evaluating (the entries' timings.json), 2026-12-05
#: (0.25 s on the AMD EPYC VM the day before).
EVAL_JOB_S = 0.3
#: Seconds of Table 4c's coverage replay per participant-round and parameter coordinate (one participant's window
#: added to the round's counts, the round's minimum and uncovered count): the coverage rung's 25 runs took 208 s
#: for 1,000 participant-rounds of an 0.81 M-parameter CNN each (docs/analysis-cost.md).
REPLAY_S = 1.0e-8
#: Seconds of each gather, figure, findings and report job of the analysis (:func:`analysis_jobs`): the quick
#: preset's 28 took 13 s of wall at 2 at a time on the same idle machine, 2026-12-05.
ANALYSIS_JOB_S = 1.0
#: Seconds of one data-stage job (loading the raw dataset, partitioning, writing the tables).
DATA_JOB_S = 3.0


def analysis_jobs() -> int:
    """The analysis's gather jobs: one per table and figure of the registry (:data:`hasfl.analysis.artifacts.
    ARTIFACTS`), the findings, the report and the analysis manifest."""
    from hasfl.analysis.artifacts import ARTIFACTS

    return len(ARTIFACTS) + 3


def parameter_count(model: Mapping[str, Any], shape: Sequence[int], classes: int) -> int:
    """Parameters of the full model of config block ``model`` (weights, biases, batch-norm affines)."""
    if model["arch"] == "lstm":
        h, fan_in = int(model["hidden"]), int(model["embed_dim"])
        total = int(classes) * fan_in  # the embedding (one row per character)
        for _ in range(int(model["layers"])):
            total += 4 * h * (fan_in + h) + 8 * h
            fan_in = h
        return total + h * int(classes) + int(classes)
    c_in, total = int(shape[0]), 0
    for c in map(int, model["channels"]):
        total += c_in * c * 9 + 3 * c  # weights, bias, batch-norm weight and bias
        c_in = c
    hidden, pool = int(model["hidden"]), int(model["pool_out"])
    return total + c_in * pool * pool * hidden + hidden + hidden * int(classes) + int(classes)


def _per_sample(measured: Mapping[str, float], q: float) -> float:
    """Seconds per sample at width ``q`` from a forward measurement's widths (:data:`hasfl.bench.calibrate.
    FORWARD_WIDTHS`): linear between the two measured widths around ``q``, the narrowest's below it."""
    points = sorted((float(w), float(s)) for w, s in measured.items())
    if q <= points[0][0]:
        return points[0][1]
    for (w0, s0), (w1, s1) in zip(points, points[1:]):
        if q <= w1:
            return s0 + (s1 - s0) * (q - w0) / (w1 - w0)
    return points[-1][1]


def evaluation_seconds(config: Mapping[str, Any], dataset: str, method: str, rates: Mapping[str, Any],
                       facts: Mapping[str, Any] | None = None,
                       speeds: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Seconds of one run's evaluate job (:mod:`hasfl.analysis.evaluations`) on a machine of ``rates``, per table
    that reads the run (:func:`hasfl.analysis.artifacts.run_tables`) and ``"job"`` (:data:`EVAL_JOB_S`): forward
    passes over the test set and over the capable clients' train rows, priced from ``speeds`` -- this model's
    forward seconds per sample measured on this machine (:func:`forward_speeds`) -- or, without, by their MACs at
    the calibrated training rate (which under-prices the small CNNs' evaluations about 4x); right to
    about 2x, as the training estimate.

    * ``bn_sensitivity`` (a CNN): the full model under each batch-norm mode (four; one when it keeps no running
      statistics) and the ``static`` mode's statistics pass over the train rows of the clients allowed width 1;
    * ``submodel_accuracy``: one evaluation per distinct width the method's participants train (per participant
      when each holds units of its own, :attr:`hasfl.registry.MethodInfo.own_units`), and under the ``static`` rule
      a statistics pass per width;
    * ``table4b_stale_coordinates`` (a run capped below width 1): the full model twice and the sub-model once;
    * ``personal_accuracy``: each client's split (about as many samples as the train set in all) through its local
      model and through the global model;
    * ``table4c_coverage_over_time``: the coverage replay (:data:`REPLAY_S` per participant-round and parameter).
    """
    from hasfl.analysis.artifacts import run_tables

    dp = config["dataset_params"][dataset]
    facts = facts or _facts(dataset, dp, None)
    model, fed = dp["model"], config["federation"]
    rate = float(rates["lstm_gmacs" if model["arch"] == "lstm" else "cnn_gmacs"]) * 1e9
    test, train = int(facts["test"]), int(facts["train"])
    pmax = _capacities(config)

    def forward(q: float, n: float, kind: str = "eval") -> float:
        if speeds is not None and speeds.get(kind):
            return n * _per_sample(speeds[kind], q)
        s = n * forward_macs(model, facts["shape"], facts["classes"], q) / rate
        if model["arch"] == "lstm":  # the recurrence, per 2,048-sample batch, step and layer (as training's)
            s += (math.ceil(n / 2048) * facts["shape"][0] * int(model["layers"])
                  * float(rates.get("lstm_timestep_s", 0.0)) / 3.0)
        return s

    def capable(q: float) -> float:
        return train * sum(1 for p in pmax if p >= q - 1e-9) / len(pmax)

    widths = sorted({round(t, 6) for _, t in _method_widths(method, config, pmax)})
    info = METHODS[method]
    out: dict[str, float] = {"job": EVAL_JOB_S}
    for table in run_tables(dataset, method, config["datasets"], config["methods"]):
        if table == "bn_sensitivity":
            if model["arch"] != "cnn":
                out[table] = 0.0
                continue
            modes = 1 if model.get("bn_stats") == "batch" else 4
            out[table] = modes * forward(1.0, test) + (forward(1.0, capable(1.0), "stats") if modes > 1 else 0.0)
        elif table == "submodel_accuracy":
            if info.own_units:
                subs = [sum(widths) / len(widths)] * int(fed["clients_per_round"])
            else:
                subs = widths[: int(fed["clients_per_round"])]
            out[table] = sum(forward(q, test) for q in subs)
            if info.eval_bn == "static":
                out[table] += sum(forward(q, capable(q), "stats") for q in subs)
        elif table == "table4b_stale_coordinates":
            top = max(widths)
            out[table] = 2 * forward(1.0, test) + forward(top, test) if top < 1.0 else 0.0
        elif table == "personal_accuracy":  # every client's split (about the train set): its own model and the global
            out[table] = forward(sum(pmax) / len(pmax), train) + forward(1.0, train)
        elif table == "table4c_coverage_over_time":
            out[table] = (int(fed["rounds"]) * int(fed["clients_per_round"]) * REPLAY_S
                          * parameter_count(model, facts["shape"], facts["classes"]))
    return out


def seed_hours(config: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Job-hours of one seed of each dataset x method of ``config`` on the reference machine
    (:data:`FALLBACK`, one core): what findings.json prices the seeds an inconclusive unit needs at, the
    same on every machine."""
    est = estimate(config, 1, FALLBACK)
    n = max(1, len(config["seeds"]))
    return {d: {m: h / n for m, h in v.items()} for d, v in est["per_method_job_hours"].items()}


def _capacities(config: Mapping[str, Any]) -> list[float]:
    cap = config["capacity"]
    return [t for t, n in zip(cap["tiers"], cap["counts"], strict=True) for _ in range(int(n))]


def estimate(config: Mapping[str, Any], cores: int, rates: Mapping[str, Any],
             manifests: Mapping[str, Mapping[str, Any]] | None = None, machine_cores: int | None = None,
             finished: Mapping[str, Any] | None = None, packing: Any = None,
             speeds: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Jobs, job-hours and wall hours of the preset ``config`` at ``--cores`` ``cores`` on a machine of
    ``machine_cores`` cores (jobs beyond them share cores: they do not run faster). ``finished``
    (:func:`reused`): the runs and data-stage folders that are reused, left out of the price.
    ``packing`` (:class:`hasfl.dag.gpu.Packing`): training and evaluate jobs share the GPUs, K per GPU; the job time
    is then device time of one job alone, the device-hours it divided by the calibrated speed-up of K jobs (1 when
    K is not calibrated), and the wall the device-hours over the GPUs. ``speeds`` (:func:`forward_speeds`): each
    dataset's measured forward seconds, which price the evaluate jobs (:func:`evaluation_seconds`)."""
    done_runs = set((finished or {}).get("runs", ()))
    done_data = set((finished or {}).get("data", ()))
    fed = config["federation"]
    pmax = _capacities(config)
    per_dataset = {}
    eval_cost: dict[str, dict[str, float]] = {}
    for d in config["datasets"]:
        dp = config["dataset_params"][d]
        facts = _facts(d, dp, (manifests or {}).get(d))
        model, optim = dp["model"], dp["optim"]
        rate = float(rates["lstm_gmacs" if model["arch"] == "lstm" else "cnn_gmacs"]) * 1e9
        per_client = facts["train"] / fed["clients"]
        steps = math.ceil(per_client / optim["batch_size"]) * optim["local_epochs"]
        evals = math.ceil(fed["rounds"] / fed["eval_every"])
        eval_s = evals * facts["test"] * forward_macs(model, facts["shape"], facts["classes"], 1.0) / rate
        if model["arch"] == "lstm":  # evaluation batches of 2,048: the recurrence once per batch and step
            eval_s += (evals * math.ceil(facts["test"] / 2048) * facts["shape"][0] * int(model["layers"])
                       * float(rates.get("lstm_timestep_s", 0.0)) / 3.0)
        methods = {}
        eval_cost[d] = {m: evaluation_seconds(config, d, m, rates, facts, (speeds or {}).get(d)) for m in config["methods"]}
        for m in config["methods"]:
            widths = _method_widths(m, config, pmax)
            macs = sum(forward_macs(model, facts["shape"], facts["classes"], q) for _, q in widths) / len(widths)
            macs *= METHODS[m].cost_factor  # FjORD: the distilled student's pass
            step_s = float(rates["step_overhead_s"]) + optim["batch_size"] * 3.0 * macs / rate
            if model["arch"] == "lstm":  # the recurrence's per-character cost, each layer
                step_s += float(rates.get("lstm_timestep_s", 0.0)) * facts["shape"][0] * int(model["layers"])
            methods[m] = fed["rounds"] * fed["clients_per_round"] * steps * step_s + eval_s
        per_dataset[d] = methods
    seeds = len(config["seeds"])
    todo = [(d, m, int(sd)) for d in config["datasets"] for m in config["methods"] for sd in config["seeds"]
            if (d, m, int(sd)) not in done_runs]
    train_s = sum(per_dataset[d][m] for d, m, _s in todo)
    # the evaluate job of every run whose evaluations are not all finished (in the folder or the store): the
    # tables not finished, and the job's own cost
    done_evals = set((finished or {}).get("evals", ()))
    eval_s, n_eval = 0.0, 0
    for d in config["datasets"]:
        for m in config["methods"]:
            for sd in map(int, config["seeds"]):
                left = [t for t in eval_cost[d][m] if t != "job" and (d, m, sd, t) not in done_evals]
                if left:
                    eval_s += eval_cost[d][m]["job"] + sum(eval_cost[d][m][t] for t in left)
                    n_eval += 1
    n_train = len(todo)
    n_data = sum(1 for d in config["datasets"] for sd in config["seeds"] if (d, int(sd)) not in done_data)
    slots = max(1, int(cores) // int(config["threads_per_job"]))
    parallel = max(1, min(slots, int(machine_cores or cores) // int(config["threads_per_job"])))
    longest = max((per_dataset[d][m] for d, m, _s in todo), default=0.0)
    n_analysis = analysis_jobs()
    # jobs run side by side: the wall is the total over the slots, but never below the longest job;
    # a few seconds per data-stage and analysis job, and the evaluate jobs over the slots
    analysis_s = eval_s / parallel + ANALYSIS_JOB_S * n_analysis / min(parallel, 2)
    wall = max(train_s / parallel, longest) + DATA_JOB_S * n_data / min(parallel, 2) + analysis_s
    device_hours = None
    if packing is not None:
        at_once = max(1, min(slots, packing.slots))
        gain = (packing.speedup or 1.0) * min(1.0, at_once / packing.slots)  # fewer --cores than slots: less
        # the evaluate jobs take the GPU slots as training jobs do (rule evaluate; priced by the forward seconds
        # measured on the device), the gathers the CPU
        device_hours = (train_s + eval_s) / gain / 3600.0
        analysis_s = eval_s / gain / len(packing.gpus) + ANALYSIS_JOB_S * n_analysis / min(parallel, 2)
        wall = (max(train_s / gain / len(packing.gpus), longest) + DATA_JOB_S * n_data / min(at_once, 2)
                + analysis_s)
    return {"device_hours": device_hours, "train_jobs": n_train, "data_jobs": n_data,
            "reused_runs": len(config["datasets"]) * len(config["methods"]) * seeds - n_train, "reused_data": len(config["datasets"]) * seeds - n_data,
            "train_job_hours": train_s / 3600.0, "wall_hours": wall / 3600.0,
            "eval_jobs": n_eval, "eval_job_hours": eval_s / 3600.0, "analysis_wall_hours": analysis_s / 3600.0,
            "measured": [d for d in config["datasets"] if d in (speeds or {})],
            "unmeasured": [d for d in config["datasets"] if d not in (speeds or {})],
            "slots": slots, "longest_job_hours": longest / 3600.0,
            "per_dataset_job_hours": {d: sum(per_dataset[dd][m] for dd, m, _s in todo if dd == d) / 3600.0
                                      for d in per_dataset},
            "per_method_job_hours": {d: {m: s * seeds / 3600.0 for m, s in v.items()} for d, v in per_dataset.items()}}


def hardware(probe: bool = True) -> dict[str, Any]:
    """CPU model and cores, and the GPUs the training jobs' torch will use (:func:`hasfl.device.devices`:
    ``nvidia-smi -L`` confirmed by a cached torch probe): ``gpus`` those names, ``listed`` what ``nvidia-smi``
    lists, ``gpu_note`` why listed GPUs do not count ('' when there is nothing to say). Without ``probe`` (a dry
    run, which writes nothing of ours) an uncached probe caches its answer in a temporary folder it removes, not in
    the user's cache."""
    listed = listed_gpus()
    if listed and not probe and not probe_path(CACHE, listed).is_file():
        with tempfile.TemporaryDirectory() as scratch:  # the same probe, its answer kept only while it is read
            found = devices(Path(scratch), listed)
        if found.note:  # it names where the probe was cached: nowhere that stays
            found = replace(found, note=found.note.split(" (probe cached in ")[0] + " (a dry run caches no probe)")
    else:
        found = devices(CACHE, listed)
    return {"cpu": cpu_model(), "cores": os.cpu_count() or 1, "gpus": list(found.gpus), "listed": list(found.listed),
            "gpu_note": found.note}


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def _measurement_path(kind: str, hw: Mapping[str, Any], device: str, threads: int, *what: Any) -> Path:
    """Where a measurement of ``kind`` on this machine (CPU, GPUs, device, threads, torch, the CPU kernel pin in the
    environment: :func:`hasfl.device.kernel_pin`) of ``what`` is cached. A build under the portable pin runs AVX2
    kernels on an AVX-512 CPU at about half the unpinned speed: priced from an unpinned measurement, its training
    took about twice the estimate."""
    pin = kernel_pin()
    key = hashlib.sha256(json.dumps([hw["cpu"], hw["gpus"], device, threads, _torch_version(), *what]
                                    + ([pin] if pin else []), sort_keys=True).encode()).hexdigest()
    return CACHE / f"{kind}-{key[:16]}.json"


def throughput(device: str, threads: int, hw: Mapping[str, Any], measure: bool = True) -> dict[str, Any]:
    """This machine's throughput for ``device`` (``cpu``/``cuda``): cached, else measured once (only when
    ``measure``: a dry run prices an unmeasured machine by the reference numbers and writes no cache)."""
    path = _measurement_path("throughput", hw, device, threads, CALIBRATION)
    cached = cached_measurement(path)
    if cached is not None:
        return {**cached, "source": str(path)}
    if not measure:
        return {**FALLBACK, "source": "the reference machine's: a dry run measures nothing, the build measures once"}
    rates = cached_measurement(path, [sys.executable, "-m", "hasfl.bench.calibrate", "--device", device, "--threads",
                                      str(threads)], timeout_s=300)
    return dict(FALLBACK) if rates is None else {**rates, "source": f"measured now, cached in {path}"}


#: The forward measurement's version (:func:`forward_speeds`): a new one measures again.
FORWARD = 1


def forward_speeds(config: Mapping[str, Any], device: str, threads: int, hw: Mapping[str, Any],
                   manifests: Mapping[str, Mapping[str, Any]] | None = None,
                   measure: bool = True) -> dict[str, dict[str, Any]]:
    """Each dataset's forward seconds per sample of its model on this machine (:func:`hasfl.bench.calibrate.
    forward_seconds`, a few seconds per model), cached per machine and model; measured only when ``measure`` (a
    build, not a dry run, which prices from the cache or the MACs). A dataset missing from the answer is priced by
    its MACs."""
    out: dict[str, dict[str, Any]] = {}
    for d in config["datasets"]:
        dp = config["dataset_params"][d]
        facts = _facts(d, dp, (manifests or {}).get(d))
        spec = {"model": dict(dp["model"]), "shape": list(facts["shape"]), "classes": int(facts["classes"]),
                "batch": int(dp["optim"]["batch_size"])}
        path = _measurement_path("forward", hw, device, threads, FORWARD, spec)
        cmd = [sys.executable, "-m", "hasfl.bench.calibrate", "--device", device, "--threads", str(threads),
               "--forward", json.dumps(spec)]
        got = cached_measurement(path, cmd if measure else None, timeout_s=300)
        if got is not None:
            out[d] = {**got, "source": str(path)}
    return out


#: A 1-minute load average above this share of the cores is reported as other work on the machine.
LOADED_SHARE = 0.5


def load_lines(cores: int, rates: Mapping[str, Any], load: float | None = None, wall_hours: float | None = None,
               slots: int | None = None) -> list[str]:
    """The pre-flight's line on other work sharing this machine's CPUs (``load``: the 1-minute load average, default
    the machine's now): the estimate assumes the cores are free, so a loaded machine's wall time runs past it (a new
    user's quick preset took 3.5x its estimate under a shared load). With ``wall_hours`` (the free-core estimate) and
    ``slots`` (the build's jobs at a time) it also gives the estimate corrected for that load: the cores shared by
    the build's ``slots`` jobs and ``load`` other runnable ones, ``wall x max(1, (slots + load) / cores)``. A
    throughput measured now under that load is itself too low: the line names the cache file to delete on an idle
    machine. None when the load is below :data:`LOADED_SHARE` of the cores or unknown."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):
            return []
    if load <= LOADED_SHARE * max(1, int(cores)):
        return []
    line = f"  load: the 1-minute load average is {load:.1f} on {cores} cores: other work shares the CPUs"
    factor = max(1.0, (int(slots or cores) + load) / max(1, int(cores)))
    if wall_hours is None:
        line += ", so the wall time may run well past the estimate, which assumes the cores are free"
    elif factor > 1.0:
        line += (f", so the wall time runs past the estimate, which assumes the cores are free: shared with that load "
                 f"(wall x (jobs at a time + load) / cores = x{factor:.2f}), about {_hours(wall_hours * factor)}, if "
                 "the load stays")
    else:
        line += f"; the build's {int(slots or cores)} jobs at a time and that load fit the cores: the estimate stands"
    source = str(rates.get("source", ""))
    if source.startswith("measured now, cached in "):
        line += (f"; the throughput was measured now, under that load: delete {source.split(' cached in ', 1)[1]} "
                 "and build on an idle machine to measure it again")
    return [line]


def _hours(h: float) -> str:
    if h < 1.0:
        return f"{h * 60:.0f} min"
    return f"{h:,.1f} h" if h < 100 else f"{h:,.0f} h"


def render(config: Mapping[str, Any], est: Mapping[str, Any], rates: Mapping[str, Any], hw: Mapping[str, Any],
           cores: int, device: str, packing: Any = None) -> str:
    """The pre-flight block (with ``packing``, :class:`hasfl.dag.gpu.Packing`: K, device time, wall time)."""
    gpu = ", ".join(hw["gpus"]) if hw["gpus"] else "no GPU"
    lines = [
        f"hasfl pre-flight: preset '{config['name']}' on {hw['cpu']} ({hw['cores']} cores, {gpu}); "
        f"device {device}, --cores {cores} ({est['slots']} jobs at a time)",
        *([f"  GPU: {hw['gpu_note']}"] if hw.get("gpu_note") else []),
        f"  jobs: {est['data_jobs']} data stage, {est['train_jobs']} training "
        f"({len(config['datasets'])} datasets x {len(config['methods'])} methods x {len(config['seeds'])} seeds"
        + (f"; {est['reused_runs']} finished runs and {est['reused_data']} data-stage folders reused, not priced"
           if est.get("reused_runs") or est.get("reused_data") else "") + "), analysis",
        f"  training: about {_hours(est['train_job_hours'])} of job time ("
        + ", ".join(f"{d} {_hours(h)}" for d, h in est["per_dataset_job_hours"].items())
        + f"); longest job {_hours(est['longest_job_hours'])}",
        f"  analysis: about {_hours(est['eval_job_hours'])} of job time in {est['eval_jobs']} evaluate jobs (one per "
        f"run whose evaluations neither the folder nor the run store holds), about "
        f"{_hours(est['analysis_wall_hours'])} of wall time with the tables; "
        + (f"forward passes measured here for {', '.join(est['measured'])}" if est.get("measured") else "")
        + ("; " if est.get("measured") and est.get("unmeasured") else "")
        + (f"{', '.join(est['unmeasured'])} priced by MACs (measured at the first build, seconds)"
           if est.get("unmeasured") else ""),
        f"  estimated wall time: {_hours(est['wall_hours'])} (cost model x throughput "
        f"{rates['cnn_gmacs']:.1f} / {rates['lstm_gmacs']:.1f} GMAC/s CNN / LSTM, "
        f"{rates['step_overhead_s'] * 1e3:.1f} ms per step, {rates.get('source', '')}; right to about 2x)",
        *load_lines(hw["cores"], rates, wall_hours=est["wall_hours"], slots=est["slots"]),
    ]
    if packing is not None:
        lines += packing.lines()
        lines.append(f"  device time: about {_hours(est['device_hours'])} of GPU time for the training and evaluate "
                     f"jobs packed so (one job alone: {_hours(est['train_job_hours'] + est['eval_job_hours'])})"
                     + ("" if packing.speedup else "; the speed-up of K jobs is not calibrated: priced as one job "
                        "at a time"))
        need = packing.slots * int(config["threads_per_job"])
        if cores < need:
            lines.append(f"  --cores {cores} runs fewer training jobs at once than the {packing.slots} GPU slots; "
                         f"give --cores {need} (or more) to fill them")
    return "\n".join(lines)


def reused(current: Iterable[str]) -> dict[str, set[Any]]:
    """The jobs a DAG run reuses, from the folders :func:`hasfl.dag.outputs.audit` found current (``runs/<d>/<m>/
    seed<s>``, ``data/<d>/seed<s>``) and the run evaluations finished in the folder or the store
    (``evals/<d>/<m>/seed<s>/<table>``): ``{"runs": {(d, m, s)}, "data": {(d, s)}, "evals": {(d, m, s, table)}}``."""
    runs, data, evals = set(), set(), set()
    for rel in current:
        parts = rel.split("/")
        if parts[0] == "runs" and len(parts) == 4:
            runs.add((parts[1], parts[2], int(parts[3].removeprefix("seed"))))
        elif parts[0] == "data" and len(parts) == 3:
            data.add((parts[1], int(parts[2].removeprefix("seed"))))
        elif parts[0] == "evals" and len(parts) == 5:
            evals.add((parts[1], parts[2], int(parts[3].removeprefix("seed")), parts[4]))
    return {"runs": runs, "data": data, "evals": evals}


def device_of(config: Mapping[str, Any], hw: Mapping[str, Any]) -> str:
    """The device the jobs of ``config`` run on here: config ``device``, ``auto`` resolved as a job resolves it
    (:func:`hasfl.device.resolve`) by the GPUs torch confirms (``hw["gpus"]``, :func:`hardware`)."""
    device = str(config["device"])
    return resolve(device, bool(hw["gpus"])) if device == "auto" else device


def no_gpu_refusal(config: Mapping[str, Any], hw: Mapping[str, Any]) -> str:
    """Why a build whose jobs run on this machine, which has no GPU, cannot train with ``device: cuda``."""
    why = hw.get("gpu_note") or "nvidia-smi lists none"
    return (f"config key 'device' is 'cuda' but this machine has no GPU torch can use ({why}) and the jobs "
            "would run here; use device: cpu (or auto), or run on a GPU machine or a SLURM cluster "
            "(--profile profiles/slurm)")


def check(config: Mapping[str, Any], cores: int, manifests: Mapping[str, Mapping[str, Any]] | None = None,
          finished: Mapping[str, Any] | None = None, local: bool = True, hw: Mapping[str, Any] | None = None,
          packing: Any = None, measure: bool = True) -> tuple[str, str | None]:
    """The pre-flight block and, when the run should not start here, the reason (else None); ``finished``
    (:func:`reused`): what is reused and so not priced. ``local``: the jobs run on this machine
    (not a SLURM cluster's nodes), so ``device: cuda`` needs a GPU here. ``packing``: the GPU plan
    (:func:`hasfl.dag.gpu.plan`) the jobs run under. ``measure``: the models' forward passes may be measured now
    (:func:`forward_speeds`; off in a dry run)."""
    hw = hw or hardware()
    device = config["device"]
    if device == "cuda" and not hw["gpus"]:
        head = f"hasfl pre-flight: preset '{config['name']}' on {hw['cpu']} ({hw['cores']} cores, no GPU); device cuda"
        if not local:  # a cluster's nodes: each job requests a GPU there, priced by nothing measured here
            return head + ": the jobs run on the executor's nodes, each requesting a GPU (not priced here)", None
        return head, no_gpu_refusal(config, hw)
    device = device_of(config, hw)
    rates = throughput(device, int(config["threads_per_job"]), hw, measure)
    limit = float(config["execution"]["max_cpu_wall_hours"])

    def priced(speeds: Mapping[str, Any] | None) -> dict[str, Any]:
        return estimate(config, cores, rates, manifests, hw["cores"] if device == "cpu" else None, finished,
                        packing if device == "cuda" else None, speeds)

    est = priced(forward_speeds(config, device, int(config["threads_per_job"]), hw, manifests, measure=False))
    if est["unmeasured"] and measure and not (device == "cpu" and limit > 0 and est["wall_hours"] > limit):
        # a run that starts: its models' forward passes measured now (a run refused by its MACs alone is not)
        est = priced(forward_speeds(config, device, int(config["threads_per_job"]), hw, manifests, measure=True))
    block = render(config, est, rates, hw, cores, device, packing if device == "cuda" else None)
    if device == "cpu" and limit > 0 and est["wall_hours"] > limit:
        return block, (f"the estimated {_hours(est['wall_hours'])} exceed config key execution.max_cpu_wall_hours = {limit:g} "
                       f"on a machine without a GPU; preset '{config['name']}' is meant for a GPU machine or a SLURM "
                       f"cluster (docs/guide/run.md, docs/guide/slurm.md). To start it here anyway: add "
                       f"--config 'execution={{max_cpu_wall_hours: 0}}'")
    return block, None


#: Snakemake options after which no job runs (a dry run, a listing, a report, the linter, ...).
NO_JOBS = frozenset({
    "--dry-run", "--dryrun", "--lint", "--report", "--list-rules", "--list", "--summary", "--detailed-summary",
    "--dag", "--rulegraph", "--filegraph", "--d3dag", "--touch", "--cleanup-metadata", "--cm", "--unlock",
    "--list-changes", "--lc", "--list-code-changes", "--list-input-changes", "--list-params-changes",
    "--archive", "--delete-all-output", "--delete-temp-output", "--containerize", "--export-cwl",
    "--generate-unit-tests", "--list-target-rules", "--lt", "--print-compilation", "--version", "--help"})
#: Short options after which no job runs (``-n`` may come bundled, e.g. ``-np``).
NO_JOBS_SHORT = frozenset("nlStDh")


def runs_jobs(argv: Sequence[str]) -> bool:
    """Whether a Snakemake command line (``sys.argv[1:]``) would run jobs: False for a dry run, a listing, a report
    and the other modes of :data:`NO_JOBS`. Used to refuse, once and before Snakemake's job table, a run the
    pre-flight stops (a dry run goes on and shows the plan)."""
    for arg in argv:
        if arg.split("=", 1)[0] in NO_JOBS:
            return False
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1 and arg[1:].isalpha():
            if set(arg[1:]) & NO_JOBS_SHORT:
                return False
    return True
