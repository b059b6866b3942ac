"""The job bodies of the DAG's data-stage, train and evaluate rules: each computes its output into the run store
(:func:`hasfl.dag.store.place`: one entry per identity key, made unless finished) and links it into the results
folder. The identities come from :mod:`hasfl.dag.outputs`; the workflow's glue scripts call these through the warm
worker (``hasfl.dag.jobs:train_run``).

Torch-free at import; the job functions import the engine when they compute.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hasfl.dag.identity import digest
from hasfl.dag.outputs import RunRecord, data_key, evaluation_identity, here, job_record, other_kernels
from hasfl.dag.store import entry_of, manifest_of, place, store_of
from hasfl.integrity import MANIFEST, IntegrityError, read_manifest, verify_folder

__all__ = ["evaluate_run", "stage_data", "train_run"]


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
    key, source = record.key(), record.data_stage
    entry = entry_of(store_of(results), "runs", key)
    finished = manifest_of(entry)
    refusal = None if finished is None else other_kernels(finished.get("identity") or {}, entry, record.device_class)
    if refusal:
        raise IntegrityError(refusal)

    def train(staging: Path) -> None:
        from hasfl.fl.train import train_job

        train_job(run_cfg, data_cfg, staging, identify=record.identify, data_dir=data_dir, target=target,
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
