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
  every file is hashed as it is copied and the bytes written compared with its manifest's sha256 (a writer that
  does not hold this folder's lock, such as a DAG of another folder sharing a run-store entry, could change it
  between the check and the copy): a mismatch refuses the export, naming the file;
* under ``workflow/``, the workflow that made them as the checkout holds it (the files of the Snakefile,
  ``workflow/``, ``src/``, ``config.yaml``, ``pyproject.toml`` with the pinned versions and ``profiles/`` that
  git tracks or would track -- untracked files not ignored included, as the code digests include them -- and the
  config files given), so that ``pip install -e workflow && snakemake ...`` inside it reruns the DAG. It must be
  the code that made the results: each run's recorded training-code digest, each data stage's data-code digest
  and the analysis manifest's analysis-code digest are compared with this checkout's, and a crate whose workflow
  differs is refused (``allow_other_code``: shipped, the metadata saying it is not their code; runs record code
  digests, not a commit). A checkout with uncommitted changes under those paths is exported with a
  :class:`CrateWarning` naming the modified and untracked files (listed in the metadata too);
* the config files given, checked against the runs' identities (each run's recorded config slice against
  :func:`hasfl.config.run_config` of the merged files; :func:`hasfl.analysis.provenance.check_configfiles});
* in the metadata: each run's and data stage's identity digest (the run store's key parts,
  :mod:`hasfl.dag.store`) and each run's training-code digest, the analysis identity, the git commit and whether
  the tree was dirty, the versions, kernels and machine (:func:`hasfl.analysis.provenance.provenance`), and the
  findings' verdicts.

Exporting again replaces the crate whole (written beside it, then renamed into place); a folder that is not a
crate is never replaced. Needs the ``rocrate`` extra (``pip install -e '.[rocrate]'``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
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
from hasfl.analysis.provenance import ProvenanceError, check_configfiles, provenance, training_code_check
from hasfl.config import REPO_ROOT
from hasfl.errors import HasflError
from hasfl.staging import staged_folder
from hasfl.layout import finished_folders, kind_root, result_folders
from hasfl.integrity import MANIFEST, STORE_NAME, ResultsLock, read_manifest, refuse_results_folder, verify_results

__all__ = ["CrateError", "CrateSummary", "CrateWarning", "METADATA", "PROFILES", "WORKFLOW_PATHS", "export_rocrate"]

#: the RO-Crate metadata file at the crate's root
METADATA = "ro-crate-metadata.json"
#: the profiles the crate conforms to beyond RO-Crate itself (Workflow Run RO-Crate 0.5; ro-crate-py adds the
#: Workflow RO-Crate 1.1 they extend, with the main workflow)
PROFILES = (("https://w3id.org/ro/wfrun/process/0.5", "Process Run Crate", "0.5"),
            ("https://w3id.org/ro/wfrun/workflow/0.5", "Workflow Run Crate", "0.5"),
            ("https://w3id.org/workflowhub/workflow-ro-crate/1.0", "Workflow RO-Crate", "1.0"))
#: the RO-Crate specification version the crate declares
RO_CRATE_VERSION = "1.1"
#: the licence of the workflow and of the results it ships (pyproject.toml's ``license``)
LICENSE = "https://spdx.org/licenses/MIT"
#: the repository paths (tracked files under them) that define the workflow: what ``workflow/`` holds
WORKFLOW_PATHS = ("Snakefile", "workflow", "src", "config.yaml", "pyproject.toml", "profiles")
#: results-folder entries the crate leaves out: hidden names (the lock, Snakemake's state)
_HIDDEN = "."


class CrateError(HasflError, ValueError):
    """A results folder that cannot be exported as a crate, or an ``--out`` that cannot take one."""


class CrateWarning(UserWarning):
    """A crate written from a checkout with uncommitted changes: its workflow is no commit (the files named)."""


@dataclass(frozen=True)
class CrateSummary:
    """What :func:`export_rocrate` wrote: the crate folder, result files and bytes copied, workflow files."""

    out: Path
    files: int
    bytes: int
    workflow_files: int
    runs: int


def _results_files(results: Path) -> list[Path]:
    """Every file of the results folder, relative to it, hidden entries left out (sorted). A link is followed only
    to a file in the folder or in its run store (``<results_dir>/.store``, what a job links): a link to a folder (a
    loop, another tree) or elsewhere would ship what no manifest lists, so it is refused, named."""
    root = results.resolve()
    allowed = (root, (Path(os.path.abspath(results)).parent / STORE_NAME).resolve())
    out = []
    for dirpath, dirnames, filenames in os.walk(results):
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = here / name
            if name.startswith(_HIDDEN) or not path.is_symlink():
                continue
            try:
                target = path.resolve(strict=True)
            except (OSError, RuntimeError) as exc:
                raise CrateError(f"'{path}' is a link that leads nowhere ({getattr(exc, 'strerror', None) or exc}); "
                                 "a results folder holds files and links into its run store: remove the link and "
                                 "export again") from None
            if target.is_dir() or not any(target.is_relative_to(a) for a in allowed):
                what = "the folder" if target.is_dir() else "a file outside the results folder and its run store"
                raise CrateError(f"'{path}' links {what} '{target}', which no manifest lists; a crate ships only the "
                                 "folder's files and what they link in the store: remove the link and export again")
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(_HIDDEN))
        rel = here.relative_to(results)
        out += [rel / f for f in sorted(filenames) if not f.startswith(_HIDDEN)]
    return out


def _git_z(repo: Path, *args: str) -> list[str] | None:
    """``git -C repo <args>`` (NUL-separated output) as its entries; None outside git or when git fails."""
    try:
        res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return [p for p in res.stdout.decode().split("\0") if p] if res.returncode == 0 else None


def _tracked(paths: Sequence[str], repo: Path = REPO_ROOT) -> list[str]:
    """The checkout's files under ``paths`` that git tracks or would track (``git ls-files``, with the untracked
    files it does not ignore: the code digests read them too), or every file there outside git."""
    tracked = _git_z(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths)
    if tracked:
        return sorted({p for p in tracked if (repo / p).is_file()})
    found = []
    for p in paths:
        base = repo / p
        if base.is_file():
            found.append(p)
        elif base.is_dir():
            found += [f.relative_to(repo).as_posix() for f in sorted(base.rglob("*"))
                      if f.is_file() and "__pycache__" not in f.parts]
    return found


def _uncommitted(paths: Sequence[str], repo: Path = REPO_ROOT) -> tuple[list[str], list[str]]:
    """The files under ``paths`` that differ from the checkout's commit: (modified, added, deleted or renamed;
    untracked and not ignored), from ``git status``; both empty outside git."""
    entries = _git_z(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *paths) or []
    modified, untracked = [], []
    skip = False
    for entry in entries:
        if skip:  # the source path of a rename or copy
            skip = False
            continue
        code, path = entry[:2], entry[3:]
        if code == "??":
            untracked.append(path)
        else:
            modified.append(path)
            skip = "R" in code or "C" in code
    return sorted(modified), sorted(untracked)


def _dirty_note(modified: Sequence[str], untracked: Sequence[str], limit: int | None = None) -> str:
    """``modified: a, b; untracked: c`` (empty when both are); past ``limit`` files of a kind, a count."""
    def listed(files: Sequence[str]) -> str:
        shown = list(files if limit is None else files[:limit])
        return ", ".join(shown) + (f" and {len(files) - len(shown)} more" if len(files) > len(shown) else "")

    return "; ".join(f"{what}: {listed(files)}" for what, files in (("modified", modified),
                                                                     ("untracked", untracked)) if files)


def _configfiles(results: Path, configfiles: Sequence[str | Path] | None, repo: Path = REPO_ROOT) -> list[Path]:
    """The config files the folder was made with (default ``presets/<name>.yaml``), each checked to exist."""
    if not configfiles:
        default = repo / "presets" / f"{results.name}.yaml"
        if not default.is_file():
            raise CrateError(f"'{results}': no presets/{results.name}.yaml; give the config files it was made with "
                             "(--configfile FILE ...), as given to snakemake")
        configfiles = [default]
    paths = [Path(c) for c in configfiles]
    for p in paths:
        if not p.is_file():
            raise CrateError(f"config file '{p}' (--configfile): no such file")
    return paths


def _in_crate(path: Path, repo: Path = REPO_ROOT) -> str:
    """Where a config file goes in the crate: ``workflow/<its repository path>``, or ``workflow/config/<name>``."""
    try:
        return "workflow/" + path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return f"workflow/config/{path.name}"


def _run_folders(results: Path) -> list[str]:
    """The finished run folders of ``results`` (a manifest), relative to it, sorted."""
    return [f.relative_to(results).as_posix() for f in finished_folders(results, "runs")]


def _other_code(results: Path, analysis: dict[str, Any], repo: Path) -> list[str]:
    """Each part of ``results`` whose recorded code digest is not the checkout ``repo``'s, one line each: the runs'
    training code (:func:`hasfl.analysis.provenance.training_code_check`), the data stages' data code and the
    analysis manifest's analysis code (:mod:`hasfl.dag.identity`). A part recording no digest is not compared."""
    from hasfl.dag.identity import analysis_code_digest, data_code_digest

    lines = [f"{rel} training code: recorded {rec[:12]}..., this checkout {cur[:12]}..."
             for rel, rec, cur in training_code_check(results, _run_folders(results), repo / "src" / "hasfl").differing]
    data_code = None
    for folder in result_folders(results, "data"):
        recorded = ((read_manifest(folder) or {}).get("identity") or {}).get("code")
        if recorded:
            data_code = data_code or data_code_digest(repo / "src" / "hasfl")
            if recorded != data_code:
                lines.append(f"{folder.relative_to(results).as_posix()} data code: recorded {str(recorded)[:12]}..., "
                             f"this checkout {data_code[:12]}...")
    recorded = (analysis.get("identity") or {}).get("code")
    if recorded:
        current = analysis_code_digest(repo)
        if recorded != current:
            lines.append(f"{ANALYSIS_MANIFEST} analysis code: recorded {str(recorded)[:12]}..., this checkout "
                         f"{current[:12]}...")
    return lines


def _copy_hashed(src: Path, dst: Path) -> str:
    """Copy ``src`` (links followed) to ``dst`` with its times, returning the sha256 of the bytes written."""
    h = hashlib.sha256()
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(1 << 20):
            fout.write(chunk)
            h.update(chunk)
    shutil.copystat(src, dst)
    return h.hexdigest()


def _expected(results: Path, analysis: dict[str, Any]) -> tuple[dict[str, tuple[str, str]], dict[str, Any]]:
    """What the copy must find: result file (relative) -> (sha256, the manifest listing it), from the checked
    analysis manifest and each data-stage and run folder's manifest; and each manifest file (relative) -> its
    content (the copy of it must hold the same). A run whose identity is no longer the one the analysis read is
    refused."""
    expected = {rel: (str(entry["sha256"]), ANALYSIS_MANIFEST) for rel, entry in analysis["files"].items()}
    manifests: dict[str, Any] = {ANALYSIS_MANIFEST: analysis}
    runs = analysis.get("runs") or {}
    for folder in sorted([*result_folders(results, "data"), *result_folders(results, "runs")]):
        manifest = read_manifest(folder)
        if manifest is None:
            continue
        rel = folder.relative_to(results).as_posix()
        digest = (manifest.get("identity") or {}).get("digest")
        if rel in runs and digest != runs[rel]:
            raise CrateError(f"run folder '{folder}' changed after it was checked (identity {str(digest)[:12]}..., "
                             f"{ANALYSIS_MANIFEST} {str(runs[rel])[:12]}...): a process is writing the folder or its "
                             "run-store entry; export again when it has finished")
        manifests[f"{rel}/{MANIFEST}"] = manifest
        expected.update({f"{rel}/{name}": (str(entry["sha256"]), f"{rel}/{MANIFEST}")
                         for name, entry in manifest["files"].items()})
    return expected, manifests


def _copy_results(crate_dir: Path, results: Path, analysis: dict[str, Any]) -> tuple[list[Path], int, float]:
    """Copy every result file into ``crate_dir``, each hashed as it is written and compared with its manifest
    (:func:`_expected`); returns the files, their bytes and the newest file time."""
    expected, manifests = _expected(results, analysis)
    rel_files = _results_files(results)
    size, newest = 0, 0.0
    for rel in rel_files:  # real bytes: links into the run store are followed; the file's time is kept
        dst = crate_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        written = _copy_hashed(results / rel, dst)
        key = rel.as_posix()
        if key in expected and written != expected[key][0]:
            sha, listed_in = expected[key]
            raise CrateError(f"result file '{results / rel}' changed while it was copied into the crate (sha256 of the "
                             f"bytes copied {written[:12]}..., {listed_in} {sha[:12]}...): a process is writing the "
                             "folder or its run-store entry; nothing was written; export again when it has finished")
        if key in manifests:
            try:
                same = json.loads(dst.read_bytes()) == manifests[key]
            except ValueError:
                same = False
            if not same:
                raise CrateError(f"manifest '{results / rel}' changed while it was copied into the crate (it is not "
                                 "the manifest the files were checked against): a process is writing the folder; "
                                 "nothing was written; export again when it has finished")
        st = dst.stat()
        size, newest = size + st.st_size, max(newest, st.st_mtime)
    return rel_files, size, newest


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).replace(microsecond=0).isoformat()


def _check_out(out: Path) -> None:
    refuse_results_folder(out, "RO-Crate")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise CrateError(f"--out '{out}' exists and is not a folder; choose another path")
    if out.is_dir() and any(out.iterdir()) and not (out / METADATA).is_file():
        raise CrateError(f"--out '{out}' is a folder with files and no {METADATA} (not a crate this command wrote); "
                         "choose an empty or new folder")


def _build(crate_dir: Path, results: Path, configs: Sequence[Path], analysis: dict[str, Any], *,
           repo: Path = REPO_ROOT, other_code: Sequence[str] = (),
           uncommitted: tuple[Sequence[str], Sequence[str]] = ((), ())) -> CrateSummary:
    """The crate in ``crate_dir`` (module doc); ``analysis``: the checked analysis manifest; ``repo``: the checkout
    whose workflow is shipped; ``other_code``: the parts whose recorded code is not its (shipped anyway:
    ``allow_other_code``); ``uncommitted``: its modified and untracked workflow files."""
    from rocrate.rocrate import ROCrate

    rel_files, size, newest = _copy_results(crate_dir, results, analysis)
    wf_files = _tracked(WORKFLOW_PATHS, repo)
    for rel in wf_files:
        dst = crate_dir / "workflow" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / rel, dst)
    config_paths = []
    for c in configs:
        dest = _in_crate(c, repo)
        if not (crate_dir / dest).is_file():
            (crate_dir / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(c, crate_dir / dest)
        config_paths.append(dest)

    facts = provenance(results, analysis, repo=repo)
    code = training_code_check(results, _run_folders(results), repo / "src" / "hasfl")
    findings = json.loads((results / "findings.json").read_text()).get("findings", [])

    # RO-Crate 1.1: the version the Workflow and Process Run Crate profiles (0.5) build on, and the newest whose
    # validator profile (roc-validator) they extend
    crate = ROCrate(gen_preview=False, version=RO_CRATE_VERSION)
    root = crate.root_dataset
    root["license"] = {"@id": LICENSE}
    root["name"] = f"hasfl-repro results '{results.name}'"
    root["description"] = (f"The results folder '{results.name}' of hasfl-repro (a reproduction of 'Capacity "
                           "Confounds and Coverage Guarantees in Adaptive Sub-model Federated Learning'): data "
                           "stages, training runs, tables, figures, findings.json and report.md, with the workflow "
                           "that made them under workflow/.")
    root["datePublished"] = _iso(newest)
    profiles = [crate.add_jsonld({"@id": url, "@type": "CreativeWork", "name": name, "version": version})
                for url, name, version in PROFILES]
    root["conformsTo"] = profiles
    dirty = _dirty_note(*uncommitted)
    version = f"{facts['commit']}{' (dirty)' if facts['dirty'] or dirty else ''}" + (
        " (not the code that made these results)" if other_code else "")
    wf_desc = ("The checkout's workflow at this commit"
               + (f", with uncommitted changes shipped as they are ({dirty})" if dirty else "") + ". "
               + (f"It is not the code that made these results: {'; '.join(other_code)}." if other_code else
                  "Its code digests are those the runs, data stages and analysis record."))
    wf = crate.add_workflow(dest_path="workflow/Snakefile", main=True, lang="snakemake",
                            lang_version=facts["snakemake"],
                            properties={"name": "hasfl-repro Snakemake workflow", "version": version,
                                        "description": wf_desc})
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
        for folder in result_folders(results, name):
            manifest = read_manifest(folder)
            if manifest is None:
                continue
            ident = manifest.get("identity") or {}
            digest = ident.get("digest") if name == "runs" else None
            props = {"name": folder.relative_to(results).as_posix()}
            if digest:
                props["identifier"] = str(digest)
            if name == "runs" and ident.get("code"):
                props["description"] = f"training code {ident['code']}"
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

    starts = [(f / MANIFEST).stat().st_mtime for f in finished_folders(results, "data")]
    end = (results / ANALYSIS_MANIFEST).stat().st_mtime
    if code.runs == code.unrecorded:
        code_note = "the runs record no training-code digest"
    elif code.matches:
        code_note = (f"the training code recorded by the {code.runs - code.unrecorded} runs is the shipped "
                     f"workflow's ({len(code.digests)} digests, one per method and dataset)")
    else:
        code_note = (f"the training code recorded by {len(code.differing)} of {code.runs - code.unrecorded} runs is "
                     f"not the shipped workflow's ({code.examples(code='')})")
    crate.add_action(wf, identifier="#run", object=objects, result=results_entities, properties={
        "name": f"snakemake all for the preset '{results.name}'",
        "description": (f"{facts['n_runs']} training runs (identities digest {facts['runs_digest']}); {code_note}; "
                        f"CPU kernels: {facts['kernels']}; CUDA: {facts['cuda']}; exported on: {facts['machine']}. "
                        "Start and end are file times: the first data stage's manifest and the analysis manifest."),
        **({"startTime": _iso(min(starts))} if starts else {}),
        "endTime": _iso(end),
        "actionStatus": {"@id": "http://schema.org/CompletedActionStatus"}})
    with warnings.catch_warnings():  # the entities' files are in place already (copied above): no source to copy
        warnings.filterwarnings("ignore", message="No source for", category=UserWarning)
        crate.write(crate_dir)
    return CrateSummary(out=crate_dir, files=len(rel_files), bytes=size, workflow_files=len(wf_files),
                        runs=facts["n_runs"])


def export_rocrate(results: str | Path, out: str | Path,
                   configfiles: Sequence[str | Path] | None = None, *, allow_other_code: bool = False,
                   repo: str | Path = REPO_ROOT) -> CrateSummary:
    """Write the finished results folder ``results`` as a Workflow Run RO-Crate in the folder ``out`` (module
    doc); ``configfiles``: the config files it was made with (default ``presets/<name>.yaml``), checked against
    the runs' recorded config slices; ``allow_other_code``: ship the workflow of ``repo`` (the checkout, default
    this one) even where the runs, data stages or analysis record other code (the metadata says so)."""
    try:
        import rocrate  # noqa: F401
    except ImportError as exc:
        raise CrateError("hasfl export rocrate needs the 'rocrate' extra: pip install -e '.[rocrate]'") from exc
    results, out, repo = Path(results), Path(out), Path(repo)
    if not kind_root(results, "runs").is_dir():
        raise CrateError(f"'{results}' has no runs/ folder (expected a results folder, e.g. results/quick)")
    if not (results / "findings.json").is_file():
        raise CrateError(f"'{results}' has no findings.json: its analysis has not finished (run the DAG's target "
                         "all first)")
    configs = _configfiles(results, configfiles, repo)
    _check_out(out)
    # as hasfl adopt: not while a DAG writes the folder, so the bytes copied are the bytes checked; a reader, so a
    # folder that cannot be written (read-only disk) is exported without making a lock file there
    lock = ResultsLock(results, write=False)
    lock.acquire()
    try:
        verify_results(results)
        analysis = verify_analysis(results)
        try:
            check_configfiles(results, _run_folders(results), configs, base=repo / "config.yaml")
        except ProvenanceError as exc:
            raise CrateError(str(exc)) from None
        other_code = _other_code(results, analysis, repo)
        if other_code and not allow_other_code:
            raise CrateError(f"'{results}' was not made by this checkout's code ({repo}), which the crate would ship "
                             f"as the workflow that made it: {'; '.join(other_code[:5])}"
                             + (f"; {len(other_code) - 5} more" if len(other_code) > 5 else "")
                             + ". Runs record code digests, not a commit: export from the checkout whose code they "
                             "record, or pass --allow-other-code (allow_other_code=True) to ship this checkout's "
                             "code marked as not theirs")
        uncommitted = _uncommitted(WORKFLOW_PATHS, repo)
        if any(uncommitted):
            warnings.warn(f"the crate's workflow is not a commit: the checkout {repo} has uncommitted changes under "
                          f"{', '.join(WORKFLOW_PATHS)}, shipped as they are ({_dirty_note(*uncommitted, limit=20)}); the "
                          "metadata marks the version dirty and lists them. Commit them for a crate whose workflow "
                          "is a commit", CrateWarning, stacklevel=2)
        # an earlier crate is renamed aside and deleted (``_check_out`` refused anything else)
        with staged_folder(out) as staging:
            summary = _build(staging, results, configs, analysis, repo=repo, other_code=other_code,
                             uncommitted=uncommitted)
    finally:
        lock.release()
    return replace(summary, out=out)
