"""Garbage collection of the run store (``hasfl gc``): the entries no results folder links any more, listed and,
with ``--delete``, removed under the locks the jobs and builds hold, so nothing a running build links or is about to
relink is removed, and nothing is removed while a folder that might link entries cannot be read.

Torch-free.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hasfl.dag.store import KINDS, STORE, entry_of, open_lock, named, unwritable
from hasfl.integrity import IntegrityError

__all__ = ["Collected", "collect"]


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
                raise IntegrityError(f"results folder '{folder}' is being written by a build "
                                     f"({ResultsLock.holder(fd)}); its jobs "
                                     "relink store entries they hold now, which look unused meanwhile: run `hasfl gc "
                                     "--delete` again when it has finished (nothing was removed)") from None
        yield


@contextmanager
def _try_lock(entry: Path) -> Iterator[bool]:
    """Hold ``entry``'s lock if nobody does (yields True), else yield False at once."""
    fd = open_lock(entry.with_name(entry.name + ".lock"))
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
    (:func:`place`): an entry a job holds is left alone (``busy``), and the links are read again once the locks are
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
        why = unwritable(store) if doomed else None
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
                with named("removing the store entry", entry, "nothing else was removed for it; fix the store "
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
