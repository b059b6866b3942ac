"""A run's identity in one place: :class:`RunRecord`.

Everything a training run's bytes depend on that is known before it trains: its canonical config slice
(:func:`hasfl.dag.identity.run_slice`), the training code (:func:`hasfl.integrity.training_code_digest`), the
device class it computes on, what it takes from its data stage (:func:`data_source` and the tables' sha256) and the
run whose budget it matches (:func:`budget_of`). One frozen record gives

* :meth:`RunRecord.key`: the run store's key (``.store/runs/<key>``);
* :meth:`RunRecord.identity`: the identity a run's ``manifest.json`` records (with the dataset tensors' digest,
  which only the job that loads the data knows: :func:`hasfl.integrity.run_identity` is its file format);
* :meth:`RunRecord.stale` / :meth:`RunRecord.why_stale`: whether a finished run's recorded identity is this record's.

The device class names the CPU kernels too (:func:`cpu_class`): a run made under the portable kernel pin and one made
without it are two entries of the store, a resume never crosses them (the checkpoint carries the identity) and a
build under one never keeps the other's run in its folder (:meth:`RunRecord.why_stale`).

Every site that keys, links, audits or gates a run builds a record here: the train rule's job
(:func:`hasfl.dag.jobs.train_run`), the store's prediction (:func:`hasfl.dag.status.status`), the check of an
entry against its key, adoption, the identity audit (:func:`hasfl.dag.outputs.audit`, also ``hasfl verify
--config``) and the gate before the analysis (:func:`hasfl.dag.jobs.verify_runs_job`).

Values that change no byte on a device class are keyed at their default there (:data:`INERT_ON`): with ``device:
auto`` on a CPU machine, ``cuda_deterministic`` is part of the slice the job receives but not of what decides
whether a finished run is this one. The default is the value every existing entry was keyed with, so no key changes.

Torch-free: the Snakefile imports this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from hasfl.config import data_config, dotted_differences
from hasfl.dag.identity import PACKAGE, analysis_identity, canonical, data_identity, digest, run_slice
from hasfl.device import kernel_pin
from hasfl.integrity import MANIFEST, IntegrityError, read_manifest, run_identity, training_code_digest
from hasfl.io import InputFileError
from hasfl.layout import data_folder, eval_folder, parse_folder, result_folders, run_folder
from hasfl.registry import METHODS

__all__ = ["DATA_TABLES", "INERT_ON", "Audit", "Manifests", "RunRecord", "Visitor", "audit", "budget_of", "cpu_class",
           "data_key", "data_source", "evaluation_identity", "evaluation_staleness", "here", "made_under",
           "other_kernels", "keyed_config", "job_record", "preset_jobs", "tables_of"]

#: Data-stage tables a run reads (their sha256 are part of its key).
DATA_TABLES = ("partition.parquet", "clients.parquet")
#: Config keys of a run slice that change no byte on a device class, with the value a run there is keyed and
#: compared at: CUDA's deterministic algorithms never touch a CPU run (:func:`hasfl.config.run_config` keeps the key
#: for ``device: auto``, which may resolve to a GPU).
INERT_ON: dict[str, dict[str, Any]] = {"cpu": {"cuda_deterministic": True}}


def data_key(identity: Mapping[str, Any]) -> str:
    """The store key of a data stage: the digest of its identity (:func:`hasfl.dag.identity.data_identity`)."""
    return digest(dict(identity))


def data_source(identity: Mapping[str, Any]) -> str:
    """What a run takes from its data stage besides the tables: the digest of the stage's identity without its code
    (dataset, seed, config slice, raw-file sha256). The code that reads the data is part of the run's training code
    (:data:`hasfl.integrity.TRAINING_CODE` holds ``data/``), so a data stage recomputed by other code into the same
    tables leaves every run's key as it was."""
    return digest({k: v for k, v in dict(identity).items() if k != "code"})


