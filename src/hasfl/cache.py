"""Once-per-machine measurements, cached as JSON under :data:`CACHE` (``$XDG_CACHE_HOME/hasfl``).

The pre-flight's throughput (:mod:`hasfl.dag.preflight`), the GPU packing calibration (:mod:`hasfl.dag.gpu`) and the
device probe (:mod:`hasfl.device`) are each measured by running a command once and caching its last stdout line.
Torch-free and config-free: the Snakefile's process and the engine's device decision both use it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CACHE", "cached_measurement"]

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hasfl"


def cached_measurement(path: Path, cmd: Sequence[str] | None = None, timeout_s: float = 300,
                       env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """A once-per-machine measurement: the JSON cached at ``path``; else, with ``cmd``, the last stdout line of
    running it (cached atomically at ``path``; a cache that cannot be written is skipped); None when there is
    neither."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass
    if cmd is None:
        return None
    try:
        out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, env=env)
        result = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    except (OSError, ValueError, IndexError, TypeError, subprocess.SubprocessError):
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, path)
    except OSError:
        pass
    return result
