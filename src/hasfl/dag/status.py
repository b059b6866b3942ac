"""The one walk over a preset's outputs: what each data-stage, run and run-evaluation folder of a results folder is
(:class:`Status`: current, to rerun and why, holding another job's output, finished in the run store so only
linked, missing), read from manifests and store entries only; the session and ``hasfl verify --config`` read it.
Also what the store must hold before a build starts (:func:`check_store`) and the check of each link against its
entry's key (:func:`link_problems`).

Torch-free: the Snakefile imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hasfl.dag.identity import Checkout, digest
from hasfl.dag.outputs import (Audit, Manifests, RunRecord, audit, budget_of, data_key, data_source,
                               evaluation_identity, other_kernels, preset_jobs)
from hasfl.dag.store import KINDS, STORE, entry_of, run_entry, store_of, store_refusal, unwritable
from hasfl.integrity import MANIFEST, IntegrityError
from hasfl.layout import data_folder, result_folders, run_folder
from hasfl.registry import METHODS

__all__ = ["Status", "check_store", "link_problems", "linked_entry", "preset_folders", "status"]


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
    Every folder of ``results``, of any preset (the status walk checks its preset's folders as it passes them)."""
    results = Path(results)
    read = Manifests()
    found = (_link_problem(results, kind, folder.relative_to(results).as_posix(), read(folder), read)
             for kind in KINDS for folder in result_folders(results, kind))
    return [problem for problem in found if problem is not None]


def _link_problem(results: Path, kind: str, rel: str, manifest: Mapping[str, Any] | None,
                  read: Manifests) -> str | None:
    """Why the folder ``rel`` of ``kind`` links a store entry holding another key's content (:func:`link_problems`),
    None when it does not (or links nothing, or is not finished). A run's key reads its data stage (the folder's
    ``data/<d>/seed<s>``), an evaluation's is its identity's digest."""
    linked = linked_entry(results / rel)
    if linked is None or manifest is None or linked[0] != kind:
        return None
    identity = manifest.get("identity")
    if not isinstance(identity, Mapping):
        got = None
    elif kind == "runs":
        cfg = identity.get("config") or {}
        stage = read(results / data_folder(str(cfg.get("dataset")), str(cfg.get("seed"))))
        source = (stage or {}).get("identity")
        got = RunRecord.recorded(identity, None if source is None else data_source(source)).key()
    else:
        got = (data_key if kind == "data" else digest)(identity)
    if got == linked[1]:
        return None
    return (f"{rel} links store entry {kind}/{linked[1][:16]}, whose manifest is another key's content "
            f"({'no identity' if got is None else 'its identity hashes to ' + got[:16]}); delete that "
            "entry folder and this folder (the build then recomputes it)")


# ------------------------------------------------------------------------------------------------ prediction
class _StoreSide:
    """The run store's side of the status walk (:class:`hasfl.dag.outputs.Visitor`), at each folder of the preset
    as the audit passes it: whether a folder not finished here is finished in the store, so its job only links (the
    pre-flight does not price it), and whether a finished folder's link holds its key (:func:`_link_problem`).
    Reads manifests only (the job checks every file). A run is predicted only with a known ``device_class`` (what a
    job here would record; None before a job runs); a run evaluation of a run finished here or in the store, with
    the run's and its data stage's manifests (the store's, else the folder's)."""

    def __init__(self, config: Mapping[str, Any], results: Path, code: Checkout, device_class: str | None,
                 read: Manifests) -> None:
        self.config, self.results, self.code, self.device_class, self.read = config, results, code, device_class, read
        self.store = store_of(results)
        self.open = self.store.is_dir()
        self.found: list[str] = []  # not finished here, finished in the store
        self.links: list[str] = []  # finished here, linking another key's entry
        self.stages: dict[str, Mapping[str, Any]] = {}  # data folder -> the manifest of its entry
        self.runs: dict[str, tuple[Path, Mapping[str, Any]]] = {}  # run folder -> its finished entry, its manifest
        self.upstream: dict[tuple[str, str, int], tuple[Any, Any]] = {}  # job -> its run's and stage's manifests

    def _here(self, rel: str, kind: str, manifest: Mapping[str, Any] | None) -> bool:
        problem = _link_problem(self.results, kind, rel, manifest, self.read)
        if problem is not None:
            self.links.append(problem)
        return (self.results / rel / MANIFEST).is_file()

    def data(self, rel: str, dataset: str, seed: int, manifest: Mapping[str, Any] | None) -> None:
        from hasfl.config import data_config
        from hasfl.dag.identity import data_identity

        here = self._here(rel, "data", manifest)
        if not self.open:
            return
        key = data_key(data_identity(data_config(self.config, dataset), seed, self.code.data))
        entry = self.read(entry_of(self.store, "data", key))
        if entry is None:
            return
        self.stages[rel] = entry
        if not here:
            self.found.append(rel)

    def _budget(self, rel: str, method: str, dataset: str, seed: int) -> dict[str, Any] | None:
        """The budget a control matches: read from its budget run's entry (its run.json) only when a control not
        finished here needs it, so a plan over a finished folder reads no run file."""
        try:
            if rel not in self.runs:
                return None
            entry, manifest = self.runs[rel]
            return budget_of(entry / "run.json", method, dataset, seed, manifest)[2]
        except (OSError, ValueError, KeyError, TypeError, IntegrityError):
            return None

    def run(self, rel: str, dataset: str, method: str, seed: int, manifest: Mapping[str, Any] | None) -> None:
        here = self._here(rel, "runs", manifest)
        data_rel, matched = data_folder(dataset, seed), METHODS[method].budget_of
        if not self.open or self.device_class is None or data_rel not in self.stages or (matched and here):
            return  # a control finished here: nothing to predict (its evaluations read its own manifest)
        matching = self._budget(run_folder(dataset, matched, seed), matched, dataset, seed) if matched else None
        if matched and matching is None:
            return
        record = RunRecord.planned(self.config, dataset, method, seed, code=self.code.train(method, dataset),
                                   device_class=self.device_class)
        _, entry = run_entry(self.store, record.reading(self.stages[data_rel]).matching(matching))
        found = self.read(entry)
        if found is None or other_kernels(found.get("identity") or {}, entry, self.device_class):
            return  # not finished, or made under another kernel pin: its job fails and says so
        self.runs[rel] = (entry, found)
        if not here:
            self.found.append(rel)

    def evaluation(self, rel: str, table: str, spec: Mapping[str, Any], job: tuple[str, str, int],
                   manifest: Mapping[str, Any] | None) -> None:
        here = self._here(rel, "evals", manifest)
        if not self.open or self.device_class is None or here:
            return
        if job not in self.upstream:
            d, m, sd = job
            run_rel, data_rel = run_folder(d, m, sd), data_folder(d, sd)
            self.upstream[job] = (self.runs[run_rel][1] if run_rel in self.runs else self.read(self.results / run_rel),
                                  self.stages.get(data_rel) or self.read(self.results / data_rel))
        run, stage = self.upstream[job]
        if run is None or stage is None:
            return
        identity = evaluation_identity(table, spec["code"], spec["params"], run, spec["run_files"], stage,
                                       spec["data_files"], self.device_class)
        if (entry_of(self.store, "evals", digest(identity)) / MANIFEST).is_file():
            self.found.append(rel)


