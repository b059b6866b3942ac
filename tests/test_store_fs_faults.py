"""The run store on file systems that are not one plain writable disk (issue 46 faults 7, 11, 12, 13, 14): a results
folder reached through a symbolic link, an entry replaced by a symlink loop, a store on another file system than the
folder it adopts, a read-only store and a read-only results folder. In-process on the digits data stage (seconds), no
Snakemake; real symlinks, real mounts (as root: a read-only bind mount and a tmpfs, since chmod does not stop root),
real flock.
"""

from __future__ import annotations

import copy
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hasfl.config import data_config, load_config
from hasfl.dag.identity import data_identity
from hasfl.dag.outputs import data_key
from hasfl.dag.jobs import stage_data
from hasfl.dag.gc import collect
from hasfl.dag.store import adopt, entry_of, store_of
from hasfl.errors import HasflError
from hasfl.integrity import ResultsLock, verify_folder, write_run_manifest

REPO = Path(__file__).resolve().parents[1]
DATA = "data/digits/seed42"


# --------------------------------------------------------------------------- real file-system conditions
def _mount(*args: str) -> bool:
    """Run ``mount`` / ``umount`` (root only); whether it worked."""
    return subprocess.run(list(args), capture_output=True).returncode == 0


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` made read-only for real while inside: as root (whom chmod does not stop) a read-only bind mount of
    ``path`` onto itself (writes fail with EROFS); otherwise every file and folder under it loses its write bits
    (EACCES)."""
    if os.geteuid() == 0:
        if not _mount("mount", "--bind", str(path), str(path)):
            pytest.skip("root, but `mount --bind` does not work here: no read-only file system can be made")
        try:
            if not _mount("mount", "-o", "remount,ro,bind", str(path)):
                pytest.skip("root, but a bind mount cannot be remounted read-only here")
            yield
        finally:
            _mount("umount", str(path))
        return
    modes = {p: p.lstat().st_mode for p in [path, *path.rglob("*")] if not p.is_symlink()}
    for p, mode in sorted(modes.items(), key=lambda pm: len(pm[0].parts), reverse=True):
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield
    finally:
        for p, mode in sorted(modes.items(), key=lambda pm: len(pm[0].parts)):
            p.chmod(mode)


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    """A writable folder on another file system than ``tmp_path``: a tmpfs mounted under it (root), else a folder in
    /dev/shm when that is another device; skipped (with the reason) when neither exists."""
    here = os.stat(tmp_path).st_dev
    mnt = tmp_path / "otherfs"
    mnt.mkdir()
    if os.geteuid() == 0 and _mount("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)):
        try:
            yield mnt
        finally:
            _mount("umount", str(mnt))
        return
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and os.stat(shm).st_dev != here:
        folder = Path(tempfile.mkdtemp(dir=shm, prefix="hasfl-test-"))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    pytest.skip("no second file system: not root (no tmpfs mount) and /dev/shm is on the same device as the tests")


# --------------------------------------------------------------------------- a finished data stage
def _digits(alpha: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The quick preset's digits data-stage slice (``alpha``: another partition, another key) and its identity."""
    cfg = copy.deepcopy(load_config(REPO / "presets" / "quick.yaml"))
    if alpha is not None:
        cfg["partition"]["alpha"] = alpha
    dc = data_config(cfg, "digits")
    return dc, data_identity(dc, 42, "test-code")


def _stage(results: Path, alpha: float | None = None) -> Path:
    """The digits data stage of ``results`` (the store's entry, linked into ``results/data/digits/seed42``)."""
    dc, ident = _digits(alpha)
    stage_data(dc, 42, results / DATA, ident, results)
    return results / DATA


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``results/quick`` with its digits data stage finished in ``results/.store`` (made once; tests copy it)."""
    root = tmp_path_factory.mktemp("template")
    (root / "results" / "quick").mkdir(parents=True)
    _stage(root / "results" / "quick")
    return root


@pytest.fixture
def results(template: Path, tmp_path: Path) -> Path:
    """A copy of :func:`template`'s ``results`` folder (links and lock files as they were)."""
    shutil.copytree(template / "results", tmp_path / "results", symlinks=True)
    return tmp_path / "results"


def _entry(results: Path, alpha: float | None = None) -> Path:
    return entry_of(results / ".store", "data", data_key(_digits(alpha)[1]))


def _remove(folder: Path) -> None:
    """Delete a store entry (its files are read-only)."""
    for f in folder.iterdir():
        f.chmod(0o644)
    shutil.rmtree(folder)


# --------------------------------------------------------------------------- fault 7: a symlinked results folder
def test_a_results_folder_reached_through_a_symlink_links_the_store_beside_its_name(results, tmp_path):
    """results/quick2 -> bigdisk/quick2 (a bigger disk): its jobs link what results/.store holds. Before, the store
    was found from the resolved path (bigdisk/.store), a second store that recomputed everything."""
    big = tmp_path / "bigdisk" / "quick2"
    big.mkdir(parents=True)
    (results / "quick2").symlink_to(big)
    assert store_of(results / "quick2") == Path(os.path.abspath(results / ".store"))
    folder = _stage(results / "quick2")
    assert not (tmp_path / "bigdisk" / ".store").exists(), "a second store was made beside the link's target"
    assert [p.name for p in (results / ".store" / "data").iterdir() if p.is_dir()] == [_entry(results).name]
    assert (folder / "manifest.json").resolve().parent == _entry(results).resolve()
    assert verify_folder(folder) is not None
    # gc reads the links of the symlinked folder: with results/quick gone, its entry is still linked, so kept
    shutil.rmtree(results / "quick")
    found = collect(results, delete=True)
    assert found.referenced == 1 and not found.unreferenced
    assert verify_folder(folder) is not None


def test_gc_keeps_the_entries_of_a_store_reached_through_a_symlink(results, tmp_path):
    """results/.store -> bigdisk/.store: `hasfl gc --delete` deleted every entry (the links' targets were compared
    with the store's unresolved path); now linked entries are kept, whichever way the store is reached."""
    big = tmp_path / "bigdisk"
    big.mkdir()
    shutil.move(str(results / ".store"), str(big / ".store"))
    (results / ".store").symlink_to(big / ".store")
    folder = results / "quick" / DATA
    for f in folder.iterdir():  # the links, made again through the symlinked store (as a job there makes them)
        f.unlink()
    _stage(results / "quick")
    found = collect(results, delete=True)
    assert found.referenced == 1 and not found.unreferenced
    assert _entry(results).is_dir() and verify_folder(folder) is not None


# --------------------------------------------------------------------------- fault 11: an entry that is a symlink loop
def test_an_entry_replaced_by_a_symlink_loop_is_named_not_retrained(results):
    """Before: the job recomputed the entry, then died in _seal with NotADirectoryError, on every retry. Now the
    job stops before computing anything, naming the entry and what to do; done that, the next run recomputes it."""
    entry = _entry(results)
    _remove(entry)
    entry.symlink_to(entry.name)  # a link to itself: ELOOP
    variant = results / "variant"
    for _ in range(2):  # the same message at every retry
        with pytest.raises(HasflError, match="symbolic link") as err:
            _stage(variant)
        assert str(entry) in str(err.value) and "delete" in str(err.value)
        assert not entry.with_name(entry.name + ".partial").exists(), "nothing is computed for a broken entry"
    entry.unlink()  # what the message says
    folder = _stage(variant)
    assert entry.is_dir() and not entry.is_symlink() and verify_folder(folder) is not None


# --------------------------------------------------------------------------- fault 12: adopting across file systems
def test_adopting_a_folder_into_a_store_on_another_file_system_copies_then_links(template, tmp_path, other_fs):
    """A folder written before the store, whose store (results/.store -> another disk) is on another file system:
    before, `hasfl adopt` (and every build there) died with EXDEV in os.link; now the files are copied, checked
    against the folder's manifest, and linked back with their times, and a second adopt has nothing to do."""
    results = tmp_path / "results"
    folder = results / "quick" / DATA
    shutil.copytree(template / "results" / "quick" / DATA, folder)  # real files (links followed), times kept
    times = {f.name: f.stat().st_mtime_ns for f in folder.iterdir()}
    (other_fs / ".store").mkdir()
    (results / ".store").symlink_to(other_fs / ".store")
    assert os.stat(folder).st_dev != os.stat(other_fs).st_dev
    assert adopt(results / "quick")["data"] == 1
    entry = _entry(results)
    assert all(f.is_symlink() and f.resolve().parent == entry.resolve() for f in folder.iterdir())
    assert {f.name: f.lstat().st_mtime_ns for f in folder.iterdir()} == times, "a link keeps its file's time"
    assert verify_folder(folder) is not None and verify_folder(entry) is not None
    assert not list((other_fs / ".store" / "data").glob("*.adopt"))
    assert adopt(results / "quick")["data"] == 0  # nothing left to move: the next build is quiet


# --------------------------------------------------------------------------- fault 13: a read-only store
@pytest.mark.parametrize("lock_file", [True, False], ids=["lock-file-kept", "no-lock-file"])
def test_a_read_only_store_still_links_the_entries_it_holds(results, lock_file):
    """Linking needs no write into the store: before, every job died on opening `<key>.lock` for writing."""
    if not lock_file:
        entry = _entry(results)
        entry.with_name(entry.name + ".lock").unlink()
    with read_only(results / ".store"):
        folder = _stage(results / "variant")
        assert (folder / "manifest.json").resolve().parent == _entry(results).resolve()
        assert verify_folder(folder) is not None


def test_a_read_only_store_that_must_take_an_entry_is_named(results):
    """A job whose key the store does not hold: one message naming the store and what to do, no raw OSError."""
    with read_only(results / ".store"):
        with pytest.raises(HasflError, match="cannot be written") as err:
            _stage(results / "variant", alpha=100.0)
    assert str(results / ".store") in str(err.value) and "results_dir" in str(err.value)


def test_the_build_check_names_a_read_only_store_before_any_job(results):
    """Where the session opens the store: a build with a job that must write an entry is refused, naming the store;
    a build whose jobs only link (every folder finished in the store) is not."""
    from hasfl.dag.status import check_store, preset_folders

    cfg = copy.deepcopy(load_config(REPO / "presets" / "quick.yaml"))
    cfg.update(datasets=["digits"], seeds=[42], methods=["hasfl", "fedavg"])
    folders = preset_folders(cfg)
    assert folders == [DATA, "runs/digits/fedavg/seed42", "runs/digits/hasfl/seed42"]
    check_store(cfg, results / "variant", linked=[])  # writable: nothing to say
    with read_only(results / ".store"):
        check_store(cfg, results / "variant", linked=folders)  # all in the store: the jobs only link
        with pytest.raises(HasflError, match="cannot be written") as err:
            check_store(cfg, results / "variant", linked=[DATA])
        assert str(results / ".store") in str(err.value) and "runs/digits/fedavg/seed42" in str(err.value)


# --------------------------------------------------------------------------- fault 14: a read-only results folder
def _finished_results(tmp_path: Path) -> Path:
    """results/quick as the DAG leaves it, small: a run linked from the store, findings.json, the analysis
    manifest (as tests/test_crate.py builds it)."""
    from hasfl.analysis.manifest import write_analysis_manifest

    root = tmp_path / "results" / "quick"
    entry = tmp_path / "results" / ".store" / "runs" / "key-hasfl"
    entry.mkdir(parents=True)
    (entry / "run.json").write_text('{"method": "hasfl"}')
    write_run_manifest(entry, ["run.json"], {"digest": "digest-hasfl"})
    run = root / "runs" / "digits" / "hasfl" / "seed42"
    run.mkdir(parents=True)
    for f in ("run.json", "manifest.json"):
        (run / f).symlink_to(entry / f)
    (root / "findings.json").write_text('{"findings": []}')
    verified = tmp_path / "verified.json"
    verified.write_text(f'{{"{run}": "digest-hasfl"}}')
    write_analysis_manifest(root, [str(root / "findings.json")], verified, identity={"digest": "analysis-digest"})
    return root


@pytest.mark.parametrize("lock_file", [True, False], ids=["lock-file-kept", "no-lock-file"])
def test_exporting_a_read_only_results_folder_reads_it_without_a_lock_file(tmp_path, lock_file):
    """`hasfl export rocrate` only reads the folder: before, it died with EROFS creating `.hasfl.lock`."""
    from hasfl.crate import export_rocrate

    results = _finished_results(tmp_path)
    if lock_file:
        (results / ResultsLock.NAME).write_text("")
    with read_only(results):
        summary = export_rocrate(results, tmp_path / "crate")
        assert summary.runs == 1 and (tmp_path / "crate" / "runs/digits/hasfl/seed42/run.json").is_file()
        assert (results / ResultsLock.NAME).exists() == lock_file


def test_adopting_a_read_only_results_folder_names_it(tmp_path, capsys):
    """`hasfl adopt` replaces files by links, so it needs the folder writable: one line naming it, exit 2."""
    from hasfl.cli import main

    results = _finished_results(tmp_path)
    with read_only(results):
        with pytest.raises(HasflError, match="cannot be written") as err:
            ResultsLock(results).acquire()
        assert str(results) in str(err.value)
        assert main(["adopt", str(results)]) == 2
    said = capsys.readouterr().err
    assert said.startswith("hasfl: error:") and str(results) in said and "Traceback" not in said


# --------------------------------------------------------------------------- gc beside what it cannot see
def test_gc_refuses_to_delete_while_a_linked_results_folder_cannot_be_read(results, tmp_path):
    """results/quick2 -> bigdisk/quick2, the disk unmounted (the link dangles): the entries only it links looked
    unused and `gc --delete` removed them (the dangling link was skipped silently). Now gc lists what it cannot read
    and `--delete` removes nothing while there is any."""
    big = tmp_path / "bigdisk" / "quick2"
    big.mkdir(parents=True)
    (results / "quick2").symlink_to(big)
    _stage(results / "quick2")
    shutil.rmtree(results / "quick")
    found = collect(results)
    assert found.referenced == 1 and not found.unreadable
    big.parent.rename(tmp_path / "unmounted")
    found = collect(results)
    assert found.unreferenced == [_entry(results)] and len(found.unreadable) == 1
    assert "quick2' is a link to" in found.unreadable[0]
    with pytest.raises(HasflError, match="holds what gc cannot read: .*quick2.*nothing was removed"):
        collect(results, delete=True)
    assert verify_folder(_entry(results)) is not None
    (tmp_path / "unmounted").rename(big.parent)  # mounted again: every link is read, nothing is unused
    found = collect(results, delete=True)
    assert found.referenced == 1 and not found.unreferenced and _entry(results).is_dir()


def test_gc_refuses_to_delete_while_a_build_writes_a_results_folder(results):
    """A re-evaluation empties its job's output folder before it relinks the entries it held: meanwhile they look
    unused, and `gc --delete` removed them (so the job recomputed them). Now gc refuses while any results folder's
    lock is held by a build, naming it, and removes nothing."""
    folder = results / "quick" / DATA
    for f in folder.iterdir():  # the job emptied its output folder
        f.unlink()
    lock = ResultsLock(results / "quick")
    lock.acquire()
    try:
        with pytest.raises(HasflError, match="'.*quick' is being written by a build .*nothing was removed"):
            collect(results, delete=True)
        assert _entry(results).is_dir()
    finally:
        lock.release()
    assert collect(results, delete=True).unreferenced == [_entry(results)] and not _entry(results).exists()


def test_gc_never_makes_a_file_outside_the_store_writable(results, tmp_path):
    """An unused entry holding a link to a read-only file outside the store: removing the entry made the outside
    file writable (chmod follows links). Now only the entry's own files are touched."""
    outside = tmp_path / "precious.txt"
    outside.write_text("keep")
    outside.chmod(0o444)
    orphan = results / ".store" / "data" / ("e" * 64)
    orphan.mkdir()
    (orphan / "manifest.json").write_text("{}")
    (orphan / "link.txt").symlink_to(outside)
    found = collect(results, delete=True)
    assert orphan in found.unreferenced and not orphan.exists()
    assert stat.S_IMODE(outside.stat().st_mode) == 0o444 and outside.read_text() == "keep"


def test_a_new_results_folder_on_a_full_disk_is_one_message_before_any_job(tmp_path):
    """A new results folder on a full file system: the lock file was made, then writing its holder's name raised a
    raw OSError out of the build's onstart (a traceback). Now the lock names the folder and the cause."""
    if os.geteuid() != 0:
        pytest.skip("a full file system needs a tmpfs mount (root)")
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)):
        pytest.skip("tmpfs cannot be mounted here")
    try:
        with open(disk / "filler", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        lock = ResultsLock(disk / "results" / "quick")
        with pytest.raises(HasflError, match=r"results folder '.*quick' cannot be written \(No space left on device\)"):
            lock.acquire()
        assert not lock.held
    finally:
        _mount("umount", str(disk))
