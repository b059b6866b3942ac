"""References from a results page's hand-written notes into findings.json, filled at generation.

The notes (``docs/results/<name>.notes.md``) are a person's reading of the findings; every number and
verdict in them is a *reference*, so the reading follows the runs it describes and cannot drift from
them. Syntax (docs/decisions.md, "Results pages from data"):

``{ID.field}``, ``{ID.unit.field}``, ``{ID.unit.part.field}``, each optionally ``:format``

* ``ID``: a finding id of findings.json (``F1c``, ``F3-shakespeare``, ``F7-E0``); or a top-level key of
  findings.json (``alpha``, ``thresholds``); or ``count`` (``{count.supported}``: how many findings show
  that verdict, "not run" written ``not_run``).
* then a path: a key of the current mapping, or the name of one of its ``units`` / ``parts`` (the
  ``unit`` field: ``fashion_mnist``, ``digits/hasfl/seed42``), or of one of its ``estimands`` (``full-model``,
  ``sub-model``: ``{F9c.full-model.verdict}``, ``{F9c.full-model.attribution}``), or an index into a list
  (``{F3-shakespeare.shakespeare.parts.0.estimate}``: a part whose name has spaces).
* ``field``: any field there (``estimate``, ``low``, ``high``, ``n``, ``mde``, ``margin``, ``seeds_needed``, ...);
  a finding's ``verdict`` is the verdict the page shows (:func:`shown_verdict`: "not run" when none of its
  units ran).
* ``:format``: a Python format spec (``{F4.fashion_mnist.estimate:.1f}``); a float without one is written
  with 3 significant digits, a missing or non-finite value as ``--``. A width or precision above
  :data:`MAX_FORMAT_WIDTH` is refused before anything is formatted (``:99999999999`` would exhaust memory).

``{{`` and ``}}`` are literal braces. Refused, naming the line: a reference that does not resolve (an
unknown id, unit or field, or one naming a mapping rather than a value), and a verdict word
(:data:`VERDICT_WORDS`: every verdict of the findings' kernel, "not run", and the negations such as
``unsupported``) typed outside a reference. The words are looked for in the text as a reader sees it
(:func:`rendered_text`: HTML entities decoded, inline HTML tags, soft hyphens and zero-width characters dropped,
NFKC), so ``&#115;upported``, or the word with a soft hyphen inside, is ``supported``. The batch-norm mode ``mixed``
written as inline code (`` `mixed` ``) is a config value, not a verdict.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from hasfl.analysis.findings.kernel import MIXED, NOT_RUN, SPLIT, VERDICTS
from hasfl.analysis.markdown import num
from hasfl.errors import HasflError

__all__ = ["MAX_FORMAT_WIDTH", "NOT_RUN", "VERDICT_WORDS", "NotesError", "estimand_counts", "fill_notes", "references",
           "rendered_text", "shown_verdict", "verdict_counts", "verdict_of"]

#: The verdicts a page counts: the findings' (:data:`hasfl.analysis.findings.kernel.VERDICTS`, "split by estimand"
#: and "not run" among them).
SHOWN_VERDICTS = tuple(VERDICTS)
#: Words that state a verdict; in notes they may only come from a reference. Each verdict may also be typed
#: negated (``unsupported``), which states one as much.
VERDICT_WORDS = SHOWN_VERDICTS
#: The largest width or precision a reference's format spec may ask for (a table cell needs far less).
MAX_FORMAT_WIDTH = 200

_REF = re.compile(r"\{(?P<path>[^{}:\s]+)(?::(?P<spec>[^{}]*))?\}")
_VERDICT_WORD = re.compile(
    r"\b(?:" + "|".join(r"\s+".join(map(re.escape, w.split())) if " " in w else f"(?:un)?{re.escape(w)}"
                        for w in VERDICT_WORDS) + r")\b", re.IGNORECASE)
#: Characters a page does not show (soft hyphen, zero-width space / joiners, word joiner, BOM, Mongolian vowel
#: separator): a word with one inside reads as the word.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200d\u2060\ufeff]")
#: Inline HTML (a tag or a comment), which renders as nothing between the letters around it.
_HTML_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>")
_CODE_SPAN = re.compile(r"`[^`\n]*`")


class NotesError(HasflError, ValueError):
    """A notes file with a reference that does not resolve or a verdict typed by hand."""


def verdict_of(f: Mapping[str, Any]) -> str:
    """A finding's verdict as counted: findings.json's, ``not run`` for a file written before "not run" was a verdict
    of its own (``inconclusive`` with ``n_units`` 0 and a reason starting "not run:")."""
    ran = [u for u in f.get("units") or [] if u.get("in_scope", True)]
    if not ran and (not f.get("n_units") or str(f.get("reason", "")).startswith("not run")):
        return NOT_RUN
    return str(f["verdict"])


def shown_verdict(f: Mapping[str, Any]) -> str:
    """The verdict a reader sees: findings.json's word (:func:`verdict_of`) where it holds for the whole finding; for
    a finding whose estimands differ (``split by estimand``) each estimand's verdict by its label ("full model:
    inconclusive; sub-models: contradicted"), so no one word is printed for both."""
    v = verdict_of(f)
    if v != SPLIT:
        return v
    return "; ".join(f"{e.get('label') or e.get('estimand')}: {e['verdict']}" for e in f.get("estimands") or []
                     if e.get("verdict") != NOT_RUN)


