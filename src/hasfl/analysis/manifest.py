"""The analysis manifest: a preset's tables, figures and findings are wrong only loudly.

The DAG's last rule (``analysis_manifest``) writes ``analysis.manifest.json`` at the top of a
preset's results folder: the sha256 of every analysis output (tables, figures,
``findings.json``, ``report.md``) and the identity digest of every run they were computed from
(the output of the gate before the analysis, ``runs/verified.json``). ``hasfl results-page``
and ``hasfl verify`` check it (:func:`verify_analysis`), so a findings file or table edited after
the analysis, or a run trained again since, stops them with the file named instead of reaching
a page. Run and data-stage folders have manifests of their own (:mod:`hasfl.integrity`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hasfl.integrity import IntegrityError, verify_folder
from hasfl.io import sha256_file, write_json

__all__ = ["ANALYSIS_MANIFEST", "verify_analysis", "write_analysis_manifest"]

#: The analysis outputs' manifest, at the top of a preset's results folder.
ANALYSIS_MANIFEST = "analysis.manifest.json"
_REDO = "rerun the preset's DAG (snakemake ... all) to redo the analysis"


def _relative(path: str | os.PathLike[str], root: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), root.resolve())).as_posix()


def write_analysis_manifest(results: str | os.PathLike[str], files: Sequence[str],
                            verified_json: str | os.PathLike[str],
                            identity: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``results/analysis.manifest.json``: the sha256 of the analysis outputs ``files``, the
    identity digest of each run they were computed from (``verified_json``, written by the
    gate :func:`hasfl.dag.jobs.verify_runs_job`), paths relative to ``results``, and the analysis's
    own ``identity`` (:func:`hasfl.dag.identity.analysis_identity`: config and code)."""
    results = Path(results)
    runs = json.loads(Path(verified_json).read_text())
    manifest = {"files": {_relative(f, results): {"sha256": sha256_file(Path(f))} for f in sorted(files)},
                "runs": {_relative(folder, results): digest for folder, digest in sorted(runs.items())}}
    if identity is not None:
        manifest["identity"] = dict(identity)
    write_json(results / ANALYSIS_MANIFEST, manifest)
    return manifest


def verify_analysis(results: str | os.PathLike[str]) -> dict[str, Any]:
    """Check a preset's analysis outputs against ``analysis.manifest.json``: every listed file
    unchanged, and every run the analysis read still finished, unchanged (its files against its
    own manifest) and of the recorded identity. Returns the manifest; raises
    :class:`~hasfl.integrity.IntegrityError` naming the file or run folder otherwise, also when
    the analysis has no manifest."""
    results = Path(results)
    path = results / ANALYSIS_MANIFEST
    if not path.is_file():
        raise IntegrityError(f"'{results}' has no {ANALYSIS_MANIFEST}: its analysis did not finish, or was written "
                             f"before analysis manifests existed; {_REDO}")
    try:
        manifest = json.loads(path.read_text())
        files, runs = dict(manifest["files"]), dict(manifest["runs"])
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"analysis manifest '{path}' is not readable ({exc}); delete it and {_REDO}")
    for name, entry in files.items():
        target = results / name
        if not target.is_file():
            raise IntegrityError(f"analysis file '{target}' is missing but {ANALYSIS_MANIFEST} lists it; {_REDO}")
        actual = sha256_file(target)
        if actual != entry["sha256"]:
            raise IntegrityError(f"analysis file '{target}' was modified after the analysis wrote it (sha256 "
                                 f"{actual[:12]}..., {ANALYSIS_MANIFEST} {entry['sha256'][:12]}...); restore it, or "
                                 f"delete it and {_REDO}")
    for rel, digest in runs.items():
        folder = results / rel
        run_manifest = verify_folder(folder)
        if run_manifest is None:
            raise IntegrityError(f"run folder '{folder}', which the analysis was computed from, is gone or "
                                 f"unfinished; {_REDO}")
        recorded = run_manifest.get("identity", {}).get("digest")
        if recorded != digest:
            raise IntegrityError(f"run folder '{folder}' holds another run than the analysis was computed from "
                                 f"(identity {str(recorded)[:12]}..., {ANALYSIS_MANIFEST} {str(digest)[:12]}...); "
                                 f"{_REDO}")
    return manifest
