"""What the round loop records, and the run files it becomes (see :mod:`hasfl.fl.train`).

:class:`RunRecord` accumulates, round by round, the evaluated rows of ``rounds.parquet``,
the per-client counters of ``clients.parquet`` and the per-client, per-round ledger of
``participation.parquet`` (who trained which coordinates when); it is part of every
checkpoint, so a resumed run continues the same record. :meth:`RunRecord.result` turns it into the
:class:`RunResult` the training job writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from hasfl.models.cost import Cost
from hasfl.models.family import ModelFamily

__all__ = ["PARTICIPATION_COLUMNS", "ROUND_COLUMNS", "RunRecord", "RunResult", "WidthCosts"]

#: Columns of ``rounds.parquet``, one row per evaluated round. ``avg_p`` is the mean allocated
#: width of the round's participants (Tables 3, 6, 7), ``avg_p_trained`` the mean width of the
#: modules they trained and uploaded (FjORD: pmax), ``upload_mb`` and ``train_mmacs`` the mean
#: upload (MB) and training forward MACs per sample (millions, Table 1's count; FjORD's
#: distillation forward pass included) per participant; ``probe_gmacs`` the forward GMACs of the
#: round's E2 probes (all participants together; 0 outside adaptation rounds). For a method that
#: allocates by E2 (hasfl_probe) the probe is part of what it pays: its upload adds to ``upload_mb`` and
#: its forward MACs, spread over the client's local samples, to ``train_mmacs``.
ROUND_COLUMNS = ("round", "test_acc", "test_loss", "avg_p", "avg_p_trained", "upload_mb", "train_mmacs",
                 "probe_gmacs", "mean_h_tilde", "n_participants", "train_loss")


#: Columns of ``participation.parquet``, one row per participant of every round: ``round`` (1-based, as in
#: rounds.parquet: the round t = round - 1 of Algorithm 1), ``client_id``, ``p`` (allocated width), ``p_trained``
#: (width of the module trained and uploaded), ``window`` and ``window_shift`` (its units: ``prefix``, the leading
#: ones, or ``rolling`` by ``window_shift``: in a layer of C units the window starts at (C - shift mod C) mod C,
#: or ``sampled``, FedEcover's own units of the participant, ``window_shift`` its draw number in the run: the units
#: follow from the seed and the earlier draws' ``p_trained``, :func:`hasfl.models.cyclic.replay`;
#: :class:`hasfl.models.slicing.Window`), ``samples`` (n_i, its aggregation weight), ``steps`` (local SGD steps),
#: ``local_loss`` (mean training loss of its local steps), ``upload_mb`` and ``train_mmacs`` (what it paid, as in
#: rounds.parquet), ``h_hat`` (its Eq. 4 estimate of the round; NaN outside adaptation rounds) and ``h_tilde``
#: (its Eq. 5 estimate after the round).
PARTICIPATION_COLUMNS = ("round", "client_id", "p", "p_trained", "window", "window_shift", "samples", "steps",
                         "local_loss", "upload_mb", "train_mmacs", "h_hat", "h_tilde")


class WidthCosts:
    """Table 1 costs (:meth:`hasfl.models.ModelFamily.cost`) of the widths a run trains, computed
    once per physical width (continuous allocations round to the same channels) without
    touching torch's global random stream."""

    def __init__(self, family: ModelFamily) -> None:
        self.family = family
        self._cache: dict[str, Cost] = {}

    def __call__(self, p: float) -> Cost:
        key = repr(self.family.widths(p))
        if key not in self._cache:
            with torch.random.fork_rng(devices=[]):
                self._cache[key] = self.family.cost(p)
        return self._cache[key]


