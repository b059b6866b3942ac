"""Table 4c (issue 27): the coordinates the participants trained in each run's last k rounds and after t0
(hasfl.analysis.tables.table4c_coverage_over_time), from real engine runs written as run folders; the
expected fractions are computed here from the parameter shapes and Algorithm 2's unit rule (prefix: the
leading ceil(p C) units; rolling: hasfl.models.slicing.rolling_window), not by the module's code."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.analysis.artifacts import TABLES
from hasfl.analysis.specs import TABLE_SETTINGS, resolve_table_settings, resolve_thresholds
from hasfl.analysis.tables import table4c_coverage_over_time as T4C
from hasfl.io import InputFileError, write_json, write_parquet
from hasfl.models.slicing import rolling_window, width, window_indices

RUN_FILES = ("participation.parquet", "run.json", "init.pt")
#: A CNN whose widest sliced layer has 8 units, so a rolling run covers every unit in a few rounds.
TINY_CNN = {"arch": "cnn", "channels": [4, 4, 8, 8], "pool_after": [1], "pool_out": 2, "hidden": 8,
            "bn_stats": "per_width"}


# --- run folders from engine runs ----------------------------------------------------------------


def write_manifest(root, digits) -> list[str]:
    path = root / "data" / "digits" / "seed42" / "manifest.json"
    write_json(path, {"seed": 42, "files": {}, "data_config": {}, "summary": {
        "dataset": "digits", "task": "image", "classes": int(digits.bundle.num_classes),
        "input_shape": list(digits.bundle.input_shape), "clients": 20}})
    return [str(path)]


def write_run(root, method: str, res) -> list[str]:
    """A run folder with the files Table 4c reads, from a RunResult."""
    d = root / "runs" / "digits" / method / "seed42"
    d.mkdir(parents=True, exist_ok=True)
    write_parquet(res.participation, d / "participation.parquet")
    write_json(d / "run.json", res.summary)
    torch.save(res.init_state, d / "init.pt")
    return [str(d / n) for n in RUN_FILES]


def table(root, files, manifests, model, k: int) -> pd.DataFrame:
    out = root / "tables"
    return T4C.job(files, manifests, {"digits": model}, k, out / f"{T4C.NAME}.parquet", out / f"{T4C.NAME}.md")


@pytest.fixture(scope="module")
def quick_runs(engine_cfg, federate, one_thread):
    """uniform and fedavg on the quick preset's digits CNN: 5 rounds, t0 = 1."""
    cfg = engine_cfg(rounds=5, warmup=1)
    return cfg, {m: federate(cfg, m) for m in ("uniform", "fedavg")}


@pytest.fixture(scope="module")
def tiny_runs(engine_cfg, federate, one_thread):
    """uniform and uniform_rolling on TINY_CNN: t0 = 1 and 10 rounds after it (more than the widest layer's 8
    units, so every unit of every layer is in some round's rolling window)."""
    cfg = engine_cfg(rounds=12, warmup=1)
    cfg["dataset_params"]["digits"]["model"] = dict(TINY_CNN)
    return cfg, {m: federate(cfg, m) for m in ("uniform", "uniform_rolling")}


# --- the independent count ----------------------------------------------------------------------


def expected_masks(state, model, in_channels: int, rows) -> dict[str, np.ndarray]:
    """Union of the parameter coordinates trained by ``rows`` ((p, window kind, round t) each) of a CNN: a layer's
    kept units are the leading width(p, C) (prefix) or ``rolling_window(C, p, t)``; a conv weight holds (kept
    out units) x (previous layer's kept units), a batch norm and a bias the kept units, fc1 the kept hidden units x
    the columns of the last conv layer's kept channels (channel-major flatten), fc2 every class x kept hidden."""
    acc = {k: np.zeros(tuple(v.shape), dtype=bool) for k, v in state.items()
           if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))}
    per = model["pool_out"] ** 2
    for p, kind, t in rows:
        def units(size: int) -> np.ndarray:
            if kind == "prefix":
                return np.arange(width(p, size))
            return window_indices(rolling_window(size, p, t)).numpy()

        prev = np.arange(in_channels)
        for i, c in enumerate(model["channels"]):
            out = units(c)
            acc[f"convs.{i}.weight"][np.ix_(out, prev)] = True
            for key in (f"convs.{i}.bias", f"bns.{i}.weight", f"bns.{i}.bias"):
                acc[key][out] = True
            prev = out
        h = units(model["hidden"])
        cols = (prev[:, None] * per + np.arange(per)).ravel()
        acc["fc1.weight"][np.ix_(h, cols)] = True
        acc["fc1.bias"][h] = True
        acc["fc2.weight"][:, h] = True
        acc["fc2.bias"][:] = True
    return acc


