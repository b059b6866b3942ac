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
  (:func:`hasfl.dag.outputs.evaluation_identity`) is the digest of the sha256 of the run and data-stage files it reads, the table's
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
  each file's time as its link's own time, so Snakemake reruns nothing); :func:`hasfl.dag.gc.collect` lists (and
  removes) entries no folder links to.

This module keeps bytes only (entries, locks, links, repair, adoption): the jobs that fill entries are
:mod:`hasfl.dag.jobs`, the walk that says what a results folder's outputs are is :mod:`hasfl.dag.status`, the
removal of entries no folder links is :mod:`hasfl.dag.gc`.

Torch-free.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hasfl.dag.outputs import RunRecord, data_key, data_source, made_under
from hasfl.integrity import (MANIFEST, NOT_WRITABLE, STORE_NAME, IntegrityError, folder_problems, read_manifest,
                             verify_folder)
from hasfl.layout import parse_folder, result_folders

__all__ = ["KINDS", "STORE", "Repair", "adopt", "check_key", "entry_lock", "entry_of", "finished", "link_into",
           "manifest_of", "named", "open_lock", "place", "repair_links", "run_entry", "store_of", "store_refusal",
           "unwritable"]

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
    store whichever way it is reached (:func:`hasfl.dag.gc.collect` compares resolved paths)."""
    return Path(os.path.abspath(results)).parent / STORE


def unwritable(folder: Path) -> str | None:
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


def store_refusal(store: Path, why: str, what: str) -> IntegrityError:
    """The error of a write the run store ``store`` cannot take (``why``: :func:`unwritable`; ``what``: who needs
    it)."""
    return IntegrityError(f"the run store '{store}' cannot be written ({why}), and {what} needs a new entry there; "
                          "make it writable (remount it read-write, or give this user write access to it), or set "
                          "results_dir to a folder whose .store you can write. Jobs whose entry the store already "
                          "holds only link it and need no write")


@contextmanager
def named(doing: str, path: Path, then: str) -> Iterator[None]:
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


def open_lock(lock: Path) -> int | None:
    """A descriptor of the lock file ``lock`` (made if missing). In a store that cannot be written (a read-only file
    system, no write permission) an existing lock file is opened read-only (``flock`` needs no write access) and a
    missing one is not made (None): nobody can write such a store, so only a finished entry is linked there, and a job
    that would write one is refused (:func:`place`). Any other failure is an :class:`IntegrityError` naming it."""
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
    fd = open_lock(entry.with_name(entry.name + ".lock"))
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


def place(store: Path, kind: str, key: str, out_dir: Path, make: Any,
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
            why = unwritable(entry.parent)
            if why is not None:  # before anything is computed
                raise store_refusal(store, why, f"this job ('{out_dir}')")
            with named("making the store's work folder", staging, "fix the store folder and run again"):
                staging.mkdir(parents=True, exist_ok=True)
            if not folder_problems(staging):  # a manifest, and every file it lists matches
                log.info("store: %s entry %s was finished before the job ended; sealed", kind, key[:16])
            else:
                make(staging)
            with named("placing the finished store entry", entry, f"what was computed stays in '{staging}' (the next "
                        "run seals it without recomputing); fix the store folder and run again"):
                _seal(staging, entry)
            log.info("store: %s entry %s written", kind, key[:16])
        with named("linking the store entry into", out_dir, "it must be a folder this user can write (the results "
                    "folder); fix it and run again"):
            link_into(entry, out_dir)  # under the entry's lock: `hasfl gc --delete` takes it before it removes one
    log.info("store: %s -> %s", out_dir, entry)
    return entry


def manifest_of(entry: Path) -> dict[str, Any] | None:
    try:
        return read_manifest(entry)
    except IntegrityError:
        return None  # the job names it


def run_entry(store: Path, record: RunRecord) -> tuple[str, Path]:
    """The key and entry of ``store`` that serve the run ``record``: its key's entry, unless that is not finished,
    ``record`` runs on the CPU under a kernel pin, and the same run recorded as ``cpu`` (before the pin was part of
    a run's key: ``record.on("cpu")``) is finished and was made under this very pin (its timings.json:
    :func:`hasfl.dag.outputs.made_under`). That run's bytes are the ones a job of ``record`` would make, and a pinned
    build already keeps such a run in the folder that holds it; linking it into another folder is the same
    judgement (a run made under another pin, or none, is never served: the job trains under ``record``'s key).
    Reads manifests only; the job that links checks every file (:func:`place`)."""
    key = record.key()
    entry = entry_of(store, "runs", key)
    if not str(record.device_class).startswith("cpu:") or manifest_of(entry) is not None:
        return key, entry
    older = record.on("cpu").key()
    kept = entry_of(store, "runs", older)
    found = manifest_of(kept)
    if found is not None and made_under(found.get("identity") or {}, kept) == record.device_class:
        return older, kept
    return key, entry


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
            why = unwritable(entry.parent)
            if why is not None:
                raise store_refusal(store, why, f"adopting '{folder}'")
            with named(f"moving the files of '{folder}' into the store entry", entry,
                        f"the files of '{folder}' are as they were; fix the store folder and run again"):
                _stage_adoption(folder, staging)
                _seal(staging, entry)
        elif have.get("files") != (read_manifest(folder) or {}).get("files"):
            raise IntegrityError(f"'{folder}' and the store entry '{entry}' of the same key hold other bytes; "
                                 "compare them (hasfl compare) before deleting either")
        with named(f"linking the store entry '{entry}' into", folder, "the folder must be writable by this user; "
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
        named = parse_folder(folder.relative_to(results))
        if named is None or not _real_files(folder):
            continue
        manifest = verify_folder(folder)
        identity = (manifest or {}).get("identity") or {}
        data_rel = named.data
        inputs = identity.get("inputs") or {}
        if data_keys.get(data_rel) is None or inputs != {n: tables[data_rel].get(n) for n in inputs}:
            counts["left"] += 1
            continue
        _adopt_folder(folder, entry_of(store, "runs", RunRecord.recorded(identity, data_keys[data_rel]).key()))
        counts["runs"] += 1
    return counts
