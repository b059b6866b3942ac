"""One training job: method x dataset x seed -> the run files the analysis reads.

The job receives exactly its config slices (:func:`hasfl.config.run_config`,
:func:`hasfl.config.data_config`) and paths; nothing else in the config can change its bytes.
Files in the run folder (names in :data:`hasfl.registry.RUN_FILES`):

* ``rounds.parquet``  -- per evaluated round: round, test_acc, test_loss, avg_p,
  mean_h_tilde, n_participants, train_loss.
* ``clients.parquet`` -- client_id, pmax, p_final, h_tilde_final, times_sampled, mean_p,
  p_max_allocated (largest width allocated), p_max_trained (largest width of the module
  it trained and uploaded; differs from the allocation only for FjORD). 0 = never sampled.
* ``init.pt`` / ``final.pt`` -- the global state_dict at round 0 and at the end.
* ``run.json``        -- status (completed / diverged), avg_p, final accuracy; written last.
* ``timings.json``    -- wall times, kept apart so the files above are byte-identical
  across reruns of the same seed on CPU.

While the job runs, ``checkpoint.pt`` in the same folder holds the full loop state every
``checkpoint_every`` rounds (atomic writes); rerunning the same job resumes from it and
gives the same bytes as an uninterrupted run. It is deleted after success.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from hasfl.data import load_dataset
from hasfl.data.stage import build_tables
from hasfl.fl.engine import run_federation
from hasfl.io import InputFileError, atomic_path, read_parquet, write_json, write_parquet
from hasfl.registry import METHODS

CHECKPOINT = "checkpoint.pt"  # in the run folder, never a declared output; removed after success

log = logging.getLogger("hasfl.train")


def save_state(state: Mapping[str, torch.Tensor], path: str | Path) -> None:
    """torch.save through a buffer (the archive name stays fixed, so bytes are reproducible), atomically."""
    buf = io.BytesIO()
    torch.save(dict(state), buf)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getvalue())


def read_data_stage(data_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """partition.parquet and clients.parquet, checked against the data stage's manifest.json."""
    manifest_path = data_dir / "manifest.json"
    if not manifest_path.is_file():
        raise InputFileError(f"input file '{manifest_path}' does not exist; run the data stage first")
    try:
        files = json.loads(manifest_path.read_text())["files"]
    except (ValueError, KeyError) as exc:
        raise InputFileError(f"input file '{manifest_path}' is not a data-stage manifest ({exc})") from exc
    return tuple(read_parquet(data_dir / name, files[name]["sha256"])  # type: ignore[return-value]
                 for name in ("partition.parquet", "clients.parquet"))


def read_hasfl_avg_p(run_json: str | Path, method: str = "hasfl") -> tuple[float, bool]:
    """The measured average p of a finished ``method`` run (a random-budget control's target) and
    whether it diverged."""
    path = Path(run_json)
    if not path.is_file():
        raise InputFileError(f"input file '{path}' does not exist; run {method} for the same dataset and seed first")
    summary = json.loads(path.read_text())
    if summary.get("method") != method:
        raise ValueError(f"'{run_json}' is not a {method} run (method={summary.get('method')!r})")
    return float(summary["avg_p"]), summary.get("status") == "diverged"


def train_job(
    run_cfg: Mapping[str, Any],
    data_cfg: Mapping[str, Any],
    out_dir: str | Path,
    *,
    data_dir: str | Path | None = None,
    hasfl_run: str | Path | None = None,
    checkpoint_every: int = 0,
) -> dict[str, Any]:
    """Run one job and write its files to ``out_dir``; returns run.json's content.

    ``run_cfg`` / ``data_cfg`` are the job's config slices (the train rule's params).
    ``data_dir`` holds the data stage's partition.parquet / clients.parquet; without it
    they are rebuilt in memory by the same code (identical tables). ``hasfl_run`` is the
    run.json of the run whose budget a random-budget control matches.
    ``checkpoint_every`` (rounds; 0 = never) changes no byte of the results.
    """
    torch.set_num_threads(int(run_cfg["threads"]))
    out = Path(out_dir)
    dataset, method, seed = run_cfg["dataset"], run_cfg["method"], int(run_cfg["seed"])
    bundle = load_dataset(dataset, data_cfg["data_dir"], data_cfg["dataset_params"])
    if data_dir is not None:
        partition, clients = read_data_stage(Path(data_dir))
    else:
        partition, clients = build_tables(bundle, data_cfg, seed)
    target, target_diverged = None, False
    budget_of = METHODS[method].budget_of
    if budget_of is not None:
        if hasfl_run is None:
            raise ValueError(f"method {method} needs --hasfl-run (the run.json of {budget_of}, same dataset and seed)")
        target, target_diverged = read_hasfl_avg_p(hasfl_run, budget_of)

    from tqdm import tqdm

    bar = tqdm(total=run_cfg["federation"]["rounds"], desc=f"{dataset}/{method}/seed{seed}", mininterval=2.0,
               file=_LogStream(log), ascii=True)

    def progress(rnd: int, row: Mapping[str, Any]) -> None:
        bar.n = rnd
        bar.set_postfix(acc=f"{row['test_acc']:.4f}", p=f"{row['avg_p']:.2f}", refresh=False)
        bar.refresh()

    checkpoint = out / CHECKPOINT
    result = run_federation(bundle, partition, clients, run_cfg, hasfl_avg_p=target, hasfl_diverged=target_diverged,
                            progress=progress, checkpoint=checkpoint, checkpoint_every=int(checkpoint_every))
    bar.close()
    write_parquet(result.rounds, out / "rounds.parquet")
    write_parquet(result.clients, out / "clients.parquet")
    save_state(result.init_state, out / "init.pt")
    save_state(result.final_state, out / "final.pt")
    write_json(out / "timings.json", result.timings)
    write_json(out / "run.json", result.summary)
    if checkpoint.exists():
        checkpoint.unlink()
    log.info("run finished: %s", result.summary)
    return result.summary


class _LogStream:
    """A file-like object that sends tqdm's lines to the job log."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def write(self, text: str) -> None:
        text = text.strip("\r\n ")
        if text:
            self.logger.info(text)

    def flush(self) -> None:
        pass
