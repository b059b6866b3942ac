"""The library's rooms and who may import whom (ARCHITECTURE.md "Import layers").

An import graph of ``src/hasfl`` is built from the source (every ``import`` statement,
also those inside functions), and the layering rules are checked on its transitive
closure: the registry imports nothing of ours, the config only the registry, the analysis
no training internals, the engine no config, nothing the command line. A second test
parses the Snakefile with a ``torch`` that cannot be imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hasfl.dag.identity import imported_modules

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SRC.joinpath("hasfl").rglob("*.py")}
    raw = {name: imported_modules(path, name) for name, path in modules.items()}
    # keep edges to real modules (`from hasfl.fl.engine import run_federation` -> hasfl.fl.engine)
    return {name: {m for m in deps if m in modules and m != name} for name, deps in raw.items()}


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def _room(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


RULES = [
    # (who, may not reach, why)
    ("hasfl.registry", "hasfl", "the registry is the bottom: it imports nothing of ours"),
    ("hasfl.layout", "hasfl", "where outputs lie is a bottom room: it imports nothing of ours"),
    ("hasfl.config", "hasfl.fl", "config never imports the engine"),
    ("hasfl.config", "hasfl.data", "config is validated without loaders"),
    ("hasfl.analysis", "hasfl.fl", "analysis never imports training internals"),
    ("hasfl.fl", "hasfl.config", "the engine receives config slices, it does not read the config"),
    ("hasfl.fl", "hasfl.analysis", "the engine does not import upward"),
    ("hasfl.data", "hasfl.fl", "the data stage does not import the engine"),
    ("hasfl.data", "hasfl.analysis", "the data stage does not import upward"),
    ("hasfl.models", "hasfl.fl", "models do not import the engine"),
    ("hasfl.models", "hasfl.data", "models do not import the loaders"),
    *[(room, "hasfl.dag", "the library never imports the DAG's front door (hasfl.dag imports it)")
      for room in ("hasfl.registry", "hasfl.config", "hasfl.data", "hasfl.models", "hasfl.fl", "hasfl.analysis",
                   "hasfl.integrity", "hasfl.io")],
]


@pytest.mark.parametrize(("who", "forbidden", "why"), RULES, ids=[f"{w}-/->{f}" for w, f, _ in RULES])
def test_layering(graph, who, forbidden, why) -> None:
    bad = {}
    for module in graph:
        if not _room(module, who):
            continue
        reached = {m for m in _closure(graph, module) if _room(m, forbidden) and not _room(m, who)}
        if who in ("hasfl.registry", "hasfl.layout"):
            reached = _closure(graph, module)
        if reached:
            bad[module] = sorted(reached)
    assert not bad, f"{why}: {bad}"


def test_nothing_in_the_library_imports_the_command_line_or_the_benchmark(graph) -> None:
    users = {m: sorted(d & {"hasfl.cli", "hasfl.bench"} | {x for x in d if x.startswith("hasfl.bench.")})
             for m, d in graph.items() if not _room(m, "hasfl.cli") and not _room(m, "hasfl.bench")}
    assert not {m: d for m, d in users.items() if d}


def test_the_graph_sees_imports_inside_functions(graph) -> None:
    """A check that cannot fail is a defect: the builder must see lazy imports (hasfl.fl.train
    imports hasfl.fl.engine at the top, hasfl.cli imports hasfl.dag.outputs inside a function)."""
    assert "hasfl.fl.engine" in graph["hasfl.fl.train"]
    assert "hasfl.dag.outputs" in graph["hasfl.cli"]
    fake = {"hasfl.config": {"hasfl.x"}, "hasfl.x": {"hasfl.fl.engine"}}
    assert "hasfl.fl.engine" in _closure(fake, "hasfl.config")


@pytest.mark.snakemake
def test_parsing_the_snakefile_imports_no_torch(medium_dry_run) -> None:
    """`snakemake -n` on the medium preset with a torch that raises on import first on ``PYTHONPATH`` (conftest
    ``medium_dry_run``)."""
    res = medium_dry_run.res
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "torch imported while parsing" not in res.stdout + res.stderr
    # and the fake does bite: importing the engine under it fails
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(medium_dry_run.fake_torch.parent), str(SRC)]))
    probe = subprocess.run([sys.executable, "-c", "import hasfl.fl.engine"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "torch imported while parsing" in probe.stderr


def test_tests_take_shared_helpers_as_fixtures() -> None:
    """No test module imports conftest (fixtures only), so a new test cannot depend on a helper
    conftest no longer has."""
    offenders = [p.name for p in (REPO / "tests").glob("test_*.py") if p.name != Path(__file__).name
                 and ("from conftest import" in p.read_text() or "import conftest" in p.read_text())]
    assert not offenders, offenders


def test_finished_folders_are_listed_in_one_module_outside_the_analysis() -> None:
    """Issue 46 point 1: outside the analysis package, no module globs a results folder's data-stage, run or
    evaluation folders itself; hasfl.layout lists them (result_folders, finished_folders)."""
    import re

    pattern = re.compile(r"""glob\(\s*f?["'](?:\*/)*(?:data|runs|evals|seed)""")
    found = [f"{p.relative_to(SRC)}:{n}" for p in sorted(SRC.joinpath("hasfl").rglob("*.py"))
             if "analysis" not in p.parts and p.name != "layout.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found
    assert pattern.search('for f in results.glob("runs/*/*/seed*"):')  # the check can fail


def test_the_analysis_names_evaluation_folders_as_the_layout_does(tmp_path) -> None:
    """The analysis keeps its own spelling of a run's evaluations folder (``hasfl.analysis.evaluations.eval_dir``: an
    edit there changes every run's evaluation key); it must be the layout's (``hasfl.layout.eval_folder``), which the
    rules, the store and the walkers use."""
    from hasfl.analysis.evaluations import EVALS, eval_dir
    from hasfl.layout import FOLDER_PATTERNS, eval_folder, result_folders

    assert str(eval_dir("R", "digits", "hasfl", 42)) == f"R/{eval_folder('digits', 'hasfl', 42)}"
    assert FOLDER_PATTERNS["evals"].split("/")[0] == EVALS
    table = tmp_path / eval_folder("digits", "hasfl", 42) / "bn_sensitivity"
    table.mkdir(parents=True)
    assert result_folders(tmp_path, "evals") == [table]


def test_the_per_run_evaluations_read_run_folders_as_the_layout_names_them() -> None:
    """The per-run evaluations keep their own pattern of a run file's path (``hasfl.analysis.per_run.files``: an
    edit there changes every run's evaluation key); it must parse the layout's run folders (``run_folder``) and
    nothing else."""
    from hasfl.analysis.per_run.files import group_run_files
    from hasfl.layout import data_folder, run_folder

    got = group_run_files([f"R/{run_folder('fashion_mnist', 'uniform_rolling', 45)}/run.json"])
    assert list(got) == [("fashion_mnist", "uniform_rolling", 45)] and list(got.values())[0] == {
        "run.json": Path(f"R/{run_folder('fashion_mnist', 'uniform_rolling', 45)}/run.json")}
    with pytest.raises(ValueError):
        group_run_files([f"R/{data_folder('fashion_mnist', 45)}/run.json"])