def tables_of(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The sha256 of the data-stage tables a run reads (:data:`DATA_TABLES`), from the stage's manifest."""
    return {n: str(((manifest.get("files") or {}).get(n) or {}).get("sha256")) for n in DATA_TABLES}


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def cpu_class(pin: Mapping[str, str] | None = None) -> str:
    """The device class of work done on the CPU under the kernel pin ``pin`` (the kernel-choosing variables set:
    :func:`hasfl.device.kernel_pin`; default this process's): ``cpu`` without one (the class every run had before the
    pin entered it, so no unpinned key moved), else ``cpu:<NAME>=<value>,...`` by name. The pin chooses the
    instruction set of ATen's and oneDNN's kernels and MKL's path, which change float sums in their last bits and a
    run's bytes with them (docs/guide/gpu.md "Bytes across machines"), so it is part of what a run is."""
    pin = kernel_pin() if pin is None else dict(pin)
    return "cpu" if not pin else "cpu:" + ",".join(f"{k}={pin[k]}" for k in sorted(pin))


def here(device_class: str) -> str:
    """``device_class`` as work here computes it: ``cpu`` under this process's kernel pin (:func:`cpu_class`), any
    other class as it is (a GPU's kernels are its own)."""
    return cpu_class() if device_class == "cpu" else device_class


def made_under(identity: Mapping[str, Any], folder: Path | None = None) -> str:
    """The device class a finished run (manifest ``identity``, files in ``folder``) was made under. A CPU run
    recorded before the kernel pin was part of its class says only ``cpu``; its ``timings.json`` (written by every
    run: :func:`hasfl.fl.runtime.cpu_kernels`) names the pin it ran under."""
    recorded = str(identity.get("device_class"))
    if recorded != "cpu" or folder is None:
        return recorded
    timings = _manifest_json(Path(folder) / "timings.json") or {}
    pin = timings.get("isa_env")
    return cpu_class(pin) if isinstance(pin, Mapping) else recorded


def other_kernels(identity: Mapping[str, Any], folder: Path, device_class: str | None) -> str | None:
    """Why the finished run of manifest ``identity`` in ``folder`` (a store entry) cannot serve work on
    ``device_class`` although its key is that work's: it was recorded as ``cpu`` before the kernel pin was part of
    the class, and made under a pin this work does not run (:func:`made_under`). None when it can serve."""
    if device_class is None:
        return None
    made = made_under(identity, folder)
    if not _other_pin(made, device_class):
        return None
    return (f"store entry '{folder}' holds a run made under {_pin_words(made)} (recorded before the kernel pin was "
            f"part of a run's key), and this build runs {_pin_words(device_class)}: it cannot serve this build. Run "
            "the build under the same pin (docs/guide/gpu.md, \"Bytes across machines\"), or move that entry out of "
            "the store to train the run again")


def _other_pin(made: str, device_class: str) -> bool:
    """Whether CPU work made under class ``made`` ran other CPU kernels than work on ``device_class`` runs (both of
    the CPU, another pin); classes of other devices are not compared here."""
    return made != device_class and _base(made) == _base(device_class) == "cpu"


def _base(device_class: str | None) -> str:
    """The kind of device of a class: ``cpu`` or ``cuda`` (what :data:`INERT_ON` is keyed by)."""
    return str(device_class).split(":", 1)[0]


def keyed_config(config: Mapping[str, Any], device_class: str | None) -> dict[str, Any]:
    """``config`` as a run on ``device_class`` is keyed and compared: :data:`INERT_ON`'s keys at their default."""
    cfg = dict(_plain(dict(config)))
    for name, value in INERT_ON.get(_base(device_class), {}).items():
        if name in cfg:
            cfg[name] = value
    return cfg


@dataclass(frozen=True)
class RunRecord:
    """What one run is, before it trains. ``device_class`` None: not known yet (a plan on a machine that may not
    run the job); ``data_stage`` None: a data stage written before identities were recorded."""

    config: Mapping[str, Any]
    code: str
    device_class: str | None = None
    data_stage: str | None = None
    inputs: Mapping[str, str] = field(default_factory=dict)
    budget: Mapping[str, Any] | None = None

    # ------------------------------------------------------------------------------------------- made from
    @classmethod
    def planned(cls, config: Mapping[str, Any], dataset: str, method: str, seed: int, *, code: str,
                device_class: str | None = None) -> RunRecord:
        """The run a preset's ``config`` asks for (its slice), trained by ``code``."""
        return cls(run_slice(config, dataset, method, int(seed)), str(code), device_class)

    @classmethod
    def recorded(cls, identity: Mapping[str, Any], data_stage: str | None) -> RunRecord:
        """The record a finished run's manifest ``identity`` holds (``data_stage``: its stage's :func:`data_source`)."""
        return cls(dict(identity.get("config") or {}), str(identity.get("code")),
                   str(identity.get("device_class")), data_stage, dict(identity.get("inputs") or {}),
                   identity.get("budget"))

    def reading(self, data_manifest: Mapping[str, Any]) -> RunRecord:
        """This run reading the data stage of manifest ``data_manifest`` (its source and its tables' sha256)."""
        ident = data_manifest.get("identity")
        return replace(self, data_stage=None if ident is None else data_source(ident),
                       inputs=tables_of(data_manifest))

    def matching(self, budget: Mapping[str, Any] | None) -> RunRecord:
        """This run matching the budget run ``budget`` (:func:`budget_of`'s third value)."""
        return replace(self, budget=None if budget is None else dict(budget))

    def on(self, device_class: str | None) -> RunRecord:
        """This run computed on ``device_class``."""
        return replace(self, device_class=device_class)

    # ------------------------------------------------------------------------------------------- what it gives
    def key(self) -> str:
        """The run store's key: the digest of the config (keyed on the device class), the data source and tables, the
        training code, the budget run and the device class."""
        return digest({"config": keyed_config(self.config, self.device_class), "data_stage": self.data_stage,
                       "inputs": {n: str(self.inputs.get(n)) for n in DATA_TABLES}, "code": self.code,
                       "budget": None if self.budget is None else dict(self.budget),
                       "device_class": self.device_class})

    def identity(self, data_digest: str) -> dict[str, Any]:
        """The identity the run's manifest records (``data_digest``: the dataset tensors' digest)."""
        return run_identity(self.config, self.inputs, data_digest=data_digest, code=self.code, budget=self.budget,
                            device_class=str(self.device_class))

    def identify(self, inputs: Mapping[str, str], data_digest: str) -> dict[str, Any]:
        """What the training job calls with the tables it read (``inputs``: their sha256) and the dataset tensors'
        digest: :meth:`identity`, after refusing tables other than the ones this record names (a record made
        without a data stage, ``hasfl train`` without ``--data``, takes the tables the job built)."""
        if self.inputs and dict(inputs) != dict(self.inputs):
            raise IntegrityError(f"the data-stage tables this run read (sha256 {dict(inputs)}) are not the ones its "
                                 f"identity names ({dict(self.inputs)}); run it from the data stage it was planned on")
        return replace(self, inputs=dict(inputs)).identity(data_digest)

    def compared(self, identity: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the finished run's config, this record's) as a run on the recorded device class is keyed
        (:func:`keyed_config`): what :meth:`stale` compares."""
        on = identity.get("device_class")
        return keyed_config(identity.get("config") or {}, on), keyed_config(self.config, on)

    def stale(self, identity: Mapping[str, Any]) -> str | None:
        """What makes the finished run of manifest ``identity`` not this one: ``"config"``, ``"code"``, or None."""
        have, want = self.compared(identity)
        if have != want:
            return "config"
        return "code" if identity.get("code") != self.code else None

    def why_stale(self, identity: Mapping[str, Any], folder: Path | None = None) -> str | None:
        """:meth:`stale` in words for a rerun line: ``"config (<keys>)"``, ``"training code"``, ``"CPU kernels
        (...)"``, or None. The kernels are compared when both this record and the run (``folder``: where its files
        lie, :func:`made_under`) are of the CPU: a GPU build keeps a folder's CPU runs, which its analysis refuses to
        mix (:func:`hasfl.integrity.device_mix`), but a pinned build never keeps an unpinned run of the same config."""
        have, want = self.compared(identity)
        if have != want:
            return "config (" + ", ".join(_diff_keys(have, want)) + ")"
        if identity.get("code") != self.code:
            return "training code"
        if self.device_class is None:
            return None  # the class a build computes on is not known: its kernels cannot be compared
        made = made_under(identity, folder)
        return (f"CPU kernels (made under {_pin_words(made)}, this build runs {_pin_words(self.device_class)})"
                if _other_pin(made, self.device_class) else None)


def _pin_words(device_class: str) -> str:
    pin = device_class.split(":", 1)[1] if ":" in device_class else ""
    return f"the kernel pin {pin}" if pin else "no kernel pin"


def evaluation_identity(table: str, code: str, params: Mapping[str, Any], run_manifest: Mapping[str, Any],
                        run_files: Iterable[str], data_manifest: Mapping[str, Any],
                        data_files: Iterable[str], device_class: str = "cpu") -> dict[str, Any]:
    """What a run's evaluation for ``table`` is (its store key is the digest of this): the table, the evaluation's
    code digest (:func:`hasfl.dag.identity.evaluation_code_digest`), its config values without where files lie
    (``params``; ``data.data_dir`` dropped: the raw files are identified by the data stage), the sha256 of every run
    file it reads (from the run's manifest), and of its data stage what the run takes from it besides the tables
    (:func:`data_source`: dataset, seed, config slice, raw-file sha256) and the sha256 of the data-stage tables it
    reads; evaluated on a GPU, its device class (``cuda:<name>``; a CPU evaluation's identity has no such key, as
    before GPU evaluations existed, so no CPU key moved)."""
    cfg = dict(params)
    if isinstance(cfg.get("data"), Mapping):
        cfg["data"] = {k: v for k, v in dict(cfg["data"]).items() if k != "data_dir"}
    listed = run_manifest.get("files") or {}
    stage = data_manifest.get("files") or {}
    ident = data_manifest.get("identity")
    out = {"table": table, "code": code, "params": canonical(cfg),
           "run": {n: str((listed.get(n) or {}).get("sha256")) for n in sorted(run_files)},
           "data": {"source": None if ident is None else data_source(ident),
                    "files": {n: str((stage.get(n) or {}).get("sha256")) for n in sorted(data_files)}}}
    return out if device_class == "cpu" else {**out, "device_class": str(device_class)}


def evaluation_staleness(have: Mapping[str, Any] | None, want: Mapping[str, Any]) -> str | None:
    """Why a finished evaluation whose manifest records ``have`` is not the one of identity ``want``
    (:func:`evaluation_identity` of this checkout, config, run and data stage), None when it is. The device class is
    where it was computed, not what it is (a run's is part of the run's files' sha256): it is not compared."""
    if not isinstance(have, Mapping):
        return "written without an identity"
    parts = []
    if have.get("code") != want["code"]:
        parts.append("evaluation code")
    if have.get("params") != want["params"]:
        parts.append("config (" + ", ".join(_diff_keys(have.get("params"), want["params"])) + ")")
    if have.get("run") != want["run"]:
        parts.append("run files (it evaluated other files than the run folder holds now)")
    if have.get("data") != want["data"]:
        parts.append("data stage (it read another data stage than the one of its run)")
    return "; ".join(parts) or None


def _diff_keys(a: Any, b: Any) -> list[str]:
    """Dotted keys at which two canonical values differ (:func:`hasfl.config.dotted_differences`)."""
    return [key for key, _, _ in dotted_differences(a, b)]


class Visitor(Protocol):
    """What a walk over a preset's outputs does at each folder beside the audit (the run store's side of the status
    walk, :func:`hasfl.dag.status.status`): :func:`audit` calls it once per data-stage, run and run-evaluation
    folder of the preset, in its order (data stages, budget runs, their controls, evaluations), with the folder's
    manifest here (None: not finished here), so one pass reads each folder once."""

    def data(self, rel: str, dataset: str, seed: int, manifest: Mapping[str, Any] | None) -> None:
        """A data-stage folder."""

    def run(self, rel: str, dataset: str, method: str, seed: int, manifest: Mapping[str, Any] | None) -> None:
        """A run folder (budget runs before the controls that match them)."""

    def evaluation(self, rel: str, table: str, spec: Mapping[str, Any], job: tuple[str, str, int],
                   manifest: Mapping[str, Any] | None) -> None:
        """A run evaluation of ``job`` (dataset, method, seed) for ``table`` (its spec:
        :func:`hasfl.analysis.evaluations.evaluation_specs`)."""


@dataclass
class Audit:
    """What :func:`audit` found. ``rerun``: output folder (relative to the results folder) -> why it is
    not what the preset would make (Snakemake reruns it); ``errors``: folders that hold another job's
    output (never rerun); ``current``: folders that are what the preset would make; ``evaluated``: run evaluations
    that are (with ``eval_code``)."""

    rerun: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    #: run evaluations (``evals/<d>/<m>/seed<s>/<table>``) that are what the preset would make, of jobs not rerun
    evaluated: list[str] = field(default_factory=list)

    def raise_errors(self) -> None:
        """One :class:`IntegrityError` listing every folder that holds another job's output."""
        if self.errors:
            raise IntegrityError("present outputs hold other jobs' results (nothing was deleted):\n  - "
                                 + "\n  - ".join(self.errors))

    def lines(self) -> list[str]:
        """One line per output to rerun, for the DAG's console."""
        return [f"{folder}: {why}" for folder, why in sorted(self.rerun.items())]


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return read_manifest(folder)
    except IntegrityError:
        return None  # unreadable: verify_results names it


class Manifests:
    """The manifests one walk reads, each file once: a folder's manifest by the file it resolves to (a finished
    folder's manifest is a link to its store entry's, so a folder and its entry are one read), None where there is
    none or it is unreadable (:func:`hasfl.integrity.verify_results` names it). Read-only: the walk's callers share
    the dicts it returns."""

    def __init__(self) -> None:
        self._read: dict[Path, dict[str, Any] | None] = {}

    def __call__(self, folder: Path) -> dict[str, Any] | None:
        key = (Path(folder) / MANIFEST).resolve()
        if key not in self._read:
            self._read[key] = _manifest(Path(folder))
        return self._read[key]


def preset_jobs(config: Mapping[str, Any]) -> tuple[list[tuple[str, int]], list[tuple[str, str, int]]]:
    """The data stages (dataset, seed) and runs (dataset, method, seed) a preset's build makes."""
    seeds = [int(s) for s in config["seeds"]]
    return ([(d, s) for d in config["datasets"] for s in seeds],
            [(d, m, s) for d in config["datasets"] for s in seeds for m in config["methods"]])


def _present_jobs(config: Mapping[str, Any] | None, results: Path) -> tuple[list[tuple[str, int]],
                                                                          list[tuple[str, str, int]]]:
    """The data stages (dataset, seed) and runs (dataset, method, seed) to check: the preset's jobs, or
    without a preset every folder under ``results`` whose path names a job."""
    if config is not None:
        return preset_jobs(config)

    named = [parse_folder(f.relative_to(results)) for kind in ("data", "runs") for f in result_folders(results, kind)]
    data = [(n.dataset, n.seed) for n in named if n is not None and n.kind == "data"]
    runs = [(n.dataset, str(n.method), n.seed) for n in named if n is not None and n.kind == "runs"
            and n.method in METHODS]
    return data, runs


def audit(config: Mapping[str, Any] | None, results: Path, *, data_code: str | None = None, train_code: Any = None,
          analysis_code: str | None = None, eval_code: Any = None, root: Path = PACKAGE,
          device_class: str | None = None, visit: Visitor | None = None, read: Manifests | None = None) -> Audit:
    """Compare every finished data-stage and run folder under ``results`` with what it should be.

    Always: each folder holds the job its path names (else an error: it is never rerun), each run was
    trained on the tables its data-stage folder holds now and each random-budget control matched the run
    in its budget folder (the sha256 chain). With a preset ``config`` (its jobs only): also the identity
    the preset would give each folder (module docstring). ``data_code``: the data-stage code digest the DAG
    uses; ``train_code(method, dataset)``: the training-code digest a run must carry (default: the
    engine's of ``root``, without glue); ``analysis_code``: the analysis code digest (with it, a finished
    analysis -- ``analysis.manifest.json`` -- of another config or code is rerun too: ``rerun["analysis"]``);
    ``eval_code(function, method, dataset)``: the per-run evaluation code digest (with it, each finished run
    evaluation is compared with the identity this checkout, the preset and its run folder give it:
    :func:`_audit_evaluations`);
    ``device_class``: the class a build here computes on (:func:`cpu_class`; None: not known, kernels not compared);
    ``visit``: called at each folder of the preset (:class:`Visitor`; with a preset only); ``read``: the walk's
    manifests (:class:`Manifests`, shared with ``visit``; a new one by default)."""
    found = Audit()
    read = read if read is not None else Manifests()
    codes: dict[tuple[str, str], str] = {}

    def code_of(m: str, d: str) -> str:
        if (m, d) not in codes:
            codes[m, d] = train_code(m, d) if train_code is not None else training_code_digest(m, d, root)
        return codes[m, d]

    data_jobs, run_jobs = _present_jobs(config, results)
    tables: dict[str, dict[str, str]] = {}
    for d, sd in data_jobs:
        rel = data_folder(d, sd)
        manifest = read(results / rel)
        if visit is not None and config is not None:
            visit.data(rel, d, sd, manifest)
        if manifest is None:
            continue
        there = ((manifest.get("data_config") or {}).get("dataset"), manifest.get("seed"))
        if there != (d, sd):
            found.errors.append(f"{rel} holds the data stage of {there[0]} seed {there[1]}; move it back or "
                                "delete the folder")
            continue
        tables[rel] = {n: str(f.get("sha256")) for n, f in manifest.get("files", {}).items()}
        why = None
        if config is not None:
            want = data_identity(data_config(config, d), sd, str(data_code))
            have = manifest.get("identity")
            if have is None:
                why = "written before data-stage identities were recorded"
            elif have.get("config") != want["config"]:
                why = "config (" + ", ".join(_diff_keys(have.get("config"), want["config"])) + ")"
            elif have.get("raw") != want["raw"]:
                why = "raw files (" + ", ".join(_diff_keys(have.get("raw"), want["raw"])) + ")"
            elif have.get("code") != want["code"]:
                why = "data-stage code"
        if why is None:
            found.current.append(rel)
        else:
            found.rerun[rel] = why
    digests: dict[str, Any] = {}
    # budget runs first: a control's chain reads its budget run's digest
    for d, m, sd in sorted(run_jobs, key=lambda job: METHODS[job[1]].budget_of is not None):
        rel = run_folder(d, m, sd)
        manifest = read(results / rel)
        if visit is not None and config is not None:
            visit.run(rel, d, m, sd, manifest)
        if manifest is None:
            continue
        identity = manifest.get("identity") or {}
        cfg = identity.get("config") or {}
        there = (cfg.get("dataset"), cfg.get("method"), cfg.get("seed"))
        if there != (d, m, sd):
            found.errors.append(f"{rel} holds the run of {there[0]} / {there[1]} / seed {there[2]}; move it "
                                f"back to runs/{there[0]}/{there[1]}/seed{there[2]} or delete the folder")
            continue
        digests[rel] = identity.get("digest")
        data_rel = data_folder(d, sd)
        budget_of = METHODS[m].budget_of
        budget_rel = run_folder(d, budget_of, sd) if budget_of else None
        inputs = identity.get("inputs") or {}
        why = None
        if config is not None:
            why = RunRecord.planned(config, d, m, sd, code=code_of(m, d), device_class=device_class).why_stale(
                identity, results / rel)
            if why is not None:
                pass
            elif data_rel in found.rerun:
                why = f"its data stage {data_rel} is rerun"
            elif budget_rel in found.rerun:
                why = f"its budget run {budget_rel} is rerun"
        if why is None and data_rel in tables and inputs != {n: tables[data_rel].get(n) for n in inputs}:
            why = f"data-stage files (it was trained on other tables than {data_rel}'s)"
        if why is None and budget_rel in digests and (identity.get("budget") or {}).get("identity") != digests[
                budget_rel]:
            why = f"budget run (it matched another run than {budget_rel})"
        if why is None:
            found.current.append(rel)
        else:
            found.rerun[rel] = why
    if config is not None and eval_code is not None:
        _audit_evaluations(config, results, found, eval_code, visit, read)
    if config is not None and analysis_code is not None:
        manifest = _manifest_json(results / "analysis.manifest.json")
        if manifest is not None:
            want, have = analysis_identity(config, analysis_code), manifest.get("identity")
            if have is None:
                found.rerun["analysis"] = "written before analysis identities were recorded"
            elif have.get("config") != want["config"]:
                found.rerun["analysis"] = "config (" + ", ".join(_diff_keys(have.get("config"), want["config"])) + ")"
            elif have.get("code") != want["code"]:
                found.rerun["analysis"] = "analysis code"
            else:
                found.current.append("analysis")
    return found


def _audit_evaluations(config: Mapping[str, Any], results: Path, found: Audit, eval_code: Any,
                       visit: Visitor | None = None, read: Manifests | None = None) -> None:
    """Each finished run evaluation (``evals/<d>/<m>/seed<s>/<table>``) of the preset compared with its identity
    (:func:`evaluation_identity`) from this checkout's code, the preset's values and the manifests of its run and
    data-stage folders: what its bytes depend on, read from files, so a second clone, a copied folder or a cleared
    ``.snakemake`` decides the same. One that differs makes its run's evaluate job rerun (``rerun`` under
    ``evals/<d>/<m>/seed<s>``, the job's output; the job relinks every table whose key is unchanged); one holding
    another table's rows is an error. An evaluation of a run or data stage that is rerun is rerun with it. The
    evaluations of a job that is not rerun are ``evaluated``."""
    from hasfl.analysis.evaluations import evaluation_specs

    read = read if read is not None else Manifests()
    foreign = {e.split(" ", 1)[0] for e in found.errors}  # refused already: their evaluations wait for the fix
    for d, m, sd in preset_jobs(config)[1]:
        job = eval_folder(d, m, sd)
        run_rel, data_rel = run_folder(d, m, sd), data_folder(d, sd)
        refused = run_rel in foreign or data_rel in foreign
        whys, current = [], []
        upstream: tuple[str | None, Any, Any] | None = None  # the job's run and data stage, read once if needed
        for table, spec in evaluation_specs(config, d, m, eval_code).items():
            manifest = read(results / job / table)
            if visit is not None:
                visit.evaluation(f"{job}/{table}", table, spec, (d, m, sd), manifest)
            if manifest is None or refused:
                continue
            have = manifest.get("identity")
            if isinstance(have, Mapping) and have.get("table") != table:
                found.errors.append(f"{job}/{table} holds the rows of table {have.get('table')!r}; delete the folder")
                continue
            if upstream is None:
                run, stage = read(results / run_rel), read(results / data_rel)
                if run_rel in found.rerun or data_rel in found.rerun:
                    why = (f"its run {run_rel} is rerun" if run_rel in found.rerun
                           else f"its data stage {data_rel} is rerun")
                elif run is None or stage is None:
                    why = (f"its run {run_rel} is not finished" if run is None
                           else f"its data stage {data_rel} is not finished")
                else:
                    why = None
                upstream = (why, run, stage)
            why, run, stage = upstream
            if why is None:
                why = evaluation_staleness(have, evaluation_identity(table, spec["code"], spec["params"], run,
                                                                     spec["run_files"], stage, spec["data_files"]))
            if why is not None:
                whys.append(f"{table}: {why}")
            else:
                current.append(f"{job}/{table}")
        if whys:
            found.rerun[job] = "; ".join(whys)
        else:
            found.evaluated += current


def _manifest_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except ValueError:
        return None  # unreadable: hasfl verify names it


def budget_of(run_json: str | Path, method: str, dataset: str, seed: int,
              manifest: Mapping[str, Any] | None = None) -> tuple[float, bool, dict[str, Any]]:
    """The budget run a random-budget control of ``dataset`` / ``seed`` matches: its measured average width, whether
    it diverged, and what of it enters the control's record (``method``, ``avg_p``, its identity digest). A run of
    another method, dataset or seed is refused (its budget is not this one's). ``manifest``: the run folder's, when
    the caller has read it already."""
    path = Path(run_json)
    if not path.is_file():
        raise InputFileError(f"input file '{path}' does not exist; run {method} for the same dataset and seed first")
    summary = json.loads(path.read_text())
    if summary.get("method") != method:
        raise ValueError(f"'{run_json}' is not a {method} run (method={summary.get('method')!r})")
    manifest = manifest if manifest is not None else read_manifest(path.parent)
    recorded = (manifest or {}).get("identity", {}).get("config") or {}
    for what, want in (("dataset", dataset), ("seed", seed)):
        have = recorded.get(what, summary.get(what))
        if have != want:
            raise ValueError(f"'{run_json}' is a {method} run of {what} {have!r}, but the control is of {what} "
                             f"{want!r}; give the {method} run of the same dataset and seed")
    identity = (manifest or {}).get("identity", {}).get("digest")
    return float(summary["avg_p"]), summary.get("status") == "diverged", {
        "method": method, "avg_p": float(summary["avg_p"]), "identity": identity}


def job_record(run_cfg: Mapping[str, Any], *, data_manifest: Mapping[str, Any] | None = None,
               hasfl_run: str | Path | None = None, code: str | None = None) -> tuple[RunRecord, float | None, bool]:
    """The :class:`RunRecord` of a training job about to run here, with the budget run's average width and status
    (a random-budget control's target): the training code (``code``, default the installed package's), this
    machine's device class, the data stage it reads (``data_manifest``; None: the engine builds the tables in
    memory and the record takes them) and the budget run it matches (``hasfl_run``: that run's run.json)."""
    from hasfl.fl.runtime import device_class
    from hasfl.registry import METHODS

    dataset, method, seed = str(run_cfg["dataset"]), str(run_cfg["method"]), int(run_cfg["seed"])
    record = RunRecord(run_cfg, code or training_code_digest(method, dataset), here(device_class(run_cfg)))
    if data_manifest is not None:
        record = record.reading(data_manifest)
    target, diverged = None, False
    matched = METHODS[method].budget_of
    if matched is not None:
        if hasfl_run is None:
            raise ValueError(f"method {method} needs --hasfl-run (the run.json of {matched}, same dataset and seed)")
        target, diverged, budget = budget_of(hasfl_run, matched, dataset, seed)
        record = record.matching(budget)
    return record, target, diverged
