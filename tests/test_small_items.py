"""Issue 46's small items: a method without a ``method_params`` block in the pre-flight, console lines of at most a
terminal's few hundred characters (the quick run printed lines of 15,384), and comments that point at README or
docs sections which exist."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import pytest

from hasfl import registry
from hasfl.dag import preflight
from hasfl.errors import HasflError
from hasfl.logs import setup_logging

REPO = Path(__file__).resolve().parents[1]
#: The longest console line the issue allows ("a terminal's few hundred characters").
LIMIT = 300


# --------------------------------------------------------------------------- c: method_params.<method> missing
def _with_method(monkeypatch: pytest.MonkeyPatch, config: dict, name: str, cost: str, block: dict | None) -> dict:
    """``config`` running one more registered method ``name`` (cost rule ``cost``), with ``block`` as its
    ``method_params`` block (None: no block)."""
    info = registry.MethodInfo(f"hasfl.fl.methods.{name}:{name}", name, cost)
    monkeypatch.setitem(registry.METHODS, name, info)
    params = {m: b for m, b in config["method_params"].items() if m != name}
    if block is not None:
        params[name] = block
    return {**config, "methods": ["hasfl", name], "method_params": params}


def test_a_fixed_width_method_without_its_block_is_named_not_a_key_error(monkeypatch, quick_config) -> None:
    """A ``fixed`` method is priced at its ``method_params.<m>.p`` (the training side gives a method without a block
    an empty one, hasfl.config.run_config, and its builder then needs ``p``): without it the pre-flight names the key."""
    cfg = _with_method(monkeypatch, quick_config, "toy_fixed", "fixed", None)
    with pytest.raises(HasflError, match=r"'method_params\.toy_fixed'.*toy_fixed.*'fixed'.*expected.*p:"):
        preflight.estimate(cfg, 2, dict(preflight.FALLBACK))
    cfg = _with_method(monkeypatch, quick_config, "toy_fixed", "fixed", {})
    with pytest.raises(HasflError, match=r"'method_params\.toy_fixed\.p'"):
        preflight.estimate(cfg, 2, dict(preflight.FALLBACK))
    cfg = _with_method(monkeypatch, quick_config, "toy_fixed", "fixed", {"p": 0.5})
    assert preflight.estimate(cfg, 2, dict(preflight.FALLBACK))["train_jobs"] == 2 * 2 * 3


def test_validation_names_a_fixed_width_method_without_its_p(monkeypatch, quick_config) -> None:
    """Validation reads every width a run trains before the pre-flight does (``config._widths``): a ``fixed``
    method without ``method_params.<m>.p`` is named there too (was a raw KeyError)."""
    from hasfl.config import ConfigError, validate_config

    cfg = _with_method(monkeypatch, quick_config, "toy_fixed", "fixed", {})
    with pytest.raises(ConfigError, match=r"config key 'method_params\.toy_fixed\.p': method 'toy_fixed' trains one"):
        validate_config(cfg)


def test_a_method_without_parameters_needs_no_block(monkeypatch, quick_config) -> None:
    """As the training side (an empty block): a method priced without parameters is priced without a block."""
    cfg = _with_method(monkeypatch, quick_config, "toy_full", "full", None)
    est = preflight.estimate(cfg, 2, dict(preflight.FALLBACK))
    assert est["train_jobs"] == 2 * 2 * 3 and all(v["toy_full"] > 0 for v in est["per_method_job_hours"].values())


# --------------------------------------------------------------------------- d: console lines
def _flush() -> None:
    for h in logging.getLogger().handlers:
        h.flush()


def test_a_long_record_is_cut_on_the_console_and_kept_whole_in_the_job_log(tmp_path, capsys) -> None:
    """A 15,000-character record (a warning: a DAG job's console shows it) reaches the console as lines of at most
    LIMIT characters, saying how much was cut and where the whole line is; the job log keeps it whole."""
    log_file = tmp_path / "logs" / "job.log"
    setup_logging(log_file)
    message = "runs: " + ", ".join(f"results/quick/runs/digits/hasfl/seed{i}/run.json" for i in range(330))
    assert len(message) > 15_000
    logging.getLogger("hasfl.test").warning("%s", message)
    logging.getLogger("hasfl.test").warning("short line\n%s\nafter", "y" * 1000)  # every line of a record
    _flush()
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines and max(len(line) for line in lines) <= LIMIT, [len(line) for line in lines]
    cut = [line for line in lines if "characters cut" in line]
    assert len(cut) == 2 and str(log_file) in cut[0], cut
    assert any(line.endswith("short line") for line in lines) and "after" in lines
    text = log_file.read_text()
    assert message in text and "y" * 1000 in text
    whole = next(line for line in text.splitlines() if message in line)  # the count is what the console lacks
    stated = int(re.search(r"([\d,]+) characters cut", cut[0])[1].replace(",", ""))
    assert cut[0].index(" [... ") + stated == len(whole) and whole.startswith(cut[0][:cut[0].index(" [... ")])


def test_without_a_log_file_the_console_is_cut_too(capsys) -> None:
    """``hasfl train`` in a terminal (no log file): cut as well, the marker naming no file."""
    setup_logging(None)
    logging.getLogger("hasfl.test").info("x" * 15_000)
    _flush()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= LIMIT and "characters cut" in lines[0], lines


def test_snakemakes_job_blocks_are_cut_on_its_console_and_whole_in_its_log(tmp_path) -> None:
    """The 15,384-character lines of the quick run are Snakemake's job blocks ("input:" of an analysis rule reading
    every run's files: table4b_stale_coordinates); :func:`hasfl.logs.cap_console` cuts its console handler's lines
    and names its log file, which keeps them whole. Snakemake's own handler and formatter, on a logger of the test."""
    from snakemake.logging import ColorizingTextHandler, DefaultFormatter
    from snakemake_interface_logger_plugins.common import LogEvent

    from hasfl.logs import cap_console

    log = logging.getLogger("hasfl.test.snakemake")
    log.propagate, log.level = False, logging.INFO
    stream = io.StringIO()
    console = ColorizingTextHandler(nocolor=True, stream=stream, formatter=DefaultFormatter())
    log_file = tmp_path / ".snakemake" / "log" / "run.snakemake.log"
    log_file.parent.mkdir(parents=True)
    whole = logging.FileHandler(log_file)
    whole.setFormatter(DefaultFormatter())
    log.handlers = [console, whole]
    try:
        assert cap_console(log) == 1 and cap_console(log) == 0  # once: a second call changes nothing
        inputs = [f"results/quick/runs/shakespeare/hasfl_nocov/seed{s}/rounds.parquet" for s in range(250)]
        log.info("rule", extra={"event": LogEvent.JOB_INFO, "jobid": 7, "rule_msg": None,
                                "rule_name": "analysis_table4b_stale_coordinates", "local": True, "input": inputs,
                                "output": ["results/quick/tables/table4b.parquet"], "log": [], "benchmark": None,
                                "wildcards": {}, "reason": "Missing output files: results/quick/tables/table4b.parquet",
                                "resources": {}, "priority": 0, "threads": 1, "indent": False, "is_checkpoint": False})
        log.info("Building DAG of jobs...")
    finally:
        for h in log.handlers:
            h.close()
        log.handlers = []
    lines = stream.getvalue().splitlines()
    assert max(len(line) for line in lines) <= LIMIT, [len(line) for line in lines]
    assert any(line.startswith("    input: results/quick/runs/") and str(log_file) in line for line in lines), lines
    assert "Building DAG of jobs..." in lines
    assert "    input: " + ", ".join(inputs) in log_file.read_text()


# --------------------------------------------------------------------------- b: comments name sections that exist
#: ``README "Section"``, ``docs/x.md, "Section"``, ``docs/x.md ("Section"``, quoted with " (a comment's line may
#: break inside) or '.
_REF = re.compile(r"(README(?:\.md)?|docs/[\w./-]+\.md),? \(?(?:\"([^\"\s][^\"]{0,79})\"|'([^'\n]+)')")
#: A line break inside a quoted section name, with the next line's comment marker.
_BREAK = re.compile(r"\s*\n\s*(?:#:?|//)?\s*")
_SCANNED = ("src", "workflow", "profiles", "scripts", "presets", "Snakefile", "config.yaml")


def _sections(doc: Path) -> list[str]:
    """The headings of ``doc`` and its bold list items (docs/decisions.md names a decision so)."""
    text = doc.read_text(encoding="utf-8")
    return ([line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
            + re.findall(r"^\s*- \*\*(.+?)\*\*", text, flags=re.MULTILINE))


#: Files whose stale pointer waits: a comment edit in the training code changes every run's training-code digest
#: (hasfl.integrity.training_code_digest hashes the bytes), so every run in every store would retrain; it is mended
#: with the next change there that retrains anyway. src/hasfl/fl/runtime.py names README "Bytes across machines",
#: now docs/guide/gpu.md "Bytes across machines (CPUs)".
_TRAINING_CODE_POINTERS = frozenset({"src/hasfl/fl/runtime.py"})


def test_comments_name_readme_and_docs_sections_that_exist() -> None:
    files = [p for name in _SCANNED for p in ([REPO / name] if (REPO / name).is_file() else (REPO / name).rglob("*"))
             if p.is_file() and p.suffix in {"", ".py", ".smk", ".yaml", ".sh", ".json", ".md"}
             and "__pycache__" not in p.parts]
    missing, checked = [], 0
    for path in files:
        if path.relative_to(REPO).as_posix() in _TRAINING_CODE_POINTERS:
            continue
        for m in _REF.finditer(path.read_text(encoding="utf-8", errors="replace")):
            doc = REPO / ("README.md" if m[1].startswith("README") else m[1])
            section = _BREAK.sub(" ", m[2] or m[3])
            checked += 1
            if not doc.is_file() or not any(s.startswith(section) for s in _sections(doc)):
                missing.append(f"{path.relative_to(REPO)}: {m[0]}")
    assert checked > 20 and not missing, missing


# --------------------------------------------------------------------------- analysis jobs' threads
def test_an_analysis_job_runs_torch_on_fixed_threads_whoever_starts_it() -> None:
    """A job forked from the warm worker inherits a loaded torch at its default thread count (every core): the
    analysis entry point fixes it (hasfl.analysis.jobs.ANALYSIS_THREADS), so an evaluation's reduction order does not
    depend on the machine's cores or on the warm worker (docs/analysis-cost.md found the jobs on every core)."""
    import torch

    from hasfl.analysis import jobs

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(ValueError, match="unknown analysis artifact"):
            jobs.run_artifact("no-such-table", {}, {}, {})
        assert torch.get_num_threads() == jobs.ANALYSIS_THREADS == 1
    finally:
        torch.set_num_threads(before)