def fractions(masks: dict[str, np.ndarray]) -> dict[str, float]:
    """Overall ("all") and per layer ("convs.0", "bns.0", "fc1", ...) fraction of True coordinates."""
    groups: dict[str, list[str]] = {"all": list(masks)}
    for k in masks:
        groups.setdefault(k.rsplit(".", 1)[0], []).append(k)
    return {g: sum(int(masks[k].sum()) for k in ks) / sum(masks[k].size for k in ks) for g, ks in groups.items()}


def by_block(df: pd.DataFrame, method: str, column: str) -> dict[str, float]:
    return dict(zip(df[df["method"] == method]["block"], df[df["method"] == method][column], strict=True))


# --- required checks ----------------------------------------------------------------------------


def test_uniform_covers_exactly_the_width_half_prefix_after_t0(quick_runs, digits, tmp_path):
    """(1) Uniform (p = min(0.5, pmax)): after t0 the fraction is < 1 and equals, overall and per block, the
    fraction of coordinates inside the width-0.5 prefix masks counted from the parameter shapes."""
    cfg, runs = quick_runs
    res = runs["uniform"]
    after = res.participation[res.participation["round"] - 1 > res.summary["t0"]]
    assert float(after["p_trained"].max()) == 0.5  # the premise: someone trained the capped width after t0
    model = cfg["dataset_params"]["digits"]["model"]
    df = table(tmp_path, write_run(tmp_path, "uniform", res), write_manifest(tmp_path, digits), model, 2)
    masks = expected_masks(res.init_state, model, digits.bundle.input_shape[0], [(0.5, "prefix", 0)])
    want = fractions(masks)
    got = by_block(df, "uniform", "frac_after_t0")
    assert got["all"] < 1.0
    assert set(got) == set(want)
    for block, frac in want.items():
        assert got[block] == pytest.approx(frac, abs=1e-12), block
    assert set(df["window"]) == {"prefix"} and set(df["status"]) == {"completed"}
    whole = df[df["block"] == "all"].iloc[0]
    assert int(whole["coordinates"]) == sum(m.size for m in masks.values())  # parameters only, no BN statistics
    assert int(whole["coordinates"]) < sum(v.numel() for v in res.init_state.values())


def test_the_window_edges_are_round_t0_and_round_r_minus_k(quick_runs, digits, tmp_path):
    """The ledger's round r is Algorithm 1's t = r - 1: "after t0" starts at r = t0 + 2 and the last k rounds at
    r = R - k + 1. Uniform's ledger with its last warm-up round (r = t0 + 1) trained at full width, as Algorithm
    1's warm-up (p = pmax) would: after t0 stays the width-0.5 fraction, k = R - t0 - 1 leaves that round out and
    k = R - t0 takes it in."""
    cfg, runs = quick_runs
    res = runs["uniform"]
    model = cfg["dataset_params"]["digits"]["model"]
    man = write_manifest(tmp_path, digits)
    files = write_run(tmp_path, "uniform", res)
    t0, last = int(res.summary["t0"]), int(res.participation["round"].max())
    led = res.participation.copy()
    led.loc[led["round"] == t0 + 1, "p_trained"] = 1.0
    write_parquet(led, tmp_path / "runs/digits/uniform/seed42/participation.parquet")
    half = fractions(expected_masks(res.init_state, model, digits.bundle.input_shape[0], [(0.5, "prefix", 0)]))["all"]
    inside = table(tmp_path, files, man, model, last - t0 - 1).set_index("block").loc["all"]
    assert inside["frac_after_t0"] == pytest.approx(half, abs=1e-12)
    assert inside["frac_last_k"] == pytest.approx(half, abs=1e-12)
    with_t0 = table(tmp_path, files, man, model, last - t0).set_index("block").loc["all"]
    assert with_t0["frac_last_k"] == 1.0 and with_t0["frac_after_t0"] == pytest.approx(half, abs=1e-12)


