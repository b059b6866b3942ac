# hasfl-repro: one DAG from raw data to every table and figure of the HAS-FL paper.
#
#   snakemake --cores 4 all                                   # the paper preset (config.yaml)
#   snakemake --cores 2 all --configfile presets/quick.yaml   # offline quick preset
#
# The configuration is validated (workflow/schemas/config.schema.json plus
# cross-key rules in hasfl.config) when this file loads, before any job runs, and the
# finished results are checked against their manifests (hasfl.integrity).

import json
import os
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

from hasfl import worker as hasfl_worker
from hasfl.config import ConfigError, read_yaml, typed_command_line, validate_config
from hasfl.identity import audit as identity_audit, writable_results
from hasfl.dag import store as hasfl_store
from hasfl.integrity import IntegrityError, ResultsLock, verify_results
from hasfl import preflight
from hasfl import gpu as hasfl_gpu


def stop(exc):
    """End the run with one clear message (no traceback) and exit code 1."""
    print(f"hasfl: {exc}", file=sys.stderr)
    raise SystemExit(1)


# The base preset, read by hasfl first so an unreadable or non-UTF-8 file is named in one line
# (files given with --configfile are read by Snakemake's command line before this file runs:
# `hasfl config --config F` checks one the same way).
BASE_CONFIG = os.path.join(workflow.basedir, "config.yaml")
try:
    read_yaml(BASE_CONFIG)
except ConfigError as exc:
    stop(exc)


configfile: BASE_CONFIG


# Lists given with --config reach us as strings ('seeds=[42,43]' -> ['42', '43']): typed as a preset
# file would type them (hasfl.config.typed_command_line).
_cli = (
    getattr(getattr(workflow, "config_settings", None), "overwrite_config", None) or {}
)
config.update(typed_command_line(config, _cli))

try:
    # Snakemake reads --configfile itself, keeping the last of a key given twice: read again, strictly.
    for _file in (
        getattr(getattr(workflow, "config_settings", None), "configfiles", None) or []
    ):
        read_yaml(_file)
    validate_config(config)
except ConfigError as exc:
    stop(exc)

# Before any job: every finished data-stage and run folder still matches its manifest (an
# edited file stops the run here, before Snakemake would delete the outputs downstream of
# it), and (onstart) one writer per results folder.
RESULTS_LOCK = ResultsLock(Path(config["results_dir"]) / config["name"])
PREFLIGHT_STOP = None
if workflow.is_main_process:
    _unwritable = writable_results(Path(config["results_dir"]) / config["name"])
    if _unwritable:
        stop(
            f"results folder '{Path(config['results_dir']) / config['name']}' cannot be written: {_unwritable}; "
            "set results_dir (or name) to a folder you can write"
        )
    # links whose store entry is gone point at nothing: removed, their jobs relink or train (hasfl.dag.store)
    _gone = hasfl_store.drop_dangling(Path(config["results_dir"]) / config["name"])
    if _gone:
        print(
            f"hasfl store: {len(_gone)} folders linked store entries that are gone; they are made again: "
            + ", ".join(_gone[:5])
            + (" ..." if len(_gone) > 5 else ""),
            file=sys.stderr,
        )
    try:
        verify_results(Path(config["results_dir"]) / config["name"])
    except IntegrityError as exc:
        stop(exc)


# Local runs: one warm process (torch imported) forks the train and data-stage jobs
# (hasfl.worker); each is still its own Snakemake job with its own log and outputs.
WARM_WORKER = {"socket": None}
# Local runs on GPUs: K training jobs per GPU, each pinned to a slot's GPU, under CUDA MPS when it can
# start (hasfl.gpu; the plan is made by the pre-flight below).
GPU_PACKING = {"plan": None, "mps": None}


onstart:
    if workflow.is_main_process and PREFLIGHT_STOP:
        stop(f"not starting: {PREFLIGHT_STOP}")
    if workflow.is_main_process:
        try:
            RESULTS_LOCK.acquire()  # held until this process exits; before any job removes an output
        except IntegrityError as exc:
            stop(exc)
    if workflow.is_main_process:
        # folders written before the run store: their files move into it, links keep each file's time
        # (hasfl.dag.store.adopt; nothing reruns); then a job of any folder links what another finished
        try:
            _adopted = hasfl_store.adopt(Path(RESULTS))
        except IntegrityError as exc:
            stop(exc)
        if _adopted["data"] or _adopted["runs"]:
            print(
                f"hasfl store: {_adopted['data']} data stages and {_adopted['runs']} runs of {RESULTS} moved "
                f"into the run store {hasfl_store.store_of(RESULTS)} (links in their place, times kept)",
                file=sys.stderr,
            )
    if workflow.is_main_process:
        # only this run's plan, never one left in the environment
        os.environ.pop(hasfl_gpu.ENV_SLOTS, None)
    if GPU_PACKING["plan"] is not None and workflow.is_main_process:
        _plan = GPU_PACKING["plan"]
        if _plan.mps:
            GPU_PACKING["mps"] = hasfl_gpu.MPS(_plan.mps_dir)
            _why = GPU_PACKING["mps"].start()
            if _why:
                print(
                    f"hasfl gpu: MPS did not start ({_why}); jobs run without it",
                    file=sys.stderr,
                )
                _plan = hasfl_gpu.replace(_plan, mps=False, mps_reason=_why)
        # the training jobs take their slots from it
        os.environ[hasfl_gpu.ENV_SLOTS] = _plan.env()
    if config["warm_worker"] and workflow.local_exec and workflow.is_main_process:
        WARM_WORKER["socket"] = hasfl_worker.start_server(parent_pid=os.getpid())
        os.environ[hasfl_worker.ENV_SOCKET] = WARM_WORKER["socket"]
    if workflow.local_exec and workflow.is_main_process:
        hasfl_worker.stop_jobs_on_interrupt(
            lambda: hasfl_worker.stop_server(WARM_WORKER["socket"])
        )


