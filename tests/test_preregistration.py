"""The pre-registration record (docs/preregistration.md, :mod:`hasfl.prereg`): generated from git, checked so that
a rule value cannot change without an entry (issue 45 point 3)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hasfl import prereg

REPO = Path(__file__).resolve().parents[1]


def _git_history() -> bool:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--is-shallow-repository"], capture_output=True,
                         text=True)
    return out.returncode == 0 and out.stdout.strip() == "false"


def test_the_record_has_every_rule_value_of_the_working_tree():
    """Every analysis key, horizon and code rule of this checkout has an entry with its current value."""
    assert prereg.check(REPO, use_git=False) == []
    keys = {k for _f, k, _r in prereg.rule_values(REPO)}
    assert {"analysis.ci_level", "analysis.min_seeds_for_verdict", "federation.rounds", "TREND_FRACTION",
            "VERDICT_RULES"} <= keys


@pytest.mark.skipif(not _git_history(), reason="needs the repository's full git history")
def test_the_record_matches_git():
    """docs/preregistration.md is what `hasfl preregistration` makes from git: each value's commit and the pages
    that existed then (regenerate with `hasfl preregistration --write` after committing a rule change)."""
    assert prereg.check(REPO) == []


def _commit(root: Path, message: str) -> str:
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message],
                   check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_rule_value_changed_without_an_entry_fails(tmp_path):
    """In a repository of this checkout's rule files: the record checks; a margin changed in config.yaml fails both
    checks (working tree, git) until it is committed and the record regenerated, which then names the new commit
    and the results page that existed at it."""
    root, first = _repo_of_rules(tmp_path)
    (root / prereg.RECORD).parent.mkdir(parents=True, exist_ok=True)
    (root / prereg.RECORD).write_text(prereg.render(prereg.entries(root), root))
    assert prereg.check(root) == [] and prereg.check(root, use_git=False) == []
    assert f"`{first[:12]}`" in (root / prereg.RECORD).read_text()
    config = (root / "config.yaml").read_text()
    assert "  f4_min_gap_pct: 0.0" in config
    (root / "config.yaml").write_text(config.replace("  f4_min_gap_pct: 0.0", "  f4_min_gap_pct: 1.5"))
    problems = prereg.check(root, use_git=False)
    assert len(problems) == 1 and "`analysis.f4_min_gap_pct` of config.yaml is 1.5" in problems[0]
    assert any("f4_min_gap_pct" in p for p in prereg.check(root))
    (root / "docs/results").mkdir(parents=True)
    (root / "docs/results/quick.md").write_text("# Results\n\nMade by `snakemake`, at commit `abcdef1234567`.\n")
    second = _commit(root, "margin 1.5, with a page")
    (root / prereg.RECORD).write_text(prereg.render(prereg.entries(root), root))
    problems = prereg.check(root)  # the record is current, but the change has no amendment entry
    assert problems == [f"{prereg.AMENDMENTS}: `analysis.f4_min_gap_pct` of config.yaml changed from 0.0 to 1.5 at "
                        f"{second[:12]} without an amendment entry (file, key, commit, why)"]
    _amend(root, "config.yaml", "analysis.f4_min_gap_pct", second, "a reason")
    (root / prereg.RECORD).write_text(prereg.render(prereg.entries(root), root))
    assert prereg.check(root) == [] and prereg.check(root, use_git=False) == []
    row = next(line for line in (root / prereg.RECORD).read_text().splitlines() if "f4_min_gap_pct" in line)
    assert f"`{second[:12]}`" in row and "quick (made at abcdef1)" in row and "`1.5`" in row
    other = next(line for line in (root / prereg.RECORD).read_text().splitlines() if "f3_equiv_margin_pct" in line)
    assert f"`{first[:12]}`" in other  # an unchanged value keeps the commit that fixed it
    amended = next(line for line in (root / prereg.RECORD).read_text().splitlines()
                   if line.startswith("| `config.yaml` | `analysis.f4_min_gap_pct` | `0.0` | `1.5`"))
    assert "a reason" in amended


def _amend(root: Path, file: str, key: str, commit: str, why: str) -> None:
    import yaml

    path = root / prereg.AMENDMENTS
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    doc.setdefault("amendments", []).append({"file": file, "key": key, "commit": commit[:12], "why": why})
    path.write_text(yaml.safe_dump(doc))


def _repo_of_rules(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "repo"
    for f in ["config.yaml", *(p.relative_to(REPO).as_posix() for p in (REPO / "presets").glob("*.yaml")),
              *(f for f, _n in prereg.CODE_RULES)]:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / f, root / f)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root, _commit(root, "rules")


def test_a_deciding_estimand_or_a_removed_rule_changed_without_an_amendment_fails(tmp_path):
    """Which estimands decide a finding (claims.ESTIMANDS) is a rule value: F9c losing its sub-model estimand, and a
    margin removed from the config, are changes that need an amendment entry each; an entry naming no change fails
    too."""
    root, _first = _repo_of_rules(tmp_path)
    claims = root / "src/hasfl/analysis/findings/claims.py"
    text = claims.read_text()
    old = '    "F9c": (("full-model", "full model"), ("sub-model", "sub-models")),'
    assert old in text
    claims.write_text(text.replace(old, '    "F9c": (("full-model", "full model"),),'))
    config = (root / "config.yaml").read_text()
    (root / "config.yaml").write_text("\n".join(line for line in config.splitlines()
                                                if not line.startswith("  f4_min_gap_pct:")) + "\n")
    second = _commit(root, "F9c decided by the full model alone; f4 margin removed")
    problems = prereg.amendment_problems(root)
    assert any("`ESTIMANDS` of src/hasfl/analysis/findings/claims.py changed" in p and second[:12] in p
               for p in problems), problems
    assert any("`analysis.f4_min_gap_pct` of config.yaml changed from 0.0 to removed" in p for p in problems)
    _amend(root, "src/hasfl/analysis/findings/claims.py", "ESTIMANDS", second, "why")
    _amend(root, "config.yaml", "analysis.f4_min_gap_pct", second, "why")
    assert prereg.amendment_problems(root) == []
    _amend(root, "config.yaml", "analysis.ci_level", second, "a change that did not happen")
    assert prereg.amendment_problems(root) == [
        f"{prereg.AMENDMENTS}: the entry for `analysis.ci_level` of config.yaml at {second[:12]} names no change "
        "that git shows"]


@pytest.mark.skipif(not _git_history(), reason="needs the repository's full git history")
def test_this_repositorys_amendments_cover_every_change_git_shows():
    """Every rule value changed on main has its reason (docs/preregistration-amendments.yaml), the 300 -> 200 rounds
    of the long horizon among them; a pilot's seeds are named."""
    assert prereg.amendment_problems(REPO) == []
    text = (REPO / prereg.RECORD).read_text()
    assert "| `presets/medium-coverage-long.yaml` | `federation.rounds` | `300` | `200` |" in text
    assert "## Pilots" in text and "| 42, 43 |" in text


def test_a_record_written_from_an_uncommitted_value_does_not_match_git(tmp_path):
    """Before, `--write` over an uncommitted rule value made `--check` say "matches git"; the record then lists the
    value as uncommitted and the check names it until it is committed."""
    root, _first = _repo_of_rules(tmp_path)
    config = (root / "config.yaml").read_text()
    (root / "config.yaml").write_text(config.replace("  f4_min_gap_pct: 0.0", "  f4_min_gap_pct: 2.5"))
    (root / prereg.RECORD).parent.mkdir(parents=True, exist_ok=True)
    (root / prereg.RECORD).write_text(prereg.render(prereg.entries(root), root))
    problems = prereg.check(root)
    assert any("`analysis.f4_min_gap_pct` of config.yaml is 2.5, not committed" in p for p in problems), problems
