"""The run store: every finished data stage and run kept once per identity key, owned by no results folder.

Layout (``<results_dir>`` is the config key; a preset's folder is ``<results_dir>/<name>``)::

    <results_dir>/.store/data/<key>/{partition,clients}.parquet, manifest.json
    <results_dir>/.store/runs/<key>/{rounds,clients,participation}.parquet, *.pt, run.json, timings.json, manifest.json
    <results_dir>/<name>/data/<dataset>/seed<s>/<file>          -> relative symbolic link into .store/data/<key>/
    <results_dir>/<name>/runs/<dataset>/<method>/seed<s>/<file> -> relative symbolic link into .store/runs/<key>/
    <results_dir>/.store/evals/<key>/rows.parquet, timings.json, manifest.json   (a run's rows of one table)
    <results_dir>/<name>/evals/<dataset>/<method>/seed<s>/<table>/<file> -> relative symbolic link into .store/evals/<key>/

* **Key.** A data stage's key is the digest of its identity (:func:`hasfl.dag.identity.data_identity`: dataset, seed,
  config slice, raw-file sha256, data-stage code). A run's key (:meth:`hasfl.dag.outputs.RunRecord.key`) is the digest of everything its
  bytes depend on that is known before it trains: its config slice, the key and table sha256 of the data stage it
  reads, its training code, the run whose budget it matches and the device class. A run evaluation's key
  (:func:`evaluation_identity`) is the digest of the sha256 of the run and data-stage files it reads, the table's
  config values and the code its module imports. Same key, same entry: a variant,
  a seed overlay or an estimator overlay that asks for a run of a key some folder already finished links it.
* **Write-once, verified on entry.** A job trains into ``<key>.partial/`` (a killed job resumes from the checkpoint
  there, whichever folder asked first), and the finished folder is renamed to ``<key>/`` in one step; files are
  then made read-only. Every reuse first checks each file against the entry's manifest (sha256): an entry that no
  longer matches is an error naming it, never linked.
* **One writer per entry**: an ``flock`` on ``<key>.lock``, so two folders that ask for one key at once train it
  once (the second links what the first finished).
* **Folders only hold links.** Deleting, retraining or renaming one results folder never changes what another folder
  holds; a link whose entry was removed (``hasfl gc --delete``) is missing, so its job runs again: relinked if the
  entry is back, else trained. :func:`adopt` moves the files of a folder written before the store into it (keeping
  each file's time as its link's own time, so Snakemake reruns nothing); :func:`collect` lists (and removes) entries
  no folder links to.

Torch-free at import; the job functions import the engine when they train.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hasfl.dag.identity import Checkout, canonical, digest
from hasfl.dag.outputs import (Audit, RunRecord, audit, budget_of, data_key, data_source, evaluation_identity,
                               job_record, preset_jobs)
from hasfl.integrity import (MANIFEST, NOT_WRITABLE, STORE_NAME, IntegrityError, folder_problems, read_manifest,
                             verify_folder)
from hasfl.layout import result_folders
from hasfl.registry import METHODS

__all__ = ["STORE", "Collected", "adopt", "check_store", "collect", "Repair", "Status", "repair_links", "status",
           "entry_of", "evaluate_run", "evaluation_identity", "link_problems", "linked_entry", "finished_evaluations", "in_store", "link_into", "preset_folders", "stage_data", "store_of",
           "train_run"]

#: The store's folder under ``results_dir``.
STORE = STORE_NAME  # one name: hasfl.integrity refuses any command's output inside a store by it
#: Files of a run folder that are never part of an entry (a checkpoint lives only in ``<key>.partial``).
NOT_KEPT = ("checkpoint.pt",)
#: The kinds of entries: data stages, runs and the runs' evaluations (:mod:`hasfl.analysis.evaluations`).
KINDS = ("data", "runs", "evals")

log = logging.getLogger("hasfl.store")


def store_of(results: str | Path) -> Path:
    """The store of the results folder ``results`` (``<results_dir>/<name>``): ``<results_dir>/.store``, beside the
    folder as it is named (made absolute, ``..`` folded, symbolic links kept), not beside where a link leads: a
    preset folder linked to a bigger disk (``results/quick -> /bigdisk/quick``) shares ``results/.store`` with the
    other presets, the store ``hasfl gc results`` reads (following the link gave it a store of its own
    that retrained everything). A store that is itself a link (``results/.store -> /bigdisk/.store``) is one
    store whichever way it is reached (:func:`collect` compares resolved paths)."""
    return Path(os.path.abspath(results)).parent / STORE


def _unwritable(folder: Path) -> str | None:
    """Why nothing can be written in ``folder`` (or, if it does not exist yet, made in its deepest existing
    ancestor), None if it can: a read-only file system, no write permission, a path component that is a file."""
    probe = Path(os.path.abspath(folder))
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return f"'{probe}' is not a folder"
    if os.access(probe, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"'{probe}' is on a read-only file system" if read_only else f"'{probe}' is not writable by this user"


def _store_refusal(store: Path, why: str, what: str) -> IntegrityError:
    """The error of a write the run store ``store`` cannot take (``why``: :func:`_unwritable`; ``what``: who needs
    it)."""
    return IntegrityError(f"the run store '{store}' cannot be written ({why}), and {what} needs a new entry there; "
                          "make it writable (remount it read-write, or give this user write access to it), or set "
                          "results_dir to a folder whose .store you can write. Jobs whose entry the store already "
                          "holds only link it and need no write")


@contextmanager
def _named(doing: str, path: Path, then: str) -> Iterator[None]:
    """Turn an ``OSError`` inside into an :class:`IntegrityError` saying what was done (``doing``), on which path,
    what the system said and what to do (``then``)."""
    try:
        yield
    except OSError as exc:
        where = f" ('{exc.filename}')" if exc.filename and str(exc.filename) != str(path) else ""
        raise IntegrityError(f"{doing} '{path}' failed: {exc.strerror or exc}{where}; {then}") from None


def entry_of(store: Path, kind: str, key: str) -> Path:
    """The entry folder of ``key`` (``kind``: ``data`` or ``runs``)."""
    if kind not in KINDS:
        raise ValueError(f"store entries are {', '.join(repr(k) for k in KINDS)}, not {kind!r}")
    return Path(store) / kind / key


def _open_lock(lock: Path) -> int | None:
    """A descriptor of the lock file ``lock`` (made if missing). In a store that cannot be written (a read-only file
    system, no write permission) an existing lock file is opened read-only (``flock`` needs no write access) and a
    missing one is not made (None): nobody can write such a store, so only a finished entry is linked there, and a job
    that would write one is refused (:func:`_place`). Any other failure is an :class:`IntegrityError` naming it."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno not in NOT_WRITABLE:
            raise IntegrityError(f"cannot open the run store's lock file '{lock}': {exc.strerror or exc}; expected "
                                 f"'{lock.parent}' to be a folder of the store: fix or remove what is in the "
                                 "way") from None
    try:
        return os.open(lock, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise IntegrityError(f"cannot read the run store's lock file '{lock}': {exc.strerror or exc}; give this user "
                             "read access to the store") from None


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold ``<entry>.lock`` (flock, freed by the kernel however the holder ends); in a store that cannot be written,
    the existing lock file read-only, or none (:func:`_open_lock`)."""
    fd = _open_lock(entry.with_name(entry.name + ".lock"))
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _refuse_broken(entry: Path) -> None:
    """Raise :class:`IntegrityError` when ``entry`` (a store entry or its ``.partial`` / ``.adopt`` folder) is there
    but is no folder: a symbolic link that loops or leads nowhere, a file (left alone, a symlink loop is
    recomputed, then every retry dies in :func:`_seal` with ``NotADirectoryError``). A link to a folder is followed
    as before; nothing is deleted: a link may be a disk that is not mounted."""
    if not os.path.lexists(entry) or entry.is_dir():
        return
    if entry.is_symlink():
        try:
            os.stat(entry)
            why = "does not lead to a folder"
        except OSError as exc:
            why = "loops" if exc.errno == errno.ELOOP else f"cannot be followed ({exc.strerror})"
        raise IntegrityError(f"store entry '{entry}' is a symbolic link (to '{os.readlink(entry)}') that {why}, not "
                             f"a folder of its files; delete the link (rm '{entry}') so that the next run recomputes "
                             "the entry, or point it at the folder that holds it")
    raise IntegrityError(f"store entry '{entry}' is a file, not a folder of its files; delete it so that the next run "
                         "recomputes the entry")


def finished(entry: Path) -> dict[str, Any] | None:
    """The manifest of a finished entry after checking every file it lists (None: not finished). An entry whose
    files no longer match raises :class:`IntegrityError` naming it."""
    if not (entry / MANIFEST).is_file():
        return None
    try:
        return verify_folder(entry)
    except IntegrityError as exc:
        raise IntegrityError(f"store entry '{entry}' no longer matches its manifest ({exc}); it is shared by every "
                             f"results folder that links to it: delete the entry folder so that the next run "
                             "trains it again") from None


def _seal(staging: Path, entry: Path) -> None:
    """Rename a finished ``staging`` folder to ``entry`` in one step and make its files read-only."""
    for name in NOT_KEPT:
        (staging / name).unlink(missing_ok=True)
    os.replace(staging, entry)
    for f in entry.iterdir():
        if f.is_file() and not f.is_symlink():
            f.chmod(f.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def link_into(entry: Path, dest: Path, *, keep_times: bool = False) -> list[str]:
    """Make ``dest`` hold ``entry``'s files as relative symbolic links (each placed by rename, the manifest last, so
    nothing half-linked looks finished). ``keep_times``: each link's own time is its file's (adopting a folder
    changes no time Snakemake compares). Returns the names linked."""
    entry, dest = Path(entry).resolve(), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    names = sorted(f.name for f in entry.iterdir() if f.is_file() and f.name not in NOT_KEPT and f.name != MANIFEST)
    for name in [*names, MANIFEST]:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".link", dir=dest)
        os.close(fd)
        os.unlink(tmp)
        os.symlink(os.path.relpath(entry / name, dest.resolve()), tmp)
        if keep_times:
            st = (entry / name).stat()
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        os.replace(tmp, dest / name)
    for name in NOT_KEPT:
        (dest / name).unlink(missing_ok=True)
    return [*names, MANIFEST]


def check_key(entry: Path, manifest: Mapping[str, Any], key: str, key_of: Callable[[Mapping[str, Any]], str]) -> None:
    """Refuse an entry whose manifest identity does not hash to the key it sits under (``key_of(identity)``): its
    files match its own manifest, but that manifest is another key's content (an entry copied or renamed by hand,
    a store merged from another machine), and linking it would hand a job the wrong partition or run with exit 0.

    Raises:
        IntegrityError: naming the entry, the key its content belongs to and what to do.
    """
    identity = manifest.get("identity")
    got = key_of(identity) if isinstance(identity, Mapping) else None
    if got != key:
        raise IntegrityError(f"store entry '{entry}' holds the content of another key ("
                             f"{'no identity in its manifest' if got is None else 'its identity hashes to ' + got[:16]}"
                             f", not {key[:16]}): its files match its own manifest but not the key it sits under, "
                             "so it is not this job's result; delete that entry folder (the job then recomputes it)")


def _place(store: Path, kind: str, key: str, out_dir: Path, make: Any,
           key_of: Callable[[Mapping[str, Any]], str], *, link: bool = False) -> Path:
    """The entry of ``key`` (made by ``make(staging)`` unless finished already), linked into ``out_dir``; a finished
    entry is linked only when its manifest identity hashes to ``key`` (``key_of``: :func:`check_key`). ``link``: the
    build planned a link (a link rule's job, workflow/rules/link.smk); an entry not finished by now is made all the
    same, and the log says so."""
    entry = entry_of(store, kind, key)
    staging = entry.with_name(key + ".partial")
    with entry_lock(entry):
        _refuse_broken(entry)
        done = finished(entry)
        if done is not None:
            check_key(entry, done, key, key_of)
            log.info("store: %s entry %s is finished (every file checked); linked, not recomputed", kind, key[:16])
        else:
            if link:
                log.warning("store: the build planned a link, but %s entry %s is not finished now (deleted since?): "
                            "it is made here", kind, key[:16])
            if entry.exists():  # an entry without its manifest is not one: the rename is the last step
                raise IntegrityError(f"store entry '{entry}' exists but has no {MANIFEST}; delete that folder")
            _refuse_broken(staging)
            why = _unwritable(entry.parent)
            if why is not None:  # before anything is computed
                raise _store_refusal(store, why, f"this job ('{out_dir}')")
            with _named("making the store's work folder", staging, "fix the store folder and run again"):
                staging.mkdir(parents=True, exist_ok=True)
            if not folder_problems(staging):  # a manifest, and every file it lists matches
                log.info("store: %s entry %s was finished before the job ended; sealed", kind, key[:16])
            else:
                make(staging)
            with _named("placing the finished store entry", entry, f"what was computed stays in '{staging}' (the next "
                        "run seals it without recomputing); fix the store folder and run again"):
                _seal(staging, entry)
            log.info("store: %s entry %s written", kind, key[:16])
        with _named("linking the store entry into", out_dir, "it must be a folder this user can write (the results "
                    "folder); fix it and run again"):
            link_into(entry, out_dir)  # under the entry's lock: `hasfl gc --delete` takes it before it removes one
    log.info("store: %s -> %s", out_dir, entry)
    return entry


def stage_data(data_cfg: Mapping[str, Any], seed: int, out_dir: str | Path, identity: Mapping[str, Any],
               results: str | Path, link: bool = False) -> None:
    """The data_stage job: the entry of ``identity``'s key in the store of ``results`` (the results folder; written by
    :func:`hasfl.data.stage.stage_job` unless finished), linked into ``out_dir``."""
    from hasfl.data.stage import stage_job

    _place(store_of(results), "data", data_key(identity), Path(out_dir),
           lambda staging: stage_job(data_cfg, int(seed), staging, identity), data_key, link=link)


def train_run(run_cfg: Mapping[str, Any], data_cfg: Mapping[str, Any], out_dir: str | Path, *, data_dir: str | Path,
              results: str | Path, hasfl_run: str | Path | None = None, checkpoint_every: int = 0,
              link: bool = False, code: str | None = None) -> None:
    """The train job: the entry of the run's key in the store of ``results`` (the results folder; trained by
    :func:`hasfl.fl.train.train_job` into ``<key>.partial`` unless finished), linked into ``out_dir``. ``data_dir``:
    the data-stage folder it reads. ``code``: the training-code digest the DAG planned the run with (the rule's
    params: the Snakefile's checkout); a job that would run other code (an installed package that is not that
    checkout) is refused before it trains. ``link``: the job of rule ``link_run`` (:func:`_place`)."""
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

    def train(staging: Path) -> None:
        from hasfl.fl.train import train_job

        train_job(run_cfg, data_cfg, staging, identify=record.identify, data_dir=data_dir, target=target,
                  target_diverged=diverged, checkpoint_every=int(checkpoint_every))

    _place(store_of(results), "runs", key, Path(out_dir), train, lambda ident: RunRecord.recorded(ident, source).key(),
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

        _place(store_of(results), "evals", digest(identity), out_dir / table, evaluate, digest, link=link)


def linked_entry(folder: Path) -> tuple[str, str] | None:
    """The store entry a finished results folder links (``(kind, key)``: its manifest is a link to
    ``.store/<kind>/<key>/manifest.json``), None for a folder of plain files or a link elsewhere."""
    link = Path(folder) / MANIFEST
    if not link.is_symlink():
        return None
    target = link.resolve()
    entry = target.parent
    if target.name != MANIFEST or entry.parent.name not in KINDS or entry.parent.parent.name != STORE:
        return None
    return entry.parent.name, entry.name


def link_problems(results: str | Path) -> list[str]:
    """Finished folders of ``results`` whose linked store entry holds another key's content: the manifest's identity
    does not hash to the key the folder links (an entry renamed, swapped or copied by hand after it was linked). Its
    files match its own manifest, so :func:`hasfl.integrity.verify_results` passes it; the content is another job's.
    A run's key reads its data stage (the folder's ``data/<d>/seed<s>``), an evaluation's is its identity's digest."""
    results = Path(results)
    out = []
    for kind in KINDS:
        for folder in result_folders(results, kind):
            linked = linked_entry(folder)
            manifest = _manifest_of(folder)
            if linked is None or manifest is None or linked[0] != kind:
                continue
            identity = manifest.get("identity")
            if not isinstance(identity, Mapping):
                got = None
            elif kind == "runs":
                cfg = identity.get("config") or {}
                stage = _manifest_of(results / "data" / str(cfg.get("dataset")) / f"seed{cfg.get('seed')}")
                source = (stage or {}).get("identity")
                got = RunRecord.recorded(identity, None if source is None else data_source(source)).key()
            else:
                got = (data_key if kind == "data" else digest)(identity)
            if got != linked[1]:
                rel = folder.relative_to(results).as_posix()
                out.append(f"{rel} links store entry {kind}/{linked[1][:16]}, whose manifest is another key's content "
                           f"({'no identity' if got is None else 'its identity hashes to ' + got[:16]}); delete that "
                           "entry folder and this folder (the build then recomputes it)")
    return out


# ------------------------------------------------------------------------------------------------ prediction
def in_store(config: Mapping[str, Any], results: str | Path, *, data_code: str, train_code: Any,
             device_class: str | None, eval_code: Callable[[str], str] | None = None) -> list[str]:
    """The preset's data-stage and run folders (relative to ``results``) that are not finished in ``results`` but
    whose entry is finished in the store: their jobs only link (the pre-flight does not price them). Reads manifests
    only (the job checks every file). ``train_code(method, dataset)``: the training-code digest; ``device_class``:
    what a job here would record (None: unknown before a job runs, so no run is predicted). With ``eval_code`` (the
    evaluation code digest of a per-run function), also the run evaluations (``evals/<d>/<m>/seed<s>/<table>``) of
    runs finished in ``results`` or in the store that are not finished in ``results`` but in the store."""
    from hasfl.config import data_config
    from hasfl.dag.identity import data_identity

    results = Path(results)
    store = store_of(results)
    if not store.is_dir():
        return []
    found: list[str] = []
    stages: dict[str, Mapping[str, Any]] = {}  # data folder -> the manifest of its entry
    finished_runs: dict[str, Mapping[str, Any]] = {}  # run folder -> the manifest of its entry
    data, runs = preset_jobs(config)
    for d, sd in data:
        rel = f"data/{d}/seed{sd}"
        manifest = _manifest_of(entry_of(store, "data", data_key(data_identity(data_config(config, d), sd, data_code))))
        if manifest is None:
            continue
        stages[rel] = manifest
        if not (results / rel / MANIFEST).is_file():
            found.append(rel)
    if device_class is None:
        return found
    budgets: dict[str, dict[str, Any]] = {}
    for d, m, sd in sorted(runs, key=lambda job: METHODS[job[1]].budget_of is not None):  # budget runs first
        rel, data_rel = f"runs/{d}/{m}/seed{sd}", f"data/{d}/seed{sd}"
        matched = METHODS[m].budget_of
        budget = budgets.get(f"runs/{d}/{matched}/seed{sd}") if matched else None
        if data_rel not in stages or (matched and budget is None):
            continue
        record = RunRecord.planned(config, d, m, sd, code=train_code(m, d), device_class=device_class)
        entry = entry_of(store, "runs", record.reading(stages[data_rel]).matching(budget).key())
        manifest = _manifest_of(entry)
        if manifest is None:
            continue
        finished_runs[rel] = manifest
        try:
            budgets[rel] = budget_of(entry / "run.json", m, d, sd)[2]
        except (OSError, ValueError, KeyError, TypeError, IntegrityError):
            pass
        if not (results / rel / MANIFEST).is_file():
            found.append(rel)
    if eval_code is not None:
        found += _evaluations_in_store(config, results, store, stages, finished_runs, eval_code)
    return found


def _evaluations_in_store(config: Mapping[str, Any], results: Path, store: Path, stages: Mapping[str, Any],
                          runs: Mapping[str, Any], eval_code: Callable[[str], str]) -> list[str]:
    """The run evaluations of the preset whose entry the store holds and ``results`` does not (:func:`in_store`): of
    every run finished in the store (``runs``: folder -> its entry's manifest) or in ``results``, with its data
    stage's manifest (``stages``, else the folder's)."""
    from hasfl.analysis.evaluations import EVALS, evaluation_specs

    found = []
    for d, m, sd in preset_jobs(config)[1]:
        rel, data_rel = f"runs/{d}/{m}/seed{sd}", f"data/{d}/seed{sd}"
        run = runs.get(rel) or _manifest_of(results / rel)
        stage = stages.get(data_rel) or _manifest_of(results / data_rel)
        if run is None or stage is None:
            continue
        for table, spec in evaluation_specs(config, d, m, eval_code).items():
            where = f"{EVALS}/{d}/{m}/seed{sd}/{table}"
            identity = evaluation_identity(table, spec["code"], spec["params"], run, spec["run_files"], stage,
                                           spec["data_files"])
            if (entry_of(store, "evals", digest(identity)) / MANIFEST).is_file() and not (
                    results / where / MANIFEST).is_file():
                found.append(where)
    return found


def finished_evaluations(config: Mapping[str, Any], results: str | Path,
                         eval_code: Callable[[str], str] | None = None) -> list[str]:
    """The run evaluations of the preset finished in ``results`` (``evals/<d>/<m>/seed<s>/<table>`` with a manifest;
    with ``eval_code``, only those computed by the evaluation code of this checkout): what the pre-flight does not
    price again."""
    from hasfl.analysis.artifacts import ARTIFACTS, run_tables
    from hasfl.analysis.evaluations import EVALS

    results = Path(results)
    out = []
    for d, m, sd in preset_jobs(config)[1]:
        for t in run_tables(d, m, config["datasets"], config["methods"]):
            manifest = _manifest_of(results / EVALS / d / m / f"seed{sd}" / t)
            function = ARTIFACTS[t].per_run
            if manifest is None or (eval_code is not None and function is not None
                                    and (manifest.get("identity") or {}).get("code") != eval_code(function)):
                continue
            out.append(f"{EVALS}/{d}/{m}/seed{sd}/{t}")
    return out


@dataclass
class Status(Audit):
    """Every output of a preset in one walk (:func:`status`), by folder relative to the results folder: the audit's
    ``current`` (finished, what the preset would make), ``rerun`` (finished, not what it would make: why) and
    ``errors`` (:attr:`foreign`: holds another job's output, never rerun, named), and ``in_store`` (not finished
    here, its store entry is: only linked), ``missing`` (data-stage and run folders made by a job) and ``evaluated``
    (run evaluations finished here by this checkout's code)."""

    in_store: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    evaluated: list[str] = field(default_factory=list)

    @property
    def foreign(self) -> list[str]:
        """The folders that hold another job's output (the audit's ``errors``)."""
        return self.errors

    def reused(self) -> list[str]:
        """What no job recomputes: finished here, linked from the store, or evaluated here (the pre-flight's)."""
        return [*self.current, *self.in_store, *self.evaluated]

    def counts(self) -> dict[str, int]:
        """How many folders of each status (data stages and runs; run evaluations apart; the analysis not counted)."""
        runs = [f for f in self.in_store if not f.startswith("evals/")]
        return {"current": len([f for f in self.current if f != "analysis"]),
                "rerun": len([f for f in self.rerun if f != "analysis" and not f.startswith("evals/")]),
                "evaluations rerun": len([f for f in self.rerun if f.startswith("evals/")]),
                "foreign": len(self.foreign),
                "in store": len(runs), "missing": len(self.missing), "evaluations in store": len(self.in_store)
                - len(runs), "evaluations here": len(self.evaluated)}


def status(config: Mapping[str, Any], results: str | Path, code: Checkout, *,
           device_class: str | None = None) -> Status:
    """The one walk over a preset's outputs in ``results`` that the Snakefile's session and ``hasfl verify --config``
    read, with the digests of the checkout ``code`` (:class:`hasfl.dag.identity.Checkout`): the identity audit
    (:func:`hasfl.dag.outputs.audit`: current, rerun, foreign), what the run store holds (:func:`in_store`, reading
    manifests only; runs only with a known ``device_class``), what neither holds (missing) and the run evaluations
    finished here by that code (:func:`finished_evaluations`)."""
    found = audit(config, Path(results), data_code=code.data, analysis_code=code.analysis, train_code=code.train,
                  eval_code=code.evaluation)
    linked = in_store(config, results, data_code=code.data, train_code=code.train, device_class=device_class,
                      eval_code=code.evaluation)
    found.errors += link_problems(results)
    done = {*found.current, *found.rerun, *linked}
    foreign = {e.split(" ", 1)[0] for e in found.errors}
    return Status(current=found.current, rerun=found.rerun, errors=found.errors, in_store=linked,
                  missing=[f for f in preset_folders(config) if f not in done and f not in foreign],
                  evaluated=[e for e in finished_evaluations(config, results, code.evaluation)
                             if e.rsplit("/", 1)[0] not in found.rerun])


def preset_folders(config: Mapping[str, Any]) -> list[str]:
    """The data-stage and run folders (relative to the results folder) a preset's build makes: data stages, then
    runs, each sorted (:func:`hasfl.dag.outputs.preset_jobs`)."""
    data, runs = preset_jobs(config)
    return sorted(f"data/{d}/seed{sd}" for d, sd in data) + sorted(f"runs/{d}/{m}/seed{sd}" for d, m, sd in runs)


def check_store(config: Mapping[str, Any], results: str | Path, *, linked: Iterable[str],
                rerun: Iterable[str] = ()) -> None:
    """Refuse, before any job, a build whose run store cannot be written (a read-only file system, no write
    permission) while one of its jobs would write an entry there: a folder of the preset (:func:`preset_folders`)
    neither finished in ``results`` nor finished in the store (``linked``: what :func:`in_store` found), or one the
    identity check reruns (``rerun``). A store that cannot be written but holds every entry the build needs passes:
    those jobs only link (rather than every job dying with a raw ``OSError``, link-only ones too). The session
    calls it where it opens the store, after :func:`in_store`.

    Raises:
        IntegrityError: naming the store, why it cannot be written, the folders that need it and what to do.
    """
    results = Path(results)
    store = store_of(results)
    why = _unwritable(store)
    if why is None:
        for kind in KINDS:
            why = why or (_unwritable(store / kind) if (store / kind).is_dir() else None)
    if why is None:
        return
    done, again = set(linked), set(rerun)
    pending = [f for f in preset_folders(config)
               if f in again or (f not in done and not (results / f / MANIFEST).is_file())]
    if pending:
        raise _store_refusal(store, why, f"this build ({len(pending)} data-stage and run folders of '{results}' "
                                         f"the store does not hold, e.g. {', '.join(pending[:3])})")


def _manifest_of(entry: Path) -> dict[str, Any] | None:
    try:
        return read_manifest(entry)
    except IntegrityError:
        return None  # the job names it


@dataclass(frozen=True)
class Repair:
    """What :func:`repair_links` did (or, in a dry run, would do): folders whose dangling or missing links were pointed
    again at the entry that holds their files (``relinked``), folders whose links were all removed so that their job
    runs again and links or recomputes its entry (``dropped``); of both, those holding a link whose target is gone
    (``dangling``: Snakemake cannot read such a link's time; a link that is merely missing, as a job killed while
    linking leaves, is a missing output to it)."""

    relinked: tuple[str, ...]
    dropped: tuple[str, ...]
    dangling: tuple[str, ...] = ()

    @property
    def folders(self) -> tuple[str, ...]:
        return (*self.relinked, *self.dropped)


def _entry_of_folder(folder: Path, store: Path) -> Path | None:
    """The finished store entry a linked folder's live links point at (the manifest's first), else None."""
    links = sorted((f for f in folder.iterdir() if f.is_symlink() and f.exists()), key=lambda f: f.name != MANIFEST)
    for f in links:
        target = f.resolve().parent
        if target.parent.parent == store.resolve() and (target / MANIFEST).is_file():
            return target
    return None


def repair_links(results: str | Path, *, apply: bool) -> Repair:
    """The data-stage and run folders of ``results`` with a link whose target is gone (an entry deleted by ``hasfl
    gc --delete`` or by hand, a link repointed by hand): a dangling link whose file the folder's entry still holds
    is pointed at it again (``relinked``: nothing reruns); a folder whose entry is gone loses all its links
    (``dropped``: its job then links the entry of its key, or recomputes it). Only symbolic links are touched, never a
    real file. ``apply`` False (a dry run) changes nothing and says what a run would do.

    Raises:
        IntegrityError: links point into a run store that does not exist (unmounted, moved): nothing is removed,
            the store is named.
    """
    results = Path(results)
    store = store_of(results)
    relinked, dropped, broken = [], [], []
    folders = [f for kind in ("data", "runs", "evals") for f in result_folders(results, kind)]
    if not store.is_dir():
        linked = [f for f in folders if f.is_dir() and any(p.is_symlink() for p in f.iterdir())]
        if linked:
            raise IntegrityError(f"the run store '{store}' does not exist, but {len(linked)} folders of '{results}' "
                                 f"link into it (e.g. {linked[0].relative_to(results).as_posix()}): was it moved or "
                                 "unmounted? Restore it; nothing was removed")
        return Repair((), ())
    for folder in sorted(folders):
        if not folder.is_dir():
            continue
        rel = folder.relative_to(results).as_posix()
        dangling = [f for f in folder.iterdir() if f.is_symlink() and not f.exists()]
        if dangling:
            broken.append(rel)
        entry = _entry_of_folder(folder, store)
        if entry is not None:  # a link of the entry's files removed (by an older dry run, by hand): missing too
            listed = (read_manifest(entry) or {}).get("files") or {}
            dangling += [folder / n for n in sorted(listed) if not (folder / n).is_symlink() and not (folder / n).exists()]
        if not dangling:
            continue
        if entry is not None and all((entry / f.name).is_file() for f in dangling):
            relinked.append(rel)
            if apply:
                for f in dangling:
                    f.unlink(missing_ok=True)
                    os.symlink(os.path.relpath(entry / f.name, folder.resolve()), f)
            continue
        dropped.append(rel)
        if apply:
            for f in folder.iterdir():
                if f.is_symlink():
                    f.unlink()
            if rel.startswith("evals/"):
                _drop_evaluations(folder.parent)
    return Repair(tuple(relinked), tuple(dropped), tuple(broken))


def _drop_evaluations(run_evals: Path) -> None:
    """Remove a run's evaluations folder (``evals/<dataset>/<method>/seed<s>``: the evaluate job's one output, a
    folder Snakemake takes as made while it exists) once one of its tables lost its entry, so that the job runs again
    and links or recomputes every table's entry. Only links, empty folders and Snakemake's timestamp are there; a
    real file is left where it is (and the folder with it)."""
    for f in sorted(run_evals.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if f.is_symlink() or f.name == ".snakemake_timestamp":
            f.unlink()
        elif f.is_dir() and not any(f.iterdir()):
            f.rmdir()
    if not any(run_evals.iterdir()):
        run_evals.rmdir()


def _real_files(folder: Path) -> bool:
    """Whether ``folder`` holds a finished output as files of its own (not links into the store)."""
    manifest = folder / MANIFEST
    return manifest.is_file() and not manifest.is_symlink()


def _take(src: Path, dst: Path) -> bool:
    """Put the file ``src`` at ``dst`` as a hard link (the same inode: its time and bytes, no copy), or, where the
    two are on different file systems or the system refuses hard links, as a copy with its time. Returns whether it
    copied."""
    try:
        os.link(src, dst)
        return False
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
    shutil.copy2(src, dst)
    return True


def _stage_adoption(folder: Path, staging: Path) -> None:
    """Fill ``staging`` with ``folder``'s own files (:func:`_take`); copies (another file system)
    are checked against the folder's manifest before anything of the folder is replaced."""
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    copied = False
    for f in sorted(folder.iterdir()):
        if f.is_file() and not f.is_symlink() and f.name not in NOT_KEPT:
            copied = _take(f, staging / f.name) or copied
    if copied:
        try:
            verify_folder(staging)
        except IntegrityError as exc:
            raise IntegrityError(f"copying '{folder}' into the run store ('{staging}', another file system) did not "
                                 f"give the same bytes ({exc}); nothing of '{folder}' was changed: check both disks "
                                 "and run again") from None


def _adopt_folder(folder: Path, entry: Path) -> None:
    """Move ``folder``'s files into ``entry`` (or check them against an equal finished entry) and link them back,
    each link keeping its file's time: hard links where the store is on the folder's file system, else a copy that
    is checked, then swapped in (:func:`_stage_adoption`). A store that cannot take the entry, or any other failure
    of the file system, is an :class:`IntegrityError` naming the folder and the entry."""
    store = entry.parent.parent
    with entry_lock(entry):
        _refuse_broken(entry)
        have = finished(entry)
        if have is None:
            if entry.exists():
                raise IntegrityError(f"store entry '{entry}' exists but has no {MANIFEST}; delete that folder")
            staging = entry.with_name(entry.name + ".adopt")
            _refuse_broken(staging)
            why = _unwritable(entry.parent)
            if why is not None:
                raise _store_refusal(store, why, f"adopting '{folder}'")
            with _named(f"moving the files of '{folder}' into the store entry", entry,
                        f"the files of '{folder}' are as they were; fix the store folder and run again"):
                _stage_adoption(folder, staging)
                _seal(staging, entry)
        elif have.get("files") != (read_manifest(folder) or {}).get("files"):
            raise IntegrityError(f"'{folder}' and the store entry '{entry}' of the same key hold other bytes; "
                                 "compare them (hasfl compare) before deleting either")
        with _named(f"linking the store entry '{entry}' into", folder, "the folder must be writable by this user; "
                    "its files not linked yet are as they were: fix it and run again"):
            link_into(entry, folder, keep_times=True)


def adopt(results: str | Path) -> dict[str, int]:
    """Move every finished data-stage and run folder of ``results`` that holds files of its own (written before the
    store) into the store, after checking each against its manifest; links replace the files with the same times,
    so Snakemake reruns nothing. A run whose data stage is not the one it was trained on is left as it is (the
    identity check reruns it). Returns counts."""
    results = Path(results)
    store = store_of(results)
    counts = {"data": 0, "runs": 0, "left": 0}
    data_keys: dict[str, str | None] = {}
    for folder in result_folders(results, "data"):
        manifest = verify_folder(folder) if _real_files(folder) else read_manifest(folder)
        if manifest is None:
            continue
        identity = manifest.get("identity")
        key = None if identity is None else data_key(identity)
        data_keys[folder.relative_to(results).as_posix()] = None if identity is None else data_source(identity)
        if key is not None and _real_files(folder):
            _adopt_folder(folder, entry_of(store, "data", key))
            counts["data"] += 1
    tables = {rel: {n: str(f.get("sha256")) for n, f in (read_manifest(results / rel) or {}).get("files", {}).items()}
              for rel in data_keys}
    for folder in result_folders(results, "runs"):
        if not _real_files(folder):
            continue
        manifest = verify_folder(folder)
        identity = (manifest or {}).get("identity") or {}
        data_rel = f"data/{folder.parent.parent.name}/{folder.name}"
        inputs = identity.get("inputs") or {}
        if data_keys.get(data_rel) is None or inputs != {n: tables[data_rel].get(n) for n in inputs}:
            counts["left"] += 1
            continue
        _adopt_folder(folder, entry_of(store, "runs", RunRecord.recorded(identity, data_keys[data_rel]).key()))
        counts["runs"] += 1
    return counts


# ------------------------------------------------------------------------------------------------ garbage
@dataclass
class Collected:
    """What :func:`collect` found: entries no results folder links to, their bytes, and the folders read."""

    unreferenced: list[Path] = field(default_factory=list)
    bytes: int = 0
    referenced: int = 0
    folders: list[Path] = field(default_factory=list)
    #: ``.partial`` folders nobody is writing (a killed job's checkpoint: its rerun resumes from it), kept
    #: unless asked (``partial``), and entries a job held while gc ran (left alone).
    partial: list[Path] = field(default_factory=list)
    busy: list[Path] = field(default_factory=list)
    #: what under the results folder could not be read (a folder linked to a disk that is not mounted, one this user
    #: cannot list): the entries it links look unused, so ``--delete`` refuses while there is any
    unreadable: list[str] = field(default_factory=list)


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def _used(results_dir: Path, store: Path, found: Collected | None = None) -> set[Path]:
    """The store entries (as ``store/<kind>/<key>``) some link of a folder under ``results_dir`` points to. A link
    is read from its folder's real path (a folder reached through a symbolic link, as :func:`store_of` allows) and
    also followed to the end (a store reached through a symbolic link), and counts if either lands in the store."""
    stores = (store, store.resolve())
    used: set[Path] = set()
    for folder in sorted(p for p in results_dir.iterdir() if p.name != STORE):
        if not folder.is_dir():
            if folder.is_symlink() and found is not None:  # a folder whose disk is gone: its links are unknown
                found.unreadable.append(f"'{folder}' is a link to '{os.readlink(folder)}', which is not there")
            continue
        if found is not None:
            found.folders.append(folder)

        def unreadable(exc: OSError) -> None:
            if found is not None:
                found.unreadable.append(f"'{exc.filename}' cannot be read ({exc.strerror or exc})")

        for root, dirs, files in os.walk(folder, onerror=unreadable):
            for name in [*dirs, *files]:
                link = Path(root) / name
                if not link.is_symlink():
                    continue
                text = os.path.join(os.path.realpath(link.parent), os.readlink(link))
                for target in (Path(os.path.normpath(text)), Path(os.path.realpath(link))):
                    if target.parent.parent.parent in stores:
                        used.add(store / target.parent.parent.name / target.parent.name)
    return used


@contextmanager
def _builds_held_off(results_dir: Path, folders: Iterable[Path]) -> Iterator[None]:
    """Every results folder's lock (:class:`hasfl.integrity.ResultsLock`'s file) held shared while gc deletes: a
    build holds it exclusively, so gc refuses while one runs (its jobs empty an output folder before they relink
    the entries it held: those look unused then) and no build starts until gc is done. A folder without a lock file
    has had no build."""
    from hasfl.integrity import ResultsLock

    with ExitStack() as stack:
        for folder in folders:
            lock = folder / ResultsLock.NAME
            try:
                fd = os.open(lock, os.O_RDONLY)
            except FileNotFoundError:
                continue
            stack.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
                raise IntegrityError(f"results folder '{folder}' is being written by a build ({holder}); its jobs "
                                     "relink store entries they hold now, which look unused meanwhile: run `hasfl gc "
                                     "--delete` again when it has finished (nothing was removed)") from None
        yield


@contextmanager
def _try_lock(entry: Path) -> Iterator[bool]:
    """Hold ``entry``'s lock if nobody does (yields True), else yield False at once."""
    fd = _open_lock(entry.with_name(entry.name + ".lock"))
    if fd is None:  # a store nobody can write: nobody holds a lock that was never made
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def collect(results_dir: str | Path, *, delete: bool = False, partial: bool = False) -> Collected:
    """The store entries of ``results_dir`` that no link of any folder under it points to; ``.partial`` folders
    nobody is writing (a killed job's checkpoint, ``partial``: listed apart, removed only with ``partial``); removed
    only with ``delete``. Removal is under each entry's lock, the one a job holds while it writes and links the entry
    (:func:`_place`): an entry a job holds is left alone (``busy``), and the links are read again once the locks are
    held, so an entry linked meanwhile is kept (else a just-trained entry could be deleted under a running
    DAG)."""
    results_dir = Path(results_dir).resolve()
    store = results_dir / STORE
    found = Collected()
    used = _used(results_dir, store, found)
    for kind in KINDS:
        for entry in sorted((store / kind).glob("*")) if (store / kind).is_dir() else []:
            if not entry.is_dir():
                continue
            if entry in used:
                found.referenced += 1
                continue
            if entry.suffix in (".partial", ".adopt"):
                if _locked(entry_of(store, kind, entry.name.split(".")[0])):
                    continue  # a job is writing it now
                if entry.suffix == ".partial":
                    found.partial.append(entry)
                    continue
            found.unreferenced.append(entry)
            found.bytes += _size(entry)
    if delete:
        doomed = [*found.unreferenced, *(found.partial if partial else [])]
        if doomed and found.unreadable:
            raise IntegrityError(f"'{results_dir}' holds what gc cannot read: " + "; ".join(found.unreadable)
                                 + ". The store entries linked from there would look unused, so nothing was removed: "
                                 "mount or fix it (or remove the link, if that folder is gone for good) and run `hasfl "
                                 "gc --delete` again")
        why = _unwritable(store) if doomed else None
        if why is not None:
            raise IntegrityError(f"the run store '{store}' cannot be written ({why}): its {len(doomed)} entries no "
                                 "folder links cannot be removed; make it writable and run `hasfl gc --delete` again "
                                 "(without --delete, gc only lists them)")
        with ExitStack() as stack:
            if doomed:
                stack.enter_context(_builds_held_off(results_dir, found.folders))
            held = []
            for entry in doomed:
                if stack.enter_context(_try_lock(entry.with_name(entry.name.split(".")[0]))):
                    held.append(entry)
                else:
                    found.busy.append(entry)
            again = _used(results_dir, store)  # a job may have linked one before its lock was ours
            for entry in held:
                if entry in again:
                    found.busy.append(entry)
                    continue
                with _named("removing the store entry", entry, "nothing else was removed for it; fix the store "
                            "folder and run `hasfl gc --delete` again"):
                    for f in entry.rglob("*"):
                        if f.is_file() and not f.is_symlink():  # a link's target may lie outside the store
                            f.chmod(f.stat().st_mode | stat.S_IWUSR)
                    shutil.rmtree(entry)
        # the entries' .lock files stay: a job may have one open, waiting, and a new file would be a second lock
    return found


def _locked(entry: Path) -> bool:
    """Whether a job holds ``entry``'s lock now."""
    lock = entry.with_name(entry.name + ".lock")
    if not lock.is_file():
        return False
    try:
        fd = os.open(lock, os.O_RDONLY)  # flock needs no write access: a read-only store is read as any other
    except OSError:
        return True  # unreadable: treated as held, so gc leaves it alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
