"""One training job: method x dataset x seed -> the run files the analysis reads.

The job receives exactly its config slices (:func:`hasfl.config.run_config`,
:func:`hasfl.config.data_config`) and paths; nothing else in the config can change its bytes.
Files in the run folder (names in :data:`hasfl.registry.RUN_FILES`):

* ``rounds.parquet``  -- per evaluated round: :data:`hasfl.fl.records.ROUND_COLUMNS` (accuracy,
  loss, allocated and trained average width, upload MB and training MACs per participant,
  mean H~, participants, train loss).
* ``clients.parquet`` -- client_id, pmax, p_final, h_tilde_final, times_sampled, mean_p,
  p_max_allocated (largest width allocated), p_max_trained (largest width of the module
  it trained and uploaded; differs from the allocation only for FjORD),
  p_max_trained_after_warmup (the same over rounds t > t0). 0 = never sampled.
* ``participation.parquet`` -- one row per participant of every round:
  :data:`hasfl.fl.records.PARTICIPATION_COLUMNS` (widths allocated and trained, window and its
  shift, samples, local steps and loss, upload MB, MACs, the round's estimates).
* ``init.pt`` / ``final.pt`` -- the global state_dict at round 0 and at the end.
* ``local_models.pt`` -- the local model each client keeps, by client id (``{"p": its trained width, "state":
  its state_dict}``), for a method its authors evaluate client by client (FedLPS); empty for every other method.
* ``warmup.pt``       -- the global state_dict at the end of round t0 = ``hasfl.warmup`` (the
  first adaptation round; Proposition 3 is checked from there on).
* ``run.json``        -- status (completed / diverged), avg_p, avg_p_trained, t0, final accuracy.
* ``manifest.json``   -- sha256 of every file above and the run's identity; written last.
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
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from hasfl.data import load_dataset
from hasfl.data.stage import build_tables
from hasfl.fl.checkpoint import Checkpointer
from hasfl.fl.engine import run_federation
from hasfl.integrity import MANIFEST, IntegrityError, identity_difference, read_manifest, write_run_manifest
from hasfl.io import InputFileError, atomic_path, read_parquet, write_json, write_parquet
from hasfl.logs import PROGRESS
from hasfl.registry import RUN_FILES

CHECKPOINT = "checkpoint.pt"  # in the run folder, never a declared output; removed after success

log = logging.getLogger("hasfl.train")


def save_state(state: Mapping[str, Any], path: str | Path) -> None:
    """torch.save through a buffer (the archive name stays fixed, so bytes are reproducible), atomically."""
    buf = io.BytesIO()
    torch.save(dict(state), buf)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getvalue())


DATA_TABLES = ("partition.parquet", "clients.parquet")


def read_data_stage(data_dir: Path, dataset: str | None = None,
                    seed: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """partition.parquet and clients.parquet, checked against the data stage's manifest.json,
    and their sha256s. ``dataset`` / ``seed``: the run's; a data stage of another one is refused."""
    manifest_path = data_dir / "manifest.json"
    if not manifest_path.is_file():
        raise InputFileError(f"input file '{manifest_path}' does not exist; run the data stage first")
    try:
        manifest = json.loads(manifest_path.read_text())
        files = manifest["files"]
        digests = {name: str(files[name]["sha256"]) for name in DATA_TABLES}
    except (ValueError, KeyError, TypeError) as exc:
        raise InputFileError(f"input file '{manifest_path}' is not a data-stage manifest ({exc})") from exc
    there = ((manifest.get("data_config") or {}).get("dataset"), manifest.get("seed"))
    for what, want, have in (("dataset", dataset, there[0]), ("seed", seed, there[1])):
        if want is not None and have != want:
            raise InputFileError(f"data stage '{data_dir}' is of {what} {have!r}, but the run is of {what} {want!r}; "
                                 f"give the data stage of the same dataset and seed")
    partition, clients = (read_parquet(data_dir / name, digests[name]) for name in DATA_TABLES)
    return partition, clients, digests


def table_digest(df: pd.DataFrame) -> str:
    """sha256 of the Parquet bytes ``write_parquet`` writes for ``df`` (what the data stage's file holds)."""
    import hashlib

    buf = io.BytesIO()
    df.to_parquet(buf, index=False, engine="pyarrow", compression="zstd")
    return hashlib.sha256(buf.getvalue()).hexdigest()


def check_out_dir(out: Path, identity: Mapping[str, Any], overwrite: bool) -> None:
    """Refuse to write into a folder that holds a finished run of another identity."""
    manifest = read_manifest(out)
    if manifest is None or overwrite:
        return
    theirs = manifest.get("identity", {})
    if theirs.get("digest") != identity["digest"]:
        raise IntegrityError(
            f"run folder '{out}' holds a finished run of another identity (differs in: "
            f"{', '.join(identity_difference(theirs, identity)) or 'identity format'}); choose another --out, "
            "or pass --overwrite to replace it")


