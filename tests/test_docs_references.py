"""Every code reference in the docs resolves (issue 38 part 4): README.md, ARCHITECTURE.md, CHANGELOG.md
and docs/**/*.md (not docs/results/, which ``hasfl results-page`` writes).

A reference is
- a backticked repository path: a span that is one path starting with ``src/``, ``workflow/``, ``tests/``,
  ``presets/``, ``docs/``, ``scripts/``, ``profiles/``, ``envs/`` or ``.ci/``, or one of the top-level files
  (``config.yaml``, ``Snakefile``, ...). ``<placeholder>``, ``*`` and ``{a,b}`` must match at least one
  file; ``path::name`` (a pytest node id) must name a function or class defined in that file;
  a file of another repository is written with that repository's name first
  (``HeteroFL:src/models/conv.py``) and is not checked;
- a backticked dotted name starting with ``hasfl.``: it resolves by import, walking down
  (``hasfl.dag.jobs.train_run``: the longest importable module, then attributes, dataclass fields
  included; ``module:function`` too). A name whose first part is not a module or attribute of the
  package ``hasfl`` is a key of the config block ``hasfl`` (``hasfl.p_min``) and must be one in
  ``config.yaml``;
- a backticked dotted name relative to one of hasfl's modules (``tables.base.table_markdown``,
  ``kernel.holm``): its first part is the last part of a module's name (not a top-level key of
  config.yaml, not a file name) and it resolves below one of the modules of that name;
- a relative Markdown link ``[x](path#anchor)``: the file exists relative to the page, and the anchor,
  if any, is the GitHub slug of one of the target's headings.

Fenced code blocks are commands, not references, and are skipped. The artifact index of
docs/reference/outputs.md must be what :data:`hasfl.analysis.artifacts.ARTIFACTS` gives:
``python tests/test_docs_references.py --write-artifact-index`` rewrites it.
"""

from __future__ import annotations

import functools
import glob
import importlib
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PATH_PREFIXES = ("src/", "workflow/", "tests/", "presets/", "docs/", "scripts/", "profiles/", "envs/", ".ci/")
TOP_FILES = {"config.yaml", "Snakefile", "pyproject.toml", "README.md", "ARCHITECTURE.md", "CHANGELOG.md"}
INDEX_START = "<!-- artifact index: generated from hasfl.analysis.artifacts.ARTIFACTS -->"
INDEX_END = "<!-- end artifact index -->"

_FENCE = re.compile(r"^ *(```|~~~).*?^ *\1 *$", re.M | re.S)
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_PATH = re.compile(r"^[\w./*<>{},+-]+(:\d+(-\d+)?|::[\w\[\]-]+)?$")
_DOTTED = re.compile(r"^hasfl(\.\w+)+(:\w+)?(\(.*\))?$")
_RELATIVE = re.compile(r"^[a-z_]\w*(\.\w+)+(\(.*\))?$")
_FILE_EXT = re.compile(r"\.(json|md|parquet|py|pt|gz|csv|zip|yaml|png|pdf|txt|whl)$")


def doc_pages(repo: Path = REPO) -> list[Path]:
    pages = [repo / n for n in ("README.md", "ARCHITECTURE.md", "CHANGELOG.md") if (repo / n).exists()]
    pages += sorted(p for p in (repo / "docs").rglob("*.md") if "results" not in p.relative_to(repo / "docs").parts[:1])
    return pages


def _strip_fences(text: str) -> str:
    return _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    s = heading.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _strip_fences(page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+?) *#* *$", text, re.M)}


def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",") for x in _expand_braces(pattern[:m.start()] + alt + pattern[m.end():])]


def check_path(span: str, repo: Path = REPO) -> str | None:
    """None when ``span`` (a repository path, maybe with placeholders or ``::name``) resolves, else why not."""
    path, _, node = span.partition("::")
    path = re.sub(r":\d+(-\d+)?$", "", path)  # file.py:127-138
    pattern = re.sub(r"<[^<>]*>", "*", path).rstrip("/")
    hits = [h for p in _expand_braces(pattern) for h in glob.glob(str(repo / p))]
    if not hits:
        return f"no such file or folder: {path}"
    if node:
        name = node.split("[", 1)[0]
        if not any(re.search(rf"^\s*(async def|def|class) {re.escape(name)}\b", Path(h).read_text(), re.M)
                   for h in hits if Path(h).is_file()):
            return f"{path} defines no {name}"
    return None


def _config_hasfl_keys(repo: Path) -> dict:
    return (yaml.safe_load((repo / "config.yaml").read_text()) or {}).get("hasfl", {})


