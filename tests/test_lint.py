"""Workflow hygiene (issue 5, section 3): snakefmt-formatted rules, and `snakemake --lint`
clean except the warnings justified in docs/decisions.md ("Lint")."""

from __future__ import annotations

import re
import subprocess
import sys

JUSTIFIED = {
    "Specify a conda environment or container for each rule.",
    "Mixed rules and functions in same snakefile.",
}


def test_snakefmt_check(repo):
    files = [str(repo / "Snakefile"), *map(str, sorted((repo / "workflow" / "rules").glob("*.smk")))]
    res = subprocess.run([sys.executable, "-m", "snakefmt", "--check", *files], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_snakemake_lint_only_justified_warnings(snakemake, repo):
    res = snakemake("--lint", "--configfile", str(repo / "presets/quick.yaml"))
    out = res.stdout + res.stderr
    found = set(re.findall(r"^\s+\* (.+?):\s*$", out, re.M))
    assert found <= JUSTIFIED, found - JUSTIFIED
    decisions = (repo / "docs" / "decisions.md").read_text()
    for warning in found:
        assert warning in decisions
