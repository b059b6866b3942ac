"""Logging setup shared by the CLI and the Snakemake scripts."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


#: A log record with this attribute set is per-round progress (a training job's progress bar lines).
PROGRESS = "hasfl_progress"


def _not_progress(record: logging.LogRecord) -> bool:
    return not getattr(record, PROGRESS, False)


def setup_logging(log_file: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    """Log to stderr and, if given, to ``log_file`` (created with its folder). With a log file (a DAG job) the
    per-round progress (records marked :data:`PROGRESS`) goes to the file only, so the console shows a few lines
    per job; without one (``hasfl train`` in a terminal) it is shown."""
    stderr = logging.StreamHandler(sys.stderr)
    handlers: list[logging.Handler] = [stderr]
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w"))
        stderr.addFilter(_not_progress)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=handlers, force=True)
    return logging.getLogger("hasfl")
