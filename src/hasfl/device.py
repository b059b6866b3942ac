"""One device decision: what torch in a training job will see, for the pre-flight, the GPU plan and the jobs.

``nvidia-smi -L`` lists the GPUs the driver knows; torch in a job can use them only when its build has CUDA,
the driver suits that build and ``CUDA_VISIBLE_DEVICES`` leaves them visible. So the GPUs that count are the
ones torch confirms:

* in a job, :func:`torch_view` asks torch directly and :func:`resolve` turns config key ``device`` into
  ``cuda`` or ``cpu`` (:func:`hasfl.fl.runtime.resolve_device`);
* in the Snakefile's process, which stays torch-free, :func:`devices` runs the same :func:`torch_view` in a
  subprocess (the probe, ``python -m hasfl.device``) with this process's interpreter and environment
  (``CUDA_VISIBLE_DEVICES`` included). The probe runs only when ``nvidia-smi`` lists a GPU (a machine
  without one pays nothing) and its answer is cached per python executable, torch version,
  ``CUDA_VISIBLE_DEVICES`` and ``nvidia-smi`` listing (:func:`probe_path`, JSON of :func:`torch_view`).

GPUs that ``nvidia-smi`` lists but the probe does not confirm (a CPU-only torch build, ``CUDA_VISIBLE_DEVICES``
hiding them, a driver torch cannot use, a probe that fails or times out) count as no GPU: ``device: auto``
is the CPU, with the pre-flight's CPU stop, and ``device: cuda`` is refused before any job;
:attr:`Devices.note` says why in one line.

Torch-free unless :func:`torch_view` is called: the Snakefile imports this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from hasfl.cache import cached_measurement
from hasfl.errors import HasflError

__all__ = ["DEVICES", "KERNEL_PIN_ENV", "DeviceError", "Devices", "cpu_model", "devices", "kernel_pin", "listed_gpus",
           "probe_path", "resolve", "torch_view", "unusable"]

#: The values of config key ``device`` (workflow/schemas/config.schema.json).
DEVICES = ("auto", "cpu", "cuda")
#: The probe's version: a new one probes again.
PROBE_VERSION = 1
#: How long the probe (importing torch, initialising CUDA) may take before it counts as no GPU.
PROBE_TIMEOUT_S = 120.0


#: The environment variables that choose which CPU kernels PyTorch, oneDNN and MKL run (the portable kernel pin,
#: docs/guide/gpu.md): a speed measured under one setting prices nothing under another. The same names as
#: ``hasfl.fl.runtime.ISA_ENV`` (a run's timings record them); tests/test_preflight.py pins the two equal.
KERNEL_PIN_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS")


def kernel_pin(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The kernel-choosing variables set in ``env`` (this process's environment by default)."""
    env = os.environ if env is None else env
    return {k: env[k] for k in KERNEL_PIN_ENV if k in env}


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``; else :func:`platform.processor`, else 'cpu')."""
    import platform

    model = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return model


class DeviceError(HasflError, RuntimeError):
    """Config key ``device`` asks for a device torch here cannot use."""


@dataclass(frozen=True)
class Devices:
    """The GPUs of this machine: ``listed`` by ``nvidia-smi -L``, ``gpus`` the names torch confirms (in CUDA order,
    what a job sees), ``note`` why listed GPUs do not count ('' when there is nothing to say)."""

    listed: tuple[str, ...]
    gpus: tuple[str, ...]
    note: str = ""


def listed_gpus(timeout_s: float = 10) -> tuple[str, ...]:
    """The GPU lines of ``nvidia-smi -L`` (none when it is absent or fails)."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(ln.strip() for ln in out.stdout.splitlines() if ln.strip().startswith("GPU"))


def torch_view() -> dict[str, Any]:
    """What torch in this process sees (imports torch): CUDA usable, how many devices, their names, torch's
    version and CUDA build, and ``CUDA_VISIBLE_DEVICES``. The probe prints it; a job
    (:func:`hasfl.fl.runtime.resolve_device`) tests the same ``torch.cuda.is_available()`` (tests/test_device.py
    pins the two together)."""
    import torch

    cuda = bool(torch.cuda.is_available())
    count = int(torch.cuda.device_count()) if cuda else 0
    return {"cuda": cuda and count > 0, "count": count,
            "names": [str(torch.cuda.get_device_name(i)) for i in range(count)],
            "torch": str(torch.__version__), "cuda_build": torch.version.cuda,
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "probe": PROBE_VERSION}


def resolve(name: str, cuda: bool, why: str = "") -> str:
    """Config key ``device`` (:data:`DEVICES`) as the device the jobs use, ``cuda`` or ``cpu``, given
    whether torch can use CUDA (``cuda``); ``device: cuda`` without it raises :class:`DeviceError` (``why``:
    the reason, for the message)."""
    if name == "auto":
        return "cuda" if cuda else "cpu"
    if name.split(":", 1)[0] == "cuda" and not cuda:
        raise DeviceError(f"config key 'device' is '{name}' but no CUDA device is available"
                          f"{f' ({why})' if why else ''}; use device: cpu (or auto), or run on a GPU machine")
    return name


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def probe_path(cache: Path, listed: Sequence[str], env: Mapping[str, str] | None = None) -> Path:
    """Where the probe's answer for this python executable, torch version, ``CUDA_VISIBLE_DEVICES`` (of ``env``,
    default this process's) and ``nvidia-smi`` listing is cached: ``cache/device-<key>.json``, holding
    :func:`torch_view`'s JSON."""
    env = os.environ if env is None else env
    key = json.dumps([sys.executable, _torch_version(), env.get("CUDA_VISIBLE_DEVICES"), list(listed),
                      PROBE_VERSION])
    return Path(cache) / f"device-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def unusable(view: Mapping[str, Any]) -> str:
    """Why torch did not confirm the listed GPUs, from the probe's answer."""
    if not view.get("cuda_build"):
        return f"torch {view.get('torch', '?')} is a CPU-only build"
    visible = view.get("visible")
    if visible is not None and int(view.get("count", 0)) == 0:
        return f"CUDA_VISIBLE_DEVICES='{visible}' leaves torch no device"
    return (f"torch {view.get('torch', '?')} (CUDA {view['cuda_build']}) reports torch.cuda.is_available() False: "
            "the driver or the container does not give it the GPU")


def devices(cache: Path, listed: Sequence[str] | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> Devices:
    """This machine's GPUs as the jobs' torch will see them: ``listed`` (default: ``nvidia-smi -L``), confirmed by
    the probe (cached under ``cache``, run only when a GPU is listed); unconfirmed ones count as none."""
    listed = listed_gpus() if listed is None else tuple(listed)
    if not listed:
        return Devices((), ())
    path = probe_path(cache, listed)
    view = cached_measurement(path, [sys.executable, "-m", "hasfl.device"], timeout_s=timeout_s)
    lead = f"nvidia-smi lists {len(listed)} GPU(s) but torch here cannot use them"
    if view is None:
        return Devices(listed, (), f"{lead}: the torch probe ({sys.executable} -m hasfl.device) failed or ran past "
                                   f"{timeout_s:g} s; treated as no GPU")
    if not view.get("cuda") or not view.get("names"):
        return Devices(listed, (), f"{lead}: {unusable(view)}; treated as no GPU (probe cached in {path})")
    return Devices(listed, tuple(str(n) for n in view["names"]))


if __name__ == "__main__":  # the probe: one JSON line of what torch sees
    print(json.dumps(torch_view()))
