"""envs/hasfl.yaml pins exactly what pyproject.toml pins (dependencies + the `test` extra)."""

from __future__ import annotations

import re
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from conftest import REPO

ENV_FILE = REPO / "envs" / "hasfl.yaml"


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


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


def _env() -> dict:
    return yaml.safe_load(ENV_FILE.read_text())


def _env_parts() -> tuple[list[str], list[str]]:
    """(conda specs, pip requirement strings) of the environment file."""
    conda, pip = [], []
    for dep in _env()["dependencies"]:
        if isinstance(dep, dict):
            assert set(dep) == {"pip"}, dep
            pip.extend(dep["pip"])
        else:
            conda.append(str(dep))
    return conda, pip


@pytest.fixture(scope="module")
def project_pins() -> dict[str, str]:
    project = _pyproject()["project"]
    return _pins(project["dependencies"] + project["optional-dependencies"]["test"])


def test_env_pins_equal_pyproject_pins(project_pins):
    _, pip = _env_parts()
    env_pins = _pins(pip)
    missing = sorted(set(project_pins) - set(env_pins))
    extra = sorted(set(env_pins) - set(project_pins))
    differ = {n: (project_pins[n], env_pins[n]) for n in project_pins.keys() & env_pins.keys()
              if project_pins[n] != env_pins[n]}  # fmt: skip
    assert not missing, f"in pyproject.toml but not in {ENV_FILE.name}: {missing}"
    assert not differ, f"pinned differently (pyproject, env): {differ}"
    assert not extra, f"in {ENV_FILE.name} but not in pyproject.toml: {extra}"


def test_env_conda_part_is_python_and_pip_only():
    conda, _ = _env_parts()
    names = {re.split(r"[=<>! ]", spec, maxsplit=1)[0] for spec in conda}
    assert names == {"python", "pip"}, conda  # no library from conda as well as from pip
    python = next(spec for spec in conda if spec.startswith("python"))
    version = python.split("=", 1)[1].lstrip("=")
    requires = SpecifierSet(_pyproject()["project"]["requires-python"])
    assert version in requires, f"{python} does not satisfy requires-python {requires}"
    assert "conda-forge" in _env()["channels"]


def test_env_file_is_named_and_has_no_local_paths():
    env = _env()
    assert env["name"] == "hasfl"
    _, pip = _env_parts()
    # `-e .` would resolve against wherever conda/Snakemake copies the file; the README
    # step `pip install --no-deps -e .` installs the project instead.
    assert not [p for p in pip if p.startswith("-") or "/" in p or p.startswith(".")], pip
