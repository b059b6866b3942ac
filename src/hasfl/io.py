"""Atomic file output: nothing half-written is ever left looking complete.

Every writer here writes to a temporary file in the destination folder and
renames it into place (``os.replace`` is atomic on POSIX within one file system).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.errors import HasflError


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` on success.

    On an exception the temporary file is removed and ``path`` is untouched.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp creates 0600; give results the usual mode
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN / inf float replaced by None (standard JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as sorted, indented, standard JSON (NaN/inf become null), atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_finite(obj), indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_parquet(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``df`` to Parquet atomically, byte-deterministic for equal frames.

    The pandas index is dropped and no creation timestamps are stored, so the
    same frame always gives the same bytes.
    """
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False, engine="pyarrow", compression="zstd")


class InputFileError(HasflError, RuntimeError):
    """An input file is missing, truncated or not what its manifest recorded."""


def read_parquet(path: str | os.PathLike[str], expected_sha256: str | None = None) -> pd.DataFrame:
    """Read a Parquet file; a missing, corrupt or modified file raises InputFileError naming it."""
    p = Path(path)
    if not p.is_file():
        raise InputFileError(f"input file '{p}' does not exist")
    if expected_sha256 is not None:
        actual = sha256_file(p)
        if actual != expected_sha256:
            raise InputFileError(f"input file '{p}' has sha256 {actual} but its manifest records {expected_sha256} "
                                 "(truncated or modified); rerun the stage that writes it")
    try:
        return pd.read_parquet(p)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputFileError(f"input file '{p}' is not a readable Parquet file ({type(exc).__name__}: {exc}); "
                             "rerun the stage that writes it") from exc
