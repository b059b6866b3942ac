"""Identity in one place: what each output of a preset should be, and one check of every present one.

Three output kinds, each with one identity computed from the preset alone (no torch, no data loaded):

* **data stage** (``data/<dataset>/seed<s>``): the dataset and seed, its canonical config slice
  (:func:`data_slice`: :func:`hasfl.config.data_config` without ``data_dir`` -- where the raw files
  live changes no byte; their sha256 do), the sha256 of its raw files and the data-stage code digest
  (:func:`data_code_digest`);
* **run** (``runs/<dataset>/<method>/seed<s>``): its canonical config slice
  (:func:`hasfl.config.run_config`), the sha256 of the data-stage tables it read (the chain raw ->
  data stage -> run), the identity digest of the run whose budget it matches (-> budget run) and the
  training code (:func:`hasfl.integrity.training_code_digest`);
* **analysis** (:func:`analysis_identity`): the config (without where files live and how jobs run) and
  the analysis code, written into ``analysis.manifest.json`` beside the identity digests of the runs it
  read (:mod:`hasfl.analysis.manifest`).

:func:`audit` compares every present, finished data-stage and run folder of a preset with what the
preset would make there. The Snakefile runs it when the DAG is built and reruns every output that
differs (a content change Snakemake's own triggers would miss: folders copied in without its
metadata, a data stage swapped underneath finished runs); ``hasfl verify --config`` prints the same
findings. A folder that holds another job's output (another seed's run, say) is never rerun -- that
would delete a correct run -- but named in a clear error.

Canonical slices (:func:`canonical`: sorted keys, plain JSON values) are also the rules' params, so two
configs equal up to key order or the spelling of ``data_dir`` never rerun anything.

Torch-free: the Snakefile imports this module.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hasfl.config import data_config, run_config
from hasfl.errors import HasflError
from hasfl.integrity import PACKAGE, TRAINING_CODE, training_code_digest
from hasfl.registry import DATA_FILES, DATASETS, raw_files

__all__ = ["ANALYSIS_CODE", "CHECKOUT", "NOT_ANALYSIS_CODE", "REGISTRY_TABLES", "Checkout", "CodeRootError",
           "analysis_code_digest", "analysis_identity", "canonical", "checkout_root", "code_text", "data_code_digest",
           "data_identity", "data_slice", "digest", "evaluation_code_digest", "imported_modules", "module_closure",
           "raw_digests", "registry_facts", "run_slice", "source_digest", "writable_results", "write_rerun_token"]

#: The data-stage code, relative to the ``hasfl`` package (the glue script is added by the DAG).
DATA_CODE: tuple[str, ...] = ("data", "io.py")


def _unsigned_zero(value: Any) -> Any:
    """``value`` with every ``-0.0`` as ``0.0``: equal numbers are one identity (JSON writes ``-0.0`` apart)."""
    if isinstance(value, float):
        return 0.0 if value == 0.0 else value
    if isinstance(value, dict):
        return {k: _unsigned_zero(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_unsigned_zero(v) for v in value]
    return value


def canonical(value: Any) -> Any:
    """``value`` as plain JSON values with every mapping's keys sorted and ``-0.0`` written ``0.0``: two configs equal
    up to key order or the sign of a zero (a YAML file written by ``hasfl config --yaml``, say) give equal slices,
    params and digests."""
    return json.loads(json.dumps(_unsigned_zero(value), sort_keys=True, default=str))


def digest(value: Any) -> str:
    """sha256 of ``value``'s canonical JSON (``-0.0`` as ``0.0``)."""
    return hashlib.sha256(json.dumps(_unsigned_zero(value), sort_keys=True, separators=(",", ":"),
                                     default=str).encode()).hexdigest()


def data_slice(config: Mapping[str, Any], dataset: str) -> dict[str, Any]:
    """The config slice a data stage's bytes depend on: :func:`hasfl.config.data_config` without
    ``data_dir`` (the raw files are identified by their sha256), canonical."""
    return _located_nowhere(data_config(config, dataset))