@dataclass
class RunResult:
    """Everything a training job writes (see :mod:`hasfl.fl.train` for the files)."""

    rounds: pd.DataFrame
    clients: pd.DataFrame
    participation: pd.DataFrame
    init_state: dict[str, Tensor]
    final_state: dict[str, Tensor]
    summary: dict[str, Any]
    timings: dict[str, Any] = field(default_factory=dict)
    warmup_state: dict[str, Tensor] | None = None
    kept_models: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class RunRecord:
    """The loop's record so far; ``next_round`` is the first round still to train.

    ``t0`` is the last warm-up round (config ``hasfl.warmup``: the first adaptation round);
    ``warmup_state`` the global state at the end of round t0 and ``p_hi_trained_after`` the
    largest width each client trained in rounds t > t0 (Proposition 3 from t0 on).
    """

    n_clients: int
    t0: int
    next_round: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    p_sum: np.ndarray = field(init=False)
    times_sampled: np.ndarray = field(init=False)
    p_hi_alloc: np.ndarray = field(init=False)
    p_hi_trained: np.ndarray = field(init=False)
    p_hi_trained_after: np.ndarray = field(init=False)
    avg_p_rounds: list[float] = field(default_factory=list)
    avg_p_trained_rounds: list[float] = field(default_factory=list)
    upload_mb_rounds: list[float] = field(default_factory=list)
    train_mmacs_rounds: list[float] = field(default_factory=list)
    probe_gmacs_rounds: list[float] = field(default_factory=list)
    warmup_state: dict[str, Tensor] | None = None
    status: str = "completed"
    diverged_round: int | None = None
    _paid: list[tuple[float, float]] = field(default_factory=list)  # this round's (upload MB, MACs) per client
    ledger: list[tuple[Any, ...]] = field(default_factory=list)  # participation.parquet rows
    _round_rows: list[list[Any]] = field(default_factory=list)  # this round's ledger rows, estimates still to come

    def __post_init__(self) -> None:
        n = self.n_clients
        self.p_sum, self.times_sampled = np.zeros(n), np.zeros(n, dtype=np.int64)
        self.p_hi_alloc, self.p_hi_trained, self.p_hi_trained_after = np.zeros(n), np.zeros(n), np.zeros(n)

    def client_trained(self, t: int, client: int, p: float, p_trained: float, upload_mb: float,
                       train_macs: float) -> None:
        """In round ``t`` client ``client`` was allocated width ``p`` and trained a width-``p_trained`` module,
        uploading ``upload_mb`` and computing ``train_macs`` forward MACs per sample (Table 1's costs)."""
        self._paid.append((float(upload_mb), float(train_macs)))
        self.p_hi_alloc[client] = max(self.p_hi_alloc[client], p)
        self.p_hi_trained[client] = max(self.p_hi_trained[client], p_trained)
        if t > self.t0:
            self.p_hi_trained_after[client] = max(self.p_hi_trained_after[client], p_trained)

    def client_done(self, t: int, client: int, p: float, p_trained: float, window: Any, samples: int, steps: int,
                    local_loss: float) -> None:
        """The ledger row of ``client`` in round ``t``: its widths, its window (a
        :class:`hasfl.models.slicing.Window`), its samples and local steps and loss, and what it paid (the last
        :meth:`client_trained`); its estimates follow at :meth:`round_estimated`."""
        upload_mb, macs = self._paid[-1]
        self._round_rows.append([t + 1, int(client), float(p), float(p_trained), str(window.kind), int(window.shift),
                                 int(samples), int(steps), float(local_loss), upload_mb, macs / 1e6, math.nan, math.nan])

    def round_estimated(self, h_hat: Mapping[int, float] | None, h_tilde: np.ndarray) -> None:
        """Close this round's ledger rows: each participant's Eq. 4 estimate (None: not an adaptation round) and
        Eq. 5 estimate after the round."""
        for row in self._round_rows:
            client = row[1]
            if h_hat is not None:
                row[11] = float(h_hat[client])
            row[12] = float(h_tilde[client])
            self.ledger.append(tuple(row))
        self._round_rows = []

    def round_trained(self, participants: np.ndarray, widths: np.ndarray, trained: np.ndarray,
                      probe_gmacs: float = 0.0) -> None:
        """One round's allocation (avg p of Tables 3, 6, 7) and what its participants paid."""
        upload_mb, train_macs = zip(*self._paid, strict=True) if self._paid else ((0.0,), (0.0,))
        self._paid = []
        self.probe_gmacs_rounds.append(float(probe_gmacs))
        self.p_sum[participants] += widths
        self.times_sampled[participants] += 1
        self.avg_p_rounds.append(float(np.mean(widths)))
        self.avg_p_trained_rounds.append(float(np.mean(trained)))
        self.upload_mb_rounds.append(float(np.mean(upload_mb)))
        self.train_mmacs_rounds.append(float(np.mean(train_macs)) / 1e6)

    def warmup_done(self, t: int, global_state: Mapping[str, Tensor]) -> None:
        """Keep the global state at the end of round t0 (``warmup.pt``)."""
        if t == self.t0:
            self.warmup_state = {k: v.detach().cpu().clone() for k, v in global_state.items()}

    def diverged(self, rounds_done: int) -> None:
        """The loss or the parameters became NaN/inf in round ``rounds_done``."""
        self.status, self.diverged_round = "diverged", rounds_done

    def evaluated(self, rounds_done: int, acc: float, loss: float, mean_h_tilde: float, n_participants: int,
                  train_loss: float) -> dict[str, Any]:
        """Append the row of an evaluated round and return it."""
        row = {"round": rounds_done, "test_acc": acc, "test_loss": loss, "avg_p": self.avg_p_rounds[-1],
               "avg_p_trained": self.avg_p_trained_rounds[-1], "upload_mb": self.upload_mb_rounds[-1],
               "train_mmacs": self.train_mmacs_rounds[-1], "probe_gmacs": self.probe_gmacs_rounds[-1],
               "mean_h_tilde": mean_h_tilde,
               "n_participants": n_participants, "train_loss": train_loss}
        self.rows.append(row)
        return row

    def result(self, run_cfg: Mapping[str, Any], pmax: np.ndarray, p_final: np.ndarray,
               estimates: Mapping[str, np.ndarray], hasfl_avg_p: float | None, hasfl_diverged: bool, init_state: dict[str, Tensor],
               final_state: dict[str, Tensor], timings: dict[str, Any]) -> RunResult:
        """The run's tables, states and summary (run.json); ``estimates`` maps each estimator of
        :data:`hasfl.fl.estimator.ESTIMATORS` to its final per-client values. A run that ends before round t0 has
        no warm-up state of its own: its final state stands in (nothing was trained after t0)."""
        rounds_df = pd.DataFrame.from_records(self.rows, columns=list(ROUND_COLUMNS))
        rounds_df = rounds_df.astype({"round": "int64", "n_participants": "int64"})
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_p = np.where(self.times_sampled > 0, self.p_sum / np.maximum(self.times_sampled, 1), np.nan)
        clients_df = pd.DataFrame({
            "client_id": np.arange(len(pmax), dtype=np.int64),
            "pmax": pmax,
            "p_final": p_final.astype(np.float64),
            "h_tilde_final": np.asarray(estimates["update"], dtype=np.float64).copy(),
            "times_sampled": self.times_sampled,
            "mean_p": mean_p,
            "p_max_allocated": self.p_hi_alloc,
            "p_max_trained": self.p_hi_trained,
            "p_max_trained_after_warmup": self.p_hi_trained_after,
            # E1-E3 (hasfl.fl.estimator.ESTIMATORS), final values; E0 is h_tilde_final
            "est_within_tier_final": np.asarray(estimates["within_tier"], dtype=np.float64),
            "est_probe_final": np.asarray(estimates["probe"], dtype=np.float64),
            "est_reported": np.asarray(estimates["reported"], dtype=np.float64),
        })
        summary = {
            "dataset": run_cfg["dataset"], "method": run_cfg["method"], "seed": int(run_cfg["seed"]),
            "status": self.status, "diverged_round": self.diverged_round,
            "rounds_completed": len(self.avg_p_rounds),
            "avg_p": float(np.mean(self.avg_p_rounds)) if self.avg_p_rounds else math.nan,
            "avg_p_trained": float(np.mean(self.avg_p_trained_rounds)) if self.avg_p_trained_rounds else math.nan,
            "t0": self.t0,
            "final_test_acc": float(rounds_df["test_acc"].iloc[-1]) if len(rounds_df) else math.nan,
            "target_avg_p": hasfl_avg_p,
            "target_from_diverged_run": bool(hasfl_diverged) if hasfl_avg_p is not None else None,
        }
        warmup = self.warmup_state if self.warmup_state is not None else final_state
        ledger = pd.DataFrame.from_records(self.ledger, columns=list(PARTICIPATION_COLUMNS))
        ledger = ledger.astype({"round": "int64", "client_id": "int64", "p": "float64", "p_trained": "float64",
                                "window": "object", "window_shift": "int64", "samples": "int64", "steps": "int64",
                                "local_loss": "float64", "upload_mb": "float64", "train_mmacs": "float64",
                                "h_hat": "float64", "h_tilde": "float64"})
        return RunResult(rounds_df, clients_df, ledger, init_state, final_state, summary, timings, warmup)
