"""Logging setup shared by the CLI and the Snakemake scripts."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

__all__ = ["CONSOLE", "CONSOLE_WIDTH", "PROGRESS", "WIDTH_ENV", "CappedFormatter", "cap_console", "cap_line",
           "console_width", "setup_logging"]

#: A log record with this attribute set is per-round progress (a training job's progress bar lines).
PROGRESS = "hasfl_progress"
#: A log record with this attribute set is one of a DAG job's two console lines (its start and its end,
#: :func:`hasfl.dag.worker.run_logged`); ``extra={CONSOLE: True}``.
CONSOLE = "hasfl_console"
#: The longest line the console shows (characters): a longer one is cut to this, the cut said at its end (the
#: quick run printed lines of 15,384 characters). Log files keep every line whole.
CONSOLE_WIDTH = 300
#: The environment variable that sets the console width of a DAG's Snakemake console (:func:`console_width`); 0 shows
#: every line whole (e.g. to read a dry run's job inputs, which no log file keeps).
WIDTH_ENV = "HASFL_CONSOLE_WIDTH"
#: The format of the records of :func:`setup_logging`.
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def console_width() -> int:
    """The width a DAG's Snakemake console is cut to: :data:`WIDTH_ENV` when set (0: no cut), else
    :data:`CONSOLE_WIDTH`.

    Raises:
        ValueError: naming the variable when its value is not a non-negative integer."""
    import os

    raw = os.environ.get(WIDTH_ENV, "").strip()
    if not raw:
        return CONSOLE_WIDTH
    if not raw.isdigit():
        raise ValueError(f"environment variable {WIDTH_ENV}={raw!r}: expected a width in characters (0: no cut)")
    return int(raw)


def cap_line(line: str, limit: int = CONSOLE_WIDTH, where: str | None = None) -> str:
    """``line`` if it has at most ``limit`` characters, else its start and a marker saying how many characters were
    cut and, with ``where`` (a log file), where the whole line is; the result has at most ``limit`` characters."""
    if len(line) <= limit:
        return line
    marker, previous = "", None
    while marker != previous:  # the marker's length depends on the count it states: settle both
        previous, cut = marker, len(line) - max(0, limit - len(marker))
        marker = f" [... {cut:,} characters cut" + (f"; whole line in {where}]" if where else "]")
    if len(marker) <= limit:
        return line[:limit - len(marker)] + marker
    return cap_line(line, limit) if where else line[:limit]  # a path too long to name, or a tiny limit


class CappedFormatter(logging.Formatter):
    """A console's formatter: what ``inner`` formats, each line cut by :func:`cap_line` to ``limit`` characters,
    the marker naming ``where`` (the log file that keeps the whole record; None: none does)."""

    def __init__(self, inner: logging.Formatter | None = None, limit: int = CONSOLE_WIDTH,
                 where: str | Path | None = None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()
        self.limit = limit
        self.where = None if where is None else str(where)

    def format(self, record: logging.LogRecord) -> str:
        text = self.inner.format(record)
        if not isinstance(text, str):  # Snakemake's formatter returns None for records it does not show
            return text
        return "\n".join(cap_line(line, self.limit, self.where) for line in text.split("\n"))


def cap_console(logger: logging.Logger, limit: int = CONSOLE_WIDTH) -> int:
    """Cut the lines of ``logger``'s console handlers (its stream handlers that are not files) to ``limit``
    characters, keeping each handler's own formatter (:class:`CappedFormatter`); the marker names ``logger``'s log
    file, which keeps them whole. For Snakemake's console (``logging.getLogger("snakemake")``: its job blocks list
    every input of a job on one line). Returns how many handlers it capped (0 when they already are)."""
    files = [h.baseFilename for h in logger.handlers if isinstance(h, logging.FileHandler)]
    capped = 0
    for handler in logger.handlers:
        if (isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)
                and not isinstance(handler.formatter, CappedFormatter)):
            handler.setFormatter(CappedFormatter(handler.formatter, limit, files[0] if files else None))
            capped += 1
    return capped


def _job_console(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or bool(getattr(record, CONSOLE, False))


def setup_logging(log_file: str | Path | None = None, level: int = logging.INFO) -> logging.Logger:
    """Log to stderr and, if given, to ``log_file`` (created with its folder). With a log file (a DAG job) the file
    gets every record and the console only warnings, errors and the records marked :data:`CONSOLE` (the job's
    start and end: one line each), so a run's console is Snakemake's job table and two lines per job; without one
    (``hasfl train`` in a terminal) everything is shown, the per-round progress (:data:`PROGRESS`) too. A console
    line is at most :data:`CONSOLE_WIDTH` characters (:func:`cap_line`); the log file keeps it whole."""
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(CappedFormatter(logging.Formatter(FORMAT), where=log_file))
    handlers: list[logging.Handler] = [stderr]
    if log_file is not None:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w"))
        stderr.addFilter(_job_console)
    logging.basicConfig(level=level, format=FORMAT, handlers=handlers, force=True)
    return logging.getLogger("hasfl")
