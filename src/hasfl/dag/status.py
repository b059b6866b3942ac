"""The one walk over a preset's outputs: what each data-stage, run and run-evaluation folder of a results folder is
(:class:`Status`: current, to rerun and why, holding another job's output, finished in the run store so only
linked, missing), read from manifests and store entries only; the session and ``hasfl verify --config`` read it.
Also what the store must hold before a build starts (:func:`check_store`) and the check of each link against its
entry's key (:func:`link_problems`).

Torch-free: the Snakefile imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hasfl.dag.identity import Checkout, digest
from hasfl.dag.outputs import (Audit, RunRecord, audit, budget_of, data_key, data_source, evaluation_identity,
                               other_kernels, preset_jobs)
from hasfl.dag.store import KINDS, STORE, entry_of, manifest_of, store_of, store_refusal, unwritable
from hasfl.integrity import MANIFEST, IntegrityError
from hasfl.layout import data_folder, eval_folder, result_folders, run_folder
from hasfl.registry import METHODS

__all__ = ["Status", "check_store", "finished_evaluations", "in_store", "link_problems", "linked_entry",
           "preset_folders", "status"]


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
            manifest = manifest_of(folder)
            if linked is None or manifest is None or linked[0] != kind:
                continue
            identity = manifest.get("identity")
            if not isinstance(identity, Mapping):
                got = None
            elif kind == "runs":
                cfg = identity.get("config") or {}
                stage = manifest_of(results / data_folder(str(cfg.get("dataset")), str(cfg.get("seed"))))
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
        rel = data_folder(d, sd)
        manifest = manifest_of(entry_of(store, "data", data_key(data_identity(data_config(config, d), sd, data_code))))
        if manifest is None:
            continue
        stages[rel] = manifest
        if not (results / rel / MANIFEST).is_file():
            found.append(rel)
    if device_class is None:
        return found
    entries: dict[str, Path] = {}  # run folder -> its finished entry in the store

    def budget(rel: str, method: str, d: str, sd: int) -> dict[str, Any] | None:
        """The budget a control matches: read from its budget run's entry (its run.json) only when a control
        not finished here needs it, so a plan over a finished folder reads no run file."""
        try:
            return budget_of(entries[rel] / "run.json", method, d, sd)[2] if rel in entries else None
        except (OSError, ValueError, KeyError, TypeError, IntegrityError):
            return None

    for d, m, sd in sorted(runs, key=lambda job: METHODS[job[1]].budget_of is not None):  # budget runs first
        rel, data_rel = run_folder(d, m, sd), data_folder(d, sd)
        matched = METHODS[m].budget_of
        here = (results / rel / MANIFEST).is_file()
        if data_rel not in stages or (matched and here):
            continue  # a control finished here: nothing to predict (its evaluations read its own manifest)
        matching = budget(run_folder(d, matched, sd), matched, d, sd) if matched else None
        if matched and matching is None:
            continue
        record = RunRecord.planned(config, d, m, sd, code=train_code(m, d), device_class=device_class)
        entry = entry_of(store, "runs", record.reading(stages[data_rel]).matching(matching).key())
        manifest = manifest_of(entry)
        if manifest is None or other_kernels(manifest.get("identity") or {}, entry, device_class):
            continue  # not finished, or made under another kernel pin: its job fails and says so
        finished_runs[rel], entries[rel] = manifest, entry
        if not here:
            found.append(rel)
    if eval_code is not None:
        found += _evaluations_in_store(config, results, store, stages, finished_runs, eval_code, device_class)
    return found


def _evaluations_in_store(config: Mapping[str, Any], results: Path, store: Path, stages: Mapping[str, Any],
                          runs: Mapping[str, Any], eval_code: Callable[[str], str],
                          device_class: str = "cpu") -> list[str]:
    """The run evaluations of the preset whose entry the store holds and ``results`` does not (:func:`in_store`): of
    every run finished in the store (``runs``: folder -> its entry's manifest) or in ``results``, with its data
    stage's manifest (``stages``, else the folder's)."""
    from hasfl.analysis.evaluations import evaluation_specs

    found = []
    for d, m, sd in preset_jobs(config)[1]:
        rel, data_rel = run_folder(d, m, sd), data_folder(d, sd)
        run = runs.get(rel) or manifest_of(results / rel)
        stage = stages.get(data_rel) or manifest_of(results / data_rel)
        if run is None or stage is None:
            continue
        for table, spec in evaluation_specs(config, d, m, eval_code).items():
            where = f"{eval_folder(d, m, sd)}/{table}"
            identity = evaluation_identity(table, spec["code"], spec["params"], run, spec["run_files"], stage,
                                           spec["data_files"], device_class)
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

    results = Path(results)
    out = []
    for d, m, sd in preset_jobs(config)[1]:
        for t in run_tables(d, m, config["datasets"], config["methods"]):
            manifest = manifest_of(results / eval_folder(d, m, sd) / t)
            function = ARTIFACTS[t].per_run
            if manifest is None or (eval_code is not None and function is not None
                                    and (manifest.get("identity") or {}).get("code") != eval_code(function)):
                continue
            out.append(f"{eval_folder(d, m, sd)}/{t}")
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
                  eval_code=code.evaluation, device_class=device_class)
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
    return sorted(data_folder(d, sd) for d, sd in data) + sorted(run_folder(d, m, sd) for d, m, sd in runs)


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
    why = unwritable(store)
    if why is None:
        for kind in KINDS:
            why = why or (unwritable(store / kind) if (store / kind).is_dir() else None)
    if why is None:
        return
    done, again = set(linked), set(rerun)
    pending = [f for f in preset_folders(config)
               if f in again or (f not in done and not (results / f / MANIFEST).is_file())]
    if pending:
        raise store_refusal(store, why, f"this build ({len(pending)} data-stage and run folders of '{results}' "
                                         f"the store does not hold, e.g. {', '.join(pending[:3])})")