def check_name(span: str, repo: Path = REPO) -> str | None:
    """None when the dotted name ``span`` resolves by import (or is a key of config.yaml's block ``hasfl``)."""
    name = re.sub(r"\(.*\)$", "", span).replace(":", ".")
    parts = name.split(".")
    import hasfl

    if not (hasattr(hasfl, parts[1]) or importlib.util.find_spec(f"hasfl.{parts[1]}") is not None):
        node: object = _config_hasfl_keys(repo)
        for key in parts[1:]:
            if not isinstance(node, dict) or key not in node:
                return f"{span}: neither a module of hasfl nor a key of config.yaml's block 'hasfl'"
            node = node[key]
        return None
    module, i = None, len(parts)
    while i > 1:
        try:
            module = importlib.import_module(".".join(parts[:i]))
            break
        except ModuleNotFoundError as e:
            if e.name is not None and not ".".join(parts[:i]).startswith(e.name):
                return f"{span}: importing {'.'.join(parts[:i])} fails: {e}"
            i -= 1
    obj: object = module
    for attr in parts[i:]:
        if hasattr(obj, attr):
            obj = getattr(obj, attr)
            continue
        fields = getattr(obj, "__dataclass_fields__", None) or {}
        annotations = getattr(obj, "__annotations__", {}) if isinstance(obj, type) else {}
        if attr in fields or attr in annotations:
            return None  # a field without a class-level default
        if isinstance(obj, type(importlib)):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{attr}")
                continue
            except ModuleNotFoundError:
                pass
        return f"{span}: {'.'.join(parts[:parts.index(attr)])} has no attribute {attr}"
    return None


@functools.cache
def _hasfl_modules() -> tuple[str, ...]:
    src = REPO / "src"
    return tuple(".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
                 for p in sorted((src / "hasfl").rglob("*.py")))


@functools.cache
def _module_tails() -> frozenset[str]:
    """Last parts of hasfl's modules that a page may name a module by (``kernel.holm``), less the top-level
    keys of config.yaml (``analysis.ci_level``, ``partition.alpha`` are config keys)."""
    config_keys = set(yaml.safe_load((REPO / "config.yaml").read_text()) or {})
    return frozenset(m.rsplit(".", 1)[1] for m in _hasfl_modules() if "." in m) - config_keys


def check_relative(span: str, repo: Path = REPO) -> str | None:
    """A dotted name relative to one of hasfl's packages (``tables.base.table_markdown``,
    ``report.estimator_section``): it resolves when it does below some ``hasfl.<...>.<first part>``."""
    parts = re.sub(r"\(.*\)$", "", span).split(".")
    roots = sorted({".".join(segs[: segs.index(parts[0]) + 1])
                    for segs in (m.split(".") for m in _hasfl_modules()) if parts[0] in segs[1:]})
    if any(check_name(".".join([root, *parts[1:]]), repo) is None for root in roots):
        return None
    return f"{span}: resolves below none of {', '.join(roots)}"


def check_link(target: str, page: Path, repo: Path = REPO) -> str | None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#") and not target[1:]:
        return None  # http(s), mailto
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"link to a missing file: {target}"
    if anchor and dest.is_file() and dest.suffix == ".md" and anchor not in _anchors(dest):
        return f"link to a missing heading: {target}"
    return None


def references(text: str) -> list[tuple[str, str]]:
    """(kind, reference) for every path, name and link of a Markdown text; kind is path, name or link."""
    text = _strip_fences(text)
    out: list[tuple[str, str]] = []
    for m in _SPAN.finditer(text):
        span = m.group(1).strip()
        if _DOTTED.match(span):
            out.append(("name", span))
        elif _RELATIVE.match(span) and not _FILE_EXT.search(span) and span.split(".")[0] in _module_tails():
            out.append(("relative", span))
        elif _PATH.match(span) and (span.startswith(PATH_PREFIXES) or span.split("::")[0] in TOP_FILES):
            out.append(("path", span))
    out += [("link", m.group(1)) for m in _LINK.finditer(text)]
    return out


def problems(page: Path, repo: Path = REPO, text: str | None = None) -> tuple[list[str], int]:
    """(what does not resolve, how many references were checked) on one page."""
    refs = references(page.read_text() if text is None else text)
    bad = []
    for kind, ref in refs:
        why = (check_path(ref, repo) if kind == "path" else check_name(ref, repo) if kind == "name"
               else check_relative(ref, repo) if kind == "relative" else check_link(ref, page, repo))
        if why:
            bad.append(f"{page.relative_to(repo) if page.is_relative_to(repo) else page.name}: {why}")
    return bad, len(refs)


