"""``hasfl export rocrate RESULTS --out DIR``: a finished results folder as a Workflow Run RO-Crate.

The Workflow Run RO-Crate profiles (Process Run Crate and Workflow Run Crate 0.5,
https://w3id.org/ro/wfrun/workflow/0.5) describe one run of a workflow so that WorkflowHub and Zenodo can read
its provenance: the crate's root names the workflow (``mainEntity``: the Snakefile, a ``ComputationalWorkflow`` in
Snakemake), and one ``CreateAction`` its run: the workflow as ``instrument``, the config files it was given as
``object``, what it made as ``result``. The metadata is written with ro-crate-py (``rocrate``).

What the crate holds:

* the results folder's files as real bytes (links into the run store followed), at the crate's root, after
  checking them (:func:`hasfl.integrity.verify_results`, :func:`hasfl.analysis.manifest.verify_analysis`) under the
  folder's results lock (:class:`hasfl.integrity.ResultsLock`, refused while a DAG writes the folder): a
  folder whose bytes differ from its manifests, or whose analysis has not finished, is refused, so a crate
  never carries a modified run; on arrival ``hasfl verify <crate>`` checks it like any results folder;
* under ``workflow/``, the workflow that made them as the repository holds it (``git ls-files`` of the Snakefile,
  ``workflow/``, ``src/``, ``config.yaml``, ``pyproject.toml`` with the pinned versions, and the config files
  given), so that ``pip install -e workflow && snakemake ...`` inside it reruns the DAG;
* in the metadata: each run's and data stage's identity digest (the run store's key parts,
  :mod:`hasfl.dag.store`), the analysis identity, the git commit and whether the tree was dirty, the versions,
  kernels and machine (:func:`hasfl.analysis.provenance.provenance`), and the findings' verdicts.

Exporting again replaces the crate whole (written beside it, then renamed into place); a folder that is not a
crate is never replaced. Needs the ``rocrate`` extra (``pip install -e '.[rocrate]'``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hasfl.analysis.manifest import ANALYSIS_MANIFEST, verify_analysis
from hasfl.analysis.page_refs import shown_verdict
from hasfl.analysis.provenance import provenance
from hasfl.config import REPO_ROOT
from hasfl.errors import HasflError
from hasfl.export import sibling, swap_in
from hasfl.integrity import MANIFEST, ResultsLock, read_manifest, refuse_results_folder, verify_results

__all__ = ["CrateError", "CrateSummary", "METADATA", "PROFILES", "WORKFLOW_PATHS", "export_rocrate"]

#: the RO-Crate metadata file at the crate's root
METADATA = "ro-crate-metadata.json"
#: the profiles the crate conforms to beyond RO-Crate itself (Workflow Run RO-Crate 0.5; ro-crate-py adds the
#: Workflow RO-Crate 1.1 they extend, with the main workflow)
PROFILES = (("https://w3id.org/ro/wfrun/process/0.5", "Process Run Crate", "0.5"),
            ("https://w3id.org/ro/wfrun/workflow/0.5", "Workflow Run Crate", "0.5"))
#: the repository paths (tracked files under them) that define the workflow: what ``workflow/`` holds
WORKFLOW_PATHS = ("Snakefile", "workflow", "src", "config.yaml", "pyproject.toml", "profiles")
#: results-folder entries the crate leaves out: hidden names (the lock, Snakemake's state)
_HIDDEN = "."


class CrateError(HasflError, ValueError):
    """A results folder that cannot be exported as a crate, or an ``--out`` that cannot take one."""


@dataclass(frozen=True)
class CrateSummary:
    """What :func:`export_rocrate` wrote: the crate folder, result files and bytes copied, workflow files."""

    out: Path
    files: int
    bytes: int
    workflow_files: int
    runs: int


def _results_files(results: Path) -> list[Path]:
    """Every file of the results folder, relative to it, hidden entries left out (sorted)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(results, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(_HIDDEN))
        rel = Path(dirpath).relative_to(results)
        out += [rel / f for f in sorted(filenames) if not f.startswith(_HIDDEN)]
    return out


def _tracked(paths: Sequence[str]) -> list[str]:
    """The repository's tracked files under ``paths`` (``git ls-files``), or every file there outside git."""
    try:
        res = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--", *paths], capture_output=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        res = None
    if res is not None and res.returncode == 0 and res.stdout:
        return sorted(p for p in res.stdout.decode().split("\0") if p and (REPO_ROOT / p).is_file())
    found = []
    for p in paths:
        base = REPO_ROOT / p
        if base.is_file():
            found.append(p)
        elif base.is_dir():
            found += [f.relative_to(REPO_ROOT).as_posix() for f in sorted(base.rglob("*"))
                      if f.is_file() and "__pycache__" not in f.parts]
    return found


