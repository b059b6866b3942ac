"""Shared fixtures. Tests receive everything from here as fixtures (never ``from conftest import``).

* ``repo``, ``paper_config``, ``quick_config`` -- the repository root and the merged presets;
* ``snakemake`` -- runs Snakemake with this interpreter (``snakemake(*args)``), builds the usual
  command line of a preset run (``snakemake.dag_args``) and reads its job counts
  (``snakemake.job_counts``, also the fixture ``job_counts``);
* ``tiny_preset`` -- writes a tiny-preset overlay (digits, a few methods, seeds and rounds);
* ``tiny_world`` -- a module's copy of the one finished tiny world (a workflow copy where a tiny preset ran to the
  end), built once per session for every module and xdist worker; ``quick_dry_run`` -- the quick preset's dry run
  in an empty folder, once per session;
* ``small_cnn`` / ``small_lstm`` -- tiny model families for slicing and client tests;
* ``hasfl_cli`` -- the ``hasfl`` command line run in this process (``hasfl_cli(*args)``: exit code, stdout, stderr;
  an uncaught exception is exit 1 with its traceback on stderr, as the console script gives), for tests of what a
  command says and returns; a subprocess only where the process itself is under test (kills, imports, entry point);
* ``engine_cfg``, ``digits``, ``digits_family``, ``federate``, ``one_thread`` -- the quick preset's
  digits federation on the CPU, for tests of the engine (hasfl.fl).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from hasfl.config import deep_merge, load_config

_REPO = Path(__file__).resolve().parents[1]
_QUICK = _REPO / "presets" / "quick.yaml"


# --------------------------------------------------------------------------- tests that start Snakemake
#: Fixtures whose use means the test starts Snakemake (a dry run or a DAG): such a test is marked ``snakemake``.
SNAKEMAKE_FIXTURES = frozenset({"snakemake", "tiny_world", "quick_dry_run", "medium_dry_run"})
#: Fixtures whose use means the test starts and signals processes of its own (concurrent training jobs): marked
#: ``processes`` (the README's short check leaves them out; the full suite runs them).
PROCESSES_FIXTURES = frozenset({"cpu_packing_calibration"})
_ITEM: list[pytest.Item] = []  # the test being set up or run


def _starts_snakemake(args: Any) -> bool:
    """Whether a subprocess command line runs Snakemake (``snakemake ...`` or ``python -m snakemake ...``)."""
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else str(args).split()
    return any(Path(a).name == "snakemake" for a in argv[:3])


class _GuardedPopen(subprocess.Popen):  # type: ignore[type-arg]
    """``subprocess.Popen`` that refuses to start Snakemake for a test not marked ``snakemake`` (or ``dag``), so
    the README's short check (``-m 'not dag and not slow and not snakemake and not processes'``) starts none."""

    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        item = _ITEM[-1] if _ITEM else None
        if (item is not None and _starts_snakemake(args) and item.get_closest_marker("snakemake") is None
                and item.get_closest_marker("dag") is None):
            raise RuntimeError(f"{item.nodeid} starts Snakemake ({' '.join(map(str, args))[:120]}) but is not marked: "
                               "add @pytest.mark.snakemake (the short check leaves such tests out)")
        super().__init__(args, *rest, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen = _GuardedPopen  # type: ignore[misc]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a fixture of :data:`SNAKEMAKE_FIXTURES`, or runs the DAG, is marked ``snakemake``; one that
    uses a fixture of :data:`PROCESSES_FIXTURES` is marked ``processes``."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SNAKEMAKE_FIXTURES & fixtures or item.get_closest_marker("dag"):
            item.add_marker(pytest.mark.snakemake)
        if PROCESSES_FIXTURES & fixtures:
            item.add_marker(pytest.mark.processes)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ANN201 (a hook wrapper)
    _ITEM.append(item)
    try:
        yield
    finally:
        _ITEM.pop()


# --------------------------------------------------------------------------- repository and presets
@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root (Snakefile, config.yaml, presets/, src/, workflow/)."""
    return _REPO


@pytest.fixture()
def paper_config() -> dict:
    return load_config()


@pytest.fixture()
def quick_config() -> dict:
    return load_config(_QUICK)


# --------------------------------------------------------------------------- the hasfl command line, in process
class CliResult(NamedTuple):
    """What ``hasfl ARGS`` returned and printed (the fields of :class:`subprocess.CompletedProcess` tests read)."""

    returncode: int
    stdout: str
    stderr: str


def _hasfl_cli(*args: str | Path) -> CliResult:
    """``hasfl ARGS`` through :func:`hasfl.cli.main` in this process: argparse's exits keep their code, any other
    exception is exit 1 with its traceback on stderr (what the console script's process would give)."""
    import contextlib
    import io
    import traceback

    from hasfl.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
        except Exception:  # noqa: BLE001 (a traceback is what a process would print)
            traceback.print_exc()
            rc = 1
    return CliResult(int(rc), out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def hasfl_cli() -> Callable[..., CliResult]:
    return _hasfl_cli


# --------------------------------------------------------------------------- Snakemake
class Snakemake:
    """``python -m snakemake`` with the test's interpreter (so the worktree's ``hasfl`` is imported)."""

    command = (sys.executable, "-m", "snakemake")

    def __call__(self, *args: str, cwd: Path = _REPO, timeout: int = 900) -> subprocess.CompletedProcess[str]:
        """Run snakemake with ``args`` in ``cwd``; returns the completed process (no check)."""
        return subprocess.run([*self.command, *map(str, args)], cwd=cwd, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)

    @staticmethod
    def env() -> dict[str, str]:
        return dict(os.environ, PYTHONHASHSEED="0")

    @staticmethod
    def dag_args(*overlays: Path | str, workdir: Path, target: str = "all", cores: int = 2) -> list[str]:
        """``--cores N TARGET --configfile presets/quick.yaml OVERLAY... -s Snakefile --directory WORKDIR``."""
        return ["--cores", str(cores), target, "--configfile", str(_QUICK), *map(str, overlays),
                "-s", str(_REPO / "Snakefile"), "--directory", str(workdir)]

    def dag(self, *overlays: Path | str, workdir: Path, target: str = "all", cores: int = 2, timeout: int = 1200,
            extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        """Run the quick preset plus ``overlays`` in ``workdir`` up to ``target``."""
        return self(*self.dag_args(*overlays, workdir=workdir, target=target, cores=cores), *extra, timeout=timeout)

    @staticmethod
    def job_counts(output: str) -> dict[str, int]:
        """Rule -> number of jobs from Snakemake's "Job stats" table ({} when nothing to do)."""
        if "Job stats:" not in output:
            return {}
        block = output.split("Job stats:", 1)[1].split("\ntotal", 1)[0]
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", block, re.M)}


@pytest.fixture(scope="session")
def snakemake() -> Snakemake:
    return Snakemake()


@pytest.fixture(scope="session")
def job_counts() -> Callable[[str], dict[str, int]]:
    """Rule -> number of jobs from Snakemake's output (its "Job stats" table)."""
    return Snakemake.job_counts



def of_kinds(folders: Iterable[str], *kinds: str) -> list[str]:
    """The folders (relative to a results folder: ``data/...``, ``runs/...``, ``evals/...``, ``analysis``) of
    ``kinds``, sorted; all of them when no kind is given."""
    return sorted(f for f in folders if not kinds or f.split("/")[0] in kinds)


class Walked(NamedTuple):
    """A preset's config (as the session validates and keys it on a CPU build) and its status walk."""

    config: dict[str, Any]
    status: Any  # hasfl.dag.status.Status

    def reruns(self, kind: str) -> list[str]:
        """The finished folders of ``kind`` (``data``, ``runs``, ``analysis``) the walk reruns."""
        return of_kinds(self.status.rerun, kind)

    def missing(self, kind: str) -> list[str]:
        """The folders of ``kind`` no finished output or store entry holds (a job makes them)."""
        return of_kinds(self.status.missing, kind)

    def params(self) -> dict[str, str]:
        """Folder -> the config params its rule hands the job (workflow/rules/data.smk ``data_cfg``, train.smk
        ``run_cfg`` and ``data_cfg``), which Snakemake's params trigger compares with the finished job's: two configs
        that give equal params (and an empty walk) plan nothing."""
        from hasfl.dag.identity import data_slice, run_slice
        from hasfl.dag.outputs import keyed_config, preset_jobs

        data, runs = preset_jobs(self.config)
        out = {f"data/{d}/seed{s}": [data_slice(self.config, d)] for d, s in data}
        out |= {f"runs/{d}/{m}/seed{s}": [keyed_config(run_slice(self.config, d, m, s), "cpu"), data_slice(self.config, d)]
                for d, m, s in runs}
        return {folder: json.dumps(p) for folder, p in out.items()}  # in order: a key order is a difference too


def preset_status(workdir: Path, *configfiles: str | Path) -> Walked:
    """What a CPU build of ``--configfile presets/quick.yaml CONFIGFILES...`` in the checkout ``workdir`` decides,
    in process: the config merged over ``workdir/config.yaml`` and validated as the session does
    (:func:`hasfl.config.load_config`), keyed on the CPU device class, and the session's one status walk
    (:func:`hasfl.dag.status.status`) with that checkout's code digests (:class:`hasfl.dag.identity.Checkout`). What
    Snakemake itself decides on top (its params trigger, the job table) the end-to-end dry runs test."""
    from hasfl.config import load_config
    from hasfl.dag.identity import Checkout
    from hasfl.dag.outputs import keyed_config
    from hasfl.dag.status import status

    files = [workdir / "presets/quick.yaml", *(workdir / f for f in configfiles)]
    config = keyed_config(load_config(files, base=workdir / "config.yaml"), "cpu")
    results = workdir / config["results_dir"] / config["name"]
    return Walked(config, status(config, results, Checkout(workdir), device_class="cpu"))


@pytest.fixture(scope="session")
def walk() -> Callable[..., Walked]:
    """``walk(workdir, *configfiles)``: :func:`preset_status`."""
    return preset_status


class Planned(NamedTuple):
    """What the Snakefile's session decided in process (:func:`plan_in_process`): the session when it completed, else
    None; the exit code of its stop (1) or None; what it printed (the pre-flight block, the store and identity lines,
    a stop's one ``hasfl:`` line)."""

    session: Any  # hasfl.dag.session.Session | None
    code: int | None
    stderr: str

    def jobs(self, *kinds: str) -> dict[str, list[str]]:
        """The folders of ``kinds`` (``data``, ``runs``, ``evals``; default all) the session leaves to jobs, by what the
        job does: ``rerun`` (finished, not what this preset makes), ``missing`` (made by a job) and ``link`` (the run
        store holds it: a link job)."""
        assert self.session is not None, self.stderr[-3000:]
        found = self.session.status
        return {"rerun": of_kinds(found.rerun, *kinds), "missing": of_kinds(found.missing, *kinds),
                "link": of_kinds(found.in_store, *kinds)}

    def plans_nothing(self, *kinds: str) -> bool:
        """No folder of ``kinds`` (default: data stages and runs, the ``runs`` target's) is rerun, made or linked, and
        no finished output is another job's."""
        return not any(self.jobs(*(kinds or ("data", "runs"))).values()) and not self.session.status.foreign


def plan_in_process(workdir: Path, *configfiles: str | Path, config: dict[str, Any] | None = None,
                    argv: tuple[str, ...] = ("-n", "all"), basedir: Path = _REPO, cores: int = 2,
                    local: bool = True) -> Planned:
    """What ``snakemake ARGV --configfile CONFIGFILES... [--config ...] -s BASEDIR/Snakefile --directory WORKDIR``
    decides at parse time, in this process: the config merged as Snakemake merges it (its own ``load_configfile`` and
    ``update_config``: the Snakefile's ``config.yaml``, then the files (relative ones in ``workdir``), then
    ``config``), handed with Snakemake's own ``ConfigSettings`` to the Snakefile's
    :class:`hasfl.dag.session.Session`, run in ``workdir`` with ``sys.argv`` as the command line's. The stand-in for
    Snakemake's workflow object carries only what the session reads of it (``basedir``, the main process, local
    execution, the cores); everything else is the real code path (the session's ``status`` is its one walk).
    A second the call instead of Snakemake's start and DAG (5-10 s); what Snakemake decides on top (its job table,
    which rule makes a file) the end-to-end dry runs test."""
    import contextlib
    import io
    from types import SimpleNamespace

    from snakemake.common.configfile import load_configfile
    from snakemake.settings.types import ConfigSettings
    from snakemake.utils import update_config

    from hasfl.dag.session import ENV_CONFIGFILES, Session, base_config

    workdir = Path(workdir)
    files = [Path(f) if Path(f).is_absolute() else workdir / f for f in configfiles]
    err, cwd, argv0, env = io.StringIO(), os.getcwd(), sys.argv, os.environ.get(ENV_CONFIGFILES)
    try:
        os.chdir(workdir)
        sys.argv = ["snakemake", *argv]
        with contextlib.redirect_stderr(err):
            try:
                overwrite: dict[str, Any] = {}
                for f in files:
                    update_config(overwrite, load_configfile(f))
                update_config(overwrite, copy.deepcopy(config or {}))
                merged: dict[str, Any] = {}
                update_config(merged, load_configfile(base_config(basedir)))  # the Snakefile's ``configfile:``
                update_config(merged, overwrite)
                workflow = SimpleNamespace(basedir=str(basedir), is_main_process=True, local_exec=local, _cores=cores,
                                           global_resources={}, register_resource=lambda *a: None,
                                           config_settings=ConfigSettings(config=config or {}, configfiles=files))
                return Planned(Session(workflow, merged), None, err.getvalue())
            except SystemExit as exc:
                return Planned(None, int(exc.code or 0), err.getvalue())
    finally:
        os.chdir(cwd)
        sys.argv = argv0
        if env is None:
            os.environ.pop(ENV_CONFIGFILES, None)
        else:
            os.environ[ENV_CONFIGFILES] = env


@pytest.fixture(scope="session")
def plan() -> Callable[..., Planned]:
    """``plan(workdir, *configfiles, config=None, argv=("-n", "all"), basedir=<this checkout>)``:
    :func:`plan_in_process`."""
    return plan_in_process


# --------------------------------------------------------------------------- the tiny preset
TINY: dict[str, Any] = {
    "name": "tiny",
    "datasets": ["digits"],
    "methods": ["hasfl", "random_budget", "fedavg"],
    "seeds": [42],
    "federation": {"rounds": 3},
    "hasfl": {"warmup": 0},  # hasfl.warmup <= federation.rounds - 2
}


class TinyPreset:
    """Writes the tiny preset: an overlay over presets/quick.yaml (digits, 3 rounds, seed 42, hasfl,
    random_budget and fedavg), results and data under the overlay's folder unless told otherwise."""

    defaults = TINY

    def __call__(self, folder: Path, file: str = "tiny", *, results_dir: Path | str | None = "results",
                 data_dir: Path | str | None = "data", rounds: int | None = None, standalone: bool = False,
                 **overrides: Any) -> Path:
        """Write ``folder/<file>.yaml`` and return its path.

        ``results_dir`` / ``data_dir``: relative to ``folder`` (absolute paths as given), None to
        leave the key out (the defaults ``results`` / ``data`` relative to Snakemake's directory).
        ``rounds``: ``federation.rounds``. ``overrides``: any other keys, merged over the tiny
        preset key by key. ``standalone``: the quick preset merged in as well, for the ``hasfl`` CLI,
        which takes one preset (merged over config.yaml).
        """
        overlay = copy.deepcopy(TINY)
        for key, value in (("results_dir", results_dir), ("data_dir", data_dir)):
            if value is not None:
                overlay[key] = str(Path(folder) / value)
        if rounds is not None:
            overlay["federation"]["rounds"] = rounds
        overlay = deep_merge(overlay, overrides)
        if standalone:
            overlay = deep_merge(yaml.safe_load(_QUICK.read_text()), overlay)
        path = Path(folder) / f"{file}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(overlay))
        return path


@pytest.fixture(scope="session")
def tiny_preset() -> TinyPreset:
    """``tiny_preset(folder, file="tiny", *, results_dir=..., data_dir=..., rounds=..., **overrides)``."""
    return TinyPreset()


# --------------------------------------------------------------------------- one finished world, built once
def _once_per_session(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
                      make: Callable[[Path], None]) -> Path:
    """``<shared>/<name>``, made by ``make(path)`` once per test session for every xdist worker: the first worker to
    ask makes it under a lock in the session's shared temporary folder (``.../pytest-N/``; this run's own without
    xdist) and the others wait and read it. Made at ``<name>.partial`` and renamed, so a failed make leaves nothing a
    later ask would read."""
    import fcntl
    import shutil

    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    done, partial = shared / name, shared / f"{name}.partial"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if partial.is_dir():
                shutil.rmtree(partial)
            else:
                partial.unlink(missing_ok=True)
            make(partial)
            partial.rename(done)
    return done


#: The shared world's preset (over presets/quick.yaml): digits, 2 rounds, 2 seeds, a method whose run another reads
#: (random_budget reads hasfl's), one with a method parameter (fedprox's mu); one thread per job.
WORLD_METHODS = ("hasfl", "random_budget", "fedprox")
WORLD_SEEDS = (42, 43)
#: What a copy of the workflow holds (the jobs' code digests are hashed from the copy's src/hasfl).
WORKFLOW_ITEMS = ("Snakefile", "config.yaml", "presets", "profiles", "workflow", "src")


def _build_world(snakemake: Snakemake, tiny_preset: TinyPreset, work: Path) -> None:
    """A copy of the workflow in ``work`` and the world's preset run to the end there: ``work/tiny.yaml`` (the
    overlay), ``work/tiny-standalone.yaml`` (the same config merged over presets/quick.yaml, for the ``hasfl`` CLI),
    the finished folder ``work/results/tiny`` and its run store ``work/results/.store`` (links relative, so a copy
    of ``work`` is a world of its own)."""
    import shutil

    for item in WORKFLOW_ITEMS:
        src = _REPO / item
        if src.is_dir():
            shutil.copytree(src, work / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, work / item)
    kw: dict[str, Any] = {"methods": list(WORLD_METHODS), "seeds": list(WORLD_SEEDS), "rounds": 2,
                          "threads_per_job": 1}
    tiny_preset(work, "tiny", results_dir=None, data_dir=None, **kw)
    tiny_preset(work, "tiny-standalone", results_dir=None, data_dir=None, standalone=True, **kw)
    res = snakemake("--cores", "2", "all", "--configfile", "presets/quick.yaml", "tiny.yaml", cwd=work, timeout=1500)
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.fixture(scope="session")
def _tiny_world(snakemake: Snakemake, tiny_preset: TinyPreset, tmp_path_factory: pytest.TempPathFactory,
                worker_id: str) -> Path:
    """The finished world, built once per test session for every xdist worker (:func:`_once_per_session`). Never
    handed out: tests get a copy."""

    def build(work: Path) -> None:
        work.mkdir()
        _build_world(snakemake, tiny_preset, work)

    return _once_per_session(tmp_path_factory, worker_id, "tiny-world", build)


@pytest.fixture(scope="session")
def quick_dry_run(snakemake: Snakemake, tmp_path_factory: pytest.TempPathFactory,
                  worker_id: str) -> subprocess.CompletedProcess[str]:
    """One ``snakemake -n all --configfile presets/quick.yaml`` in an empty folder (``-s Snakefile --directory D
    --config results_dir=D/results``, console lines whole: ``HASFL_CONSOLE_WIDTH=0``), run once per test session for
    every test that reads what it plans (its job table, a job's inputs) and every xdist worker
    (:func:`_once_per_session`). The tests of the console itself run their own."""
    folder = tmp_path_factory.getbasetemp() / "quick-dry-run"

    def run(saved: Path) -> None:
        folder.mkdir(exist_ok=True)
        res = subprocess.run([*snakemake.command, "-n", "all", "-s", str(_REPO / "Snakefile"), "--directory",
                              str(folder), "--configfile", str(_QUICK), "--config", f"results_dir={folder}/results"],
                             cwd=_REPO, env={**snakemake.env(), "HASFL_CONSOLE_WIDTH": "0"}, capture_output=True,
                             text=True, timeout=600)
        saved.write_text(json.dumps({"args": res.args, "returncode": res.returncode, "stdout": res.stdout,
                                     "stderr": res.stderr}))

    done = json.loads(_once_per_session(tmp_path_factory, worker_id, "quick-dry-run.json", run).read_text())
    return subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"], done["stderr"])


class MediumDryRun(NamedTuple):
    """The medium preset's one dry run (:func:`medium_dry_run`): its process, its empty folder and the stand-in
    ``torch`` package that was first on its ``PYTHONPATH``."""

    res: subprocess.CompletedProcess[str]
    folder: Path
    fake_torch: Path


@pytest.fixture(scope="session")
def medium_dry_run(snakemake: Snakemake, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> MediumDryRun:
    """One ``snakemake -n all --configfile presets/medium.yaml`` in an empty folder (results and data under it) as a
    user types it: the console at its default width (``HASFL_CONSOLE_WIDTH`` unset) and, first on ``PYTHONPATH``, a
    ``torch`` that raises on import (parsing the Snakefile must not import torch). Run once per test session for
    the tests of what it plans (its fetch rules), of its console and of its imports."""
    folder = tmp_path_factory.getbasetemp() / "medium-dry-run"
    fake = folder / "fake" / "torch"

    def run(saved: Path) -> None:
        fake.mkdir(parents=True, exist_ok=True)
        (fake / "__init__.py").write_text('raise ImportError("torch imported while parsing the Snakefile")\n')
        env = {k: v for k, v in snakemake.env().items() if k != "HASFL_CONSOLE_WIDTH"}
        env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), str(_REPO / "src")])
        res = subprocess.run([*snakemake.command, "-n", "all", "-s", str(_REPO / "Snakefile"), "--directory",
                              str(folder), "--configfile", str(_REPO / "presets" / "medium.yaml"), "--config",
                              f"results_dir={folder}/results", f"data_dir={folder}/data"],
                             cwd=_REPO, env=env, capture_output=True, text=True, timeout=600)
        saved.write_text(json.dumps({"args": res.args, "returncode": res.returncode, "stdout": res.stdout,
                                     "stderr": res.stderr, "folder": str(folder), "fake": str(fake)}))

    done = json.loads(_once_per_session(tmp_path_factory, worker_id, "medium-dry-run.json", run).read_text())
    res = subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"], done["stderr"])
    return MediumDryRun(res, Path(done["folder"]), Path(done["fake"]))  # the folders of the worker that ran it


@pytest.fixture(scope="module")
def tiny_world(_tiny_world: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A module's own copy of the finished world (see ``_build_world``): a workflow copy in which the tiny preset
    (``tiny.yaml`` over ``presets/quick.yaml``; digits x hasfl, random_budget, fedprox x seeds 42, 43; 2 rounds) has
    run to the end. Run Snakemake there with ``cwd=`` the copy; edit its sources, configs and folders freely."""
    import shutil

    work = tmp_path_factory.mktemp("world") / "work"
    shutil.copytree(_tiny_world, work, symlinks=True)
    return work


# --------------------------------------------------------------------------- tiny model families
class IndexReference:
    """Sub-models written from the rule with index tensors, for the window tests (rolling, sampled)."""

    @staticmethod
    def random_state(family) -> dict:
        """A full-width state with distinct random values everywhere (buffers included), seed 0."""
        import torch

        torch.manual_seed(0)
        state = {k: v.clone() for k, v in family.build(1.0).state_dict().items()}
        for v in state.values():
            if v.is_floating_point():
                v.copy_(torch.randn_like(v))
        return state

    @staticmethod
    def cnn(family, state, units, h) -> dict:
        """The CNN sub-model holding output channels ``units[i]`` (index tensors) of conv layer i, its inputs the
        previous layer's (the image channels whole), fc1's hidden units ``h`` over the flattened columns of the
        last layer's channels (channel-major), and the class outputs whole."""
        import torch

        out, prev = {}, torch.arange(family.in_shape[0])
        for i, idx in enumerate(units):
            out[f"convs.{i}.weight"] = state[f"convs.{i}.weight"][idx][:, prev]
            for k in ("convs.{i}.bias", "bns.{i}.weight", "bns.{i}.bias", "bns.{i}.running_mean",
                      "bns.{i}.running_var"):
                out[k.format(i=i)] = state[k.format(i=i)][idx]
            out[f"bns.{i}.num_batches_tracked"] = state[f"bns.{i}.num_batches_tracked"]
            prev = idx
        per = family.pool_out**2
        flat = (prev[:, None] * per + torch.arange(per)[None, :]).reshape(-1)
        out["fc1.weight"] = state["fc1.weight"][h][:, flat]
        out["fc1.bias"] = state["fc1.bias"][h]
        out["fc2.weight"] = state["fc2.weight"][:, h]
        out["fc2.bias"] = state["fc2.bias"]
        return out

    @staticmethod
    def lstm(family, state, h) -> dict:
        """The LSTM sub-model holding hidden units ``h`` (an index tensor) in every gate block and layer, the
        embedding and the class outputs whole."""
        import torch

        H = family.hidden
        rows = torch.cat([g * H + h for g in range(4)])
        out = {"embed.weight": state["embed.weight"]}
        for layer in range(family.layers):
            ih = state[f"lstm.weight_ih_l{layer}"][rows]
            out[f"lstm.weight_ih_l{layer}"] = ih if layer == 0 else ih[:, h]
            out[f"lstm.weight_hh_l{layer}"] = state[f"lstm.weight_hh_l{layer}"][rows][:, h]
            for b in ("bias_ih", "bias_hh"):
                out[f"lstm.{b}_l{layer}"] = state[f"lstm.{b}_l{layer}"][rows]
        out["fc.weight"] = state["fc.weight"][:, h]
        out["fc.bias"] = state["fc.bias"]
        return out


@pytest.fixture(scope="session")
def index_reference() -> IndexReference:
    """:class:`IndexReference`: sub-models by index tensors and a random full state."""
    return IndexReference()


@pytest.fixture()
def small_cnn():
    """A 3-conv CNN family on 3x16x16 inputs, 7 classes (two pooling stages, 2x2 pooled output)."""
    from hasfl.models import family_from_config

    model = {"arch": "cnn", "channels": [8, 12, 16], "pool_after": [0, 1], "pool_out": 2, "hidden": 20}
    return family_from_config(model, (3, 16, 16), 7)


@pytest.fixture()
def small_lstm():
    """A 2-layer char-LSTM family: sequences of 6, vocabulary 11, embedding 5, hidden 12."""
    from hasfl.models import family_from_config

    return family_from_config({"arch": "lstm", "embed_dim": 5, "hidden": 12, "layers": 2}, (6,), 11)


# --------------------------------------------------------------------------- the engine's digits federation
class Federation(NamedTuple):
    """One dataset x seed as the data stage gives it to the engine."""

    bundle: Any
    partition: Any
    clients: Any
    seed: int


@pytest.fixture(scope="module")
def one_thread():
    """Several torch threads on a small shared CPU only slow tiny models down (restored after the module)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def _engine_base() -> dict:
    cfg = load_config(_QUICK)
    cfg["device"] = "cpu"
    return cfg


@pytest.fixture(scope="session")
def engine_cfg(_engine_base) -> Callable[..., dict]:
    """``engine_cfg(rounds=None, **hasfl)``: a fresh copy of the quick preset on the CPU, with
    ``rounds`` rounds and the given overrides of the ``hasfl`` block."""

    def make(rounds: int | None = None, **hasfl: float) -> dict:
        out = copy.deepcopy(_engine_base)
        if rounds is not None:
            out["federation"]["rounds"] = rounds
        out["hasfl"].update(hasfl)
        return out

    return make


@pytest.fixture(scope="session")
def digits(_engine_base) -> Federation:
    """The quick preset's digits federation for seed 42: (bundle, partition, clients, seed)."""
    from hasfl.config import data_config
    from hasfl.data import load_dataset
    from hasfl.data.stage import build_tables

    dcfg = data_config(_engine_base, "digits")
    bundle = load_dataset("digits", dcfg["data_dir"], dcfg["dataset_params"])
    partition, clients = build_tables(bundle, dcfg, 42)
    return Federation(bundle, partition, clients, 42)


@pytest.fixture()
def digits_family(_engine_base, digits):
    """The model family of the quick preset's digits CNN."""
    from hasfl.models import family_from_config

    return family_from_config(_engine_base["dataset_params"]["digits"]["model"], digits.bundle.input_shape,
                              digits.bundle.num_classes)


@pytest.fixture(scope="session")
def federate(digits) -> Callable[..., Any]:
    """``federate(cfg, method, **kwargs)``: run_federation of ``method`` on the digits federation."""
    from hasfl.config import run_config
    from hasfl.fl.engine import run_federation

    def run(cfg: dict, method: str, **kwargs: Any):
        return run_federation(digits.bundle, digits.partition, digits.clients,
                              run_config(cfg, "digits", method, digits.seed), **kwargs)

    return run


class _Stopped(Exception):
    """Raised by :func:`interrupted`'s progress callback: the run stops as a killed job would."""


@pytest.fixture(scope="session")
def interrupted(federate) -> Callable[..., Any]:
    """``interrupted(cfg, method, checkpoint, *, at, every)``: ``federate`` stopped after round ``at`` with a
    checkpoint every ``every`` rounds at path ``checkpoint``, then run again from it; returns the resumed run."""
    from hasfl.fl.checkpoint import Checkpointer

    def run(cfg: dict, method: str, checkpoint: Any, *, at: int, every: int) -> Any:
        def stop(rnd: int, row: Any) -> None:
            if rnd == at:
                raise _Stopped

        with pytest.raises(_Stopped):
            federate(cfg, method, checkpointer=Checkpointer(checkpoint, every, {"digest": method}), progress=stop)
        return federate(cfg, method, checkpointer=Checkpointer(checkpoint, every, {"digest": method}))

    return run


# --------------------------------------------------------------------------- measured once per session
@pytest.fixture(scope="session")
def cpu_packing_calibration(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Any]:
    """One real packing calibration on this CPU (``hasfl.bench.packing.calibrate_packing("cpu", ks=(1, 2))``: K jobs
    started at once, their steps counted), shared by the tests that read one: each measurement starts K processes
    that import torch (~10 s). Measured once for all xdist workers (:func:`_once_per_session`)."""
    from hasfl.bench.packing import calibrate_packing

    def measure(path: Path) -> None:
        path.write_text(json.dumps(calibrate_packing("cpu", ks=(1, 2), seconds=0.5)))

    return json.loads(_once_per_session(tmp_path_factory, worker_id, "cpu_packing_calibration.json", measure).read_text())


# --------------------------------------------------------------------------- a finished folder, fabricated
def write_linked_results(tmp_path: Path, name: str, runs: dict[str, dict[str, Any]], findings: dict[str, Any],
                         analysis_identity: dict[str, Any], *, seed: int = 42) -> Path:
    """``<tmp_path>/results/<name>`` as the DAG leaves a finished folder: per method of ``runs`` (method -> the
    identity its manifest records) a run of digits x ``seed`` whose files are links into its store entry under
    ``results/.store/runs``, ``findings.json`` (``findings``), one table and the analysis manifest over them
    (``analysis_identity``)."""
    from hasfl.analysis.manifest import write_analysis_manifest
    from hasfl.integrity import write_run_manifest

    root = tmp_path / "results" / name
    store = tmp_path / "results" / ".store" / "runs"
    folders = []
    for method, identity in runs.items():
        entry = store / f"key-{method}"
        entry.mkdir(parents=True)
        (entry / "run.json").write_text(json.dumps({"method": method}))
        (entry / "timings.json").write_text(json.dumps({"device": "cpu", "cpu_capability": "AVX2", "total_s": 6.0}))
        write_run_manifest(entry, ["run.json", "timings.json"], identity)
        folder = root / "runs" / "digits" / method / f"seed{seed}"
        folder.mkdir(parents=True)
        for f in ("run.json", "timings.json", "manifest.json"):
            (folder / f).symlink_to(entry / f)
        folders.append(folder)
    (root / "tables").mkdir()
    (root / "tables" / "t.md").write_text("| a |\n|---|\n| 1 |\n")
    (root / "findings.json").write_text(json.dumps(findings))
    verified = tmp_path / f"verified-{name}.json"
    verified.write_text(json.dumps({str(r): f"digest-{r.parent.name}" for r in folders}))
    write_analysis_manifest(root, [str(root / "findings.json"), str(root / "tables" / "t.md")], verified,
                            identity=analysis_identity)
    return root


@pytest.fixture(scope="session")
def linked_results() -> Callable[..., Path]:
    """``linked_results(tmp_path, name, runs, findings, analysis_identity, *, seed=42)``: a finished results folder
    whose runs link into a store (:func:`write_linked_results`)."""
    return write_linked_results

