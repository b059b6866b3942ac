"""Repository-level promises: CI runs exactly the README's commands; the CLI works."""

from __future__ import annotations

import subprocess
import sys


def _ci_commands(repo) -> list[str]:
    lines = (repo / ".ci" / "run").read_text().splitlines()
    return [ln for ln in lines if ln.strip() and not ln.startswith(("#", "set ", "cd "))]


def test_ci_runs_exactly_the_readme_quickstart(repo):
    readme = (repo / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    quick_lines = [ln for ln in quick.splitlines() if ln.strip()]
    ci = _ci_commands(repo)
    assert ci == [quick_lines[0], quick_lines[-1]], (ci, quick_lines)
    assert quick_lines[1] == "snakemake --cores 2 all --configfile presets/quick.yaml"
    assert quick_lines[2] == "snakemake --cores 4 all"


def test_hasfl_help_lists_subcommands():
    out = subprocess.run([sys.executable, "-m", "hasfl.cli", "--help"], capture_output=True, text=True, check=True)
    for cmd in ("config", "data", "train", "cost"):
        assert cmd in out.stdout


def test_hasfl_cli_reports_bad_config(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("federation: {rounds: 0}\n")
    res = subprocess.run([sys.executable, "-m", "hasfl.cli", "config", "--config", str(bad)],
                         capture_output=True, text=True)
    assert res.returncode == 2
    assert "config key 'federation.rounds': must be >= 1, got 0" in res.stderr


def test_the_short_check_leaves_out_what_starts_snakemake_or_signals_processes(repo):
    """The README's short check selects by markers; a test using the packing calibration (concurrent jobs it starts) is
    marked ``processes`` by its fixture, so the short check collects none of them, the full suite all."""
    readme = (repo / "README.md").read_text()
    expr = "not dag and not slow and not snakemake and not processes"
    assert f"python -m pytest -m '{expr}'" in readme

    def collected(marks: str) -> set[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", "-n", "0",
                              "-m", marks, "tests/test_gpu_packing.py", "tests/test_resume.py"],
                             cwd=repo, capture_output=True, text=True, timeout=120)
        return {ln.split("::")[1].split("[")[0] for ln in out.stdout.splitlines() if "::" in ln}

    short, full = collected(expr), collected("not slow")
    for name in ("test_calibration_measures_concurrent_jobs_for_real", "test_plan_k_from_config_or_cached_calibration",
                 "test_sigkill_mid_run_resumes_to_identical_bytes", "test_sigkill_during_checkpoint_write"):
        assert name in full and name not in short, name
    assert "test_checkpoint_payload_and_resume_in_process" in short