def test_every_code_reference_in_the_docs_resolves() -> None:
    pages = doc_pages()
    assert REPO / "README.md" in pages and REPO / "ARCHITECTURE.md" in pages
    assert not any("results" in p.relative_to(REPO).parts[1:2] for p in pages)
    bad, n = [], 0
    for page in pages:
        b, k = problems(page)
        bad += b
        n += k
    print(f"{n} references checked on {len(pages)} pages")
    assert n > 250, n  # a checker that finds nothing to check is broken
    assert not bad, "\n".join(bad)


def test_the_checker_fails_on_bad_references(tmp_path) -> None:
    """A check that cannot fail is a defect: a fabricated page with one bad reference of each kind."""
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text("# Page\n\n## A heading\n")
    text = """# A page

Good: `src/hasfl/registry.py`, `src/hasfl/fl/methods/<name>.py`, `tests/test_repo.py::test_hasfl_help_lists_subcommands`,
`hasfl.dag.store`, `hasfl.registry.METHODS`, `hasfl.registry.MethodInfo.shown_in`, `hasfl.p_min`,
`hasfl.analysis.tables.method_table:compute`, [self](page.md#a-heading), [web](https://example.org),
`tables.base.table_markdown`, `analysis.ci_level` (a config key: not a name), `findings.json` (a file).
Bad: `src/hasfl/nope.py`, `hasfl.x.y`, `hasfl.registry.NOPE`, `hasfl.no_such_key`, `report.estimator_section`,
`tests/test_repo.py::test_nope`, [gone](missing.md), [anchor](page.md#no-such-heading).

```bash
cat src/also_not_checked.py `src/in_a_fence.py`
```
"""
    bad, n = problems(page, REPO, text)
    assert n == 19, (n, references(text))
    assert len(bad) == 8, bad
    for needle in ("src/hasfl/nope.py", "hasfl.x.y", "hasfl.registry.NOPE", "hasfl.no_such_key", "test_nope",
                   "report.estimator_section",
                   "missing.md", "#no-such-heading"):
        assert sum(needle in b for b in bad) == 1, (needle, bad)


def test_slugs_are_githubs() -> None:
    assert slug("The run store (issue 36)") == "the-run-store-issue-36"
    assert slug("The `hasfl` command") == "the-hasfl-command"
    assert slug("Table 8, F7, F8 and Figure 9: the estimators measured") == "table-8-f7-f8-and-figure-9-the-estimators-measured"


def test_decisions_contents_list_every_section_with_a_status() -> None:
    """docs/decisions.md opens with one row per section (its status); a new section needs its row."""
    text = _strip_fences((REPO / "docs" / "decisions.md").read_text())
    sections = [h for h in re.findall(r"^## (.+)$", text, re.M) if h != "Contents"]
    rows = re.findall(r"^\| \[(.+?)\]\(#([\w-]+)\) \| (.+?) \|$", text.split("## Contents", 1)[1].split("\n## ", 1)[0], re.M)
    assert [r[0] for r in rows] == [h.replace("|", "/") for h in sections]
    assert all(anchor == slug(h) and status.strip() for (_, anchor, status), h in zip(rows, sections))


def artifact_index() -> str:
    from hasfl.analysis.artifacts import ARTIFACTS

    rows = ["| artifact | kind | files |", "|---|---|---|"]
    for name, a in ARTIFACTS.items():
        base = f"{a.folder}/{name}" if a.folder else name
        exts = ("parquet", "md") if a.kind == "table" else ("png", "pdf")
        rows.append(f"| `{name}` | {a.kind} | " + ", ".join(f"`{base}.{e}`" for e in exts) + " |")
    return "\n".join(rows)


def _outputs_page() -> Path:
    return REPO / "docs" / "reference" / "outputs.md"


def test_the_outputs_page_lists_every_artifact_of_the_registry() -> None:
    text = _outputs_page().read_text()
    assert INDEX_START in text and INDEX_END in text
    inside = text.split(INDEX_START, 1)[1].split(INDEX_END, 1)[0].strip()
    assert inside == artifact_index(), "run: python tests/test_docs_references.py --write-artifact-index"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-artifact-index"]:
        sys.exit("usage: python tests/test_docs_references.py --write-artifact-index")
    page = _outputs_page()
    head, rest = page.read_text().split(INDEX_START, 1)
    page.write_text(head + INDEX_START + "\n" + artifact_index() + "\n" + INDEX_END + rest.split(INDEX_END, 1)[1])
