"""The pre-registration record (docs/preregistration.md): every rule value that decides a verdict, with the commit
at which it was fixed and the results that existed then, read from git.

A *rule value* is a key of the config block ``analysis`` (margins, alpha via ``ci_level``, power, the seed minimum),
a horizon (``federation.rounds``, ``federation.eval_every``, ``seeds``) of the paper preset or of a preset that sets
it, a code constant of the rule (:data:`CODE_RULES`: the trend window, the endpoint, the floor tolerance) or the
verdict rules' text itself (``VERDICT_RULES``). A value is *fixed at* the oldest commit of the first-parent history
since which the file has held that value at every commit that touched it: a later commit that changes it moves
the entry. *Results then*: the results pages (``docs/results/<page>.md``) that existed at that commit and the commit
each page says it was made at.

``hasfl preregistration`` prints the record, ``--write`` rewrites the file, ``--check`` exits non-zero when the file
differs from what git and the working tree give (``tests/test_preregistration.py`` runs the check, and, without a git
history, compares the record's values with the working tree's so that a changed rule value without an entry fails).
This module imports nothing of the library: it reads files and git.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["AMENDMENTS", "CODE_RULES", "RECORD", "Change", "Entry", "amendment_problems", "changes", "check", "entries",
           "render", "rule_values"]

#: The record's path in the repository.
RECORD = "docs/preregistration.md"
#: Code constants that are rule values: (file, name).
CODE_RULES: tuple[tuple[str, str], ...] = (
    ("src/hasfl/analysis/specs.py", "FINAL_ENDPOINT_EVALS"),
    ("src/hasfl/analysis/specs.py", "TREND_FRACTION"),
    ("src/hasfl/analysis/specs.py", "TREND_MIN_EVALS"),
    ("src/hasfl/analysis/specs.py", "FLOOR_TOL_PCT"),
    ("src/hasfl/analysis/findings/kernel.py", "VERDICT_RULES"),
    ("src/hasfl/analysis/findings/f9_rolling.py", "EXTRACTION_PAIRS"),
    ("src/hasfl/analysis/findings/claims.py", "ESTIMANDS"),
    ("src/hasfl/analysis/findings/claims.py", "AUTHORS"),
)
#: Why each rule value changed, and the pilots run before a rule was fixed (a person's text; checked against git).
AMENDMENTS = "docs/preregistration-amendments.yaml"
#: The horizon keys of a preset file (dotted paths).
HORIZON_KEYS = ("federation.rounds", "federation.eval_every", "seeds")
_MADE_AT = re.compile(r"at commit `([0-9a-f]{7,40})`")
_RUNS = re.compile(r"\((\d+) training runs, identities digest `([0-9a-f]+)`")


@dataclass(frozen=True)
class Entry:
    """One rule value: where it lives, its value as the record shows it, the commit that fixed it."""

    file: str
    key: str
    value: str
    commit: str | None
    date: str | None
    results_then: tuple[str, ...]


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


@functools.lru_cache(maxsize=4096)
def _show(root: str, commit: str, file: str) -> str | None:
    """``file`` at ``commit`` (None where it does not exist): a commit's content never changes, so the record's
    walks (the fixing commits, the changes, the removed keys) read each version once."""
    return _git(Path(root), "show", f"{commit}:{file}")


def _shown(value: Any) -> str:
    """A value as the record shows it: numbers and lists as YAML flow, a long text by its length and digest."""
    if isinstance(value, str) and len(value) > 60:
        return f"text of {len(value)} characters, sha256 {hashlib.sha256(value.encode()).hexdigest()[:12]}"
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    if isinstance(value, dict):  # a mapping (tuple keys included) by its canonical text's length and digest
        text = repr(sorted(value.items(), key=repr))
        return f"mapping of {len(value)} entries, sha256 {hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return yaml.safe_dump(value, default_flow_style=True, width=10**9).strip().removesuffix("...").strip()


@functools.lru_cache(maxsize=512)
def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


@functools.lru_cache(maxsize=512)
def _parse_py(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _yaml_value(text: str, key: str) -> Any:
    node: Any = _load_yaml(text)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _code_value(text: str, name: str) -> Any:
    tree = _parse_py(text)
    if tree is None:
        return _MISSING
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return _MISSING
    return _MISSING


_MISSING = object()


def rule_values(root: Path) -> list[tuple[str, str, Callable[[str], Any]]]:
    """``(file, key, reader)`` of every rule value in the working tree at ``root``: the config's ``analysis`` keys
    and horizons, each preset's horizons it sets, :data:`CODE_RULES`; ``reader(text)`` reads the value from a
    version of the file."""
    out: list[tuple[str, str, Callable[[str], Any]]] = []
    config = yaml.safe_load((root / "config.yaml").read_text()) or {}
    for key in sorted((config.get("analysis") or {})):
        out.append(("config.yaml", f"analysis.{key}", lambda t, k=f"analysis.{key}": _yaml_value(t, k)))
    presets = ["config.yaml", *sorted(p.relative_to(root).as_posix() for p in (root / "presets").glob("*.yaml"))]
    for f in presets:
        text = (root / f).read_text()
        for key in HORIZON_KEYS:
            if _yaml_value(text, key) is not _MISSING:
                out.append((f, key, lambda t, k=key: _yaml_value(t, k)))
        if f != "config.yaml":
            for key in sorted((yaml.safe_load(text) or {}).get("analysis") or {}):
                out.append((f, f"analysis.{key}", lambda t, k=f"analysis.{key}": _yaml_value(t, k)))
    for f, name in CODE_RULES:
        out.append((f, name, lambda t, n=name: _code_value(t, n)))
    return out


def _history(root: Path, file: str) -> list[tuple[str, str]]:
    """``(commit, date)`` of the first-parent commits that touched ``file``, newest first."""
    log = _git(root, "log", "--first-parent", "--format=%H %cs", "--", file)
    return [tuple(line.split(" ", 1)) for line in (log or "").splitlines() if line.strip()]  # type: ignore[misc]


def _pages_then(root: Path, commit: str) -> tuple[str, ...]:
    """The results pages at ``commit`` with the commit each says it was made at."""
    names = _git(root, "ls-tree", "--name-only", commit, "docs/results/") or ""
    out = []
    for name in sorted(names.splitlines()):
        if not name.endswith(".md") or name.endswith(".notes.md"):
            continue
        text = _show(str(root), commit, name) or ""
        made = _MADE_AT.search(text)
        runs = _RUNS.search(text)
        ran = f"; {runs.group(1)} runs, identities digest {runs.group(2)[:12]}" if runs else ""
        out.append(f"{Path(name).stem} (made at {made.group(1)[:7] if made else 'an unstated commit'}{ran})")
    return tuple(out)


def entries(root: Path | str) -> list[Entry]:
    """The record's entries for the repository at ``root`` (the working tree's values; commits from git, None where
    git has no history or the working tree's value is not committed)."""
    root = Path(root)
    out = []
    pages: dict[str, tuple[str, ...]] = {}
    histories: dict[str, list[tuple[str, str]]] = {}
    for file, key, read in rule_values(root):
        current = read((root / file).read_text())
        commit = date = None
        if file not in histories:
            histories[file] = _history(root, file)
        for c, d in histories[file]:
            text = _show(str(root), c, file)
            if text is None or read(text) != current:
                break
            commit, date = c, d
        if commit is not None and commit not in pages:
            pages[commit] = _pages_then(root, commit)
        out.append(Entry(file, key, _shown(current), commit[:12] if commit else None, date,
                         pages[commit] if commit else ()))
    return out


