"""ARCHITECTURE.md, "Adding a method: 2 files": ``src/hasfl/fl/methods/<name>.py`` with a builder and one
``MethodInfo`` in ``hasfl.registry.METHODS``; "the config validation, ``hasfl train --method``, the wildcards, the job's
config slice, the DAG edge to a matched run and the pre-flight take it from there", and "its runs' training-code
identity is the engine plus its own module and entry, so adding it retrains no finished run".

Tested by doing exactly that in a copy of the repository's ``src/`` and ``workflow/`` (with ``config.yaml``,
``presets/`` and the Snakefile beside them; nothing else of the copy is edited), the copy's package imported through
``PYTHONPATH`` in a subprocess: before the two files the name is refused by the validation; after, it is accepted,
gets its config slice, is priced by the pre-flight (:func:`hasfl.dag.preflight.estimate`) like the method of the
same cost rule, is a choice of ``hasfl train --method``, and has a training-code digest
(:func:`hasfl.integrity.training_code_digest`) of its own while every other method's digest is unchanged.
The registry has no registration function (``METHODS`` is a dict literal), so the entry is written into the copy's
``registry.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the method's module: every client at its capacity pmax (as HeteroFL allocates), the shared local SGD
TOY_MODULE = '''"""A toy method (tests/test_add_method.py): every client trains at its capacity pmax."""

from __future__ import annotations

from hasfl.fl.methods import Method, MethodContext, local_sgd
from hasfl.fl.policies import StaticPolicy

__all__ = ["toy"]


def toy(ctx: MethodContext) -> Method:
    """Toy: p_i = pmax_i."""
    return Method(StaticPolicy(ctx.pmax), local_sgd(ctx))
'''
#: its one registry entry, written as the first entry of the METHODS literal
TOY_ENTRY = '    "toy": MethodInfo(f"{_M}.toy:toy", "Toy", "capacity", color="#000000", marker="*"),\n'
METHODS_LITERAL = "METHODS: dict[str, MethodInfo] = {\n"

#: what the subprocess reports of the copy's package (JSON on stdout)
PROBE = r'''
import json, sys
import hasfl
from hasfl.config import REPO_ROOT, ConfigError, load_config, run_config
from hasfl.integrity import method_module, training_code_digest
from hasfl.registry import DATASETS, METHODS

out = {"package": hasfl.__file__, "methods": list(METHODS),
       "digests": {f"{m}/{d}": training_code_digest(m, d) for m in METHODS for d in ("digits", "shakespeare")}}
try:
    cfg = load_config(REPO_ROOT / "presets" / "quick.yaml", overrides=["methods=[hasfl, heterofl, toy]"])
except ConfigError as exc:
    out["refused"] = str(exc)
else:
    from hasfl.cli import build_parser
    from hasfl.dag.preflight import FALLBACK, estimate

    est = estimate(cfg, 2, FALLBACK, machine_cores=2)
    out["priced"] = {d: est["per_method_job_hours"][d] for d in cfg["datasets"]}
    out["train_jobs"] = est["train_jobs"]
    out["n_runs"] = len(cfg["datasets"]) * len(cfg["methods"]) * len(cfg["seeds"])
    out["slice"] = run_config(cfg, "digits", "toy", 42)
    out["module"] = str(method_module("toy"))
    from hasfl.registry import resolve

    builder = resolve(METHODS["toy"].build)
    out["builder"] = f"{builder.__module__}:{builder.__name__}:{sys.modules[builder.__module__].__file__}"
    args = build_parser().parse_args(["train", "--dataset", "digits", "--method", "toy", "--seed", "42",
                                      "--out", "x"])
    out["cli_method"] = args.method
print(json.dumps(out))
'''


def _copy(tmp_path: Path) -> Path:
    """The repository's src/ and workflow/ (and config.yaml, presets/, the Snakefile, pyproject.toml) in a folder."""
    work = tmp_path / "work"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for rel in ("src", "workflow", "presets"):
        shutil.copytree(REPO / rel, work / rel, ignore=ignore)
    for rel in ("config.yaml", "Snakefile", "pyproject.toml"):
        shutil.copy2(REPO / rel, work / rel)
    return work


def _probe(work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(work / "src")}
    res = subprocess.run([sys.executable, "-c", PROBE], cwd=work, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert Path(out["package"]).resolve().is_relative_to(work.resolve()), out["package"]  # the copy's package
    return out


def _add_method(work: Path) -> None:
    """ARCHITECTURE.md's two files: the method's module and its MethodInfo in hasfl.registry.METHODS."""
    (work / "src" / "hasfl" / "fl" / "methods" / "toy.py").write_text(TOY_MODULE)
    registry = work / "src" / "hasfl" / "registry.py"
    text = registry.read_text()
    assert text.count(METHODS_LITERAL) == 1
    registry.write_text(text.replace(METHODS_LITERAL, METHODS_LITERAL + TOY_ENTRY))


def _changed_files(work: Path, before: dict[str, bytes]) -> set[str]:
    now = {p.relative_to(work).as_posix(): p.read_bytes() for p in work.rglob("*")
           if p.is_file() and "__pycache__" not in p.parts}
    return {k for k in set(now) | set(before) if now.get(k) != before.get(k)}


def test_a_method_is_two_files_accepted_priced_and_digested_alone(tmp_path) -> None:
    work = _copy(tmp_path)
    before = _probe(work)
    assert "toy" not in before["methods"]
    assert "config key 'methods[2]': unknown method 'toy'" in before["refused"]

    files = {p.relative_to(work).as_posix(): p.read_bytes() for p in work.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    _add_method(work)
    assert _changed_files(work, files) == {"src/hasfl/fl/methods/toy.py", "src/hasfl/registry.py"}
    after = _probe(work)

    # accepted by the config validation, with its own config slice and CLI choice
    assert "refused" not in after, after.get("refused")
    assert after["slice"]["method"] == "toy" and after["slice"]["method_params"] == {}
    assert "p_min" not in after["slice"]["hasfl"]  # not an allocation-rule method: Eq. 6's keys are not its
    assert after["cli_method"] == "toy"
    # priced by the pre-flight: every run of it counted, at the price of the method of the same cost rule
    assert after["train_jobs"] == after["n_runs"]
    for dataset, methods in after["priced"].items():
        assert methods["toy"] > 0 and methods["toy"] == methods["heterofl"], (dataset, methods)
    # its own training code: the module it was added in, a digest no other method has; the others' unchanged
    module = (work / "src" / "hasfl" / "fl" / "methods" / "toy.py").resolve()
    assert Path(after["module"]).resolve() == module
    name, func, path = after["builder"].split(":", 2)
    assert (name, func, Path(path).resolve()) == ("hasfl.fl.methods.toy", "toy", module)  # the builder imports
    toy = {k: v for k, v in after["digests"].items() if k.startswith("toy/")}
    assert len(toy) == 2 and not set(toy.values()) & set(before["digests"].values())
    assert {k: v for k, v in after["digests"].items() if not k.startswith("toy/")} == before["digests"]
