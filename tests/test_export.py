"""`hasfl export tensorboard` (issue 28): every finished run's per-round curves and per-client ledger as TensorBoard
event files, read back from the files (TFRecord + Event protobuf) and compared with the Parquet files."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from hasfl.export import LEDGER_SCALARS, ROUND_SCALARS, ExportError, export_tensorboard, read_events

CLI = "import sys; from hasfl.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def results(tmp_path_factory, tiny_preset):
    root = tmp_path_factory.mktemp("export")
    preset = tiny_preset(root, "t", standalone=True, results_dir=None, data_dir=None, rounds=3)
    out = root / "results" / "runs" / "digits" / "hasfl" / "seed42"
    subprocess.run([sys.executable, "-c", CLI, "train", "--config", str(preset), "--dataset", "digits", "--method",
                    "hasfl", "--seed", "42", "--out", str(out), "--threads", "1"], check=True, capture_output=True)
    return root / "results"


def test_the_event_files_hold_the_runs_curves_and_ledger(results, tmp_path):
    written = export_tensorboard(results, tmp_path / "tb")
    assert list(written) == ["digits/hasfl/seed42"]
    events = read_events(tmp_path / "tb" / "digits" / "hasfl" / "seed42")
    assert sum(len(v) for v in events.values()) == written["digits/hasfl/seed42"]
    run = results / "runs" / "digits" / "hasfl" / "seed42"
    rounds, ledger = pd.read_parquet(run / "rounds.parquet"), pd.read_parquet(run / "participation.parquet")
    for col in ROUND_SCALARS:  # event values are float32
        got = sorted(events[f"round/{col}"])
        want = [(int(r), float(np.float32(v))) for r, v in zip(rounds["round"], rounds[col], strict=True)
                if np.isfinite(v)]
        assert got == want, col
    first = int(ledger["client_id"].iloc[0])
    rows = ledger[ledger["client_id"] == first]
    assert sorted(events[f"client_{first}/p_trained"]) == [(int(r), float(np.float32(v))) for r, v in
                                                          zip(rows["round"], rows["p_trained"], strict=True)]
    means = ledger.groupby("round")["local_loss"].mean()
    assert sorted(events["ledger/local_loss_mean"]) == [(int(r), float(np.float32(v))) for r, v in means.items()]
    assert {f"ledger/{c}_max" for c in LEDGER_SCALARS if ledger[c].notna().any()} <= set(events)


def test_cli_and_bad_folders(results, tmp_path, capsys):
    from hasfl.cli import main

    assert main(["export", "tensorboard", str(results), "--out", str(tmp_path / "x")]) == 0
    assert "1 runs" in capsys.readouterr().out
    with pytest.raises(ExportError, match="has no runs/ folder"):
        export_tensorboard(tmp_path / "nothing")
    (tmp_path / "empty" / "runs").mkdir(parents=True)
    with pytest.raises(ExportError, match="no finished run"):
        export_tensorboard(tmp_path / "empty")


def _event_files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_exporting_twice_replaces_the_event_files(results, tmp_path):
    """A second export into the same place gives the same scalars as one (not every curve twice): each run's folder
    holds one event file afterwards, the earlier one gone, and no staging folder is left beside it."""
    out = tmp_path / "tb"
    first = export_tensorboard(results, out)
    run = out / "digits" / "hasfl" / "seed42"
    once = read_events(run)
    assert len(_event_files(run)) == 1
    time.sleep(1.1)  # tensorboardX names an event file by the second: a later export is a new file name
    second = export_tensorboard(results, out)
    assert second == first
    files = _event_files(run)
    assert len(files) == 1, files
    assert _event_files(out) == [f"digits/hasfl/seed42/{files[0]}"]  # nothing else beside the run's folder
    twice = read_events(run)
    assert {k: sorted(v) for k, v in twice.items()} == {k: sorted(v) for k, v in once.items()}
    assert sum(len(v) for v in twice.values()) == second["digits/hasfl/seed42"]