@dataclass(frozen=True)
class Change:
    """A rule value that changed in git: from ``old`` to ``new`` (``removed``: the key was deleted) at ``commit``."""

    file: str
    key: str
    old: str
    new: str
    commit: str
    date: str


def _tracked(root: Path) -> list[tuple[str, str, Callable[[str], Any]]]:
    """:func:`rule_values` plus the config's ``analysis`` keys that git shows and the working tree no longer has (a
    removed rule is a change too)."""
    out = rule_values(root)
    have = {(f, k) for f, k, _r in out}
    seen: set[str] = set()
    for c, _d in _history(root, "config.yaml"):
        node = _yaml_value(_show(str(root), c, "config.yaml") or "", "analysis")
        if isinstance(node, dict):
            seen |= set(node)
    for key in sorted(seen):
        if ("config.yaml", f"analysis.{key}") not in have:
            out.append(("config.yaml", f"analysis.{key}", lambda t, k=f"analysis.{key}": _yaml_value(t, k)))
    return out


def changes(root: Path | str) -> list[Change]:
    """Every change of a rule value along the first-parent history (oldest first per value): a value that a later
    commit holds differently, or deletes. A value's first appearance is not a change."""
    root = Path(root)
    out: list[Change] = []
    for file, key, read in _tracked(root):
        prev: Any = _MISSING
        for c, d in reversed(_history(root, file)):
            text = _show(str(root), c, file)
            value = read(text) if text is not None else _MISSING
            if prev is not _MISSING and value != prev:
                out.append(Change(file, key, _shown(prev), "removed" if value is _MISSING else _shown(value), c[:12],
                                  d))
            prev = value
    return out


