"""Provenance of a results page and of report.md: what made the numbers, and how to make them again.

* :func:`provenance` -- the git commit (and whether the tree was dirty) of the code writing the page,
  Python / torch / Snakemake / numpy versions, the CPU kernels the runs used (their ``timings.json``), CUDA
  and the driver when a run used a GPU, the machine, the runs' identities digest and the analysis identity
  (``analysis.manifest.json``), and the training code the runs record (:func:`training_code_check`: a run's
  manifest records its training-code digest, not a commit) against this checkout's.
* :func:`check_configfiles` -- the config files given against the runs' identities: each run's recorded config
  slice is what :func:`hasfl.config.run_config` of the merged files gives, or the files are refused naming the
  first differing key.
* :func:`reproduce_rows` -- per finding, the command that makes it (the preset's config files and the
  finding's own tables as targets), the runs it reads and their measured cost in CPU job-hours (the
  runs' ``timings.json``, ``total_s``).
* :func:`summary_block` -- the ML Reproducibility Challenge's six headings, facts from the findings.

The GPU price of a claim is not given: the pre-flight model (:func:`hasfl.dag.preflight.estimate`) needs a
throughput calibrated on the GPU (``hasfl.bench.calibrate``), which a page written on a CPU machine has
not; ``snakemake -n`` with the same command on the GPU machine prints it.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from hasfl.analysis.page_refs import NOT_RUN, SHOWN_VERDICTS, estimand_counts, shown_verdict, verdict_counts
from hasfl.config import ABSENT, dotted_differences
from hasfl.errors import HasflError
from hasfl.integrity import result_folders
from hasfl.layout import kind_dir, run_folder

__all__ = ["CodeCheck", "ProvenanceError", "check_configfiles", "code_sentence", "dag_command", "provenance",
           "provenance_lines", "reproduce_lines", "reproduce_rows", "run_identities", "summary_block",
           "report_lines", "total_cpu_hours", "training_code_check"]

REPO = Path(__file__).resolve().parents[3]


class ProvenanceError(HasflError, ValueError):
    """Config files that do not make the runs of a results folder (the first differing key named)."""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str, repo: Path = REPO) -> str | None:
    try:
        res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def git_state(repo: Path = REPO) -> tuple[str, bool | None]:
    """The commit of the code writing the page (the checkout ``repo``) and whether its tracked files differ from
    it."""
    commit = _git("rev-parse", "HEAD", repo=repo)
    if commit is None:
        return "not a git checkout", None
    status = _git("status", "--porcelain", "--untracked-files=no", repo=repo)
    return commit, (None if status is None else bool(status))


@dataclass(frozen=True)
class CodeCheck:
    """The training code a results folder's runs record (each run manifest's ``identity.code``, the digest of
    :func:`hasfl.integrity.training_code_digest`; runs record no commit) against a checkout's.

    ``runs``: run folders read; ``unrecorded``: those whose manifest records no code digest; ``digests``: the
    distinct recorded digests; ``differing``: (folder, recorded, the checkout's) for each run whose recorded code
    is not the checkout's (a method the checkout does not know: ``"none (unknown method)"``)."""

    runs: int
    unrecorded: int
    digests: tuple[str, ...]
    differing: tuple[tuple[str, str, str], ...]

    @property
    def matches(self) -> bool:
        """Every run that records its code was trained by the checkout's."""
        return not self.differing

    def cell(self) -> str:
        """The provenance table's cell: runs, digests and how many differ from this checkout's."""
        if self.runs == self.unrecorded:
            return f"not recorded ({self.runs} runs' manifests record no training-code digest)"
        checked = self.runs - self.unrecorded
        head = f"{checked} runs, {len(self.digests)} digests" + (
            f" ({self.unrecorded} runs record none)" if self.unrecorded else "")
        if self.matches:
            return f"{head}, each this checkout's"
        return f"{head}; {len(self.differing)} of {checked} runs differ from this checkout's"

    def examples(self, limit: int = 3, code: str = "`") -> str:
        """The first ``limit`` differing runs: ``folder: recorded X, this checkout Y`` (digests cut to 12)."""
        parts = [f"{folder}: recorded {code}{rec[:12]}{code}, this checkout {code}{cur[:12]}{code}"
                 for folder, rec, cur in self.differing[:limit]]
        more = len(self.differing) - limit
        return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def _run_parts(rel: str, identity: Mapping[str, Any]) -> tuple[str, str, int | None]:
    """(dataset, method, seed) of a run folder ``runs/<dataset>/<method>/seed<s>``: its recorded config slice's,
    else its path's (:func:`hasfl.analysis.runs.parse_run_path`, the one reader of a run's path)."""
    from hasfl.analysis.runs import parse_run_path

    cfg = identity.get("config") if isinstance(identity.get("config"), Mapping) else {}
    try:
        (dataset, method, seed), _ = parse_run_path(Path(rel) / "manifest.json")
    except ValueError:
        dataset, method, seed = "", "", None
    recorded = cfg.get("seed", seed)
    try:
        seed = int(recorded) if recorded is not None else None
    except (TypeError, ValueError):
        seed = None
    return str(cfg.get("dataset", dataset)), str(cfg.get("method", method)), seed


def run_identities(results: Path, folders: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """Each run folder's recorded identity (its manifest's ``identity``; ``{}`` when it has none)."""
    from hasfl.integrity import read_manifest

    out: dict[str, Mapping[str, Any]] = {}
    for rel in sorted(folders):
        folder = Path(rel) if Path(rel).is_absolute() else results / rel
        manifest = read_manifest(folder) if folder.is_dir() else None
        identity = (manifest or {}).get("identity")
        out[rel] = identity if isinstance(identity, Mapping) else {}
    return out


def training_code_check(results: Path, folders: Sequence[str], root: Path | None = None) -> CodeCheck:
    """The training code the runs ``folders`` (relative to ``results``) record against the checkout's whose
    ``hasfl`` package is ``root`` (default: this checkout's ``src/hasfl``)."""
    from hasfl.integrity import training_code_digest

    root = REPO / "src" / "hasfl" if root is None else root
    current: dict[tuple[str, str], str] = {}
    digests: set[str] = set()
    differing = []
    unrecorded = 0
    identities = run_identities(results, folders)
    for rel, identity in identities.items():
        recorded = identity.get("code")
        if not recorded:
            unrecorded += 1
            continue
        digests.add(str(recorded))
        dataset, method, _ = _run_parts(rel, identity)
        if (method, dataset) not in current:
            try:
                current[(method, dataset)] = training_code_digest(method, dataset, root)
            except ValueError:  # a method or dataset this checkout does not know
                current[(method, dataset)] = "none (unknown method or dataset)"
        if str(recorded) != current[(method, dataset)]:
            differing.append((rel, str(recorded), current[(method, dataset)]))
    return CodeCheck(runs=len(identities), unrecorded=unrecorded, digests=tuple(sorted(digests)),
                     differing=tuple(differing))


def code_sentence(check: CodeCheck) -> str:
    """What a page says of the code that made its runs (runs record code digests, not a commit)."""
    if check.runs == check.unrecorded:
        return "The runs' manifests record no training-code digest: which code trained them is not known."
    if check.matches:
        return "The runs' training code (the digests their manifests record) is this checkout's."
    return (f"**The runs were not all trained by this checkout's code**: {len(check.differing)} of "
            f"{check.runs - check.unrecorded} runs record another training-code digest ({check.examples()}). Runs "
            "record their code digest, not a commit: the commands on this page, run at this commit, would train "
            "them again; to reproduce these runs, use the checkout whose code gives the digests they record.")


def _shown(value: Any) -> str:
    return "absent" if value is ABSENT else json.dumps(value)


def merged_config(files: Sequence[Path], base: Path | None = None) -> dict[str, Any]:
    """``base`` (this checkout's ``config.yaml``) with ``files`` merged over it in order, validated, numbers
    canonical: the config the DAG run with ``--configfile <files>`` reads."""
    from hasfl.config import load_config

    return load_config(list(files), REPO / "config.yaml" if base is None else base)


def check_configfiles(results: Path, folders: Sequence[str], files: Sequence[Path],
                      names: Sequence[str] | None = None, base: Path | None = None) -> int:
    """Refuse config ``files`` (shown as ``names``; merged over ``base``, by default this checkout's
    ``config.yaml``) that do not make the runs ``folders`` of ``results``: each
    run whose manifest records its config slice (``identity.config``) must be of a dataset, method and seed the
    merged files run, and its slice what :func:`hasfl.config.run_config` of them gives. Raises
    :class:`ProvenanceError` naming the run and the first differing key (``federation.rounds: runs 6, config files
    8``); returns the number of runs checked (runs recording no slice are not)."""
    from hasfl.config import run_config

    shown = " ".join(names if names is not None else [Path(f).as_posix() for f in files])
    config = merged_config(files, base)
    checked = 0
    for rel, identity in run_identities(results, folders).items():
        recorded = identity.get("config")
        if not isinstance(recorded, Mapping):
            continue
        dataset, method, seed = _run_parts(rel, identity)
        where = f"config files {shown} do not make the runs of '{results}': {rel}"
        for key, value, listed in (("dataset", dataset, config["datasets"]), ("method", method, config["methods"]),
                                   ("seed", seed, config["seeds"])):
            if value not in listed:
                raise ProvenanceError(f"{where}: {key} {json.dumps(value)} is not in the config files' {key}s "
                                      f"{json.dumps(listed)}; give the config files the DAG was run with "
                                      "(--configfile, every overlay)")
        expected = json.loads(json.dumps(run_config(config, dataset, method, int(seed or 0)), sort_keys=True,
                                         default=str))
        diff = dotted_differences(json.loads(json.dumps(recorded, default=str)), expected, missing=ABSENT)
        if diff:
            key, ran, given = diff[0]
            more = f" (and {len(diff) - 1} more keys)" if len(diff) > 1 else ""
            raise ProvenanceError(f"{where}: {key}: runs {_shown(ran)}, config files {_shown(given)}{more}; the run's "
                                  "manifest records the config slice it was trained with: give the config files the "
                                  "DAG was run with (--configfile, every overlay)")
        checked += 1
    return checked


def _timings(results: Path, folders: Sequence[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for folder in folders:
        path = Path(folder) / "timings.json" if Path(folder).is_absolute() else results / folder / "timings.json"
        try:
            out[folder] = json.loads(path.read_text())
        except (OSError, ValueError):
            out[folder] = {}
    return out


def runs_digest(runs: Mapping[str, str]) -> tuple[int, str]:
    """Number of runs the analysis read and a digest of their identities (which runs the page is about)."""
    ids = [runs[folder] for folder in sorted(runs)]
    return len(ids), hashlib.sha256("".join(ids).encode()).hexdigest()[:16]


def _kernels(timings: Mapping[str, Mapping[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for info in timings.values():
        cap = info.get("cpu_capability")
        pins = ", ".join(f"{k}={v}" for k, v in sorted((info.get("isa_env") or {}).items()))
        key = (f"{info.get('device', 'cpu')} {cap}" + (f" ({pins})" if pins else "")) if cap else "not recorded"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} ({n} runs)" for k, n in sorted(counts.items())) or "no runs"


def _machine() -> str:
    import os

    from hasfl.device import cpu_model

    return f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()} ({platform.machine()})"


def _cuda(timings: Mapping[str, Mapping[str, Any]]) -> str:
    gpus = sorted({str(t.get("device")) for t in timings.values() if str(t.get("device", "")).startswith("cuda")})
    if not gpus:
        return "none (every run on the CPU)"
    driver = None
    if shutil.which("nvidia-smi"):
        try:
            res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20)
            driver = res.stdout.strip().splitlines()[0] if res.returncode == 0 and res.stdout.strip() else None
        except (OSError, subprocess.SubprocessError):
            driver = None
    try:
        import torch

        build = torch.version.cuda
    except ImportError:
        build = None
    return f"{', '.join(gpus)}; CUDA build {build or 'unknown'}; driver {driver or 'not visible here'}"


def provenance(results: Path, manifest: Mapping[str, Any], *, repo: Path = REPO,
               analysis_code: str | None = None) -> dict[str, Any]:
    """The provenance facts of the analysis in ``results`` (its ``analysis.manifest.json``: ``manifest``), written
    by the checkout ``repo``; ``analysis_code``: that checkout's analysis code digest
    (:func:`hasfl.dag.identity.analysis_code_digest`), compared with the one the manifest records when given."""
    runs = manifest.get("runs") or {}
    folders = list(runs) if isinstance(runs, Mapping) else [str(r) for r in runs]
    timings = _timings(results, folders)
    commit, dirty = git_state(repo)
    n_runs, digest = runs_digest(runs if isinstance(runs, Mapping) else {f: "" for f in folders})
    ident = manifest.get("identity") or {}
    identity = ident.get("digest")
    recorded_analysis = ident.get("code")
    return {"commit": commit, "dirty": dirty, "python": platform.python_version(), "torch": _version("torch"),
            "snakemake": _version("snakemake"), "numpy": _version("numpy"), "kernels": _kernels(timings),
            "cuda": _cuda(timings), "machine": _machine(), "n_runs": n_runs, "runs_digest": digest,
            "analysis_identity": str(identity) if identity else "not recorded in this manifest",
            "training_code": training_code_check(results, folders, repo / "src" / "hasfl"),
            "analysis_code": _analysis_code_cell(recorded_analysis, analysis_code)}


def _analysis_code_cell(recorded: Any, current: str | None) -> str:
    """The analysis code the analysis manifest records, and whether it is this checkout's (``current``)."""
    if not recorded:
        return "not recorded in this manifest"
    if current is None:
        return f"`{str(recorded)[:12]}`"
    if str(recorded) == current:
        return f"`{str(recorded)[:12]}` (this checkout's)"
    return (f"`{str(recorded)[:12]}`; this checkout's is `{current[:12]}` (the DAG command at this commit would redo "
            "the analysis)")


def provenance_lines(p: Mapping[str, Any], level: str = "##") -> list[str]:
    dirty = {True: "dirty: tracked files differ from it", False: "clean", None: "unknown"}[p["dirty"]]
    code = p.get("training_code")
    return [f"{level} Provenance", "",
            "| | |", "|---|---|",
            f"| git commit (code writing this file) | `{p['commit']}` ({dirty}) |",
            *([f"| training code (runs' manifests) | {code.cell()} |"] if code is not None else []),
            f"| Python / torch / Snakemake / numpy | {p['python']} / {p['torch']} / {p['snakemake']} / {p['numpy']} |",
            f"| CPU kernels (runs' `timings.json`) | {p['kernels']} |",
            f"| CUDA and driver | {p['cuda']} |",
            f"| machine writing this file | {p['machine']} |",
            f"| runs read | {p['n_runs']} (identities digest `{p['runs_digest']}`) |",
            f"| analysis identity (`analysis.manifest.json`) | `{p['analysis_identity']}` |",
            *([f"| analysis code (`analysis.manifest.json`) | {p['analysis_code']} |"] if "analysis_code" in p else []),
            ""]


def dag_command(configfiles: Sequence[str], targets: Sequence[str] = ("all",), cores: int = 2) -> str:
    """``snakemake --cores N <targets> --configfile <files>`` (the targets first: ``--configfile`` takes every word
    after it)."""
    cf = f" --configfile {' '.join(configfiles)}" if configfiles else ""
    return f"snakemake --cores {cores} {' '.join(targets)}{cf}"


def _needed(f: Mapping[str, Any], folders: Sequence[str], methods: Mapping[str, Sequence[str]]) -> list[str]:
    """The run folders (``runs/<dataset>/<method>/seed<s>``) finding ``f`` reads: its units' datasets x its methods
    (a unit naming a run, F5's ``digits/uniform/seed42``, names its folder)."""
    want: set[str] = set()
    meths = methods.get(str(f["id"]))
    for u in f.get("units") or []:
        name = str(u.get("unit"))
        if name.count("/") == 2:
            want |= {r for r in folders if r.endswith(f"{kind_dir('runs')}/{name}")}  # <dataset>/<method>/seed<s>
            continue
        dataset = name.split("/")[0]  # a dataset, or a dataset's variant unit (``fashion_mnist/sub-model``)
        want |= {r for r in folders if r.split("/")[-3:-2] == [dataset]
                 and (meths is None or r.split("/")[-2] in meths)}
    return sorted(want)


def total_cpu_hours(results: Path, manifest: Mapping[str, Any]) -> float | None:
    """The measured CPU job-hours of every run the analysis read (None when a run lacks its timings)."""
    timings = _timings(results, [str(r) for r in manifest.get("runs") or {}])
    secs = [t.get("total_s") for t in timings.values()]
    return None if not secs or not all(isinstance(s, (int, float)) for s in secs) else sum(secs) / 3600.0


def evaluation_cpu_hours(results: Path) -> tuple[float | None, int]:
    """The measured CPU job-hours of the run evaluations the results folder links (each entry's ``timings.json``,
    ``total_s``: :mod:`hasfl.analysis.evaluations`) and how many there are; None when one lacks its timings."""
    folders = result_folders(results, "evals")
    secs = []
    for folder in folders:
        try:
            secs.append(float(json.loads((folder / "timings.json").read_text())["total_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None, len(folders)
    return (sum(secs) / 3600.0 if secs else None), len(folders)


def reproduce_rows(results: Path, findings: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any],
                   configfiles: Sequence[str], methods: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Per finding: its command, the runs it reads and their measured CPU job-hours."""
    runs = manifest.get("runs") or {}
    folders = [str(r) for r in runs]
    timings = _timings(results, folders)
    rows = []
    for f in findings:
        needed = _needed(f, folders, methods)
        secs = [timings[r].get("total_s") for r in needed]
        known = [float(s) for s in secs if isinstance(s, (int, float))]
        hours = sum(known) / 3600.0 if needed and len(known) == len(needed) else None
        targets = [f"{results.as_posix()}/{p}" for p in f.get("files") or []] or ["all"]
        rows.append({"id": f["id"], "verdict": shown_verdict(f), "command": dag_command(configfiles, targets),
                     "runs": len(needed), "cpu_job_hours": hours,
                     "partial": bool(needed) and len(known) < len(needed)})
    return rows


#: The CPU kernel pin under which a page's digits reproduce on any x86-64 CPU with AVX2 (docs/guide/gpu.md): ATen's
#: and oneDNN's kernels at AVX2, and MKL's matrix products on its branch that is the same on every maker's CPU
#: (without it MKL picks its path by the CPU's maker as well as its instruction set: an Intel and an AMD AVX-512
#: machine pinned to AVX2 gave other digits runs, measured 2026-12-05).
PORTABLE_PIN = "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_CBWR=COMPATIBLE"


def reproduce_lines(rows: Sequence[Mapping[str, Any]], kernels: str | None = None, level: str = "##") -> list[str]:
    pinned = kernels is not None and all(p in kernels for p in PORTABLE_PIN.split()) and kernels.count("runs)") == 1
    pin_note = ([f"CPU kernels of these runs: {kernels}. " + (
        f"They ran under the portable kernel pin, so each command below is prefixed with it (`{PORTABLE_PIN}`): with "
        "it the printed digits reproduce on any x86-64 CPU with AVX2 (the float sums of AVX-512 and AVX2 kernels, and "
        "of MKL's paths for each CPU maker, differ in their last bits, and training carries that into the printed "
        "digits of the image runs)."
        if pinned else f"Prefix a command with `{PORTABLE_PIN}` to run it under the portable kernel pin; without "
        "it the digits of the image runs differ between CPU kinds (AVX-512 and AVX2 kernels, and MKL's paths for "
        "each CPU maker, round differently)."),
        ""] if kernels is not None else [])
    prefix = f"{PORTABLE_PIN} " if pinned else ""
    lines = [f"{level} Reproduce a claim", "", *pin_note,
             "Each finding's command makes the tables the finding is computed from (targets before "
             "`--configfile`, which takes every word after it); the same command with target `all` makes "
             "`findings.json`. From an empty results folder it trains every run of the preset, not only the "
             "finding's: the runs gate (`verify_runs`) reads them all before any table, so its cost is the "
             "summary's job-hours; in a folder whose runs are finished (or in the run store) it reruns only what "
             "changed. The runs column counts the runs the finding reads (its methods on its datasets), and their "
             "cost is their own measured seconds (`timings.json`, `total_s`) in job-hours on the CPU they ran on, "
             "data stage and analysis not counted. On a GPU: the pre-flight block that `snakemake -n` prints with "
             "the same command on that machine (its model needs the GPU's calibrated throughput, not recorded "
             "here).", "",
             "| finding | verdict | command | runs it reads | their CPU job-hours (measured) |", "|---|---|---|---|---|"]
    for r in rows:
        hours = ("--" if r["cpu_job_hours"] is None else f"{r['cpu_job_hours']:.3g}") + (" (some runs lack timings)"
                                                                                          if r["partial"] else "")
        command = ("-- (its methods or datasets are not in this preset)" if r["verdict"] == NOT_RUN
                   else f"`{prefix}{r['command']}`")
        lines.append(f"| {r['id']} | {r['verdict']} | {command} | {r['runs']} | {hours} |")
    return [*lines, ""]


def summary_block(findings: Sequence[Mapping[str, Any]], command: str, n_runs: int,
                  cpu_hours: float | None, level: str = "##",
                  evaluations: tuple[float | None, int] = (None, 0),
                  horizon_dependent: Sequence[str] = ()) -> list[str]:
    """The ML Reproducibility Challenge's summary: six headings, facts rendered from the findings; a split finding
    counted once as split, its estimands' verdicts beside; ``horizon_dependent``: the estimand verdicts that differ at
    a longer horizon (section "Horizons side by side")."""
    counts = verdict_counts(findings)
    parts = estimand_counts(findings)
    kinds: dict[str, int] = {}
    for f in findings:
        kind = str(f.get("kind") or ("extension" if f.get("extension") else "paper claim"))
        kinds[kind] = kinds.get(kind, 0) + 1
    datasets = sorted({str(u.get("unit")).split("/")[0] for f in findings for u in f.get("units") or []})
    tally = ", ".join(f"{counts[v]} {v}" for v in SHOWN_VERDICTS if counts.get(v))
    cost = "--" if cpu_hours is None else f"{cpu_hours:.3g}"
    eval_hours, n_evals = evaluations
    analysis = ""
    if n_evals:
        share = ("" if eval_hours is None or cpu_hours is None else
                 f", {100.0 * eval_hours / (eval_hours + cpu_hours):.3g}% of the two")
        analysis = (f" The analysis's run evaluations (one per run and table that evaluates a model or replays a "
                    f"run: {n_evals}) took {'--' if eval_hours is None else f'{eval_hours:.3g}'} CPU job-hours"
                    f"{share}; the tables that gather them, a few seconds each.")
    sub = level + "#"
    return [f"{level} Reproducibility summary", "",
            f"{sub} Scope of reproducibility", "",
            f"{len(findings)} findings tested ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), on "
            f"{', '.join(datasets) or 'no dataset'}; each states the paper's claim, its scope and its test "
            "(section Findings).", "",
            f"{sub} Methodology", "",
            f"Every method retrained from the data by one DAG: `{command}`; {n_runs} training runs, {cost} CPU "
            f"job-hours of training measured.{analysis} Job-hours are wall seconds of each job as it ran: they grow "
            "with whatever else loaded the machine then, and are not a property of the runs. Each claim is a test "
            "with a margin and a three-valued verdict (rules under Findings).",
            "",
            f"{sub} Results", "",
            f"Verdicts: {tally or 'none'} (every finding of the findings table counted once: they add up to "
            f"{len(findings)})."
            + (" The split findings' estimands: " + ", ".join(f"{n} {v}" for v, n in sorted(parts.items()))
               + " (each its own verdict; section Findings)." if parts else "")
            + (f" Horizon-dependent (the verdict differs at a longer horizon; section \"Horizons side by side\"): "
               f"{len(horizon_dependent)} ({', '.join(horizon_dependent)})." if horizon_dependent else ""), "",
            f"{sub} What was easy", "",
            "Running the preset: one command, every number on this page read from the files it wrote and checked "
            "against the analysis manifest.", "",
            f"{sub} What was difficult", "",
            f"Deciding the claims at this scale: findings inconclusive: {counts.get('inconclusive', 0)} (the seeds "
            "each unit would need are in the findings table); findings not run by this preset's methods or datasets: "
            f"{counts.get(NOT_RUN, 0)}.", "",
            f"{sub} Communication with original authors", "",
            "None recorded in this repository: the reproduction works from the paper's text (docs/decisions.md "
            "records each reading of it).", ""]


def report_lines(results: Path, config_summary: Mapping[str, Any], findings: Sequence[Mapping[str, Any]],
                 configfiles: Sequence[str], methods: Mapping[str, Sequence[str]]) -> list[str]:
    """report.md's reproducibility summary, Reproduce a claim and Provenance, for the runs of ``config_summary``
    (datasets x methods x seeds) under ``results``. The analysis manifest is written after report.md: the runs
    are those of the preset's run folders, each with the identity its own manifest records."""
    from hasfl.integrity import read_manifest

    runs: dict[str, str] = {}
    for d in config_summary.get("datasets") or []:
        for m in config_summary.get("methods") or []:
            for sd in config_summary.get("seeds") or []:
                rel = run_folder(d, m, sd)
                manifest = read_manifest(results / rel) if (results / rel).is_dir() else None
                if manifest is not None:
                    runs[rel] = str((manifest.get("identity") or {}).get("digest"))
    manifest = {"runs": runs, "identity": {"digest": "in analysis.manifest.json, written after this report"}}
    command = dag_command(configfiles)
    rows = reproduce_rows(results, findings, manifest, configfiles, methods)
    prov = provenance(results, manifest)
    return [*summary_block(findings, command, prov["n_runs"], total_cpu_hours(results, manifest),
                           evaluations=evaluation_cpu_hours(results)),
            *reproduce_lines(rows), *provenance_lines(prov)]
