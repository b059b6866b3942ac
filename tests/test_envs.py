"""envs/hasfl.yaml pins exactly what pyproject.toml pins (dependencies + the `test` extra)."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ENV_FILE = "envs/hasfl.yaml"


@pytest.fixture(scope="module")
def pyproject(repo) -> dict:
    return tomllib.loads((repo / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def env(repo) -> dict:
    """The conda environment file."""
    return yaml.safe_load((repo / ENV_FILE).read_text())


def _pins(requirements: list[str]) -> dict[str, str]:
    """name -> specifier of PEP 508 requirement strings; every one must be an exact pin."""
    pins: dict[str, str] = {}
    for line in requirements:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name not in pins, f"{req.name} listed twice"
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{line!r} is not an exact '==' pin"
        pins[name] = specs[0].version
    return pins


def _env_parts(env: dict) -> tuple[list[str], list[str]]:
    """(conda specs, pip requirement strings) of the environment file."""
    conda, pip = [], []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            assert set(dep) == {"pip"}, dep
            pip.extend(dep["pip"])
        else:
            conda.append(str(dep))
    return conda, pip


@pytest.fixture(scope="module")
def project_pins(pyproject) -> dict[str, str]:
    project = pyproject["project"]
    return _pins(project["dependencies"] + project["optional-dependencies"]["test"])


def test_env_pins_equal_pyproject_pins(project_pins, env):
    _, pip = _env_parts(env)
    env_pins = _pins(pip)
    missing = sorted(set(project_pins) - set(env_pins))
    extra = sorted(set(env_pins) - set(project_pins))
    differ = {n: (project_pins[n], env_pins[n]) for n in project_pins.keys() & env_pins.keys()
              if project_pins[n] != env_pins[n]}  # fmt: skip
    assert not missing, f"in pyproject.toml but not in {ENV_FILE}: {missing}"
    assert not differ, f"pinned differently (pyproject, env): {differ}"
    assert not extra, f"in {ENV_FILE} but not in pyproject.toml: {extra}"


def test_env_conda_part_is_python_and_pip_only(env, pyproject):
    conda, _ = _env_parts(env)
    names = {re.split(r"[=<>! ]", spec, maxsplit=1)[0] for spec in conda}
    assert names == {"python", "pip"}, conda  # no library from conda as well as from pip
    python = next(spec for spec in conda if spec.startswith("python"))
    version = python.split("=", 1)[1].lstrip("=")
    requires = SpecifierSet(pyproject["project"]["requires-python"])
    assert version in requires, f"{python} does not satisfy requires-python {requires}"
    assert "conda-forge" in env["channels"]


def test_env_file_is_named_and_has_no_local_paths(env):
    assert env["name"] == "hasfl"
    _, pip = _env_parts(env)
    # `-e .` would resolve against wherever conda/Snakemake copies the file; the README
    # step `pip install --no-deps -e .` installs the project instead.
    assert not [p for p in pip if p.startswith("-") or "/" in p or p.startswith(".")], pip