def _amendments(root: Path) -> dict[str, Any]:
    path = root / AMENDMENTS
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _matches(entry: Mapping[str, Any], ch: Change) -> bool:
    commit = str(entry.get("commit", ""))
    return (entry.get("file") == ch.file and entry.get("key") == ch.key and len(commit) >= 7
            and ch.commit.startswith(commit[:12]))


def _entry(entries_: Sequence[Mapping[str, Any]], ch: Change) -> Mapping[str, Any] | None:
    """The amendment entry of change ``ch`` with a reason, else None."""
    hit = [e for e in entries_ if _matches(e, ch)]
    return hit[0] if hit and str(hit[0].get("why", "")).strip() else None


def amendment_problems(root: Path | str, found: Sequence[Change] | None = None) -> list[str]:
    """Every change git shows without an entry in :data:`AMENDMENTS` (file, key, commit, why), and every entry that
    names no change git shows."""
    root = Path(root)
    found = changes(root) if found is None else found
    entries_ = list(_amendments(root).get("amendments") or [])
    problems = []
    for ch in found:
        if _entry(entries_, ch) is None:
            problems.append(f"{AMENDMENTS}: `{ch.key}` of {ch.file} changed from {ch.old} to {ch.new} at {ch.commit} "
                            "without an amendment entry (file, key, commit, why)")
    for e in entries_:
        if not any(_matches(e, ch) for ch in found):
            problems.append(f"{AMENDMENTS}: the entry for `{e.get('key')}` of {e.get('file')} at {e.get('commit')} "
                            "names no change that git shows")
    return problems


def _amendment_lines(root: Path, found: Sequence[Change]) -> list[str]:
    notes = _amendments(root)
    lines = ["", "## Amendments", "",
             f"Every rule value that changed after it was first committed: old and new value and the commit, from git; "
             f"why, from [{Path(AMENDMENTS).name}]({Path(AMENDMENTS).name}) (a person's text; `hasfl preregistration "
             "--check` fails on a change without an entry).", "",
             "| file | rule value | old | new | commit | date | why |", "|---|---|---|---|---|---|---|"]
    for ch in found:
        hit = _entry(notes.get("amendments") or [], ch)
        why = " ".join(str(hit["why"]).split()) if hit else "**no entry**"
        lines.append(f"| `{ch.file}` | `{ch.key}` | `{ch.old}` | `{ch.new}` | `{ch.commit}` | {ch.date} | "
                     f"{why.replace('|', '/')} |")
    pilots = notes.get("pilots") or []
    if pilots:
        lines += ["", "## Pilots", "",
                  "Runs looked at before a rule was fixed, and the seeds they used (a confirmatory page that shares "
                  "them is not independent of that choice).", "",
                  "| what | seeds | when | note |", "|---|---|---|---|"]
        for p in pilots:
            lines.append(f"| {' '.join(str(p.get('what', '')).split())} | {', '.join(map(str, p.get('seeds') or []))} | "
                         f"{p.get('when', '--')} | {' '.join(str(p.get('note', '')).split())} |")
    return lines