def _configfiles(results: Path, configfiles: Sequence[str | Path] | None) -> list[Path]:
    """The config files the folder was made with (default ``presets/<name>.yaml``), each checked to exist."""
    if not configfiles:
        default = REPO_ROOT / "presets" / f"{results.name}.yaml"
        if not default.is_file():
            raise CrateError(f"'{results}': no presets/{results.name}.yaml; give the config files it was made with "
                             "(--configfile FILE ...), as given to snakemake")
        configfiles = [default]
    paths = [Path(c) for c in configfiles]
    for p in paths:
        if not p.is_file():
            raise CrateError(f"config file '{p}' (--configfile): no such file")
    return paths


def _in_crate(path: Path) -> str:
    """Where a config file goes in the crate: ``workflow/<its repository path>``, or ``workflow/config/<name>``."""
    try:
        return "workflow/" + path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return f"workflow/config/{path.name}"


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).replace(microsecond=0).isoformat()


def _check_out(out: Path) -> None:
    refuse_results_folder(out, "RO-Crate")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise CrateError(f"--out '{out}' exists and is not a folder; choose another path")
    if out.is_dir() and any(out.iterdir()) and not (out / METADATA).is_file():
        raise CrateError(f"--out '{out}' is a folder with files and no {METADATA} (not a crate this command wrote); "
                         "choose an empty or new folder")


