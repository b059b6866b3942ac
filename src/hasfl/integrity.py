"""A result is wrong only loudly: run identities, manifests, verification and the results lock.

* **Run identity** (:func:`run_identity`): everything a training run's bytes depend on -- its
  config slice (which holds the device, the precision and the thread count), the sha256 of the
  data-stage tables it reads, a digest of the dataset tensors, the training code, the run whose
  budget it matches, and the device class it ran on. It is written into every checkpoint and
  into the run's ``manifest.json``; a checkpoint or a finished run of another identity is
  never resumed or silently overwritten.
* **Manifests**: every data-stage folder and every run folder ends with a ``manifest.json``
  (written last) holding the sha256 of each file. :func:`verify_folder` checks a folder against
  it; the workflow checks every finished folder of a preset before any job starts
  (:func:`verify_results`), the analysis checks each run file it reads, and ``hasfl verify``
  checks a whole results folder.
* **One writer per results folder** (:class:`ResultsLock`).

Torch-free: the Snakefile imports this module.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.layout import FOLDER_PATTERNS, MANIFEST, kind_root, result_folders
from hasfl.io import InputFileError, sha256_file, write_json

__all__ = [
    "FOLDER_PATTERNS",
    "MANIFEST",
    "NOT_WRITABLE",
    "TRAINING_CODE",
    "IntegrityError",
    "ResultsLock",
    "device_mix",
    "folder_problems",
    "method_module",
    "owning_results",
    "refuse_results_folder",
    "refuse_store_path",
    "result_folders",
    "read_manifest",
    "run_identity",
    "training_code_digest",
    "verify_folder",
    "verify_results",
    "write_run_manifest",
]

PACKAGE = Path(__file__).resolve().parent
#: The engine code every training run's bytes depend on (relative to the ``hasfl`` package): the
#: loaders, the models and the federated engine, without the method modules of
#: :data:`METHOD_PACKAGE` (each run adds only its own method's module).
TRAINING_CODE: tuple[str, ...] = ("data", "models", "fl", "io.py")
#: The package of one module per method (:mod:`hasfl.fl.methods`); its ``__init__.py`` is engine code.
METHOD_PACKAGE = "fl/methods"
#: Run-folder files that are not part of the result (wall times) and not checksummed.
UNCHECKED = ("timings.json",)


class IntegrityError(InputFileError):
    """A result file differs from its manifest, or a run belongs to another configuration."""


def _module_file(module: str, root: Path) -> Path:
    """The source file of ``module`` without importing it (a module of the package at ``root``), else via
    importlib."""
    parts = module.split(".")
    if parts[0] == root.name:
        base = root.joinpath(*parts[1:])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"cannot find the source of module '{module}' (a method's builder)")
    return Path(spec.origin)


def method_module(method: str, root: Path = PACKAGE) -> Path:
    """The source file of ``method``'s builder (:attr:`hasfl.registry.MethodInfo.build`) in the package
    at ``root``."""
    from hasfl.registry import METHODS

    if method not in METHODS:
        raise ValueError(f"unknown method '{method}'; expected one of {', '.join(METHODS)}")
    return _module_file(METHODS[method].training_fields()["build"].partition(":")[0], root)


def package_files(module_file: Path) -> dict[str, Path]:
    """The Python files of the top-level package ``module_file`` belongs to (the module alone when it is a top-level
    module), by path relative to the folder holding that package, sorted: the code an installed method's builder can
    import from its own package."""
    top = module_file.parent
    if not (top / "__init__.py").is_file():
        return {module_file.name: module_file}
    while (top.parent / "__init__.py").is_file():
        top = top.parent
    return {f.relative_to(top.parent).as_posix(): f for f in sorted(top.rglob("*.py"))}


def training_code_digest(method: str, dataset: str, root: Path = PACKAGE) -> str:
    """The training-code identity of a run of ``method`` on ``dataset``: the engine code
    (:data:`TRAINING_CODE` without the other methods' modules), the method's own module and the
    registry's facts its bytes depend on (its method and dataset entries, precisions, file names).

    Adding a method, or editing one method's module or label, changes no other method's digest. A method an installed
    package registers (:func:`hasfl.registry.installed_methods`) has every file of that package as its own module.
    ``root``: the ``hasfl`` package folder whose files are read (the installed one by default; the
    Snakefile passes its own checkout's).
    """
    from hasfl.registry import DATA_FILES, DATASETS, METHODS, PRECISIONS, RUN_FILES

    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset '{dataset}'; expected one of {', '.join(DATASETS)}")
    methods_dir = root / METHOD_PACKAGE
    own = method_module(method, root)
    h = hashlib.sha256()
    for rel in TRAINING_CODE:
        target = root / rel
        files = [target] if target.is_file() else sorted(target.rglob("*.py"))
        for f in files:
            if f.parent == methods_dir and f.name != "__init__.py":
                continue  # another method's module (its own is added below)
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    if own.is_relative_to(root):
        h.update(own.name.encode())
        h.update(own.read_bytes())
    else:  # an installed package's method (hasfl.registry.installed_methods): every file of that package
        for rel, f in package_files(own).items():
            h.update(rel.encode())
            h.update(f.read_bytes())
    facts = {"method": METHODS[method].training_fields(), "dataset": DATASETS[dataset].training_fields(),
             "precisions": list(PRECISIONS), "run_files": list(RUN_FILES), "data_files": list(DATA_FILES)}
    h.update(json.dumps(facts, sort_keys=True).encode())
    return h.hexdigest()


def run_identity(run_cfg: Mapping[str, Any], inputs: Mapping[str, str], *, data_digest: str, code: str,
                 budget: Mapping[str, Any] | None, device_class: str) -> dict[str, Any]:
    """The identity of one training run: its components and their sha256 (``digest``).

    ``inputs`` maps each data-stage file the run reads to its sha256; ``data_digest`` is a
    digest of the dataset tensors; ``budget`` the identity digest and average width of the run
    whose budget it matches (random-budget controls), else None.
    """
    parts = {"config": dict(run_cfg), "inputs": dict(sorted(inputs.items())), "data": data_digest, "code": code,
             "budget": dict(budget) if budget is not None else None, "device_class": device_class}
    blob = json.dumps(parts, sort_keys=True, default=str)
    return {"digest": hashlib.sha256(blob.encode()).hexdigest(), **parts}


def identity_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The components in which two identities differ (for messages), config keys by name."""
    out = []
    for part in ("config", "inputs", "data", "code", "budget", "device_class"):
        if a.get(part) == b.get(part):
            continue
        if part == "config" and isinstance(a.get(part), Mapping) and isinstance(b.get(part), Mapping):
            keys = sorted(k for k in set(a[part]) | set(b[part]) if a[part].get(k) != b[part].get(k))
            out.append("config (" + ", ".join(keys) + ")")
        else:
            out.append({"inputs": "data-stage files", "data": "dataset files", "code": "training code",
                        "budget": "matched run", "device_class": "device"}.get(part, part))
    return out


def write_run_manifest(folder: Path, files: Sequence[str], identity: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``manifest.json`` (last) with the sha256 of ``files`` and the run's identity."""
    manifest = {"files": {name: {"sha256": sha256_file(folder / name)} for name in files if name not in UNCHECKED},
                "identity": dict(identity)}
    write_json(folder / MANIFEST, manifest)
    return manifest


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """A folder's manifest, None if it has none (not finished); unreadable -> IntegrityError."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
        manifest["files"]  # noqa: B018 - the key a manifest must have
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"manifest '{path}' is not readable ({exc}); delete the folder {folder} to redo it")
    return manifest


def verify_folder(folder: Path, names: Iterable[str] | None = None) -> dict[str, Any] | None:
    """Check the files of ``folder`` (all, or ``names``) against its manifest; returns the manifest
    (None when the folder has none). A missing or changed file raises :class:`IntegrityError`."""
    manifest = read_manifest(folder)
    if manifest is None:
        return None
    recorded = manifest["files"]
    for name in (recorded if names is None else [n for n in names if n in recorded]):
        path = folder / name
        if not path.is_file():
            raise IntegrityError(f"result file '{path}' is missing but its manifest lists it; "
                                 f"delete the folder {folder} to redo that stage")
        actual = sha256_file(path)
        if actual != recorded[name]["sha256"]:
            where = folder
            if path.is_symlink():  # a link into the run store: the entry is what changed, for every folder
                where = path.resolve().parent
            raise IntegrityError(f"result file '{path}' was modified after it was written (sha256 {actual[:12]}..., "
                                 f"manifest {recorded[name]['sha256'][:12]}...); restore it, or delete the folder "
                                 f"{where} to redo that stage"
                                 + (" (a run-store entry: every results folder that links it is made again)"
                                    if where != folder else ""))
    return manifest


def folder_problems(folder: Path) -> list[str]:
    """Every file of ``folder`` that does not match its manifest, one line each (``[]``: all match): ``missing:
    <file> ...`` (absent, or a symlink whose target is gone) or ``modified: <file> sha256 differs from its
    manifest``; an unreadable or absent manifest is one ``manifest: ...`` line. Unlike :func:`verify_folder`, which
    stops at the first, it lists them all (for a report such as ``hasfl compare``)."""
    try:
        manifest = read_manifest(folder)
    except IntegrityError as exc:
        return [f"manifest: {exc}"]
    if manifest is None:
        return [f"manifest: {folder / MANIFEST} is missing (not a finished folder)"]
    if not isinstance(manifest["files"], Mapping):
        return [f"manifest: {folder / MANIFEST} has no mapping of files to sha256"]
    problems = []
    for name, entry in sorted(manifest["files"].items()):
        path = folder / name
        if path.is_symlink() and not path.exists():
            problems.append(f"missing: {name} is a dangling symlink (to '{os.readlink(path)}'); its manifest lists it")
        elif not path.is_file():
            problems.append(f"missing: {name} is not in the folder; its manifest lists it")
        elif not isinstance(entry, Mapping) or sha256_file(path) != entry.get("sha256"):
            problems.append(f"modified: {name} sha256 differs from its manifest")
    return problems


def verify_results(results: Path, expected_runs: Mapping[str, Mapping[str, Any]] | None = None,
                   skip: Sequence[str] = ()) -> dict[str, int]:
    """Check every finished data-stage, run and evaluation folder under ``results`` (``<results_dir>/<name>``) but those of
    ``skip`` (relative paths: folders whose store links are being repaired, :func:`hasfl.dag.store.repair_links`).

    ``expected_runs`` maps a run folder (relative to ``results``, e.g. ``runs/digits/hasfl/seed42``)
    to the config slice the preset expects there; a finished run of another slice raises
    :class:`IntegrityError` (it would otherwise be mixed into the analysis). Returns counts.
    """
    counts = {"data": 0, "runs": 0, "unfinished": 0}
    kinds = ["data", "runs"]
    if kind_root(results, "evals").is_dir():  # the runs' evaluations (hasfl.analysis.evaluations), a folder a table
        counts["evals"] = 0
        kinds.append("evals")
    for kind in kinds:
        for folder in result_folders(results, kind):
            if folder.relative_to(results).as_posix() in skip:
                continue
            manifest = verify_folder(folder)
            if manifest is None:
                counts["unfinished"] += 1
                continue
            counts[kind] += 1
            rel = folder.relative_to(results).as_posix()
            if kind == "runs" and expected_runs is not None and rel in expected_runs:
                recorded = manifest.get("identity", {}).get("config")
                if recorded != expected_runs[rel]:
                    diff = identity_difference({"config": recorded or {}}, {"config": expected_runs[rel]})
                    raise IntegrityError(
                        f"run folder '{folder}' holds a finished run of another configuration ({', '.join(diff)} "
                        f"differ from the preset's); it was not written by this workflow for this config. Delete "
                        f"the folder (or the run's files) to train it again")
    return counts


#: The errno values of a write the file system refuses for good (read-only file system, no permission): where they
#: mean "nothing can be written here", a reader goes on without writing (:class:`ResultsLock`, the run store's lock).
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


class ResultsLock:
    """An exclusive lock on one results folder, held while a workflow writes into it.

    ``flock`` on ``<results>/.hasfl.lock``: released by the kernel when the holder exits, however
    it exits, so a killed run leaves no stale lock. The file names the holder (host, pid,
    working directory, command) for the message a second writer gets.

    ``write=False`` (a command that only reads the folder, ``hasfl export rocrate``): in a folder that cannot be
    written (read-only file system, no write permission) an existing lock file is locked shared through a read-only
    descriptor (a DAG writing the folder still refuses it) and a missing one is not made: nobody holds a lock whose
    file does not exist. A writer gets one :class:`IntegrityError` naming the folder instead of
    the raw ``OSError``.
    """

    NAME = ".hasfl.lock"

    def __init__(self, results: Path, *, write: bool = True) -> None:
        self.path = Path(results) / self.NAME
        self.write = write
        self._fd: int | None = None
        self._reading = False  # held as a reader of a folder that cannot be written, without a lock file

    @property
    def held(self) -> bool:
        """Whether this object holds the lock (a second ``flock`` from the same process on a new descriptor would
        wait for the first)."""
        return self._fd is not None or self._reading

    def acquire(self) -> None:
        """Take the lock (nothing to do when held already) or raise :class:`IntegrityError` naming the holder, or the
        folder when a writer cannot write it."""
        if self.held:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if self.write or exc.errno not in NOT_WRITABLE:
                raise IntegrityError(f"results folder '{self.path.parent}' cannot be written ({exc.strerror or exc}): "
                                     f"its lock file '{self.path}' cannot be made or opened, and this command writes "
                                     "the folder; make it writable (remount it read-write, or give this user write "
                                     "access), or work on a copy of it") from None
            self._acquire_reading()
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._refuse(fd)
        try:  # who holds it, for the message a second writer gets; a full disk refuses even these few bytes
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "cwd": os.getcwd(),
                                      "command": " ".join(sys.argv)}).encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise IntegrityError(f"results folder '{self.path.parent}' cannot be written ({exc.strerror or exc}): its "
                                 f"lock file '{self.path}' cannot hold the holder's name, and nothing a job writes "
                                 "would fit either; free space on that file system (or set results_dir to another) "
                                 "and run again") from None
        self._fd = fd

    def _acquire_reading(self) -> None:
        """The reader's lock of a folder that cannot be written: the existing lock file shared, or none."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            self._reading = True
            return
        except OSError as exc:
            raise IntegrityError(f"results folder '{self.path.parent}': its lock file '{self.path}' cannot be read "
                                 f"({exc.strerror or exc}); give this user read access to the folder") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            self._refuse(fd)
        self._fd = fd

    @staticmethod
    def holder(fd: int) -> str:
        """Who holds the lock open at ``fd``: what its lock file says (the build's pid, host and start), else
        'unknown'."""
        return os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"

    def _refuse(self, fd: int) -> None:
        """Close ``fd`` and raise the error naming the run that holds the lock (what its lock file says)."""
        holder = self.holder(fd)
        os.close(fd)
        raise IntegrityError(f"results folder '{self.path.parent}' is being written by another run ({holder}); "
                             "wait for it to finish or stop it, or use another `name` / `results_dir`") from None

    def release(self) -> None:
        """Give the lock back (also done by the kernel at exit)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._reading = False


def _spellings(path: str | Path) -> list[Path]:
    """``path`` as written (absolute, ``..`` folded lexically) and with every symlink resolved (also for a
    path that does not exist yet: its deepest existing ancestor is resolved and the rest appended), so a
    guard sees where a write would really land, not only where the path seems to point (the resolved path
    first: the folder a message names is the real one)."""
    lexical = Path(os.path.abspath(path))
    resolved = Path(path).expanduser().resolve(strict=False)
    return [resolved] if resolved == lexical else [resolved, lexical]


def owning_results(path: str | Path) -> Path | None:
    """The results folder (``<results_dir>/<name>``, the one holding the workflow's ``.hasfl.lock``) that
    ``path`` lies in, or None: what a CLI command must not write into (the DAG owns it). Symlinks are
    followed: a link outside that points into a results folder lies in it."""
    for p in _spellings(path):
        for folder in (p, *p.parents):
            if (folder / ResultsLock.NAME).is_file():
                return folder
    return None


def _finished_folder(path: str | Path) -> Path | None:
    """The finished data-stage / run folder (one with a manifest) that ``path`` lies in (symlinks followed),
    or None."""
    for p in _spellings(path):
        for folder in p.parents:
            if (folder / MANIFEST).is_file():
                return folder
    return None


#: The run store's folder name under a results directory (hasfl.dag.store.STORE).
STORE_NAME = ".store"


def refuse_store_path(path: str | Path, what: str) -> None:
    """Raise :class:`IntegrityError` when ``path`` (an output of a CLI command, ``what``) lies inside a run store
    (a ``.store`` folder; symlinks resolved): its entries are written once by the DAG and shared by every results
    folder that links them, so no command writes there."""
    resolved = Path(path).resolve()
    for parent in [resolved, *resolved.parents]:
        if parent.name == STORE_NAME:
            raise IntegrityError(f"{what} '{path}' is inside the run store '{parent}', whose entries are written once "
                                 "and shared by every results folder that links them; write it outside")


def refuse_results_folder(path: str | Path, what: str) -> None:
    """Raise :class:`IntegrityError` when ``path`` (an output of a CLI command, ``what``) lies inside a run store
    (:func:`refuse_store_path`), inside a results folder of the workflow (:func:`owning_results`) or inside a
    finished data-stage / run folder (one with a manifest) -- writing there would overwrite what the DAG made and
    checks. Symlinks in ``path`` are resolved first (a path through a link into a results folder is refused too)."""
    refuse_store_path(path, what)
    results = owning_results(path)
    if results is not None:
        raise IntegrityError(f"{what} '{path}' is inside the results folder '{results}', which the workflow writes "
                             "and checks; write it outside (e.g. docs/results/ for a results page, or a scratch "
                             "folder for `hasfl data` / `hasfl train`)")
    finished = _finished_folder(path)
    if finished is not None:
        raise IntegrityError(f"{what} '{path}' is inside the finished folder '{finished}' (it has a {MANIFEST}); "
                             "writing there would change a checked result; choose another path")


def device_mix(classes: Mapping[str, Sequence[str]]) -> str | None:
    """Why runs of several device classes (a manifest's ``identity.device_class``: ``cpu``, ``cuda:<GPU name>``)
    cannot go into one analysis (``classes``: class -> run folders), or None when there is one class. Float
    results differ in rounding between devices, so a comparison across methods would mix in the device."""
    if len(classes) <= 1:
        return None
    listed = "; ".join(f"{c}: {len(f)} run(s), e.g. '{sorted(f)[0]}'" for c, f in sorted(classes.items()))
    return (f"the runs of this analysis were trained on {len(classes)} device classes ({listed}); one analysis "
            "takes runs of one device class only. Nothing was deleted: move or delete the runs of the other "
            "class(es) yourself and train them again on the device of the rest, or analyse each class under its "
            "own results_dir / name")