onsuccess:
    hasfl_worker.stop_server(WARM_WORKER["socket"])
    if GPU_PACKING["mps"] is not None:
        GPU_PACKING["mps"].stop()
    _report = Path(config["results_dir"]) / config["name"] / "report.md"
    if workflow.is_main_process and _report.is_file():
        print(
            f"hasfl: done; the report is {_report} (HTML: snakemake --report "
            f"{_report.with_suffix('.html')} with the same --configfile)",
            file=sys.stderr,
        )


onerror:
    hasfl_worker.stop_server(WARM_WORKER["socket"])
    if GPU_PACKING["mps"] is not None:
        GPU_PACKING["mps"].stop()


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/identity.smk"


# Identity in one place (hasfl.identity.audit): every finished data-stage and run folder of the
# preset is compared with what the preset would make there -- config slice, raw-file and data-stage
# sha256 chain, budget run, code. One that differs is rerun: its job gets one more input, a rerun
# token made by rule identity_rerun (workflow/rules/identity.smk), so Snakemake reruns it (and what
# depends on it) even where it has no metadata of its own (a folder copied in); nothing is changed
# on disk when the DAG is built, so a dry run is only a dry run. A folder that holds another job's
# output is a clear error, never rerun.
if workflow.is_main_process:
    _audit = identity_audit(
        config,
        Path(RESULTS),
        data_code=SRC_DATA,
        analysis_code=SRC_ANALYSIS,
        train_code=train_code,
    )
    try:
        _audit.raise_errors()
    except IntegrityError as exc:
        stop(exc)
    if _audit.rerun:
        _lines = _audit.lines()
        print(
            f"hasfl identity: {len(_lines)} finished outputs are not what this preset would make; "
            "they are rerun:\n  "
            + "\n  ".join(_lines[:20])
            + (f"\n  ... and {len(_lines) - 20} more" if len(_lines) > 20 else ""),
            file=sys.stderr,
        )
        schedule_reruns(_audit.rerun)
    # Pre-flight (after the identity check, whose current folders are what is reused): what this run
    # costs on this machine; a run far too long for a CPU stops here.
    _manifests = {
        d: json.loads(m.read_text())
        for d in config["datasets"]
        for m in sorted((Path(RESULTS) / "data" / d).glob("seed*/manifest.json"))[:1]
    }
    _hw = preflight.hardware()
    # finished in the run store (by this or another folder): the job only links it
    _in_store = hasfl_store.in_store(
        config,
        Path(RESULTS),
        data_code=SRC_DATA,
        train_code=train_code,
        device_class="cpu" if preflight.device_of(config, _hw) == "cpu" else None,
    )
    if _in_store:
        _n_runs = sum(1 for f in _in_store if f.startswith("runs/"))
        print(
            f"hasfl store: {_n_runs} runs and {len(_in_store) - _n_runs} data stages of this preset are finished "
            f"in the run store {hasfl_store.store_of(RESULTS)}: linked, not recomputed",
            file=sys.stderr,
        )
    if workflow.local_exec and preflight.device_of(config, _hw) == "cuda":
        # K jobs per GPU (config gpu); calibrated once per device, not in a dry run
        GPU_PACKING["plan"] = hasfl_gpu.plan(
            config,
            _hw["gpus"],
            Path(RESULTS),
            preflight.CACHE,
            calibrate=preflight.runs_jobs(sys.argv[1:]),
        )
        if (
            GPU_PACKING["plan"] is not None
            and "gpu_slot" not in workflow.global_resources
        ):
            workflow.register_resource("gpu_slot", GPU_PACKING["plan"].slots)
    _block, PREFLIGHT_STOP = preflight.check(
        config,
        int(workflow._cores or 1),
        _manifests,
        preflight.reused([*_audit.current, *_in_store]),
        local=bool(workflow.local_exec),
        hw=_hw,
        packing=GPU_PACKING["plan"],
    )
    print(_block, file=sys.stderr)
    if PREFLIGHT_STOP and preflight.runs_jobs(sys.argv[1:]):
        stop(f"not starting: {PREFLIGHT_STOP}")  # once, before Snakemake's job table
    if (
        PREFLIGHT_STOP
    ):  # a dry run goes on (onstart stops a run the command line did not show)
        print(f"  a run would not start: {PREFLIGHT_STOP}", file=sys.stderr)


rule all:
    default_target: True
    input:
        data_outputs(),
        train_outputs(),
        analysis_outputs(),
        ANALYSIS_MANIFEST,
        rerun_tokens(),


rule data:
    """Only the data stage (partitions, capacities, TV) of every dataset x seed."""
    input:
        data_outputs(),
        rerun_tokens("data"),


rule runs:
    """Only the data and training stages."""
    input:
        data_outputs(),
        train_outputs(),
        rerun_tokens("data", "runs"),