class Terminated(Exception):
    """SIGTERM or SIGINT reached a training job (preemption, scancel, Ctrl-C)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def train_job(
    run_cfg: Mapping[str, Any],
    data_cfg: Mapping[str, Any],
    out_dir: str | Path,
    *,
    identify: Callable[[Mapping[str, str], str], Mapping[str, Any]],
    data_dir: str | Path | None = None,
    target: float | None = None,
    target_diverged: bool = False,
    checkpoint_every: int = 0,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run one job and write its files to ``out_dir``; returns run.json's content.

    ``run_cfg`` / ``data_cfg`` are the job's config slices (the train rule's params).
    ``data_dir`` holds the data stage's partition.parquet / clients.parquet; without it
    they are rebuilt in memory by the same code (identical tables). ``identify(inputs, data_digest)``: the run's
    identity, given the sha256 of the tables read and the dataset tensors' digest, as its caller decided it
    (:meth:`hasfl.dag.outputs.RunRecord.identify`, which refuses tables other than the planned ones; this module
    computes nothing of it). ``target`` / ``target_diverged``: the average width and status of the run whose budget
    a random-budget control matches. ``checkpoint_every`` (rounds; 0 = never) changes no byte of the results. A folder
    that holds a finished run of another identity is refused unless ``overwrite``. SIGTERM / SIGINT end
    the job (``SystemExit(128 + signum)`` after logging where it stopped); from the first one on, both
    are ignored in this process, which is ending.
    """
    torch.set_num_threads(int(run_cfg["threads"]))
    out = Path(out_dir)
    dataset, method, seed = run_cfg["dataset"], run_cfg["method"], int(run_cfg["seed"])
    bundle = load_dataset(dataset, data_cfg["data_dir"], data_cfg["dataset_params"])
    if data_dir is not None:
        partition, clients, inputs = read_data_stage(Path(data_dir), dataset, seed)
    else:
        partition, clients = build_tables(bundle, data_cfg, seed)
        inputs = {"partition.parquet": table_digest(partition), "clients.parquet": table_digest(clients)}
    identity = dict(identify(inputs, bundle.digest()))
    check_out_dir(out, identity, overwrite)

    from tqdm import tqdm

    bar = tqdm(total=run_cfg["federation"]["rounds"], desc=f"{dataset}/{method}/seed{seed}", mininterval=2.0,
               file=_LogStream(log), ascii=True)
    done = [0]

    def progress(rnd: int, row: Mapping[str, Any]) -> None:
        done[0] = rnd
        bar.n = rnd
        bar.set_postfix(acc=f"{row['test_acc']:.4f}", p=f"{row['avg_p']:.2f}", refresh=False)
        bar.refresh()

    def on_signal(signum: int, _frame: Any) -> None:
        # One stop is enough: a second signal (the job's process and the warm worker both relay one) is
        # ignored from here to the process's end, so it never lands in a cleanup (e.g. tqdm's __del__).
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        previous.clear()  # not restored: the job ends
        raise Terminated(signum)

    checkpointer = Checkpointer(out / CHECKPOINT, int(checkpoint_every), identity)
    import threading

    main_thread = threading.current_thread() is threading.main_thread()  # handlers only exist there
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
    try:
        result = run_federation(bundle, partition, clients, run_cfg, hasfl_avg_p=target,
                                hasfl_diverged=target_diverged, progress=progress, checkpointer=checkpointer)
    except Terminated as stop:
        saved = checkpointer.saved_round
        log.error("terminated (%s) after round %d of %d; %s", stop, done[0], run_cfg["federation"]["rounds"],
                  f"checkpoint at round {saved}: rerunning the job resumes from it" if saved else
                  "no checkpoint yet: rerunning the job starts from round 0")
        raise SystemExit(128 + stop.signum) from None
    finally:
        bar.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    write_parquet(result.rounds, out / "rounds.parquet")
    write_parquet(result.clients, out / "clients.parquet")
    write_parquet(result.participation, out / "participation.parquet")
    save_state(result.init_state, out / "init.pt")
    save_state(result.warmup_state if result.warmup_state is not None else result.final_state, out / "warmup.pt")
    save_state(result.final_state, out / "final.pt")
    save_state({str(i): result.kept_models[i] for i in sorted(result.kept_models)}, out / "local_models.pt")
    write_json(out / "timings.json", result.timings)
    write_json(out / "run.json", result.summary)
    write_run_manifest(out, [f for f in RUN_FILES if f != MANIFEST], identity)
    if checkpointer.path is not None and checkpointer.path.exists():
        checkpointer.path.unlink()
    log.info("run finished: %s", result.summary)
    return result.summary


class _LogStream:
    """A file-like object that sends tqdm's lines to the job log."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def write(self, text: str) -> None:
        text = text.strip("\r\n ")
        if text:  # per-round progress: the job log keeps it, the console of a DAG run does not (hasfl.logs)
            self.logger.info(text, extra={PROGRESS: True})

    def flush(self) -> None:
        pass
