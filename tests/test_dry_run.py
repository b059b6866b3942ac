"""A dry run does no work: ``snakemake -n all`` on a finished folder (the shared tiny world, conftest ``tiny_world``)
opens no result file (no file a manifest lists is read: the check of every file against its manifest waits for
``onstart``, which a dry run never reaches) and writes nothing in the results folder, the run store or the home folder
(no calibration, no cache), with an empty home (no cache to price from). Python's audit hook (a ``sitecustomize`` on
the subprocess's path) records every file Snakemake's process and its children open and every folder change."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.dag
#: Snakemake's own cache of the workflow's sources (``~/.cache/snakemake``): Snakemake writes it in every command,
#: a dry run too; not ours to avoid
SNAKEMAKES_CACHE = Path(".cache/snakemake")

HOOK = '''
import os, sys
_LOG = os.environ.get("HASFL_TEST_AUDIT_LOG")
_ROOTS = tuple(r for r in os.environ.get("HASFL_TEST_AUDIT_ROOTS", "").split(os.pathsep) if r)
_EVENTS = {"open", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.chmod",
           "os.utime", "os.truncate", "shutil.rmtree", "shutil.copyfile"}
def _hook(event, args):
    if event not in _EVENTS or not args or isinstance(args[0], int):
        return
    try:
        path = os.path.abspath(os.fspath(args[0]))
    except Exception:
        return
    if not path.startswith(_ROOTS):
        return
    mode = args[1] if event == "open" and len(args) > 1 and isinstance(args[1], str) else None
    flags = args[2] if event == "open" and len(args) > 2 and isinstance(args[2], int) else 0
    with open(_LOG, "a") as f:  # outside the roots: not recorded itself
        f.write(repr((event, path, mode, flags)) + "\\n")
if _LOG and _ROOTS:
    sys.addaudithook(_hook)
'''


def _tree(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` (links not followed) with its kind, size, mode and modification time."""
    out = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        out[path.relative_to(root).as_posix()] = (st.st_mode, st.st_size, st.st_mtime_ns,
                                                  os.readlink(path) if path.is_symlink() else None)
    return out


def _listed(results: Path) -> set[Path]:
    """Every file a manifest under ``results`` (its store included) lists, resolved."""
    out = set()
    for manifest in results.rglob("manifest.json"):
        for name in (json.loads(manifest.read_text()).get("files") or {}):
            out.add((manifest.parent / name).resolve())
    return out


def _writes(line: tuple) -> bool:
    event, _, mode, flags = line
    if event != "open":
        return True
    return bool(mode and set(mode) & set("wax+")) or bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))


def test_a_dry_run_reads_no_result_file_and_writes_nothing(tiny_world, snakemake, tmp_path):
    results = tiny_world / "results"
    assert any(results.rglob("final.pt"))
    listed = _listed(results)
    assert len(listed) > 20
    home, hook, log = tmp_path / "home", tmp_path / "hook", tmp_path / "audit.log"
    home.mkdir()
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**snakemake.env(), "HOME": str(home), "HASFL_TEST_AUDIT_LOG": str(log),
           "HASFL_TEST_AUDIT_ROOTS": os.pathsep.join([str(results.resolve()), str(results), str(home)]),
           "PYTHONPATH": os.pathsep.join([str(hook), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("XDG_CACHE_HOME", None)
    before = _tree(results)
    start = time.perf_counter()
    res = subprocess.run([*snakemake.command, "-n", "all", "--configfile", "presets/quick.yaml", "tiny.yaml"],
                         cwd=tiny_world, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Nothing to be done" in res.stdout + res.stderr
    events = [ast.literal_eval(line) for line in log.read_text().splitlines()]
    assert any(e[0] == "open" for e in events)  # the hook saw the process (the manifests it reads)
    opened = {Path(e[1]).resolve() for e in events if e[0] == "open" and isinstance(e[1], str)}
    read = sorted(str(p) for p in opened & listed)
    assert not read, f"a dry run opened {len(read)} result files, e.g. {read[:3]}"
    snakemakes = home / SNAKEMAKES_CACHE
    ours = [e for e in events if _writes(e) and not Path(e[1]).is_relative_to(snakemakes)
            and not snakemakes.is_relative_to(e[1])]
    assert not ours, f"a dry run wrote {ours[:3]}"
    assert _tree(results) == before
    written = sorted(str(p) for p in home.rglob("*") if not p.is_relative_to(home / SNAKEMAKES_CACHE)
                     and p not in (home / ".cache", home / SNAKEMAKES_CACHE.parent))
    assert not written, written[:5]
    print(f"dry run on the finished tiny world: {wall:.1f} s, {len(opened)} files opened")
