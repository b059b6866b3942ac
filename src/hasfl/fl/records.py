"""What the round loop records, and the run files it becomes (see :mod:`hasfl.fl.train`).

:class:`RunRecord` accumulates, round by round, the evaluated rows of ``rounds.parquet``
and the per-client counters of ``clients.parquet``; it is part of every checkpoint, so a
resumed run continues the same record. :meth:`RunRecord.result` turns it into the
:class:`RunResult` the training job writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from torch import Tensor

__all__ = ["ROUND_COLUMNS", "RunRecord", "RunResult"]

#: Columns of ``rounds.parquet``, one row per evaluated round.
ROUND_COLUMNS = ("round", "test_acc", "test_loss", "avg_p", "mean_h_tilde", "n_participants", "train_loss")


@dataclass
class RunResult:
    """Everything a training job writes (see :mod:`hasfl.fl.train` for the files)."""

    rounds: pd.DataFrame
    clients: pd.DataFrame
    init_state: dict[str, Tensor]
    final_state: dict[str, Tensor]
    summary: dict[str, Any]
    timings: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunRecord:
    """The loop's record so far; ``next_round`` is the first round still to train."""

    next_round: int
    rows: list[dict[str, Any]]
    p_sum: np.ndarray
    times_sampled: np.ndarray
    p_hi_alloc: np.ndarray
    p_hi_trained: np.ndarray
    avg_p_rounds: list[float]
    status: str = "completed"
    diverged_round: int | None = None

    @classmethod
    def fresh(cls, n_clients: int) -> RunRecord:
        """The record before round 0."""
        return cls(0, [], np.zeros(n_clients), np.zeros(n_clients, dtype=np.int64), np.zeros(n_clients),
                   np.zeros(n_clients), [])

    def client_trained(self, client: int, p: float, p_trained: float) -> None:
        """Client ``client`` was allocated width ``p`` and trained a width-``p_trained`` module."""
        self.p_hi_alloc[client] = max(self.p_hi_alloc[client], p)
        self.p_hi_trained[client] = max(self.p_hi_trained[client], p_trained)

    def round_trained(self, participants: np.ndarray, widths: np.ndarray) -> None:
        """The allocation of one round's participants (avg p of Tables 3, 6, 7)."""
        self.p_sum[participants] += widths
        self.times_sampled[participants] += 1
        self.avg_p_rounds.append(float(np.mean(widths)))

    def diverged(self, rounds_done: int) -> None:
        """The loss or the parameters became NaN/inf in round ``rounds_done``."""
        self.status, self.diverged_round = "diverged", rounds_done

    def evaluated(self, rounds_done: int, acc: float, loss: float, mean_h_tilde: float, n_participants: int,
                  train_loss: float) -> dict[str, Any]:
        """Append the row of an evaluated round and return it."""
        row = {"round": rounds_done, "test_acc": acc, "test_loss": loss, "avg_p": self.avg_p_rounds[-1],
               "mean_h_tilde": mean_h_tilde, "n_participants": n_participants, "train_loss": train_loss}
        self.rows.append(row)
        return row

    def result(self, run_cfg: Mapping[str, Any], pmax: np.ndarray, p_final: np.ndarray, h_tilde: np.ndarray,
               hasfl_avg_p: float | None, hasfl_diverged: bool, init_state: dict[str, Tensor],
               final_state: dict[str, Tensor], timings: dict[str, Any]) -> RunResult:
        """The run's tables, states and summary (run.json)."""
        rounds_df = pd.DataFrame.from_records(self.rows, columns=list(ROUND_COLUMNS))
        rounds_df = rounds_df.astype({"round": "int64", "n_participants": "int64"})
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_p = np.where(self.times_sampled > 0, self.p_sum / np.maximum(self.times_sampled, 1), np.nan)
        clients_df = pd.DataFrame({
            "client_id": np.arange(len(pmax), dtype=np.int64),
            "pmax": pmax,
            "p_final": p_final.astype(np.float64),
            "h_tilde_final": h_tilde.copy(),
            "times_sampled": self.times_sampled,
            "mean_p": mean_p,
            "p_max_allocated": self.p_hi_alloc,
            "p_max_trained": self.p_hi_trained,
        })
        summary = {
            "dataset": run_cfg["dataset"], "method": run_cfg["method"], "seed": int(run_cfg["seed"]),
            "status": self.status, "diverged_round": self.diverged_round,
            "rounds_completed": len(self.avg_p_rounds),
            "avg_p": float(np.mean(self.avg_p_rounds)) if self.avg_p_rounds else math.nan,
            "final_test_acc": float(rounds_df["test_acc"].iloc[-1]) if len(rounds_df) else math.nan,
            "target_avg_p": hasfl_avg_p,
            "target_from_diverged_run": bool(hasfl_diverged) if hasfl_avg_p is not None else None,
        }
        return RunResult(rounds_df, clients_df, init_state, final_state, summary, timings)
