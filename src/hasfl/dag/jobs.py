"""The job bodies of the DAG's data-stage, train and evaluate rules: each computes its output into the run store
(:func:`hasfl.dag.store.place`: one entry per identity key, made unless finished) and links it into the results
folder; the gate before the analysis (rule ``verify_runs``: :func:`verify_runs_job`) and ``hasfl train``'s run
outside the DAG (:func:`train_job`). The identities come from :mod:`hasfl.dag.outputs`; the workflow's glue scripts
call these through the warm worker (``hasfl.dag.jobs:train_run``).

Torch-free at import; the job functions import the engine when they compute.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.dag.identity import digest
from hasfl.dag.outputs import RunRecord, data_key, evaluation_identity, here, job_record, made_under, other_kernels
from hasfl.dag.store import manifest_of, place, run_entry, store_of
from hasfl.integrity import (MANIFEST, IntegrityError, device_mix, identity_difference, read_manifest,
                             training_code_digest, verify_folder)
from hasfl.io import InputFileError, write_json

__all__ = ["evaluate_run", "stage_data", "train_job", "train_run", "verify_runs_job"]


def stage_data(data_cfg: Mapping[str, Any], seed: int, out_dir: str | Path, identity: Mapping[str, Any],
               results: str | Path, link: bool = False) -> None:
    """The data_stage job: the entry of ``identity``'s key in the store of ``results`` (the results folder; written by
    :func:`hasfl.data.stage.stage_job` unless finished), linked into ``out_dir``."""
    from hasfl.data.stage import stage_job

    place(store_of(results), "data", data_key(identity), Path(out_dir),
           lambda staging: stage_job(data_cfg, int(seed), staging, identity), data_key, link=link)


def train_run(run_cfg: Mapping[str, Any], data_cfg: Mapping[str, Any], out_dir: str | Path, *, data_dir: str | Path,
              results: str | Path, hasfl_run: str | Path | None = None, checkpoint_every: int = 0,
              link: bool = False, code: str | None = None) -> None:
    """The train job: the entry of the run's key in the store of ``results`` (the results folder; trained by
    :func:`hasfl.fl.train.train_job` into ``<key>.partial`` unless finished), linked into ``out_dir``. ``data_dir``:
    the data-stage folder it reads. ``code``: the training-code digest the DAG planned the run with (the rule's
    params: the Snakefile's checkout); a job that would run other code (an installed package that is not that
    checkout) is refused before it trains. ``link``: the job of rule ``link_run`` (:func:`hasfl.dag.store.place`)."""
    from hasfl.integrity import training_code_digest

    data_manifest = read_manifest(Path(data_dir))
    if data_manifest is None:
        raise IntegrityError(f"data stage '{data_dir}' has no {MANIFEST}; run the data stage first")
    installed = training_code_digest(str(run_cfg["method"]), str(run_cfg["dataset"]))
    if code is not None and installed != code:
        raise IntegrityError(
            f"the training code this job runs (the installed hasfl package, digest {installed[:12]}...) is not the "
            f"code the DAG planned '{out_dir}' with (its Snakefile's checkout, {str(code)[:12]}...): the run would be "
            "recorded under the wrong code. Install that checkout (pip install -e .) or run the installed package's "
            "own Snakefile")
    # the one record of what this run is: its key here, the identity its manifest records in the job
    record, target, diverged = job_record(run_cfg, data_manifest=data_manifest, hasfl_run=hasfl_run, code=installed)
    source = record.data_stage
    key, entry = run_entry(store_of(results), record)
    finished = manifest_of(entry)
    refusal = None if finished is None else other_kernels(finished.get("identity") or {}, entry, record.device_class)
    if refusal:
        raise IntegrityError(refusal)

    def train(staging: Path) -> None:
        from hasfl.fl.train import train_job as engine_job

        engine_job(run_cfg, data_cfg, staging, identify=record.identify, data_dir=data_dir, target=target,
                  target_diverged=diverged, checkpoint_every=int(checkpoint_every))

    place(store_of(results), "runs", key, Path(out_dir), train, lambda ident: RunRecord.recorded(ident, source).key(),
           link=link)


def evaluate_run(tables: Mapping[str, Mapping[str, Any]], *, run_dir: str | Path, data_dir: str | Path,
                 out_dir: str | Path, results: str | Path, link: bool = False) -> None:
    """The evaluate job of one run: for each table of ``tables`` (name -> ``function`` (``"module:function"``),
    ``code`` (its digest), ``run_files``, ``data_files`` and ``params``), the entry of its key
    (:func:`evaluation_identity`) in the store of ``results``, computed unless finished, linked into
    ``out_dir/<table>``. The run's and the data stage's files are checked against their manifests first (the keys
    hold their sha256); the tables share the loaded dataset and model (one cache). The models are evaluated on the
    device a training job of the run's config would use here (:func:`hasfl.analysis.per_run.base.evaluation_device`;
    a GPU's evaluations are keyed by its device class)."""
    from hasfl.analysis.per_run.base import EVAL_FILE, evaluate_job, evaluation_device
    from hasfl.analysis.jobs import fixed_threads
    from hasfl.integrity import write_run_manifest
    from hasfl.io import write_json

    run_dir, data_dir, out_dir = Path(run_dir), Path(data_dir), Path(out_dir)
    names = sorted({n for spec in tables.values() for n in spec["run_files"]})
    run_manifest = verify_folder(run_dir, names)
    if run_manifest is None:
        raise IntegrityError(f"run '{run_dir}' has no {MANIFEST}; its training job has not finished")
    data_manifest = read_manifest(data_dir)
    if data_manifest is None:
        raise IntegrityError(f"data stage '{data_dir}' has no {MANIFEST}; run the data stage first")
    verify_folder(data_dir, sorted({n for spec in tables.values() for n in spec["data_files"]}))
    fixed_threads()
    device, device_class = evaluation_device(str(((run_manifest.get("identity") or {}).get("config") or {})
                                                 .get("device", "cpu")))
    device_class = here(device_class)  # on the CPU, its kernel pin: an evaluation's sums change with it as a run's
    cache: dict[Any, Any] = {}
    out_dir.mkdir(parents=True, exist_ok=True)
    for table, spec in tables.items():
        identity = evaluation_identity(table, spec["code"], spec["params"], run_manifest, spec["run_files"],
                                       data_manifest, spec["data_files"], device_class)

        def evaluate(staging: Path, spec: Mapping[str, Any] = spec, identity: dict[str, Any] = identity) -> None:
            start = time.perf_counter()
            evaluate_job(spec["function"], [str(run_dir / n) for n in spec["run_files"]], [str(data_dir / MANIFEST)],
                         spec["params"], staging / EVAL_FILE,
                         [str(data_dir / n) for n in spec["data_files"] if n != MANIFEST], cache, device)
            # its own seconds (not part of the result: unchecked, as a run's), for the pages' analysis share
            write_json(staging / "timings.json", {"total_s": time.perf_counter() - start})
            write_run_manifest(staging, [EVAL_FILE], identity)

        place(store_of(results), "evals", digest(identity), out_dir / table, evaluate, digest, link=link)


