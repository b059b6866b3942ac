"""A method from an installed package: registered through the ``hasfl.methods`` entry-point group
(:func:`hasfl.registry.installed_methods`), with its config defaults and schema, its whole package in its runs'
training identity, and trained, evaluated and tabled by the DAG with no edit of this repository.

The package is installed as an installer leaves one on a path: the package folder beside its ``.dist-info`` (metadata
and ``entry_points.txt``), found through ``PYTHONPATH`` by the subprocesses that import the registry afresh (the test
process has imported it already, so nothing here leaks into other tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]

INFO = '''"""A tiny method package: its registry entry, light (no torch)."""
from hasfl.registry import MethodInfo

METHOD = MethodInfo("tinyhalf.method:build", "Tiny half", "fixed", color="#123456", marker="v",
                    shown_in=("table3_allocation",), defaults={"p": 0.5},
                    schema={"type": "object", "additionalProperties": False, "required": ["p"],
                            "properties": {"p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}}})
NOT_A_METHOD = 3
'''

METHOD = '''"""Uniform's rule at its own width p: the builder, imported when a run starts."""
from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import UniformPolicy
from tinyhalf.helpers import width


def build(ctx: MethodContext) -> Method:
    return Method(UniformPolicy(ctx.pmax, width(ctx.params)), local_sgd(ctx))
'''

HELPERS = '''def width(params):
    return float(params["p"])
'''


def install(site: Path, entries: str = "tiny_half = tinyhalf.info:METHOD") -> Path:
    """The package ``tinyhalf`` installed into ``site`` with the entry points ``entries``; returns ``site``."""
    pkg = site / "tinyhalf"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "info.py").write_text(INFO)
    (pkg / "method.py").write_text(METHOD)
    (pkg / "helpers.py").write_text(HELPERS)
    meta = site / "tinyhalf-0.1.dist-info"
    meta.mkdir(exist_ok=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyhalf\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[hasfl.methods]\n{entries}\n")
    return site


def env_with(site: Path) -> dict[str, str]:
    path = os.pathsep.join([str(site), str(REPO / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return dict(os.environ, PYTHONPATH=path, PYTHONHASHSEED="0")


def python(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=env_with(site), capture_output=True, text=True,
                          timeout=300, cwd=REPO)


def test_an_installed_method_is_registered_with_its_defaults_and_schema(tmp_path):
    site = install(tmp_path / "site")
    res = python(site, """
import json
from hasfl.registry import METHODS
from hasfl.config import load_config, ConfigError
cfg = load_config("presets/quick.yaml", overrides=["methods=[fedavg,tiny_half]"])
out = {"label": METHODS["tiny_half"].label, "params": cfg["method_params"]["tiny_half"], "last": list(METHODS)[-1]}
try:
    load_config("presets/quick.yaml", overrides=["methods=[tiny_half]", "method_params.tiny_half.p=1.5"])
except ConfigError as exc:
    out["bad"] = str(exc)
print(json.dumps(out))
""")
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["label"] == "Tiny half" and out["last"] == "tiny_half"
    assert out["params"] == {"p": 0.5}  # the package's default, in the run's config slice
    assert "method_params.tiny_half.p" in out["bad"] and "1.5" in out["bad"]


def test_its_whole_package_is_its_training_code(tmp_path):
    """An edit of any file of the package moves the method's training digest and no other method's."""
    site = install(tmp_path / "site")
    code = ("from hasfl.integrity import training_code_digest as t; "
            "print(t('tiny_half', 'digits'), t('uniform', 'digits'))")
    before = python(site, code)
    assert before.returncode == 0, before.stderr[-3000:]
    (site / "tinyhalf" / "helpers.py").write_text(HELPERS + "\nEXTRA = 1\n")
    after = python(site, code)
    ours, uniform = before.stdout.split()
    assert after.stdout.split()[0] != ours and after.stdout.split()[1] == uniform
    from hasfl.integrity import training_code_digest

    assert training_code_digest("uniform", "digits") == uniform  # the package changes no built-in method's digest


@pytest.mark.parametrize(("entries", "message"), [
    ("tiny_half = tinyhalf.info:NOT_A_METHOD", "is a int; expected a hasfl.registry.MethodInfo"),
    ("fedavg = tinyhalf.info:METHOD", "method 'fedavg' is registered already"),
    ("tiny_half = tinyhalf.nowhere:METHOD", "does not load: ModuleNotFoundError"),
    ("tiny-half = tinyhalf.info:METHOD", "a method name is a Python identifier"),
])
def test_a_bad_entry_is_named_with_its_package(tmp_path, entries, message):
    site = install(tmp_path / "site", entries)
    res = python(site, "import hasfl.registry")
    assert res.returncode != 0
    assert "MethodEntryError" in res.stderr and "package 'tinyhalf'" in res.stderr and message in res.stderr, \
        res.stderr[-2000:]


def test_an_installed_method_runs_through_the_dag_into_the_tables(tiny_world, snakemake, tmp_path):
    """A variant of the finished world adding the installed method: only its runs train (the world's are linked from
    the store), and it appears in the tables by its label."""
    import yaml

    site = install(tmp_path / "site")
    world = yaml.safe_load((tiny_world / "tiny.yaml").read_text())
    overlay = {**world, "name": "tiny-plugin", "methods": ["fedprox", "tiny_half"]}
    (tiny_world / "tiny-plugin.yaml").write_text(yaml.safe_dump(overlay))
    res = subprocess.run([*snakemake.command, "--cores", "2", "all", "--configfile", "presets/quick.yaml",
                          "tiny-plugin.yaml"], cwd=tiny_world, env=env_with(site), capture_output=True, text=True,
                         timeout=1200)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    results = tiny_world / "results" / "tiny-plugin"
    seeds = overlay["seeds"]
    counts = snakemake.job_counts(res.stdout + res.stderr)
    # its runs train; fedprox's and the data stages are the world's, linked from the store
    assert counts.get("train") == len(seeds) and counts.get("link_run") == len(seeds), counts
    for seed in seeds:
        run = results / "runs" / "digits" / "tiny_half" / f"seed{seed}"
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["identity"]["config"]["method_params"] == {"p": 0.5}
    led = pd.read_parquet(results / "runs" / "digits" / "tiny_half" / f"seed{seeds[0]}" / "participation.parquet")
    assert set(led["p_trained"].round(6)) <= {0.5, 0.25}  # min(p, pmax): the package's rule ran
    table = pd.read_parquet(results / "tables" / "table3_allocation_seeds.parquet")
    assert set(table.loc[table["method"] == "tiny_half", "seed"]) == set(seeds), table
    shown = (results / "tables" / "table3_allocation.md").read_text()
    assert "| Digits | Tiny half | " in shown, shown[:3000]
