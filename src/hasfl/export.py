"""``hasfl export tensorboard RESULTS``: a finished results folder as TensorBoard event files.

What FL researchers open (Flower, pfl-research, FL-bench and HeteroFL log to TensorBoard or a tracker), written
from the run files the DAG made, after the fact -- nothing in training depends on it. One event file per run,
``<out>/<dataset>/<method>/seed<s>/``, with

* the per-round curves of ``rounds.parquet`` (``round/<column>``: test accuracy and loss, allocated and trained
  width, upload MB, training MMACs, mean H~, train loss), step = the round;
* the per-client ledger of ``participation.parquet`` (``client_<id>/<column>``: allocated and trained width,
  local loss, Eq. 4 and Eq. 5 estimates, window shift), step = the round the client took part in, and per
  round the participants' mean and spread (``ledger/<column>_mean``, ``_min``, ``_max``).

Exporting again replaces each run's folder whole (written beside it, then renamed into place): a run never holds
the event files of two exports, whose curves TensorBoard would draw twice.

``tensorboard --logdir <out>`` shows them. Needs the ``tensorboard`` extra (``pip install -e '.[tensorboard]'``:
tensorboardX, which writes the event files without TensorFlow).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from hasfl.errors import HasflError
from hasfl.layout import finished_folders, kind_root
from hasfl.staging import staged_folder

__all__ = ["ExportError", "LEDGER_SCALARS", "ROUND_SCALARS", "export_tensorboard", "read_events"]

#: rounds.parquet columns written as ``round/<column>``
ROUND_SCALARS = ("test_acc", "test_loss", "avg_p", "avg_p_trained", "upload_mb", "train_mmacs", "mean_h_tilde",
                 "train_loss")
#: participation.parquet columns written per client and as the round's mean / min / max
LEDGER_SCALARS = ("p", "p_trained", "local_loss", "h_hat", "h_tilde", "window_shift")


class ExportError(HasflError, ValueError):
    """A results folder that cannot be exported; the message names the file."""


def _writer(folder: Path) -> Any:
    try:
        from tensorboardX import SummaryWriter
    except ImportError as exc:
        raise ExportError("hasfl export tensorboard needs the 'tensorboard' extra: pip install -e '.[tensorboard]' "
                          "(tensorboardX)") from exc
    return SummaryWriter(logdir=str(folder), flush_secs=3600)


def _runs(results: Path) -> Iterator[tuple[str, str, str, Path]]:
    for run in finished_folders(results, "runs"):
        yield run.parent.parent.name, run.parent.name, run.name, run


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises many types
        raise ExportError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from exc


def _write_run(folder: Path, rounds: pd.DataFrame, ledger: pd.DataFrame | None) -> int:
    """Write one run's scalars (module doc) as one event file in ``folder``; returns how many."""
    writer = _writer(folder)
    n = 0
    try:
        for row in rounds.to_dict("records"):
            for col in ROUND_SCALARS:
                v = row.get(col)
                if v is not None and math.isfinite(float(v)):
                    writer.add_scalar(f"round/{col}", float(v), int(row["round"]))
                    n += 1
        if ledger is not None and len(ledger):
            for row in ledger.to_dict("records"):
                for col in LEDGER_SCALARS:
                    v = float(row[col])
                    if math.isfinite(v):
                        writer.add_scalar(f"client_{int(row['client_id'])}/{col}", v, int(row["round"]))
                        n += 1
            stats = ledger.groupby("round")[list(LEDGER_SCALARS)].agg(["mean", "min", "max"])
            for r, vals in stats.iterrows():
                for (col, how), v in vals.items():
                    if math.isfinite(float(v)):
                        writer.add_scalar(f"ledger/{col}_{how}", float(v), int(r))
                        n += 1
    finally:
        writer.close()
    return n


def export_tensorboard(results: str | Path, out: str | Path | None = None) -> dict[str, int]:
    """Write the event files of every finished run of ``results`` under ``out`` (default ``<results>/tensorboard``);
    returns run (``dataset/method/seed<s>``) -> number of scalars written."""
    results = Path(results)
    if not kind_root(results, "runs").is_dir():
        raise ExportError(f"'{results}' has no runs/ folder (expected a results folder, e.g. results/quick)")
    out = Path(out) if out is not None else results / "tensorboard"
    from hasfl.integrity import refuse_store_path

    refuse_store_path(out, "--out")
    written: dict[str, int] = {}
    for d, m, s, run in _runs(results):
        rounds = _read(run / "rounds.parquet")
        ledger = _read(run / "participation.parquet") if (run / "participation.parquet").is_file() else None
        target = out / d / m / s
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            raise ExportError(f"'{target}' exists and is not a folder of event files; move it away to export there")
        # the old folder, with an earlier export's event files, is replaced whole: a run never holds two exports'
        # curves, and a reader never a half-written one
        with staged_folder(target) as staging:
            n = _write_run(staging, rounds, ledger)
        written[f"{d}/{m}/{s}"] = n
    if not written:
        raise ExportError(f"'{results}': no finished run (runs/<dataset>/<method>/seed<s>/manifest.json)")
    return written


def read_events(folder: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Tag -> [(step, value)] of the scalar events in the event files under ``folder`` (the TFRecord format:
    length, its masked CRC, the ``Event`` protobuf, its CRC; read back with tensorboardX's protobuf classes)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    out: dict[str, list[tuple[int, float]]] = {}
    for f in sorted(Path(folder).rglob("events.out.tfevents.*")):
        data = f.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            start = pos + 12
            event = Event.FromString(data[start:start + length])
            pos = start + length + 4
            for value in event.summary.value:
                out.setdefault(value.tag, []).append((int(event.step), float(value.simple_value)))
    return out