def test_rolling_covers_more_than_uniform_and_matches_the_union_of_rolled_windows(tiny_runs, digits, tmp_path):
    """(2) uniform_rolling (Uniform's widths, rolling windows) run for more rounds after t0 than its widest layer
    has units: its fractions after t0 and in the last k rounds equal the union of the rolled windows of its
    ledger rows and exceed Uniform's (whose prefix never leaves the width-0.5 mask)."""
    cfg, runs = tiny_runs
    model = cfg["dataset_params"]["digits"]["model"]
    man = write_manifest(tmp_path, digits)
    files = write_run(tmp_path, "uniform", runs["uniform"]) + write_run(tmp_path, "uniform_rolling",
                                                                        runs["uniform_rolling"])
    k = 3
    df = table(tmp_path, files, man, model, k)
    rol = runs["uniform_rolling"]
    led, t0, last = rol.participation, rol.summary["t0"], int(rol.participation["round"].max())
    assert (led["window"] == "rolling").all() and (led["window_shift"] == led["round"] - 1).all()
    assert last - 1 - t0 >= max(*model["channels"], model["hidden"])  # more rounds after t0 than units
    in_ch = digits.bundle.input_shape[0]

    def union(rows: pd.DataFrame) -> dict[str, np.ndarray]:
        return expected_masks(rol.init_state, model, in_ch,
                              [(p, "rolling", r - 1) for p, r in zip(rows["p_trained"], rows["round"], strict=True)])

    after = union(led[led["round"] - 1 > t0])
    for key, m in after.items():  # the premise of "as many rounds as units": every unit of a layer was in a window
        if m.ndim == 1:
            assert m.all(), key
    for column, rows in (("frac_after_t0", led[led["round"] - 1 > t0]), ("frac_last_k", led[led["round"] > last - k])):
        want, got = fractions(union(rows)), by_block(df, "uniform_rolling", column)
        assert set(got) == set(want)
        for block, frac in want.items():
            assert got[block] == pytest.approx(frac, abs=1e-12), (column, block)
        assert got["all"] > by_block(df, "uniform", column)["all"], column
    row = df[(df["method"] == "uniform_rolling") & (df["block"] == "all")].iloc[0]
    assert (row["window"], row["rounds_used"], row["last_round"], row["k"], row["t0"]) == ("rolling", k, last, k, t0)


def test_fedavg_trains_every_coordinate(quick_runs, digits, tmp_path):
    """(3) FedAvg: every participant trains the full model, so every block is 1.0 in both columns."""
    cfg, runs = quick_runs
    model = cfg["dataset_params"]["digits"]["model"]
    df = table(tmp_path, write_run(tmp_path, "fedavg", runs["fedavg"]), write_manifest(tmp_path, digits), model, 2)
    assert len(df) > 1 and (df["frac_last_k"] == 1.0).all() and (df["frac_after_t0"] == 1.0).all()
    assert (df["trained_last_k"] == df["coordinates"]).all()


def test_a_bad_or_missing_ledger_is_named(quick_runs, digits, tmp_path):
    """(4) A missing or bad participation.parquet stops the table with a message naming the file."""
    cfg, runs = quick_runs
    model = cfg["dataset_params"]["digits"]["model"]
    man = write_manifest(tmp_path, digits)
    files = write_run(tmp_path, "uniform", runs["uniform"])
    ledger = tmp_path / "runs/digits/uniform/seed42/participation.parquet"
    with pytest.raises(ValueError, match=r"runs/digits/uniform/seed42 lacks participation\.parquet"):
        table(tmp_path, [f for f in files if not f.endswith(".parquet")], man, model, 2)
    ledger.unlink()
    with pytest.raises(InputFileError, match=re.escape(f"'{ledger}' does not exist")):
        table(tmp_path, files, man, model, 2)
    ledger.write_bytes(b"not parquet")
    with pytest.raises(InputFileError, match=re.escape(f"'{ledger}' is not a readable Parquet file")):
        table(tmp_path, files, man, model, 2)
    good = runs["uniform"].participation
    write_parquet(good.drop(columns=["window"]), ledger)
    with pytest.raises(ValueError, match=re.escape(ledger.as_posix()) + r" lacks the column\(s\) 'window'"):
        table(tmp_path, files, man, model, 2)
    write_parquet(good.assign(p_trained=0.0), ledger)
    with pytest.raises(ValueError, match=re.escape(ledger.as_posix()) + r" column 'p_trained' holds 0\.0"):
        table(tmp_path, files, man, model, 2)
    write_parquet(good.assign(window="diagonal"), ledger)
    with pytest.raises(ValueError, match=re.escape(ledger.as_posix()) + r" column 'window' holds \['diagonal'\]"):
        table(tmp_path, files, man, model, 2)
    write_parquet(good.iloc[:0], ledger)
    with pytest.raises(ValueError, match=re.escape(ledger.as_posix()) + r" has no rows"):
        table(tmp_path, files, man, model, 2)
    write_parquet(good[good["round"] < good["round"].max()], ledger)  # a ledger of fewer rounds than run.json's
    with pytest.raises(ValueError, match="participation.parquet ends at round 4 but run.json says 5 rounds"):
        table(tmp_path, files, man, model, 2)


