"""Resuming a killed run: the loop state saved every k rounds, and the run's identity.

A checkpoint holds everything the remaining rounds depend on (the global state, the
method's state on the server, the estimates H~, the allocation, the policy's random
stream, the record of the rounds so far). It is written atomically (temporary file +
rename) and carries the fingerprint of the run it belongs to: a checkpoint of another
run is ignored with a warning, never resumed. A run resumed from a checkpoint writes the
same bytes as an uninterrupted one (tests/test_resume.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from hasfl.io import atomic_path

__all__ = ["Checkpointer", "run_fingerprint"]

log = logging.getLogger("hasfl.train")


def run_fingerprint(run_cfg: Mapping[str, Any], hasfl_avg_p: float | None) -> str:
    """Identity of a run's configuration; a checkpoint resumes only the same run."""
    blob = json.dumps({"cfg": run_cfg, "target": hasfl_avg_p}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class Checkpointer:
    """Atomic save / load of the loop state every ``every`` rounds (0: never)."""

    def __init__(self, path: str | Path | None, every: int, fingerprint: str) -> None:
        self.path = Path(path) if path is not None else None
        self.every, self.fingerprint = int(every), fingerprint

    def due(self, rounds_done: int, total: int) -> bool:
        """Whether to save after ``rounds_done`` rounds (never after the last one)."""
        return self.path is not None and self.every > 0 and rounds_done % self.every == 0 and rounds_done < total

    def save(self, payload: Mapping[str, Any]) -> None:
        """Write ``payload`` with this run's fingerprint, atomically."""
        assert self.path is not None
        buf = io.BytesIO()
        torch.save({"fingerprint": self.fingerprint, **payload}, buf)
        with atomic_path(self.path) as tmp:
            tmp.write_bytes(buf.getvalue())

    def load(self) -> dict[str, Any] | None:
        """The saved payload of this run, or None (no file, unreadable, or another run's)."""
        if self.path is None or self.every <= 0:
            return None
        for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):  # a write cut short by a kill
            stale.unlink()
        if not self.path.exists():
            return None
        try:
            saved = torch.load(self.path, weights_only=False)
        except Exception as exc:  # a checkpoint that cannot be read is ignored, never half-used
            log.warning("ignoring unreadable checkpoint %s: %s", self.path, exc)
            return None
        if saved.get("fingerprint") != self.fingerprint:
            log.warning("ignoring checkpoint %s of another configuration", self.path)
            return None
        log.info("resuming from %s after round %d", self.path, saved["record"].next_round)
        return saved