def _deciding_lines(root: Path) -> list[str]:
    """Which estimands decide each finding with more than one, and whose claim each is (claims.py's rule values)."""
    path = root / "src/hasfl/analysis/findings/claims.py"
    if not path.is_file():
        return []
    text = path.read_text()
    ests, who = _code_value(text, "ESTIMANDS"), _code_value(text, "AUTHORS")
    if ests is _MISSING:
        return []
    who = {} if who is _MISSING else who
    lines = ["", "## What decides each finding", "",
             "A finding not listed has one estimand, its statistic, decided over the datasets of its scope (its page "
             "says which). A finding listed has one verdict per estimand; each is another paper's authors' claim only "
             "where named, else this project's extension (`ESTIMANDS`, `AUTHORS` in "
             "`src/hasfl/analysis/findings/claims.py`, rule values above).", "",
             "| finding | estimands (each its own verdict) | whose claim |", "|---|---|---|"]
    for fid, pairs in ests.items():
        named = [f"{label}: {who[(fid, key)][0]}" for key, label in pairs if (fid, key) in who]
        lines.append(f"| {fid} | {', '.join(label for _k, label in pairs)} | "
                     f"{'; '.join(named) or 'this project extension on every estimand'} |")
    return lines


def render(items: Sequence[Entry], root: Path | str | None = None,
           found: Sequence[Change] | None = None) -> str:
    """docs/preregistration.md."""
    lines = ["# Pre-registration record", "",
             "Every rule value that decides a verdict of `findings.json`, with the commit at which it was fixed and "
             "the results pages that existed then (each with the commit it was made at). Generated from git by "
             "`hasfl preregistration --write` (module `hasfl.prereg`); `tests/test_preregistration.py` fails when a "
             "value changes without this record being regenerated. A value is *fixed at* the oldest commit since "
             "which its file has held it at every commit that touched it. The decisions behind the values are in "
             "[decisions.md](decisions.md); the rules themselves in the results pages' Findings section.", "",
             "| file | rule value | value | fixed at | date | results pages then |", "|---|---|---|---|---|---|"]
    for e in items:
        then = "; ".join(e.results_then) if e.results_then else ("none" if e.commit else "--")
        lines.append(f"| `{e.file}` | `{e.key}` | `{e.value}` | {('`' + e.commit + '`') if e.commit else 'uncommitted'}"
                     f" | {e.date or '--'} | {then} |")
    if root is not None:
        root = Path(root)
        lines += _amendment_lines(root, changes(root) if found is None else found)
        lines += _deciding_lines(root)
    return "\n".join(lines) + "\n"


def parse(text: str) -> dict[tuple[str, str], str]:
    """``{(file, key): value}`` of a record's table."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`") and cells[1].startswith("`"):
            out[(cells[0].strip("`"), cells[1].strip("`"))] = cells[2].strip("`")
    return out


def check(root: Path | str, use_git: bool = True) -> list[str]:
    """The problems of the record at ``root``: with ``use_git``, every line where the file differs from
    :func:`render` of :func:`entries`; else every rule value of the working tree without an entry of that value."""
    root = Path(root)
    path = root / RECORD
    if not path.is_file():
        return [f"{RECORD} does not exist: run `hasfl preregistration --write`"]
    text = path.read_text()
    if use_git:
        found = changes(root)
        items = entries(root)
        want = render(items, root, found)
        problems = amendment_problems(root, found)
        # a record written from an uncommitted value matches the working tree, not git: it is no record yet
        problems += [f"{RECORD}: `{e.key}` of {e.file} is {e.value}, not committed: commit it, then `hasfl "
                     "preregistration --write`" for e in items if e.commit is None]
        if text == want:
            return problems
        have, need = set(text.splitlines()), set(want.splitlines())
        return ([f"{RECORD} lacks: {line}" for line in want.splitlines() if line not in have]
                + [f"{RECORD} has, git does not: {line}" for line in text.splitlines() if line not in need]
                + problems)
    recorded = parse(text)
    problems = []
    for file, key, read in rule_values(root):
        value = _shown(read((root / file).read_text()))
        if recorded.get((file, key)) != value:
            problems.append(f"{RECORD}: `{key}` of {file} is {value!s} in the working tree, "
                            f"{recorded.get((file, key), 'absent')} in the record: a rule value changed without an "
                            "entry (commit it, then `hasfl preregistration --write`)")
    return problems