# --- k, the Markdown, the registry and the config -----------------------------------------------


def test_k_beyond_the_run_counts_every_round_and_says_so(quick_runs, digits, tmp_path):
    cfg, runs = quick_runs
    model = cfg["dataset_params"]["digits"]["model"]
    man = write_manifest(tmp_path, digits)
    files = write_run(tmp_path, "uniform", runs["uniform"]) + write_run(tmp_path, "fedavg", runs["fedavg"])
    df = table(tmp_path, files, man, model, 50)
    assert (df["rounds_used"] == 5).all() and (df["k"] == 50).all()
    same = table(tmp_path, files, man, model, 5)  # all five rounds either way
    assert df["frac_last_k"].tolist() == same["frac_last_k"].tolist()
    md = (tmp_path / "tables" / f"{T4C.NAME}.md").read_text()
    assert "Table 4c -- coordinates trained in the last k rounds" in md
    md50 = T4C.display(df)
    assert any(isinstance(x, str) and "2 of 2 runs have fewer rounds than k = 50" in x for _, x in md50)
    shown = T4C.summary_frame(df).set_index("method")
    assert shown.loc["FedAvg", "last k rounds"] == 1.0 and shown.loc["FedAvg", "least trained block (last k)"] == "--"
    assert shown.loc["Uniform", "after t0"] < 1.0 and shown.loc["Uniform", "window"] == "prefix"
    assert "| Digits | Uniform | prefix | 1 |" in md
    with pytest.raises(ValueError, match="table4c_last_rounds must be >= 1"):
        table(tmp_path, files, man, model, 0)


def test_blocks_are_layers(small_lstm, small_cnn):
    lstm = {T4C.block_of(k) for k, _ in small_lstm.build(1.0).named_parameters()}
    assert lstm == {"embed", "lstm.l0", "lstm.l1", "fc"}
    cnn = {T4C.block_of(k) for k, _ in small_cnn.build(1.0).named_parameters()}
    assert cnn == {"convs.0", "convs.1", "convs.2", "bns.0", "bns.1", "bns.2", "fc1", "fc2"}
    assert T4C.block_of("lstm.weight_hh_l0_reverse") == "lstm.l0_reverse" and T4C.block_of("w") == "w"


def test_registry_entry_is_for_every_method_and_after_table4b_on_the_results_page():
    from hasfl.analysis.results_page import TABLES as PAGE

    art = TABLES[T4C.NAME]
    assert art.all_methods and not art.nested_only and not art.heavy
    assert set(art.run_files) == set(RUN_FILES) and set(art.params) == {"models", "last_rounds"}
    positions = [a.results_page for a in TABLES.values() if a.results_page]
    assert len(positions) == len(set(positions))
    assert PAGE[PAGE.index("table4b_stale_coordinates") + 1] == T4C.NAME


def test_the_config_key(repo):
    """analysis.table4c_last_rounds: an integer >= 1 in config.yaml and the schema, not a margin of findings."""
    from hasfl.config import ConfigError, load_config, validate_config

    s = TABLE_SETTINGS["table4c_last_rounds"]
    prop = json.loads((repo / "workflow/schemas/config.schema.json").read_text())[
        "properties"]["analysis"]["properties"]["table4c_last_rounds"]
    assert prop["type"] == "integer" and prop["minimum"] == s.low
    assert prop["description"].startswith(s.meaning) and f"default {s.default})" in prop["description"]
    cfg = load_config()
    assert cfg["analysis"]["table4c_last_rounds"] == s.default == 10
    assert resolve_table_settings(cfg["analysis"]) == {"table4c_last_rounds": 10}
    assert "table4c_last_rounds" not in resolve_thresholds(cfg["analysis"])
    for bad in (0, 2.5, True):
        cfg["analysis"]["table4c_last_rounds"] = bad
        with pytest.raises(ConfigError, match="analysis.table4c_last_rounds"):
            validate_config(cfg)
        with pytest.raises(ValueError, match="config key 'analysis.table4c_last_rounds'"):
            resolve_table_settings(cfg["analysis"])
