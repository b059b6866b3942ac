"""Issue 46: code digests under a wheel (non-editable) install.

The code digests of ``hasfl verify --config`` came from ``hasfl.config.REPO_ROOT`` (``parents[2]`` of the installed
``config.py``): for a wheel install the folder above ``site-packages``, which holds none of
:data:`hasfl.dag.identity.ANALYSIS_CODE`, so ``analysis_code_digest(REPO_ROOT)`` hashed no file and returned
sha256(b"") whatever the analysis code. Now every code digest comes from one checkout
(:func:`hasfl.dag.identity.checkout_root`) and a digest that would hash nothing is refused
(:class:`hasfl.dag.identity.CodeRootError`, naming the folder and the missing code paths).

The wheel is built offline from a copy of the repository (``pip wheel --no-deps --no-build-isolation``: no build
output in the working tree) and installed with ``pip install --no-deps --target``; every probe runs with that
target first on ``PYTHONPATH`` and checks ``import hasfl`` resolves there, not to the editable ``src/``. Snakemake
is never started: the results folder ``verify --config`` reads is fabricated (an analysis manifest recording the
analysis identity of a checkout, no run or data-stage folder).

Each test failed before the fix: the wheel probe got sha256(b"") from ``analysis_code_digest(REPO_ROOT)`` for two
wheels of different analysis code, and ``verify --config`` under the wheel stopped on the missing base preset
(``<site-packages>/../config.yaml``), not on the missing code; the unit test found ``source_digest`` of no file
returning sha256(b"").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hasfl.config import load_config
from hasfl.dag.identity import (ANALYSIS_CODE, CodeRootError, analysis_code_digest, analysis_identity,
                                checkout_root, source_digest)

REPO = Path(__file__).resolve().parents[1]
EMPTY = hashlib.sha256().hexdigest()  # the digest of no file: what the wheel install's verify computed
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
EDITED = "src/hasfl/analysis/stats.py"  # an analysis module (under ANALYSIS_CODE, not NOT_ANALYSIS_CODE)

#: Run under the wheel install: where hasfl comes from, the pre-fix verify digest (of REPO_ROOT), the rule's
#: checkout of the installed package, and the analysis digest of each checkout given on the command line.
PROBE = r'''
import json, sys
import hasfl
from hasfl.config import REPO_ROOT
from hasfl.dag import identity
out = {"hasfl": hasfl.__file__, "repo_root": str(REPO_ROOT)}
def attempt(key, fn):
    try:
        out[key] = fn()
    except Exception as exc:
        out[key + "_refused"] = f"{type(exc).__name__}: {exc}"
attempt("repo_root_digest", lambda: identity.analysis_code_digest(REPO_ROOT))  # what verify --config hashed
attempt("checkout", lambda: str(identity.checkout_root()))
for i, tree in enumerate(sys.argv[1:]):
    attempt(f"given{i}", lambda: identity.analysis_code_digest(identity.checkout_root(tree)))
print(json.dumps(out))
'''
CLI = "import sys; from hasfl.cli import main; sys.exit(main(sys.argv[1:]))"


def _env(pythonpath: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(pythonpath), "PYTHONDONTWRITEBYTECODE": "1", "PIP_NO_INDEX": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _python(*args: str | Path, pythonpath: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *map(str, args)], env=_env(pythonpath), cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _checkout(dst: Path) -> Path:
    """A copy of the checkout: what the DAG, the wheel and the config need (Snakefile, workflow/, src/, presets/)."""
    for rel in ("src", "workflow", "presets"):
        shutil.copytree(REPO / rel, dst / rel, ignore=IGNORE)
    for rel in ("Snakefile", "config.yaml", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / rel, dst / rel)
    return dst


def _edit_analysis(tree: Path) -> None:
    path = tree / EDITED
    path.write_text(path.read_text() + "\n# an edit of the analysis code\n")


def _wheel_install(tree: Path, dst: Path) -> Path:
    """Build a wheel of ``tree`` offline and install it (not editable) into ``dst/site-packages``; returns that."""
    dist, site = dst / "dist", dst / "site-packages"
    dst.mkdir(parents=True)
    res = _python("-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", dist, tree, pythonpath=dst, cwd=dst)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    (wheel,) = dist.glob("hasfl-*.whl")
    res = _python("-m", "pip", "install", "--no-deps", "--target", site, wheel, pythonpath=dst, cwd=dst)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert (site / "hasfl" / "dag" / "identity.py").is_file() and not (site / "hasfl" / "Snakefile").exists()
    return site


def _finished_results(results: Path, tree: Path) -> Path:
    """A finished results folder as ``verify --config`` reads it: no data stage or run yet (``runs/`` empty) and an
    analysis manifest (one output file) recording the quick preset's analysis identity with ``tree``'s analysis
    code, as the DAG run from ``tree`` writes it."""
    (results / "runs").mkdir(parents=True)
    (results / "tables").mkdir()
    table = results / "tables" / "t.csv"
    table.write_text("a,b\n1,2\n")
    config = load_config(tree / "presets" / "quick.yaml", tree / "config.yaml")
    manifest = {"files": {"tables/t.csv": {"sha256": hashlib.sha256(table.read_bytes()).hexdigest()}}, "runs": {},
                "identity": analysis_identity(config, analysis_code_digest(tree))}
    (results / "analysis.manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return results


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """Two checkouts of different analysis code (``b`` edits :data:`EDITED`) and a wheel install of each."""
    tmp = tmp_path_factory.mktemp("wheel")
    a, b = _checkout(tmp / "a"), _checkout(tmp / "b")
    _edit_analysis(b)
    return {"tmp": tmp, "a": a, "b": b, "site_a": _wheel_install(a, tmp / "install_a"),
            "site_b": _wheel_install(b, tmp / "install_b")}


def test_a_wheel_install_refuses_a_digest_of_no_code_and_hashes_a_given_checkout(wheels) -> None:
    """Under a wheel install the pre-fix verify digest (``analysis_code_digest(REPO_ROOT)``) hashed no file: the same
    sha256(b"") for wheels of different analysis code. Now it is refused, naming the folder and the missing paths;
    the rule finds no checkout for the installed package (refused); a checkout given explicitly is hashed, to the
    value the editable install gives it, and the analysis-code edit moves the digest."""
    a, b = wheels["a"], wheels["b"]
    outs = {}
    for name in ("a", "b"):
        site = wheels[f"site_{name}"]
        res = _python("-c", PROBE, a, b, pythonpath=site, cwd=wheels["tmp"])
        assert res.returncode == 0, res.stderr[-3000:]
        out = outs[name] = json.loads(res.stdout.strip().splitlines()[-1])
        # import hasfl is the wheel's copy, not the editable src/ of the repository
        assert Path(out["hasfl"]).resolve() == (site / "hasfl" / "__init__.py").resolve(), out["hasfl"]
        assert not Path(out["hasfl"]).resolve().is_relative_to((REPO / "src").resolve())
        assert Path(out["repo_root"]) == site.parent  # parents[2] of site-packages/hasfl/config.py: no checkout
        assert not any((site.parent / rel).exists() for rel in ANALYSIS_CODE)
    digests = {name: out.get("repo_root_digest") for name, out in outs.items()}
    assert digests == {"a": None, "b": None}, (
        f"a digest of no file under the wheel install: {digests} (sha256(b'') = {EMPTY[:12]}...), one constant for "
        "two different analysis codes")
    for out in outs.values():
        refused = out["repo_root_digest_refused"]
        assert refused.startswith(f"CodeRootError: cannot compute a code digest from '{out['repo_root']}'"), refused
        assert "src/hasfl/analysis" in refused and "workflow/scripts/artifact.py" in refused
        assert "run hasfl from the clone that made the results folder" in refused
        refused = out["checkout_refused"]
        assert refused.startswith("CodeRootError: the checkout the installed hasfl package"), refused
        assert "installed from a wheel" in refused and "Snakefile, workflow, src/hasfl" in refused
        # a checkout given explicitly: hashed like the editable install hashes it; the edit is detected
        assert out["given0"] == analysis_code_digest(a)
        assert out["given1"] == analysis_code_digest(b)
        assert out["given0"] != out["given1"] and EMPTY not in (out["given0"], out["given1"])


def test_verify_config_under_a_wheel_install_refuses_naming_the_missing_code(wheels, tmp_path) -> None:
    """``hasfl verify RESULTS --config PRESET`` of the wheel install stops on the missing checkout (its code
    paths named), before anything is compared: it never calls an analysis current or stale from no code. (Before:
    it looked for the base preset beside site-packages and stopped on that, or, given one, computed sha256(b''))."""
    a, site = wheels["a"], wheels["site_a"]
    results = _finished_results(tmp_path / "results" / "quick", a)
    res = _python("-c", CLI, "verify", results, "--config", a / "presets" / "quick.yaml", pythonpath=site,
                  cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "identities consistent" not in res.stdout
    err = res.stderr.strip()
    assert err.startswith(f"hasfl: error: the checkout the installed hasfl package ({site / 'hasfl'}) came from, "
                          f"'{site.parent}', is not a checkout of hasfl-repro"), err
    assert "does not hold Snakefile, workflow, src/hasfl" in err and "pip install -e CLONE" in err
    assert "Traceback" not in err


def test_verify_config_from_a_checkout_detects_an_analysis_code_change(tmp_path) -> None:
    """Run from a checkout (its ``src/`` first on the path, as an editable install of it): ``verify --config`` calls
    the analysis current while the code is the one recorded, and stale ("analysis code") after an edit of it."""
    tree = _checkout(tmp_path / "clone")
    results = _finished_results(tmp_path / "results" / "quick", tree)
    args = ("-c", CLI, "verify", results, "--config", tree / "presets" / "quick.yaml")
    res = _python(*args, pythonpath=tree / "src", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"hasfl verify: {results}: identities consistent" in res.stdout
    _edit_analysis(tree)
    res = _python(*args, pythonpath=tree / "src", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "  - analysis: analysis code" in res.stderr, res.stderr


def test_a_digest_of_no_file_is_refused(tmp_path) -> None:
    """source_digest never returns the digest of nothing: a missing path, a folder without a Python file and
    every file excluded are refused naming the folder; checkout_root names what a partial copy lacks."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "one.py").write_text("x = 1\n")
    for paths, exclude, named in ((("gone",), (), "gone"), (("empty",), (), "empty"),
                                  (("one.py",), ("one.py",), "no Python file")):
        with pytest.raises(CodeRootError, match=f"from '{tmp_path}'") as err:
            source_digest(tmp_path, *paths, exclude=exclude)
        assert named in str(err.value)
    assert source_digest(tmp_path, "one.py") != EMPTY
    with pytest.raises(CodeRootError, match=f"'{tmp_path}' is not a checkout of hasfl-repro: it does not hold "
                                            "Snakefile, workflow, src/hasfl;"):
        checkout_root(tmp_path)
    assert checkout_root() == REPO  # the editable install: its clone, the DAG's Snakefile folder