def _located_nowhere(data_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A data-stage config slice without ``data_dir`` (where the raw files live is no identity), canonical."""
    return canonical({k: v for k, v in data_cfg.items() if k != "data_dir"})


def run_slice(config: Mapping[str, Any], dataset: str, method: str, seed: int) -> dict[str, Any]:
    """A run's config slice (:func:`hasfl.config.run_config`), canonical."""
    return canonical(run_config(config, dataset, method, int(seed)))


def data_code_digest(root: Path = PACKAGE) -> str:
    """The data-stage code identity: the loaders, the partitioner and :mod:`hasfl.io` under ``root`` (the ``hasfl``
    package folder) and the registry's dataset facts (not its method list: adding a method repartitions nothing).
    One meaning for the DAG, ``hasfl data`` and ``hasfl verify``: the Snakemake glue passes the config slice and
    changes no byte, so it is not part of it (an edit of it reruns nothing)."""
    h = hashlib.sha256(source_digest(root, *DATA_CODE).encode())
    h.update(json.dumps({"datasets": {d: i.training_fields() for d, i in DATASETS.items()},
                         "data_files": list(DATA_FILES)}, sort_keys=True).encode())
    return h.hexdigest()


_RAW_CACHE: dict[tuple[str, int, int], str] = {}


def raw_digests(dataset: str, data_dir: str | Path, params: Mapping[str, Any]) -> dict[str, str]:
    """sha256 of each raw file of ``dataset`` (by its path relative to ``data_dir``); a missing file is
    left out (the fetch rule makes it). Hashed once per (path, size, mtime) in a process."""
    out = {}
    for path in map(Path, raw_files(dataset, data_dir, params)):
        try:
            st = path.stat()
        except OSError:
            continue
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in _RAW_CACHE:
            h = hashlib.sha256()
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            _RAW_CACHE[key] = h.hexdigest()
        out[path.relative_to(data_dir).as_posix()] = _RAW_CACHE[key]
    return out


def data_identity(data_cfg: Mapping[str, Any], seed: int, code: str) -> dict[str, Any]:
    """What the data stage of ``data_cfg`` (:func:`hasfl.config.data_config`) x ``seed`` is: written into its
    manifest (``identity``) by the job and compared by :func:`audit`."""
    cfg = dict(data_cfg)
    return {"dataset": cfg["dataset"], "seed": int(seed),
            "config": _located_nowhere(cfg),
            "raw": raw_digests(cfg["dataset"], cfg["data_dir"], cfg["dataset_params"]), "code": code}


class CodeRootError(HasflError):
    """A code digest was asked of a folder that does not hold the code it must hash (a wheel install's
    ``site-packages``, a partial copy): refused, since a digest of nothing would call every result current or every
    result stale whatever the code. The message names the folder, the missing paths and what to do."""


#: What makes a folder a checkout of this repository: the DAG's Snakefile, the workflow and the package.
CHECKOUT: tuple[str, ...] = ("Snakefile", "workflow", "src/hasfl")
#: What to do when no checkout holds the code (appended to every :class:`CodeRootError`).
_WHAT_TO_DO = ("code digests are computed from the checkout (git clone) holding Snakefile, workflow/ and src/hasfl "
               "whose code the DAG ran: run hasfl from the clone that made the results folder, with the package "
               "installed from it (pip install -e CLONE); a library caller passes that clone's path")


def _missing(base: Path, rels: tuple[str, ...]) -> list[str]:
    """The paths of ``rels`` (relative to ``base``) that do not exist, or are folders without a Python file; a path
    inside one already named is left out (``src/hasfl``, not each module under it)."""
    out: list[str] = []
    for rel in dict.fromkeys(rels):
        if any(rel.startswith(m + "/") for m in out):
            continue
        target = Path(base) / rel
        if not target.exists() or (target.is_dir() and next(target.rglob("*.py"), None) is None):
            out = [m for m in out if not m.startswith(rel + "/")] + [rel]
    return out


def source_digest(base: Path, *paths: str, exclude: tuple[str, ...] = ()) -> str:
    """sha256 over the contents of the Python files under ``paths`` (relative to ``base``, the checkout), less the
    files of ``exclude`` (relative paths): the code digests the rules carry as params (a content change reruns
    them, a ``touch`` does not).

    Refuses (:class:`CodeRootError`) when a path of ``paths`` is missing under ``base`` (or is a folder without a
    Python file), and when no file at all is hashed: the digest of nothing is a constant that no code change moves."""
    missing = _missing(Path(base), paths)
    if missing:
        raise CodeRootError(f"cannot compute a code digest from '{base}': missing there: {', '.join(missing)} "
                            f"({len(missing)} of the {len(paths)} code paths it hashes); {_WHAT_TO_DO}")
    h = hashlib.sha256()
    hashed = 0
    for rel in paths:
        root = Path(base) / rel
        for f in [root] if root.is_file() else sorted(root.rglob("*.py")):
            if f.relative_to(base).as_posix() in exclude:
                continue
            h.update(str(f.relative_to(base)).encode())
            h.update(f.read_bytes())
            hashed += 1
    if not hashed:
        raise CodeRootError(f"cannot compute a code digest from '{base}': no Python file under "
                            f"{', '.join(paths)} is left to hash; {_WHAT_TO_DO}")
    return h.hexdigest()


#: The code the analysis depends on, relative to the checkout (``SRC_ANALYSIS`` of the DAG).
ANALYSIS_CODE: tuple[str, ...] = ("src/hasfl/analysis", "src/hasfl/models", "src/hasfl/io.py", "src/hasfl/registry.py",
                                  "workflow/scripts/artifact.py", "workflow/scripts/findings.py",
                                  "workflow/scripts/report.py")
#: Files under :data:`ANALYSIS_CODE` that no DAG job runs: the results page (``hasfl results-page``, the CLI only)
#: renders a finished folder; an edit of it reruns no analysis.
NOT_ANALYSIS_CODE: tuple[str, ...] = ("src/hasfl/analysis/results_page.py",)


def analysis_code_digest(base: Path) -> str:
    """The analysis code identity of the checkout ``base``: :data:`ANALYSIS_CODE` less :data:`NOT_ANALYSIS_CODE`.
    Refuses (:class:`CodeRootError`) when ``base`` does not hold every path of :data:`ANALYSIS_CODE`."""
    return source_digest(base, *ANALYSIS_CODE, exclude=NOT_ANALYSIS_CODE)


def _module_file(package_root: Path, module: str) -> Path | None:
    """The source file of ``hasfl`` module ``module`` under ``package_root`` (the ``hasfl`` folder), None if none."""
    parts = module.split(".")[1:]
    if not parts:
        return package_root / "__init__.py" if module == "hasfl" else None
    rel = Path(*parts)
    for path in (package_root / rel.with_suffix(".py"), package_root / rel / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(path: Path, name: str) -> set[str]:
    """The ``hasfl`` modules the source file ``path`` (module ``name``) imports anywhere, lazy imports inside functions
    included; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module). The import graph of the code digests
    here and of the layering test (tests/test_layout.py)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return set(_imports_of(path.read_bytes(), str(path), package))


@functools.lru_cache(maxsize=4096)
def _imports_of(source: bytes, filename: str, package: str) -> frozenset[str]:
    """:func:`imported_modules` of the bytes ``source``. Cached on the bytes themselves, so an edited file is parsed
    again: a session's digests read each module's imports once instead of once per evaluation (a paper preset's
    parse spent 19 of its 31 s here)."""
    import ast

    out: set[str] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from hasfl.analysis import stale`
    return frozenset(m for m in out if m == "hasfl" or m.startswith("hasfl."))


def _module_imports(path: Path, name: str) -> set[str]:
    """:func:`imported_modules` and the packages holding each (importing ``a.b.c`` runs ``a/__init__`` and
    ``a/b/__init__``)."""
    mods = imported_modules(path, name)
    return mods | {".".join(m.split(".")[:i]) for m in mods for i in range(1, m.count(".") + 1)}


def module_closure(module: str, package_root: Path = PACKAGE) -> list[Path]:
    """The source files of ``module`` and of every ``hasfl`` module it imports, transitively (lazy imports inside
    functions and the packages' ``__init__`` included), sorted: the code a function of ``module`` can run.

    Raises:
        CodeRootError: ``module`` has no source file under ``package_root``.
    """
    start = _module_file(package_root, module)
    if start is None:
        raise CodeRootError(f"module '{module}' has no source file under '{package_root}'; {_WHAT_TO_DO}")
    seen: dict[str, Path] = {}
    todo = [module, *(".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1))]
    while todo:
        name = todo.pop()
        path = _module_file(package_root, name)
        if name in seen or path is None:
            continue
        seen[name] = path
        todo.extend(_module_imports(path, name) - set(seen))
    return sorted(set(seen.values()))

#: The module an evaluate job runs around a per-run function (:func:`hasfl.analysis.per_run.base.evaluate_job`).
EVALUATION_JOB = "hasfl.analysis.per_run.base"


def code_text(path: Path) -> bytes:
    """The source of ``path`` as an evaluation's identity reads it: without its comments, trailing blanks and blank
    lines. A comment cannot change what the code computes, so rewording one (or removing a tracker number) keeps every
    evaluation's key; the comment spans are found by :mod:`tokenize`, whose COMMENT token is the same in every Python
    version (a digest of the token stream would not be: 3.12 splits f-strings into new tokens)."""
    return _code_text_of(path.read_bytes())


@functools.lru_cache(maxsize=4096)
def _code_text_of(source: bytes) -> bytes:
    """:func:`code_text` of the bytes ``source`` (cached on them, as :func:`_imports_of`)."""
    import io
    import tokenize

    text = source.decode("utf-8")
    lines = text.splitlines(keepends=True)
    cuts: dict[int, int] = {}  # line number -> column where its comment starts
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            cuts[tok.start[0]] = tok.start[1]
    kept = [(line[:cuts[i]] if i in cuts else line).rstrip() for i, line in enumerate(lines, 1)]
    return "\n".join(line for line in kept if line).encode()


#: The registry's per-method and per-dataset tables: an evaluation's identity holds its own run's entries of them
#: (:func:`registry_facts`), not their source, so adding or editing another method or dataset keeps its key.
REGISTRY_TABLES: tuple[str, ...] = ("METHODS", "DATASETS")


def _without_tables(text: bytes, names: tuple[str, ...]) -> bytes:
    """``text`` (a module's :func:`code_text`) without the module-level assignments to ``names``."""
    import ast

    source = text.decode()
    lines = source.split("\n")
    drop: set[int] = set()
    for node in ast.parse(source).body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id in names for t in targets):
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    return "\n".join(line for i, line in enumerate(lines) if i not in drop).encode()


def registry_facts(method: str, dataset: str) -> dict[str, Any]:
    """Every field of the registry entries of ``method`` and ``dataset`` (a code reference as ``module:function``):
    what an evaluation of a run of them may read from :data:`REGISTRY_TABLES`, label and style included (a table or
    figure may print them), nothing of the other entries."""
    import dataclasses

    from hasfl.registry import METHODS

    if method not in METHODS:
        raise CodeRootError(f"unknown method '{method}'; expected one of {', '.join(METHODS)}")
    if dataset not in DATASETS:
        raise CodeRootError(f"unknown dataset '{dataset}'; expected one of {', '.join(DATASETS)}")

    def plain(value: Any) -> Any:
        if callable(value):
            return f"{value.__module__}:{value.__qualname__}"
        if isinstance(value, Mapping):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    return {kind: {f.name: plain(getattr(entry, f.name)) for f in dataclasses.fields(entry)}
            for kind, entry in (("method", METHODS[method]), ("dataset", DATASETS[dataset]))}


def evaluation_code_digest(function: str, base: Path, method: str, dataset: str) -> str:
    """The code identity of a per-run evaluation (``"module:function"``, :mod:`hasfl.analysis.evaluations`) of a run of
    ``method`` on ``dataset`` in the checkout ``base``: the files of :func:`module_closure` of its module and of
    :data:`EVALUATION_JOB` (which reads the run and writes its rows), each as :func:`code_text` (comments do not
    count), the registry without its method and dataset tables, and the run's own entries of those
    (:func:`registry_facts`). An edit of analysis code neither imports -- a finding, a page, a table's gather step, the
    artifact entries -- and adding or editing another method leave every evaluation's key as it was."""
    return _with_registry_facts(_evaluation_files_hash(function, base), method, dataset)


def _with_registry_facts(h: Any, method: str, dataset: str) -> str:
    """The digest of the files' hash ``h`` (:func:`_evaluation_files_hash`) extended by the run's registry facts."""
    h.update(json.dumps(registry_facts(method, dataset), sort_keys=True, default=str).encode())
    return h.hexdigest()


def _evaluation_files_hash(function: str, base: Path) -> Any:
    """The part of :func:`evaluation_code_digest` that does not depend on the run: a ``hashlib`` sha256 fed the
    files of the closure, which the run's registry facts then extend (:class:`Checkout` keeps one per function and
    extends a copy per method and dataset)."""
    package = Path(base) / "src" / "hasfl"
    files = {*module_closure(function.partition(":")[0], package), *module_closure(EVALUATION_JOB, package)}
    h = hashlib.sha256()
    for f in sorted(files):
        text = code_text(f)
        rel = f.relative_to(base).as_posix()
        if rel == "src/hasfl/registry.py":
            text = _without_tables(text, REGISTRY_TABLES)
        h.update(rel.encode())
        h.update(text)
    return h


def checkout_root(repo: str | Path | None = None) -> Path:
    """The one rule for where code digests come from: the checkout holding :data:`CHECKOUT`
    (``Snakefile``, ``workflow/``, ``src/hasfl``) and every path the data-stage, training and analysis digests hash.

    The DAG passes its Snakefile's folder (``workflow.basedir``); a caller holding a checkout's path passes it
    (``repo``); ``hasfl verify --config`` gets the checkout the installed ``hasfl`` package came from (``repo`` None)
    -- an editable install's clone, the folder the DAG's Snakefile sits in, so every digest equals the DAG's. A
    package installed from a wheel (``site-packages/hasfl``) came from no checkout: refused with
    :class:`CodeRootError`, as is a ``repo`` missing any of those paths (named) -- never a digest of nothing.
    Data-stage and training digests hash ``<checkout>/src/hasfl``; the analysis digest hashes the checkout
    (:data:`ANALYSIS_CODE`)."""
    if repo is None:
        root = PACKAGE.parent.parent
        what = f"the checkout the installed hasfl package ({PACKAGE}) came from, '{root}',"
    else:
        root = Path(repo).expanduser()
        what = f"'{root}'"
    package = "src/hasfl/"
    needed = (CHECKOUT + ANALYSIS_CODE + tuple(package + rel for rel in DATA_CODE)
              + tuple(package + rel for rel in TRAINING_CODE))
    missing = _missing(root, needed)
    if missing:
        installed = " (a package installed from a wheel comes from no checkout)" if repo is None else ""
        raise CodeRootError(f"{what} is not a checkout of hasfl-repro{installed}: it does not hold "
                            f"{', '.join(missing)}; {_WHAT_TO_DO}")
    return root



class Checkout:
    """The code digests of one checkout (:func:`checkout_root`), each computed once: the data-stage code, the analysis
    code, each method and dataset's training code and each per-run evaluation's code. What a build's store keys,
    identities and status walk read (the Snakefile's session, ``hasfl verify --config``, the tests): one root, one
    place that assembles the digests."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.package = self.root / "src" / "hasfl"
        self.data = data_code_digest(self.package)
        self.analysis = analysis_code_digest(self.root)
        self._train: dict[tuple[str, str], str] = {}
        self._eval: dict[tuple[str, str, str], str] = {}
        self._eval_files: dict[str, Any] = {}

    def train(self, method: str, dataset: str) -> str:
        """The training code of a run of ``method`` on ``dataset`` (:func:`hasfl.integrity.training_code_digest`)."""
        if (method, dataset) not in self._train:
            self._train[method, dataset] = training_code_digest(method, dataset, self.package)
        return self._train[method, dataset]

    def evaluation(self, function: str, method: str, dataset: str) -> str:
        """The code of a per-run evaluation (``"module:function"``) of a run of ``method`` on ``dataset``
        (:func:`evaluation_code_digest`)."""
        if (function, method, dataset) not in self._eval:
            if function not in self._eval_files:
                self._eval_files[function] = _evaluation_files_hash(function, self.root)
            self._eval[function, method, dataset] = _with_registry_facts(self._eval_files[function].copy(), method,
                                                                          dataset)
        return self._eval[function, method, dataset]


#: Config keys no analysis table, figure or finding depends on (where files live, how jobs are run, the folder's
#: ``name``). ``report.md`` prints the name it was made under as provenance, as it prints the commit: a renamed folder
#: (new paths, so no Snakemake metadata to compare its params with) reruns nothing.
NOT_ANALYSIS_KEYS = ("results_dir", "data_dir", "execution", "name")


def analysis_identity(config: Mapping[str, Any], code: str) -> dict[str, Any]:
    """What the analysis of ``config`` is, besides the runs it reads (their identities are in the analysis
    manifest already): the config without the keys of :data:`NOT_ANALYSIS_KEYS` (conservative: a key the
    analysis does not read reruns it too), its ``method_params`` and ``dataset_params`` only of the methods and
    datasets it runs (a block added for another method, or for a dataset it does not run, changes no analysis of
    this preset), and the analysis code digest ``code``."""
    kept = {k: v for k, v in config.items() if k not in NOT_ANALYSIS_KEYS}
    for block, names in (("method_params", "methods"), ("dataset_params", "datasets")):
        if isinstance(kept.get(block), Mapping):
            ran = set(config.get(names) or ())
            kept[block] = {k: v for k, v in kept[block].items() if k in ran}
    cfg = canonical(kept)
    return {"config": cfg, "code": code, "digest": digest({"config": cfg, "code": code})}


def write_rerun_token(path: str | Path, folder: str, why: str, stamp: int) -> None:
    """The rerun token of one stale output (rule ``identity_rerun``): which folder, why, which DAG build."""
    import logging

    from hasfl.io import write_json

    logging.getLogger("hasfl.dag.identity").info("rerun %s: %s", folder, why)
    write_json(path, {"folder": folder, "why": why, "stamp": int(stamp)})


def writable_results(results: Path) -> str | None:
    """Why the results folder cannot be written (None if it can): checked before any job."""
    probe = Path(results)
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return f"'{probe}' is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"'{probe}' is not writable by this user"
    return None
