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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CODE_RULES", "RECORD", "Entry", "check", "entries", "render", "rule_values"]

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
)
#: The horizon keys of a preset file (dotted paths).
HORIZON_KEYS = ("federation.rounds", "federation.eval_every", "seeds")
_MADE_AT = re.compile(r"at commit `([0-9a-f]{7,40})`")


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


def _shown(value: Any) -> str:
    """A value as the record shows it: numbers and lists as YAML flow, a long text by its length and digest."""
    if isinstance(value, str) and len(value) > 60:
        return f"text of {len(value)} characters, sha256 {hashlib.sha256(value.encode()).hexdigest()[:12]}"
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


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
        text = _git(root, "show", f"{commit}:{name}") or ""
        made = _MADE_AT.search(text)
        out.append(f"{Path(name).stem} (made at {made.group(1)[:7] if made else 'an unstated commit'})")
    return tuple(out)


def entries(root: Path | str) -> list[Entry]:
    """The record's entries for the repository at ``root`` (the working tree's values; commits from git, None where
    git has no history or the working tree's value is not committed)."""
    root = Path(root)
    out = []
    cache: dict[tuple[str, str], str | None] = {}
    pages: dict[str, tuple[str, ...]] = {}
    histories: dict[str, list[tuple[str, str]]] = {}
    for file, key, read in rule_values(root):
        current = read((root / file).read_text())
        commit = date = None
        if file not in histories:
            histories[file] = _history(root, file)
        for c, d in histories[file]:
            if (c, file) not in cache:
                cache[(c, file)] = _git(root, "show", f"{c}:{file}")
            text = cache[(c, file)]
            if text is None or read(text) != current:
                break
            commit, date = c, d
        if commit is not None and commit not in pages:
            pages[commit] = _pages_then(root, commit)
        out.append(Entry(file, key, _shown(current), commit[:12] if commit else None, date,
                         pages[commit] if commit else ()))
    return out


def render(items: Sequence[Entry]) -> str:
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
        want = render(entries(root))
        if text == want:
            return []
        have, need = set(text.splitlines()), set(want.splitlines())
        return ([f"{RECORD} lacks: {line}" for line in want.splitlines() if line not in have]
                + [f"{RECORD} has, git does not: {line}" for line in text.splitlines() if line not in need])
    recorded = parse(text)
    problems = []
    for file, key, read in rule_values(root):
        value = _shown(read((root / file).read_text()))
        if recorded.get((file, key)) != value:
            problems.append(f"{RECORD}: `{key}` of {file} is {value!s} in the working tree, "
                            f"{recorded.get((file, key), 'absent')} in the record: a rule value changed without an "
                            "entry (commit it, then `hasfl preregistration --write`)")
    return problems
