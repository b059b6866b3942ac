"""Logging setup shared by the CLI and the Snakemake scripts."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


#: A log record with this attribute set is per-round progress (a training job's progress bar lines).
PROGRESS = "hasfl_progress"
#: A log record with this attribute set is one of a DAG job's two console lines (its start and its end,
#: :func:`hasfl.dag.worker.run_logged`); ``extra={CONSOLE: True}``.
CONSOLE = "hasfl_console"


def _not_progress(record: logging.LogRecord) -> bool:
    return not getattr(record, PROGRESS, False)


def _job_console(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or bool(getattr(record, CONSOLE, False))


def setup_logging(log_file: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    """Log to stderr and, if given, to ``log_file`` (created with its folder). With a log file (a DAG job) the file
    gets every record and the console only warnings, errors and the records marked :data:`CONSOLE` (the job's
    start and end: one line each), so a run's console is Snakemake's job table and two lines per job; without one
    (``hasfl train`` in a terminal) everything is shown, the per-round progress (:data:`PROGRESS`) too."""
    stderr = logging.StreamHandler(sys.stderr)
    handlers: list[logging.Handler] = [stderr]
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w"))
        stderr.addFilter(_job_console)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=handlers, force=True)
    return logging.getLogger("hasfl")