def _build(crate_dir: Path, results: Path, configs: Sequence[Path], analysis: dict[str, Any]) -> CrateSummary:
    """The crate in ``crate_dir`` (module doc); ``analysis``: the checked analysis manifest."""
    from rocrate.rocrate import ROCrate

    rel_files = _results_files(results)
    size, newest = 0, 0.0
    for rel in rel_files:  # real bytes: links into the run store are followed; copy2 keeps each file's time
        dst = crate_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(results / rel, dst)
        st = dst.stat()
        size, newest = size + st.st_size, max(newest, st.st_mtime)
    wf_files = _tracked(WORKFLOW_PATHS)
    for rel in wf_files:
        dst = crate_dir / "workflow" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, dst)
    config_paths = []
    for c in configs:
        dest = _in_crate(c)
        if not (crate_dir / dest).is_file():
            (crate_dir / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(c, crate_dir / dest)
        config_paths.append(dest)

    facts = provenance(results, analysis)
    findings = json.loads((results / "findings.json").read_text()).get("findings", [])

    crate = ROCrate(gen_preview=False)
    root = crate.root_dataset
    root["name"] = f"hasfl-repro results '{results.name}'"
    root["description"] = (f"The results folder '{results.name}' of hasfl-repro (a reproduction of 'Capacity "
                           "Confounds and Coverage Guarantees in Adaptive Sub-model Federated Learning'): data "
                           "stages, training runs, tables, figures, findings.json and report.md, with the workflow "
                           "that made them under workflow/.")
    root["datePublished"] = _iso(newest)
    profiles = [crate.add_jsonld({"@id": url, "@type": "CreativeWork", "name": name, "version": version})
                for url, name, version in PROFILES]
    root["conformsTo"] = profiles
    version = f"{facts['commit']}{' (dirty)' if facts['dirty'] else ''}"
    wf = crate.add_workflow(dest_path="workflow/Snakefile", main=True, lang="snakemake",
                            lang_version=facts["snakemake"],
                            properties={"name": "hasfl-repro Snakemake workflow", "version": version})
    reqs = [crate.add_jsonld({"@id": f"#software-{name.lower()}", "@type": "SoftwareApplication", "name": name,
                              "version": str(facts[key])})
            for name, key in (("Python", "python"), ("PyTorch", "torch"), ("Snakemake", "snakemake"),
                              ("NumPy", "numpy"))]
    wf["softwareRequirements"] = reqs
    crate.add_file(dest_path="workflow/pyproject.toml",
                   properties={"name": "pinned dependencies", "encodingFormat": "text/x-toml"})
    objects = [crate.add_file(dest_path=p, properties={"name": Path(p).name, "encodingFormat": "application/yaml"})
               for p in config_paths]

    results_entities = []
    for name, kind in (("runs", "training runs"), ("data", "data stages")):
        if not (results / name).is_dir():
            continue
        parts = []
        pattern = "*/*/seed*" if name == "runs" else "*/seed*"
        for folder in sorted((results / name).glob(pattern)):
            manifest = read_manifest(folder)
            if manifest is None:
                continue
            ident = manifest.get("identity") or {}
            digest = ident.get("digest") if name == "runs" else None
            props = {"name": folder.relative_to(results).as_posix()}
            if digest:
                props["identifier"] = str(digest)
            parts.append(crate.add_dataset(dest_path=folder.relative_to(results).as_posix() + "/", properties=props))
        results_entities.append(crate.add_dataset(dest_path=f"{name}/", properties={
            "name": f"{len(parts)} {kind}", "hasPart": parts}))
    for name, label in (("tables", "tables (Parquet and Markdown)"), ("figures", "figures (PNG and PDF)")):
        if (results / name).is_dir():
            results_entities.append(crate.add_dataset(dest_path=f"{name}/", properties={"name": label}))
    verdicts = ", ".join(f"{f['id']}: {shown_verdict(f)}" for f in findings if "id" in f and "verdict" in f)
    for name, fmt, desc in (("findings.json", "application/json", f"verdict per claim ({verdicts})"),
                            ("report.md", "text/markdown", "the report of the analysis"),
                            (ANALYSIS_MANIFEST, "application/json",
                             "sha256 of every analysis output and the identity of every run it read")):
        if (results / name).is_file():
            props = {"name": name, "encodingFormat": fmt, "description": desc}
            if name == ANALYSIS_MANIFEST and facts["analysis_identity"]:
                props["identifier"] = facts["analysis_identity"]
            results_entities.append(crate.add_file(dest_path=name, properties=props))

    starts = [(f / MANIFEST).stat().st_mtime for f in sorted(results.glob("data/*/seed*"))
              if (f / MANIFEST).is_file()]
    end = (results / ANALYSIS_MANIFEST).stat().st_mtime
    crate.add_action(wf, identifier="#run", object=objects, result=results_entities, properties={
        "name": f"snakemake all for the preset '{results.name}'",
        "description": (f"{facts['n_runs']} training runs (identities digest {facts['runs_digest']}); CPU kernels: "
                        f"{facts['kernels']}; CUDA: {facts['cuda']}; exported on: {facts['machine']}. Start and "
                        "end are file times: the first data stage's manifest and the analysis manifest."),
        **({"startTime": _iso(min(starts))} if starts else {}),
        "endTime": _iso(end),
        "actionStatus": {"@id": "http://schema.org/CompletedActionStatus"}})
    with warnings.catch_warnings():  # the entities' files are in place already (copied above): no source to copy
        warnings.filterwarnings("ignore", message="No source for", category=UserWarning)
        crate.write(crate_dir)
    return CrateSummary(out=crate_dir, files=len(rel_files), bytes=size, workflow_files=len(wf_files),
                        runs=facts["n_runs"])


def export_rocrate(results: str | Path, out: str | Path,
                   configfiles: Sequence[str | Path] | None = None) -> CrateSummary:
    """Write the finished results folder ``results`` as a Workflow Run RO-Crate in the folder ``out`` (module
    doc); ``configfiles``: the config files it was made with (default ``presets/<name>.yaml``)."""
    try:
        import rocrate  # noqa: F401
    except ImportError as exc:
        raise CrateError("hasfl export rocrate needs the 'rocrate' extra: pip install -e '.[rocrate]'") from exc
    results, out = Path(results), Path(out)
    if not (results / "runs").is_dir():
        raise CrateError(f"'{results}' has no runs/ folder (expected a results folder, e.g. results/quick)")
    if not (results / "findings.json").is_file():
        raise CrateError(f"'{results}' has no findings.json: its analysis has not finished (run the DAG's target "
                         "all first)")
    configs = _configfiles(results, configfiles)
    _check_out(out)
    # as hasfl adopt: not while a DAG writes the folder, so the bytes copied are the bytes checked; a reader, so a
    # folder that cannot be written (read-only disk) is exported without making a lock file there
    lock = ResultsLock(results, write=False)
    lock.acquire()
    try:
        verify_results(results)
        analysis = verify_analysis(results)
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = sibling(out, "crate")
        staging.mkdir()
        try:
            summary = _build(staging, results, configs, analysis)
            swap_in(staging, out)  # an earlier crate renamed aside and deleted (``_check_out`` refused anything else)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    finally:
        lock.release()
    return replace(summary, out=out)