def train_job(run_cfg: Mapping[str, Any], data_cfg: Mapping[str, Any], out_dir: str | Path, *,
              data_dir: str | Path | None = None, hasfl_run: str | Path | None = None,
              checkpoint_every: int = 0, overwrite: bool = False) -> dict[str, Any]:
    """One training run from its config slices outside the DAG (``hasfl train``, the tests): its record
    (:func:`job_record`) handed to :func:`hasfl.fl.train.train_job`, which computes nothing of the identity.
    ``data_dir``: the data stage it reads (without it the engine builds the same tables in memory). Returns
    run.json's content."""
    from hasfl.fl.train import train_job as engine_job

    manifest = None
    if data_dir is not None:
        manifest = read_manifest(Path(data_dir))
        if manifest is None:
            raise InputFileError(f"input file '{Path(data_dir) / MANIFEST}' does not exist; run the data stage first")
    record, target, diverged = job_record(run_cfg, data_manifest=manifest, hasfl_run=hasfl_run)
    return engine_job(run_cfg, data_cfg, out_dir, identify=record.identify, data_dir=data_dir, target=target,
                      target_diverged=diverged, checkpoint_every=checkpoint_every, overwrite=overwrite)


def verify_runs_job(run_dirs: Sequence[str], expected: Mapping[str, Mapping[str, Any]], out_json: str,
                    code: Mapping[str, str] | None = None) -> None:
    """The DAG's gate before the analysis (rule ``verify_runs``): every run folder matches its manifest, is the run
    the preset asks for (``expected``: folder -> config slice; ``code``: ``"<dataset>/<method>"`` -> the training
    code the DAG planned with, the rule's params; without it, the installed package's), as :meth:`RunRecord.stale`
    decides, and all were trained on one device class (:func:`hasfl.integrity.device_mix`). Writes ``out_json``
    (folder -> identity digest)."""
    expected = {Path(k).as_posix(): v for k, v in expected.items()}
    codes: dict[tuple[str, str], str] = {
        (m, d): str(c) for dm, c in (code or {}).items() for d, m in [str(dm).split("/", 1)]}
    identities = {}
    classes: dict[str, list[str]] = {}
    for folder in map(Path, run_dirs):
        manifest = verify_folder(folder)
        if manifest is None:
            raise IntegrityError(f"run folder '{folder}' has no {MANIFEST}: the run did not finish")
        identity = manifest.get("identity", {})
        want = expected[folder.as_posix()]
        key = (str(want["method"]), str(want["dataset"]))
        record = RunRecord(want, codes.setdefault(key, training_code_digest(*key)))
        stale = record.stale(identity)
        if stale == "config":
            have, planned = record.compared(identity)
            diff = identity_difference({"config": have}, {"config": planned})
            raise IntegrityError(
                f"run folder '{folder}' holds a run of another configuration ({', '.join(diff)} differ from the "
                f"preset's), e.g. written by `hasfl train --out`; the analysis will not mix it in. Delete the "
                f"folder to train it again with the preset's configuration")
        if stale == "code":
            raise IntegrityError(
                f"run folder '{folder}' was trained by other training code than this DAG's (code digest "
                f"{str(identity.get('code'))[:12]}... vs {record.code[:12]}...); rerun it (snakemake --forcerun "
                "train) or restore the code it was trained with")
        identities[folder.as_posix()] = identity.get("digest")
        made = made_under(identity, folder) if identity.get("device_class") else "unrecorded"
        classes.setdefault(made, []).append(folder.as_posix())
    mixed = device_mix(classes)
    if mixed:
        raise IntegrityError(mixed)
    write_json(out_json, identities)
