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

import fcntl
import hashlib
import json
import os
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hasfl.io import InputFileError, sha256_file, write_json

__all__ = [
    "MANIFEST",
    "TRAINING_CODE",
    "IntegrityError",
    "ResultsLock",
    "code_digest",
    "read_manifest",
    "run_identity",
    "training_code_digest",
    "verify_folder",
    "verify_results",
    "write_run_manifest",
]

MANIFEST = "manifest.json"
PACKAGE = Path(__file__).resolve().parent
#: The library code a training run's bytes depend on (relative to the ``hasfl`` package).
TRAINING_CODE: tuple[str, ...] = ("data", "models", "fl", "io.py", "registry.py")
#: Run-folder files that are not part of the result (wall times) and not checksummed.
UNCHECKED = ("timings.json",)


class IntegrityError(InputFileError):
    """A result file differs from its manifest, or a run belongs to another configuration."""


def code_digest(root: Path, paths: Iterable[str]) -> str:
    """sha256 over the relative names and contents of the ``*.py`` files under ``root/paths``."""
    h = hashlib.sha256()
    for rel in paths:
        target = root / rel
        files = [target] if target.is_file() else sorted(target.rglob("*.py"))
        for f in files:
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def training_code_digest() -> str:
    """The digest of the installed training code (:data:`TRAINING_CODE`)."""
    return code_digest(PACKAGE, TRAINING_CODE)


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
            raise IntegrityError(f"result file '{path}' was modified after it was written (sha256 {actual[:12]}..., "
                                 f"manifest {recorded[name]['sha256'][:12]}...); restore it, or delete the folder "
                                 f"{folder} to redo that stage")
    return manifest


def verify_results(results: Path, expected_runs: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, int]:
    """Check every finished data-stage and run folder under ``results`` (``<results_dir>/<name>``).

    ``expected_runs`` maps a run folder (relative to ``results``, e.g. ``runs/digits/hasfl/seed42``)
    to the config slice the preset expects there; a finished run of another slice raises
    :class:`IntegrityError` (it would otherwise be mixed into the analysis). Returns counts.
    """
    counts = {"data": 0, "runs": 0, "unfinished": 0}
    for kind, pattern in (("data", "data/*/seed*"), ("runs", "runs/*/*/seed*")):
        for folder in sorted(results.glob(pattern)):
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


class ResultsLock:
    """An exclusive lock on one results folder, held while a workflow writes into it.

    ``flock`` on ``<results>/.hasfl.lock``: released by the kernel when the holder exits, however
    it exits, so a killed run leaves no stale lock. The file names the holder (host, pid,
    working directory, command) for the message a second writer gets.
    """

    NAME = ".hasfl.lock"

    def __init__(self, results: Path) -> None:
        self.path = Path(results) / self.NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`IntegrityError` naming the holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise IntegrityError(f"results folder '{self.path.parent}' is being written by another run ({holder}); "
                                 "wait for it to finish or stop it, or use another `name` / `results_dir`") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "cwd": os.getcwd(),
                                  "command": " ".join(sys.argv)}).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (also done by the kernel at exit)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def verify_runs_job(run_dirs: Sequence[str], expected: Mapping[str, Mapping[str, Any]], out_json: str) -> None:
    """The DAG's gate before the analysis (rule ``verify_runs``): every run folder matches its
    manifest, was trained with the config slice the preset expects (``expected``: folder ->
    run_config) and with the installed training code. Writes ``out_json`` (folder -> identity)."""
    code = training_code_digest()
    expected = {Path(k).as_posix(): v for k, v in expected.items()}
    identities = {}
    for folder in map(Path, run_dirs):
        manifest = verify_folder(folder)
        if manifest is None:
            raise IntegrityError(f"run folder '{folder}' has no {MANIFEST}: the run did not finish")
        identity = manifest.get("identity", {})
        want = expected[folder.as_posix()]
        if identity.get("config") != want:
            diff = identity_difference({"config": identity.get("config") or {}}, {"config": want})
            raise IntegrityError(
                f"run folder '{folder}' holds a run of another configuration ({', '.join(diff)} differ from the "
                f"preset's), e.g. written by `hasfl train --out`; the analysis will not mix it in. Delete the "
                f"folder to train it again with the preset's configuration")
        if identity.get("code") != code:
            raise IntegrityError(
                f"run folder '{folder}' was trained by other training code than the installed one (code digest "
                f"{str(identity.get('code'))[:12]}... vs {code[:12]}...); rerun it (snakemake --forcerun train) or "
                "restore the code it was trained with")
        identities[folder.as_posix()] = identity.get("digest")
    write_json(out_json, identities)
