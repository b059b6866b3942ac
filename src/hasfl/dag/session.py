"""The DAG session: everything the Snakefile does around its rules, in one object.

``SESSION = Session(workflow, config)`` in the Snakefile, before its rules are included, does in order:

1. types ``--config`` lists as a preset file would, rereads every ``--configfile`` strictly and validates the merged
   config (:func:`hasfl.config.validate_config`), naming the key of every violation;
2. in the main process only: checks the results folder can be written, removes links whose store entry is gone
   (:func:`hasfl.dag.store.repair_links`: relinked from the entry that holds the file, or dropped so the job
   links or recomputes its entry; a dry run changes nothing), runs the identity check (:func:`hasfl.dag.outputs.audit`:
   what is stale gets a rerun token), counts what the run store holds (:attr:`hasfl.dag.status.Status.in_store`),
   plans the GPU packing (:mod:`hasfl.dag.gpu`) and prints the pre-flight (:mod:`hasfl.dag.preflight`), stopping a run
   it refuses before Snakemake's job table; then, for a command that runs jobs in an existing results folder, takes
   the results lock and moves a folder written before the store into it (:func:`hasfl.dag.store.adopt`).

The parse reads manifests only (the walk needs them to plan reruns and links). What reads result files' bytes or
writes (the check of every finished file against its manifest, :func:`hasfl.integrity.verify_results`; the
pre-flight's measurements and their cache) happens at ``onstart``, before any job, or not in a dry run at all: a
dry run (``snakemake -n``) reads no result file and writes nothing.

Every code digest the rules carry is computed here, once, with one meaning (:attr:`data_code`,
:attr:`analysis_code`, :meth:`train_code`). The rules read the session only through methods (:meth:`rerun_input`,
:meth:`rerun_tokens`, :meth:`rerun_why`, :meth:`gpu_slot`), after it is complete. ``onstart`` / ``onsuccess`` /
``onerror`` call :meth:`on_start` (the results lock and adoption, if the build did not take them: once per session;
MPS, the warm worker) and :meth:`on_exit`.

Torch-free (the Snakefile imports it).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from hasfl.dag import gpu as hasfl_gpu
from hasfl.dag import preflight
from hasfl.dag import worker as hasfl_worker
from hasfl.config import (ConfigError, canonical_numbers, deep_merge, read_yaml, typed_command_line, validate_config,
                          with_method_defaults)
from hasfl.dag import status as walk
from hasfl.dag import store
from hasfl.dag.identity import Checkout, checkout_root, run_slice, writable_results
from hasfl.dag.outputs import cpu_class, keyed_config
from hasfl.errors import HasflError
from hasfl.integrity import IntegrityError, ResultsLock, verify_results
from hasfl.layout import MANIFEST, Folder, eval_folder, finished_folders, parse_folder
from hasfl.logs import cap_console, console_width

__all__ = ["Session", "base_config", "stop"]


def stop(exc: object) -> NoReturn:
    """End the run with one clear message (no traceback) and exit code 1."""
    print(f"hasfl: {exc}", file=sys.stderr)
    raise SystemExit(1)


#: The environment variable the report job reads the DAG's config files from (workflow/scripts/report.py).
ENV_CONFIGFILES = "HASFL_CONFIGFILES"


def base_config(basedir: str | Path) -> str:
    """The base preset ``config.yaml`` beside the Snakefile, read by hasfl first so an unreadable or non-UTF-8 file is
    named in one line (files given with ``--configfile`` are read by Snakemake's command line before the Snakefile
    runs: ``hasfl config --config F`` checks one the same way)."""
    path = os.path.join(str(basedir), "config.yaml")
    try:
        read_yaml(path)
    except ConfigError as exc:
        stop(exc)
    return path


def _named(folders: Sequence[str], shown: int = 5) -> str:
    """The first ``shown`` of ``folders``, comma-separated, with `` ...`` when there are more."""
    return ", ".join(folders[:shown]) + (" ..." if len(folders) > shown else "")


class Session:
    """One DAG build: the validated config, the digests, the identity check's reruns, the GPU plan, and the
    handlers around the jobs (module docstring)."""

    def __init__(self, workflow: Any, config: dict[str, Any]) -> None:
        self.workflow, self.config = workflow, config
        self.basedir = Path(workflow.basedir)
        self.main = bool(workflow.is_main_process)
        # Snakemake's job blocks list every input of a job on one line (15,000 characters for a table over every
        # run): its console lines are cut to a terminal's width (HASFL_CONSOLE_WIDTH, 0: whole), its log file keeps
        # them whole
        try:
            width = console_width()
        except ValueError as exc:
            stop(exc)
        if width:
            cap_console(logging.getLogger("snakemake.logging"), width)
        self._validate()
        #: the results folder as the rules spell it (Snakemake matches paths as text)
        self.results = f"{config['results_dir']}/{config['name']}"
        self.rerun_dir = f"{self.results}/.hasfl/rerun"
        #: whether the command line runs jobs (not a dry run, a listing, a report: :func:`preflight.runs_jobs`, read
        #: once here: the executor that knows it is set only after the parse)
        self.runs_jobs = preflight.runs_jobs(sys.argv[1:])
        #: folders the link repair handles (their files are checked by their jobs, not at ``onstart``)
        self._repaired: tuple[str, ...] = ()
        self.reruns: dict[str, tuple[str, str]] = {}  # folder -> (token, why)
        self.plan: Any = None
        self.refusal: str | None = None
        #: why the build cannot start if its jobs run on this machine (decided at ``onstart``, once the executor is set)
        self.refusal_here: str | None = None
        #: the one walk over the preset's outputs (:func:`hasfl.dag.status.status`), None until the main process made it
        self.status: walk.Status | None = None
        #: the folders whose output the run store holds (data/<d>/seed<s>, runs/<d>/<m>/seed<s>, evals/<d>/<m>/seed<s>):
        #: their jobs are the link rules' (workflow/rules/link.smk), so the job table says what will happen
        self.linked: set[str] = set()
        #: ``cpu`` when this build's jobs run on a CPU (``device: cpu``, or local execution without a GPU for ``device:
        #: auto``), else None (a cluster's nodes may have one, or a GPU here): with it, what changes no CPU byte is keyed at its default
        #: (:data:`hasfl.dag.outputs.INERT_ON`) in the rules' params and the analysis identity, as in the store keys
        self.device_class: str | None = None
        self._hw: Any = None
        self._lock = ResultsLock(Path(self.results))
        self._mps: Any = None
        self._socket: str | None = None
        try:  # every code digest from the Snakefile's checkout, refused if it lacks a code path
            self.checkout = checkout_root(self.basedir)
        except HasflError as exc:
            stop(exc)
        self.code = Checkout(self.checkout)
        self.data_code, self.analysis_code = self.code.data, self.code.analysis
        if self.main:
            self._prepare()

    # ------------------------------------------------------------------------------------------- digests
    def train_code(self, method: str, dataset: str) -> str:
        """The training code of a run of ``method`` on ``dataset`` in this checkout (:class:`Checkout`): the meaning the
        run's identity, its store key, the gate and the audit share."""
        return self.code.train(method, dataset)

    def eval_code(self, function: str, method: str, dataset: str) -> str:
        """The code of a per-run evaluation (``"module:function"``) of a run of ``method`` on ``dataset`` in this
        checkout (:class:`Checkout`): part of the evaluation's store key, and its rule's param."""
        return self.code.evaluation(function, method, dataset)

    # ------------------------------------------------------------------------------------------- what rules read
    def rerun_input(self, folder: str) -> dict[str, str]:
        """``{"rerun": <token>}`` when the finished output in ``folder`` must be rerun, else ``{}``."""
        return {"rerun": self.reruns[folder][0]} if folder in self.reruns else {}

    def rerun_tokens(self, *kinds: str) -> list[str]:
        """The rerun tokens of this build: of the folders of ``kinds`` (``data``, ``runs``, ``analysis``), or all."""
        return [token for folder, (token, _) in sorted(self.reruns.items())
                if not kinds or folder.split("/")[0] in kinds]

    def rerun_why(self, folder: str) -> str:
        """Why ``folder`` is rerun (the token's content)."""
        return self.reruns.get(folder, (None, "unknown"))[1]

    def link_pattern(self, kind: str) -> str:
        """The regex of the folders of ``kind`` (``data``, ``runs``, ``evals``; without the kind) whose job only links
        a finished store entry: the link rules' wildcard constraint. In a job's own Snakemake process (a cluster job:
        no session) any folder of the kind, so the job's rule is found; a rule order prefers the link rule only where
        the main process planned one."""
        if not self.main:
            return r"[^/]+(/[^/]+)?/seed\d+"
        folders = sorted(f.split("/", 1)[1] for f in self.linked if f.split("/", 1)[0] == kind)
        return "|".join(re.escape(f) for f in folders) or "(?!)"  # (?!) matches nothing

    def gpu_slot(self) -> int:
        """1 when training jobs take one of the G x K local GPU slots (:mod:`hasfl.dag.gpu`), else 0 (also on a cluster
        executor: read when Snakemake builds the DAG, after it set the executor)."""
        return 1 if self.plan is not None and self.workflow.local_exec else 0

    # ------------------------------------------------------------------------------------------- the build
    def _validate(self) -> None:
        settings = getattr(self.workflow, "config_settings", None)
        # what --config gives reaches us as strings inside lists and mappings ('seeds=[42,43]' -> ['42', '43']);
        # settings.config holds only --config (overwrite_config also holds the --configfile files, typed already)
        self.config.update(typed_command_line(self.config, getattr(settings, "config", None) or {}))
        try:
            # Snakemake reads --configfile itself, keeping the last of a key given twice and dropping an empty
            # mapping given for a list or a number (``seeds: {}``): read again, strictly, and merge as a preset is
            # merged (hasfl.config.deep_merge); both must be valid
            ours = read_yaml(base_config(self.basedir))
            files = [str(p) for p in getattr(settings, "configfiles", None) or []]
            for path in files:
                ours = deep_merge(ours, read_yaml(path))
            # the command on report.md (provenance, as the commit: not a param, so it reruns nothing); jobs
            # inherit the environment (the warm worker is started after this, SLURM exports it)
            base = os.path.abspath(str(self.basedir)) + os.sep
            os.environ[ENV_CONFIGFILES] = json.dumps(
                [os.path.relpath(f, self.basedir) if os.path.abspath(f).startswith(base) else f for f in files])
            cli = getattr(settings, "config", None) or {}
            validate_config(with_method_defaults(deep_merge(ours, typed_command_line(cli, cli))))
            self.config.update(with_method_defaults(self.config))
            validate_config(self.config)
        except ConfigError as exc:
            stop(exc)
        # equal numbers, equal identities: an integer where the schema says number is read as the float it equals
        self.config.update(canonical_numbers(self.config))

    def run_cfg(self, dataset: str, method: str, seed: int | str) -> dict[str, Any]:
        """The config slice a run's job receives (the train rules' param): :func:`hasfl.dag.identity.run_slice`, keyed
        on this build's device class (:func:`hasfl.dag.outputs.keyed_config`): with ``device: auto`` on a CPU machine,
        ``cuda_deterministic`` changes no byte and reruns nothing."""
        return keyed_config(run_slice(self.config, dataset, method, int(seed)), self.device_class)

    def identity_config(self) -> dict[str, Any]:
        """The config the analysis identity is made of, keyed on this build's device class as :meth:`run_cfg`."""
        return keyed_config(self.config, self.device_class)

    def _prepare(self) -> None:
        results = Path(self.results)
        self._hw = preflight.hardware(probe=self.runs_jobs)
        if self.config["device"] == "cpu" or (self.workflow.local_exec
                                              and preflight.device_of(self.config, self._hw) == "cpu"):
            self.device_class = cpu_class()  # the kernel pin of this process is the jobs' (they inherit it)
        unwritable = writable_results(results)
        if unwritable:
            stop(f"results folder '{results}' cannot be written: {unwritable}; set results_dir (or name) to a folder "
                 "you can write")
        dry = not self.runs_jobs
        try:
            repair = store.repair_links(results, apply=not dry)
        except IntegrityError as exc:
            stop(exc)
        would = "would be " if dry else ""
        for what, folders in (("pointed again at the store entry that holds their files", repair.relinked),
                              ("made again (their store entry is gone: linked from the store or recomputed)",
                               repair.dropped)):
            if folders:
                print(f"hasfl store: {len(folders)} folders with missing links or links whose target is gone "
                      f"{would}{what}: {_named(folders)}" + (" (a dry run changes nothing)" if dry else ""),
                      file=sys.stderr)
        if dry and repair.dangling:
            # Snakemake cannot read the time of a dangling link ("unable to obtain modification time"): a dry run
            # that left them would fail later with that; one that repaired them would change the results folder. A
            # link that is only missing (a job killed while linking; `snakemake --unlock` must go on after that) is a
            # missing output Snakemake plans over
            stop(f"this dry run changes nothing, and Snakemake cannot plan over links whose target is gone "
                 f"({len(repair.dangling)} folders: {_named(repair.dangling)}): run the same command without -n, "
                 "which repairs them "
                 "first (relinks from the store, or makes them again), then plan")
        self._repaired = tuple(repair.folders)
        try:
            # the one walk over the preset's outputs: current, rerun (why), foreign, in the store, missing
            found = walk.status(self.identity_config(), results, self.code, device_class=self.device_class)
            self.status = found
            found.raise_errors()
        except IntegrityError as exc:
            stop(exc)
        if found.rerun:
            lines = found.lines()
            print(f"hasfl identity: {len(lines)} finished outputs are not what this preset would make; they are "
                  "rerun:\n  " + "\n  ".join(lines[:20])
                  + (f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else ""), file=sys.stderr)
            stamp = time.time_ns()  # one token per build: a dry run writes nothing, the next build makes its own
            self.reruns = {folder: (f"{self.rerun_dir}/{folder}.{stamp}.json", why)
                           for folder, why in found.rerun.items()}
        self._preflight(found)
        if results.is_dir() and self.runs_jobs:
            # at the build, once the pre-flight let the run go: a run with nothing to do never reaches ``onstart``,
            # and a folder left outside the store is one no variant can link
            self._lock_and_adopt()

    def _preflight(self, found: walk.Status) -> None:
        """What this run costs here (after the identity check and the store, whose outputs are reused); a run far
        too long for a CPU stops here, once, before Snakemake's job table."""
        config, results, wf = self.config, Path(self.results), self.workflow
        hw = self._hw
        device = preflight.device_of(config, hw)
        linked = found.in_store
        if self.runs_jobs:
            try:  # a store that cannot be written is named before any job, unless every job only links
                walk.check_store(config, results, linked=linked, rerun=self.reruns)
            except IntegrityError as exc:
                stop(exc)
        self.linked = self._link_jobs(linked)
        if linked:
            n = {kind: sum(1 for f in linked if f.startswith(kind + "/")) for kind in ("runs", "data", "evals")}
            evals = f" and {n['evals']} run evaluations" if n["evals"] else ""
            print(f"hasfl store: {n['runs']} runs, {n['data']} data stages{evals} of this preset are finished in the "
                  f"run store {store.store_of(results)}: linked, not recomputed", file=sys.stderr)
        if wf.local_exec and device == "cuda":
            # K jobs per GPU (config gpu); calibrated once per device, not in a dry run
            self.plan = hasfl_gpu.plan(config, hw["gpus"], results, preflight.CACHE,
                                       calibrate=self.runs_jobs)
            if self.plan is not None and "gpu_slot" not in wf.global_resources:
                wf.register_resource("gpu_slot", self.plan.slots)
        manifests: Mapping[str, Any] = {
            f.parent.name: json.loads((f / MANIFEST).read_text()) for f in reversed(finished_folders(results, "data"))
            if f.parent.name in config["datasets"]}  # each dataset's first seed
        # Snakemake parses the Snakefile before it sets the executor (workflow.local_exec is True during the whole
        # parse): where the jobs of a GPU build on a machine without one run is known only at ``onstart``, so that
        # refusal waits for it (:meth:`on_start`), and the plan prices nothing here
        no_gpu_here = config["device"] == "cuda" and not hw["gpus"]
        self.refusal_here = preflight.no_gpu_refusal(config, hw) if no_gpu_here else None
        try:
            block, self.refusal = preflight.check(config, int(wf._cores or 1), manifests,
                                                  preflight.reused(found.reused()),
                                                  local=not no_gpu_here,
                                                  hw=hw, packing=self.plan,
                                                  measure=self.runs_jobs)
        except HasflError as exc:
            stop(exc)
        print(block, file=sys.stderr)
        if self.refusal_here:
            print(f"  with a cluster executor (--executor slurm, --workflow-profile profiles/slurm) each job requests "
                  f"a GPU on its node; run on this machine, the build stops at its start: {self.refusal_here}",
                  file=sys.stderr)
        if self.refusal and self.runs_jobs:
            stop(f"not starting: {self.refusal}")
        if self.refusal:  # a dry run goes on (on_start stops a run the command line did not show)
            print(f"  a run would not start: {self.refusal}", file=sys.stderr)

    def _link_jobs(self, linked: list[str]) -> set[str]:
        """The job folders of ``linked`` (:attr:`hasfl.dag.status.Status.in_store`) whose job only links: a data
        stage or run the store holds; a run's evaluations when the store holds every table's and neither the run nor
        its data stage is rerun (the evaluate job's keys read their files)."""
        from hasfl.analysis.evaluations import evaluation_specs

        jobs: set[str] = set()
        tables: dict[Folder, set[str]] = {}  # a run's evaluations job -> the tables the store holds
        for f in linked:
            named = parse_folder(f)
            if named is None or named.kind != "evals":
                jobs.add(f)
            else:
                tables.setdefault(replace(named, table=None), set()).add(str(named.table))
        for job, held in tables.items():
            if job.run in self.reruns or job.data in self.reruns:
                continue
            if held >= set(evaluation_specs(self.config, job.dataset, str(job.method), self.eval_code)):
                jobs.add(eval_folder(job.dataset, str(job.method), job.seed))
        return jobs

    # ------------------------------------------------------------------------------------------- around the jobs
    def _lock_and_adopt(self) -> None:
        """Take the results lock (one writer; held until this process exits, before any job removes an output) and
        move a folder written before the store into it (:func:`hasfl.dag.store.adopt`: links keep their files'
        times, so nothing reruns). Once per session."""
        if self._lock.held:
            return
        try:
            self._lock.acquire()
            adopted = store.adopt(Path(self.results))
        except IntegrityError as exc:
            stop(exc)
        if adopted["data"] or adopted["runs"]:
            print(f"hasfl store: {adopted['data']} data stages and {adopted['runs']} runs of {self.results} moved "
                  f"into the run store {store.store_of(self.results)} (links in their place, times kept)",
                  file=sys.stderr)

    def start_refusal(self) -> str | None:
        """Why the build must not start, decided at ``onstart``, once Snakemake has set its executor: the pre-flight's
        refusal, or that of a GPU build on a machine without one whose jobs would run here (local execution)."""
        return self.refusal or (self.refusal_here if self.workflow.local_exec else None)

    def on_start(self) -> None:
        """``onstart``: the results lock and adoption (if the build has not taken them), the GPU slots and MPS, the
        warm worker."""
        if not self.main:
            return
        why = self.start_refusal()
        if why:
            stop(f"not starting: {why}")
        self._lock_and_adopt()  # taken at the build already, unless the command line did not look like a run
        try:
            # an edited file stops here, before any job (Snakemake deletes a job's old outputs when the job starts);
            # a folder the link repair handled is no edit
            verify_results(Path(self.results), skip=self._repaired)
        except IntegrityError as exc:
            stop(exc)
        os.environ.pop(hasfl_gpu.ENV_SLOTS, None)  # only this run's plan, never one left in the environment
        if self.plan is not None and self.workflow.local_exec:  # a cluster's nodes are not this machine's GPUs
            plan = self.plan
            if plan.mps:
                self._mps = hasfl_gpu.MPS(plan.mps_dir)
                why = self._mps.start()
                if why:
                    print(f"hasfl gpu: MPS did not start ({why}); jobs run without it", file=sys.stderr)
                    plan = hasfl_gpu.replace(plan, mps=False, mps_reason=why)
            os.environ[hasfl_gpu.ENV_SLOTS] = plan.env()  # the training jobs take their slots from it
        if self.workflow.local_exec:
            if self.config["execution"]["warm_worker"]:
                self._socket = hasfl_worker.start_server(parent_pid=os.getpid())
                os.environ[hasfl_worker.ENV_SOCKET] = self._socket
            hasfl_worker.stop_jobs_on_interrupt(lambda: hasfl_worker.stop_server(self._socket))

    def on_exit(self, *, success: bool) -> None:
        """``onsuccess`` / ``onerror``: stop the warm worker and MPS; on success name the report."""
        hasfl_worker.stop_server(self._socket)
        if self._mps is not None:
            self._mps.stop()
        report = Path(self.results) / "report.md"
        if success and self.main and report.is_file():
            print(f"hasfl: done; the report is {report} (HTML: snakemake --report {report.with_suffix('.html')} "
                  "with the same --configfile)", file=sys.stderr)