@dataclass
class Status(Audit):
    """Every output of a preset in one walk (:func:`status`), by folder relative to the results folder: the audit's
    ``current`` (finished, what the preset would make), ``rerun`` (finished, not what it would make: why),
    ``errors`` (:attr:`foreign`: holds another job's output or links another key's store entry, never rerun, named)
    and ``evaluated`` (run evaluations finished here, what this checkout's code would make), and ``in_store`` (not
    finished here, its store entry is: only linked) and ``missing`` (data-stage and run folders made by a job)."""

    in_store: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

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
    read, with the digests of the checkout ``code`` (:class:`hasfl.dag.identity.Checkout`): one pass over the
    preset's data-stage, run and run-evaluation folders (:func:`hasfl.dag.outputs.audit`, in its order), each
    compared with what the preset would make (current, rerun, foreign, evaluated) and, as it is passed, with the
    run store (:class:`_StoreSide`: in the store, its link's key); what neither holds is missing."""
    results = Path(results)
    read = Manifests()  # each manifest file read once in the walk, a folder's and its entry's alike
    store = _StoreSide(config, results, code, device_class, read)
    found = audit(config, results, data_code=code.data, analysis_code=code.analysis, train_code=code.train,
                  eval_code=code.evaluation, device_class=device_class, visit=store, read=read)
    found.errors += store.links
    done = {*found.current, *found.rerun, *store.found}
    foreign = {e.split(" ", 1)[0] for e in found.errors}
    missing = [f for f in preset_folders(config) if f not in done and f not in foreign]
    return Status(current=found.current, rerun=found.rerun, errors=found.errors, evaluated=found.evaluated,
                  in_store=store.found, missing=missing)


def preset_folders(config: Mapping[str, Any]) -> list[str]:
    """The data-stage and run folders (relative to the results folder) a preset's build makes: data stages, then
    runs, each sorted (:func:`hasfl.dag.outputs.preset_jobs`)."""
    data, runs = preset_jobs(config)
    return sorted(data_folder(d, sd) for d, sd in data) + sorted(run_folder(d, m, sd) for d, m, sd in runs)


def check_store(config: Mapping[str, Any], results: str | Path, *, linked: Iterable[str],
                rerun: Iterable[str] = ()) -> None:
    """Refuse, before any job, a build whose run store cannot be written (a read-only file system, no write
    permission) while one of its jobs would write an entry there: a folder of the preset (:func:`preset_folders`)
    neither finished in ``results`` nor finished in the store (``linked``: the status walk's ``in_store``), or one the
    identity check reruns (``rerun``). A store that cannot be written but holds every entry the build needs passes:
    those jobs only link (rather than every job dying with a raw ``OSError``, link-only ones too). The session
    calls it where it opens the store, after the status walk (:func:`status`).

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
