"""Packing training jobs onto the local GPUs (config ``execution.gpu``): K jobs per GPU, every local GPU, CUDA MPS.

A small model's local step on a GPU is bound by kernel launches, not arithmetic (docs/performance-gpu.md:
~4 ms at every width of the paper CNN on an H200), so one job alone leaves the GPU mostly idle and K jobs
sharing it finish several times sooner, more so under CUDA MPS (one hardware context for every process).
When the DAG runs locally on a machine with GPUs and the device is CUDA:

* :func:`plan` decides K (config ``execution.gpu.jobs_per_gpu``; ``auto``: the calibration
  :mod:`hasfl.bench.packing` measures once per device and caches) and whether MPS is used (config ``execution.gpu.mps``;
  ``auto``: when ``nvidia-cuda-mps-control`` is present and a daemon can be started);
* the Snakefile registers the Snakemake resource ``gpu_slot`` = G x K (unless ``--resources`` gives it) and
  gives rule train ``gpu_slot=1``, so at most G x K training jobs run at once, and starts and stops the MPS
  daemon (:class:`MPS`) around the DAG;
* each training job takes one slot (:func:`job_slot`: an exclusive ``flock`` on a slot file, held for the
  job's life, released by the kernel even when the job is killed) and runs pinned to that slot's GPU by
  ``CUDA_VISIBLE_DEVICES``; slots are spread over the GPUs (slot s is on GPU s mod G).

Which GPU a job runs on changes no byte of its result on identical GPUs (deterministic CUDA, config
``cuda_deterministic``), so none of this enters a run's identity. Under SLURM the cluster assigns GPUs
(profiles/slurm) and none of this applies.

Torch-free: the Snakefile imports this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

__all__ = ["ENV_SLOTS", "MPS", "Packing", "calibration_path", "job_slot", "plan", "replace"]

#: The environment variable through which the DAG's main process hands the slot plan to the job processes.
ENV_SLOTS = "HASFL_GPU_SLOTS"
#: The calibration's version: a new one measures again.
PACKING_CALIBRATION = 1
MPS_CONTROL = "nvidia-cuda-mps-control"


@dataclass(frozen=True)
class Packing:
    """How training jobs share the local GPUs: ``gpus`` (the names torch confirms, :func:`hasfl.device.devices`, in
    CUDA order), K jobs per GPU,
    whether MPS serves them (``mps_reason``: why not), the measured aggregate speed-up of K jobs over one
    (None when K is given, not calibrated) and where K came from."""

    gpus: tuple[str, ...]
    jobs_per_gpu: int
    mps: bool
    mps_reason: str
    speedup: float | None
    source: str
    slot_dir: str = ""
    mps_dir: str = ""

    @property
    def slots(self) -> int:
        return len(self.gpus) * self.jobs_per_gpu

    def env(self) -> str:
        """The plan as the job processes read it from :data:`ENV_SLOTS`."""
        return json.dumps(asdict(self), sort_keys=True)

    def lines(self) -> list[str]:
        """What the pre-flight prints of it."""
        mps = "CUDA MPS on" if self.mps else f"no MPS ({self.mps_reason})"
        gain = f", {self.speedup:.2f}x one job's throughput per GPU" if self.speedup else ""
        return [f"  GPU packing: {self.jobs_per_gpu} jobs per GPU x {len(self.gpus)} GPU(s) = {self.slots} training "
                f"jobs at once, {mps}{gain} (K from {self.source})"]


def _socket_dir(results: Path, kind: str) -> Path:
    """A short per-results-folder directory under the temporary dir (MPS's pipe paths must stay short)."""
    tag = hashlib.sha256(str(results.resolve()).encode()).hexdigest()[:10]
    return Path(tempfile.gettempdir()) / f"hasfl-{os.getuid()}-{tag}" / kind


class MPS:
    """The CUDA MPS control daemon of one DAG run, in its own pipe directory ``root/pipe`` (logs in ``root/log``).

    :meth:`start` starts one (``nvidia-cuda-mps-control -d``) unless one already serves that directory;
    :meth:`stop` quits it only if this object started it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.started = False

    @property
    def env(self) -> dict[str, str]:
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.root / "pipe"), "CUDA_MPS_LOG_DIRECTORY": str(self.root / "log")}

    def _control(self, stdin: str | None = None, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([MPS_CONTROL, *args], input=stdin, capture_output=True, text=True, timeout=30,
                              env={**os.environ, **self.env})

    def running(self) -> bool:
        """A daemon answers on this pipe directory."""
        if shutil.which(MPS_CONTROL) is None or not (self.root / "pipe" / "control").exists():
            return False
        try:
            return self._control("get_server_list\n").returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False

    def start(self) -> str | None:
        """Start the daemon (or find it running); None when it serves, else why not."""
        if shutil.which(MPS_CONTROL) is None:
            return f"{MPS_CONTROL} not found"
        if self.running():
            return None
        for sub in ("pipe", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        try:
            out = self._control(None, "-d")
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{MPS_CONTROL} -d failed: {exc}"
        if out.returncode != 0:
            return f"{MPS_CONTROL} -d exited {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}"
        for _ in range(50):  # the control socket appears when the daemon is up
            if (self.root / "pipe" / "control").exists():
                self.started = True
                return None
            time.sleep(0.1)
        return f"{MPS_CONTROL} -d started but no control socket appeared in {self.root / 'pipe'}"

    def stop(self) -> None:
        """Quit the daemon if this object started it."""
        if not self.started:
            return
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            self._control("quit\n")
        self.started = False


def calibration_path(cache: Path, gpus: Sequence[str], precision: str, deterministic: bool, mps: bool) -> Path:
    """Where the calibration of the first of ``gpus`` is cached (per GPU model, torch, precision, determinism,
    with or without MPS, and :data:`PACKING_CALIBRATION`)."""
    from importlib import metadata

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "none"
    key = hashlib.sha256(json.dumps([list(gpus[:1]), precision, deterministic, mps, torch_version,
                                     PACKING_CALIBRATION]).encode()).hexdigest()[:16]
    return cache / f"packing-{key}.json"


def _calibration(gpus: Sequence[str], precision: str, deterministic: bool, mps_dir: Path | None,
                 cache: Path, measure: bool = True) -> dict[str, Any] | None:
    """The packing calibration of these GPUs: from the cache, else (``measure``) measured once by
    ``python -m hasfl.bench.packing`` on the first GPU and cached; None when there is none."""
    from hasfl.cache import cached_measurement

    path = calibration_path(cache, gpus, precision, deterministic, mps_dir is not None)
    cached = cached_measurement(path)
    if cached is not None:
        return {**cached, "source": f"calibration {path}"}
    if not measure:
        return None
    print(f"hasfl gpu: calibrating how many training jobs share {gpus[0]} (once per device, about 2 minutes; "
          f"cached in {path})", file=sys.stderr, flush=True)
    cmd = [sys.executable, "-m", "hasfl.bench.packing", "calibrate", "--device", "cuda", "--precision", precision,
           *([] if deterministic else ["--no-deterministic"]), *(["--mps-dir", str(mps_dir)] if mps_dir else [])]
    result = cached_measurement(path, cmd, timeout_s=900, env={**os.environ, "CUDA_VISIBLE_DEVICES": _first_visible()})
    return None if result is None else {**result, "source": "calibration measured now"}


def plan(config: Mapping[str, Any], gpus: Sequence[str], results: Path, cache: Path,
         calibrate: bool = True) -> Packing | None:
    """The packing of this DAG run on ``gpus``, the GPUs the jobs' torch sees (:func:`hasfl.device.devices`,
    which honours ``CUDA_VISIBLE_DEVICES``; None without one). K: config ``execution.gpu.jobs_per_gpu``, or with ``auto``
    the calibration's best K under MPS when MPS is used, else its best K without; 1 when the calibration cannot
    run (or ``calibrate`` is off: a dry run, whose plan is printed from the cache only)."""
    gpus = tuple(gpus)
    if not gpus:
        return None
    g = config["execution"]["gpu"]
    mps_dir = _socket_dir(results, "mps")
    reason = "config execution.gpu.mps is false" if g["mps"] is False else (
        "" if shutil.which(MPS_CONTROL) else f"{MPS_CONTROL} not found")
    mps = not reason
    slot_dir = str(_socket_dir(results, "slots"))
    if g["jobs_per_gpu"] != "auto":
        return Packing(gpus, int(g["jobs_per_gpu"]), mps, reason, None, "config execution.gpu.jobs_per_gpu", slot_dir,
                       str(mps_dir))
    cal = _calibration(gpus, config["precision"], bool(config["cuda_deterministic"]), mps_dir if mps else None, cache,
                       measure=calibrate)
    if cal is None:
        why = ("not calibrated yet: a run measures it first, about 2 minutes once per device" if not calibrate else
               "no calibration: python -m hasfl.bench.packing failed; 1 job per GPU")
        return Packing(gpus, 1, mps, reason, None, why, slot_dir, str(mps_dir))
    if mps and cal.get("mps") is None:  # MPS present but the daemon could not start
        mps, reason = False, str(cal.get("mps_reason") or "the MPS daemon could not start")
    best = cal["mps"] if mps else cal["plain"]
    return Packing(gpus, int(best["k"]), mps, reason, float(best["speedup"]), str(cal["source"]), slot_dir,
                   str(mps_dir))


def _first_visible() -> str:
    """The first GPU ``CUDA_VISIBLE_DEVICES`` leaves visible (the calibration measures one GPU)."""
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    return spec.split(",")[0].strip() if spec else "0"


@contextlib.contextmanager
def job_slot(env: Mapping[str, str] | None = None, poll_s: float = 0.5) -> Iterator[dict[str, str]]:
    """In a training job's process: take a free GPU slot of the plan in :data:`ENV_SLOTS` (none: nothing happens)
    and set ``CUDA_VISIBLE_DEVICES`` (and MPS's pipe directory) for the job, which inherits them; the slot is
    held until the block ends (or the process dies). Yields the variables set."""
    env = os.environ if env is None else env
    raw = env.get(ENV_SLOTS)
    if not raw:
        yield {}
        return
    spec = json.loads(raw)
    n_gpus, per_gpu = len(spec["gpus"]), int(spec["jobs_per_gpu"])
    root = Path(spec["slot_dir"])
    root.mkdir(parents=True, exist_ok=True)
    handle = None
    while handle is None:
        for slot in range(n_gpus * per_gpu):  # slot s on GPU s mod G: the first free slots spread over the GPUs
            f = open(root / f"slot{slot}.lock", "a+")  # noqa: SIM115 (held open for the job's life)
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            handle, taken = f, slot
            break
        else:
            time.sleep(poll_s)  # every slot busy (more jobs than slots were started): wait for one
    gpu = taken % n_gpus
    visible = [t.strip() for t in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if t.strip()]
    chosen = {"CUDA_VISIBLE_DEVICES": visible[gpu] if visible else str(gpu)}
    if spec["mps"]:
        chosen.update(MPS(spec["mps_dir"]).env)
    saved = {k: os.environ.get(k) for k in chosen}
    os.environ.update(chosen)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()} gpu {gpu}\n")
    handle.flush()
    print(f"hasfl gpu: slot {taken} on GPU {gpu}", file=sys.stderr)  # the job's log says where it ran
    try:
        yield {**chosen, "slot": str(taken), "gpu": str(gpu)}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        handle.close()  # releases the lock