def verdict_counts(findings: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Findings per verdict (:func:`verdict_of`), every finding counted as the findings table lists it (they add up
    to the number of findings; a split finding is counted once, as split)."""
    return {v: sum(verdict_of(f) == v for f in findings) for v in SHOWN_VERDICTS}


def estimand_counts(findings: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Estimand verdicts of the findings with more than one estimand that ran, per verdict (what a split finding's
    parts say)."""
    out: dict[str, int] = {}
    for f in findings:
        ran = [e for e in f.get("estimands") or [] if e.get("verdict") != NOT_RUN]
        if len(ran) > 1:
            for e in ran:
                out[e["verdict"]] = out.get(e["verdict"], 0) + 1
    return out


def rendered_text(line: str) -> str:
    """One line of notes as a reader sees its words: HTML entities decoded (``&#115;`` -> ``s``, ``&nbsp;`` -> a
    space), inline HTML tags and comments and invisible characters (:data:`_INVISIBLE`) dropped, NFKC (full-width
    letters, ligatures and no-break spaces as their plain forms); a line break an entity decodes to is a space, so
    the line count is kept."""
    text = _INVISIBLE.sub("", html.unescape(_HTML_TAG.sub("", line)))
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return re.sub(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]", " ", text)


def _code_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each inline code span of ``text``."""
    return [m.span() for m in _CODE_SPAN.finditer(text)]


def _typed_verdicts(typed: str) -> list[tuple[int, str]]:
    """``(line number, word)`` of every verdict word in ``typed`` (notes with their references blanked out), read
    as rendered (:func:`rendered_text`) over the whole text, so a word broken across lines is found; ``mixed`` in
    inline code (the batch-norm mode, a config value) is not a verdict."""
    text = "\n".join(rendered_text(line) for line in typed.split("\n"))
    spans = _code_spans(text)
    out = []
    for w in _VERDICT_WORD.finditer(text):
        word = " ".join(w.group(0).split())
        if word.lower() == MIXED and any(a < w.start() and w.end() < b for a, b in spans):
            continue
        out.append((text.count("\n", 0, w.start()) + 1, word))
    return out


def _spec_error(spec: str | None) -> str | None:
    """Why format spec ``spec`` is refused (a width or precision above :data:`MAX_FORMAT_WIDTH`), else None; read
    before formatting, since ``format(x, "99999999999")`` asks for that many characters."""
    numbers = [int(n) for n in re.findall(r"\d+", spec or "")]
    if numbers and max(numbers) > MAX_FORMAT_WIDTH:
        return (f"asks for a width or precision of {max(numbers)}; at most {MAX_FORMAT_WIDTH} is allowed "
                "(e.g. :.1f, :>8.2f, :+.3g)")
    return None


def _fmt(value: Any, spec: str | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "--"
    if spec:
        return format(value, spec)
    return num(value) if isinstance(value, float) else str(value)


def _step(node: Any, key: str) -> tuple[bool, Any]:
    if isinstance(node, list) and key.isdigit() and int(key) < len(node):
        return True, node[int(key)]
    if isinstance(node, Mapping):
        if key in node:
            return True, node[key]
        for listed in ("units", "parts"):
            for item in node.get(listed) or []:
                if isinstance(item, Mapping) and str(item.get("unit")) == key:
                    return True, item
        for item in node.get("estimands") or []:  # {F9c.full-model.verdict}: one estimand's verdict
            if isinstance(item, Mapping) and str(item.get("estimand")) == key:
                return True, item
    return False, None


def _names(node: Any) -> list[str]:
    if not isinstance(node, Mapping):
        return []
    names = [k for k in node if k not in ("units", "parts", "estimands")]
    names += [str(u.get("unit")) for k in ("units", "parts") for u in node.get(k) or [] if isinstance(u, Mapping)]
    names += [str(e.get("estimand")) for e in node.get("estimands") or [] if isinstance(e, Mapping)]
    return names


def resolve(doc: Mapping[str, Any], path: str) -> Any:
    """The value ``path`` (``ID.unit.field``) names in findings.json ``doc``; raises :class:`NotesError`."""
    head, *rest = path.split(".")
    by_id = {str(f["id"]): f for f in doc.get("findings", [])}
    if head in by_id:
        node: Any = by_id[head]
    elif head == "count":
        node = {v.replace(" ", "_"): n for v, n in verdict_counts(doc.get("findings", [])).items()}
    elif head in doc and head != "findings":
        node = doc[head]
    else:
        raise NotesError(f"findings.json has no finding '{head}' (ids: {', '.join(by_id)}; also: count, "
                         f"{', '.join(k for k in doc if k != 'findings')})")
    if not rest:
        raise NotesError(f"'{head}' is a finding, not a value; name a field, e.g. {{{head}.verdict}}")
    for i, key in enumerate(rest):
        if head in by_id and i == len(rest) - 1 and key == "verdict" and node is by_id[head]:
            return shown_verdict(node)
        ok, node_next = _step(node, key)
        if not ok:
            where = ".".join([head, *rest[:i]])
            raise NotesError(f"'{where}' has no field or unit '{key}' (it has: {', '.join(_names(node)) or 'nothing'})")
        node = node_next
    if isinstance(node, (Mapping, list)):
        raise NotesError(f"it names a {'mapping' if isinstance(node, Mapping) else 'list'}, not a value "
                         f"(name one of: {', '.join(_names(node)) or 'its items'})")
    return node


def references(text: str) -> list[str]:
    """The paths of the references in ``text`` (``F4.fashion_mnist.estimate``), in order."""
    escaped = text.replace("{{", "").replace("}}", "")
    return [m.group("path") for m in _REF.finditer(escaped)]


def fill_notes(text: str, doc: Mapping[str, Any], source: str = "notes") -> str:
    """``text`` with every reference replaced by its value from findings.json ``doc``; raises :class:`NotesError`
    on an unresolved reference or a verdict word typed by hand (each message names ``source`` and the line)."""
    errors: list[str] = []
    escaped = text.replace("{{", "\0").replace("}}", "\1")
    # verdict words over the whole text (one may be broken across lines), references blanked out
    typed = _REF.sub(lambda m: " " * len(m.group(0)), escaped)
    for no, word in _typed_verdicts(typed):
        errors.append(f"{source}, line {no}: the verdict word '{word}' is typed by hand; write it as a "
                      "reference to the finding it describes, e.g. {F1c.verdict}")
    out_lines = []
    for no, (line, typed_line) in enumerate(zip(escaped.split("\n"), typed.split("\n"), strict=True), 1):

        def sub(m: re.Match[str], no: int = no) -> str:
            refused = _spec_error(m.group("spec"))
            if refused is not None:
                errors.append(f"{source}, line {no}: reference {m.group(0)} {refused}")
                return m.group(0)
            try:
                return _fmt(resolve(doc, m.group("path")), m.group("spec"))
            except NotesError as e:
                errors.append(f"{source}, line {no}: reference {m.group(0)} does not resolve: {e}")
            except (ValueError, TypeError) as e:
                errors.append(f"{source}, line {no}: reference {m.group(0)} cannot be formatted: {e}")
            return m.group(0)

        if "{" in typed_line or "}" in typed_line:
            errors.append(f"{source}, line {no}: an unmatched or malformed brace (a reference is "
                          "{ID.unit.field:format}; a literal brace is written {{ or }})")
        out_lines.append(_REF.sub(sub, line).replace("\0", "{").replace("\1", "}"))
    if errors:
        raise NotesError("notes refused:\n  " + "\n  ".join(errors))
    return "\n".join(out_lines)
