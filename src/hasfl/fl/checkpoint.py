"""Resuming a killed run: the loop state saved every k rounds, and the run's identity.

A checkpoint holds everything the remaining rounds depend on (the global state, the
method's state on the server, the estimates H~, the allocation, the policy's random
stream, the record of the rounds so far). It is written atomically (temporary file +
rename) and carries the identity of the run it belongs to (:func:`hasfl.integrity.run_identity`:
config slice, data-stage files, dataset, training code, matched run, device): a checkpoint
of another identity, or one whose zip archive fails its CRC check, is ignored with a warning
and the run starts afresh -- never resumed. A run resumed from a checkpoint writes the same
bytes as an uninterrupted one (tests/test_resume.py).
"""

from __future__ import annotations

import io
import logging
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from hasfl.integrity import identity_difference
from hasfl.io import atomic_path

__all__ = ["Checkpointer"]

log = logging.getLogger("hasfl.train")


class Checkpointer:
    """Atomic save / load of the loop state every ``every`` rounds (0: never) for the run of
    ``identity`` (a :func:`hasfl.integrity.run_identity`)."""

    def __init__(self, path: str | Path | None, every: int, identity: Mapping[str, Any]) -> None:
        self.path = Path(path) if path is not None else None
        self.every, self.identity = int(every), dict(identity)
        self.saved_round: int | None = None  # rounds done at the last save (or at the resumed one)

    def due(self, rounds_done: int, total: int) -> bool:
        """Whether to save after ``rounds_done`` rounds (never after the last one)."""
        return self.path is not None and self.every > 0 and rounds_done % self.every == 0 and rounds_done < total

    def save(self, payload: Mapping[str, Any]) -> None:
        """Write ``payload`` with this run's fingerprint, atomically."""
        assert self.path is not None
        buf = io.BytesIO()
        torch.save({"identity": self.identity, **payload}, buf)
        with atomic_path(self.path) as tmp:
            tmp.write_bytes(buf.getvalue())
        self.saved_round = int(payload["record"].next_round)

    def load(self) -> dict[str, Any] | None:
        """The saved payload of this run, or None (no file, unreadable, or another run's)."""
        if self.path is None or self.every <= 0:
            return None
        for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):  # a write cut short by a kill
            stale.unlink()
        if not self.path.exists():
            return None
        try:
            with zipfile.ZipFile(self.path) as archive:  # torch.load does not check the CRCs it carries
                bad = archive.testzip()
            if bad is not None:
                raise ValueError(f"member {bad} fails its CRC check")
            saved = torch.load(self.path, weights_only=False)
        except Exception as exc:  # a checkpoint that cannot be read is ignored, never half-used
            log.warning("ignoring unreadable checkpoint %s (%s); starting from round 0", self.path, exc)
            return None
        theirs = saved.get("identity") or {}
        if theirs.get("digest") != self.identity.get("digest"):
            log.warning("ignoring checkpoint %s of another run (differs in: %s); starting from round 0", self.path,
                        ", ".join(identity_difference(theirs, self.identity)) or "identity format")
            return None
        self.saved_round = int(saved["record"].next_round)
        log.info("resuming from %s after round %d", self.path, self.saved_round)
        return saved
