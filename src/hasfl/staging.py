"""A folder replaced whole: filled in a hidden sibling, then renamed in, so a reader finds the old folder or the new
one, never half of either (``hasfl export tensorboard``'s run folders, ``hasfl export rocrate``'s crate,
``hasfl results-page``'s figure folder).

Not in :mod:`hasfl.io`: that module is part of every run's and data stage's code identity, and this is the
exporters' and the page's alone. Torch-free; imports nothing of ours.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["sibling", "staged_folder"]


def sibling(target: Path, what: str) -> Path:
    """A fresh hidden folder name beside ``target`` (``.<name>.<what>-<random>``), on the same file system."""
    return target.parent / f".{target.name}.{what}-{uuid.uuid4().hex[:12]}"


@contextmanager
def staged_folder(folder: str | os.PathLike[str], keep: Callable[[Path], bool] | None = None, *,
                  make_empty: bool = True) -> Iterator[Path]:
    """Yield a fresh hidden folder beside ``folder`` to fill; on success it becomes ``folder`` by renames within one
    parent (the old folder set aside, then removed): a reader sees the old folder, for an instant none, or the new
    one. On an exception (a full disk) the staging folder is removed and ``folder`` is untouched. ``keep(path)``:
    files of the old folder carried into the new one (hard links where the file system allows); ``make_empty``
    False: an empty staging folder where there was no folder places none."""
    dest = Path(folder)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = sibling(dest, "new")
    staging.mkdir()
    try:
        if keep is not None and dest.is_dir():
            for f in sorted(dest.iterdir()):
                if f.is_file() and keep(f):
                    try:
                        os.link(f, staging / f.name)
                    except OSError:
                        shutil.copy2(f, staging / f.name)
        yield staging
        if not make_empty and not dest.exists() and not any(staging.iterdir()):
            return  # nothing to place, and no folder before: none is made
        if not dest.exists() and not dest.is_symlink():
            os.replace(staging, dest)
            return
        old = sibling(dest, "old")
        os.replace(dest, old)
        os.replace(staging, dest)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
