"""The capacity-separable estimators E1-E3, the methods that act on them, and `hasfl diagnose`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.analysis.diagnose import DiagnoseError, diagnose
from hasfl.config import data_config, load_config, run_config
from hasfl.data import load_dataset
from hasfl.data.stage import build_tables
from hasfl.fl.engine import run_federation
from hasfl.fl.estimator import reported_tv, within_tier

REPO = Path(__file__).resolve().parents[1]


# --- E1, E3 by hand ----------------------------------------------------------------------------
def test_within_tier_is_a_z_score_per_tier() -> None:
    pmax = np.array([0.25, 0.25, 0.25, 0.5, 0.5, 1.0])
    h = np.array([1.0, np.e, np.e**2, 5.0, 5.0, 3.0])
    z = within_tier(h, pmax)
    assert z[:3] == pytest.approx([-1.0, 0.0, 1.0])  # log h = 0, 1, 2: mean 1, sd 1
    assert z[3:5].tolist() == [0.0, 0.0]  # no spread within the tier
    assert z[5] == 0.0  # a tier of one client
    # a pure capacity effect is gone: h depends only on the tier
    assert np.allclose(within_tier(np.where(pmax == 0.25, 9.0, 1.0), pmax), 0.0)


def test_reported_tv_exact_and_private() -> None:
    labels = {0: np.array([0, 0, 0, 0]), 1: np.array([1, 1, 1, 1]), 2: np.array([0, 1, 0, 1])}
    tv = reported_tv(labels, 3, 2, None, np.random.default_rng(0))
    assert tv == pytest.approx([0.5, 0.5, 0.0])  # pooled 50/50
    a = reported_tv(labels, 3, 2, 0.5, np.random.default_rng(7))
    b = reported_tv(labels, 3, 2, 0.5, np.random.default_rng(7))
    assert np.array_equal(a, b) and not np.allclose(a, tv)  # seeded noise, and it moves the values
    loose = [np.abs(reported_tv(labels, 3, 2, eps, np.random.default_rng(s)) - tv).mean()
             for eps in (100.0, 0.1) for s in range(20)]
    assert np.mean(loose[:20]) < np.mean(loose[20:])  # less privacy, less error


# --- logging changes no training ---------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    cfg = load_config(REPO / "presets" / "quick.yaml", overrides=[
        "federation.rounds=12", "hasfl.warmup=2", "hasfl.t_adapt=2", "threads_per_job=1"])
    bundle = load_dataset("digits", cfg["data_dir"], cfg["dataset_params"]["digits"])
    part, clients = build_tables(bundle, data_config(cfg, "digits"), 42)
    return cfg, bundle, part, clients


def _final(digits, method: str, **estimators) -> dict[str, torch.Tensor]:
    cfg, bundle, part, clients = digits
    run_cfg = run_config(cfg, "digits", method, 42)
    for key, value in estimators.items():
        block, field = key.split("__")
        run_cfg["estimators"][block][field] = value
    torch.set_num_threads(1)
    return run_federation(bundle, part, clients, run_cfg).final_state


def _same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("method", ["hasfl", "fjord", "scaffold"])
def test_estimator_settings_change_no_byte_of_methods_that_do_not_use_them(digits, method) -> None:
    base = _final(digits, method)
    other = _final(digits, method, probe__batches=5, probe__width=0.5, reported__epsilon=0.5)
    assert _same(base, other)


def test_the_methods_that_use_them_do_change(digits) -> None:
    """The control: the same settings move hasfl_probe / hasfl_reported (the test above can fail)."""
    assert not _same(_final(digits, "hasfl_probe"), _final(digits, "hasfl_probe", probe__batches=5))
    assert not _same(_final(digits, "hasfl_reported"), _final(digits, "hasfl_reported", reported__epsilon=0.05))


# --- hasfl diagnose ------------------------------------------------------------------------------
def _table(kind: str, n: int = 120, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pmax = rng.choice([0.25, 0.5, 0.75, 1.0], size=n)
    tv = rng.uniform(0.1, 0.9, size=n)
    estimate = {"capacity": 2.0 - 1.5 * pmax + rng.normal(0, 0.05, n),
                "truth": tv + rng.normal(0, 0.15, n),
                "noise": rng.normal(0, 1, n)}[kind]
    return pd.DataFrame({"est": estimate, "pmax": pmax, "tv": tv})


@pytest.mark.parametrize(("kind", "verdict"), [("capacity", "confounded"), ("truth", "data signal"),
                                               ("noise", "inconclusive")])
def test_diagnose_verdicts(kind, verdict) -> None:
    d = diagnose(_table(kind), "est", "pmax", "tv", permutations=500)
    assert d.verdict == verdict, d.reason
    if kind == "capacity":
        assert d.r_capacity < -0.9 and d.adj_r2_capacity > 0.8 and d.permutation_p > 0.05
    if kind == "truth":
        assert d.within_r > 0.5 and d.permutation_p < 0.01


def test_diagnose_without_truth_says_only_what_capacity_explains() -> None:
    assert diagnose(_table("capacity"), "est", "pmax").verdict == "confounded"
    assert diagnose(_table("noise"), "est", "pmax").verdict == "inconclusive"


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda df: df.drop(columns=["tv"]), "truth column 'tv' is not in the table"),
    (lambda df: df.assign(est=df["est"].astype(object).where(df.index != 5, "high")),
     "estimate column 'est' has non-numeric values, e.g. 'high' (row 5)"),
    (lambda df: df.assign(pmax=0.5), "fewer than 2 capacity groups"),
    (lambda df: df.assign(tv=df["tv"].where(df.index != 3, np.nan)), "truth column 'tv' has NaN"),
])
def test_diagnose_bad_input(mutate, message) -> None:
    with pytest.raises(DiagnoseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        diagnose(mutate(_table("truth")), "est", "pmax", "tv")


def test_diagnose_cli(hasfl_cli, tmp_path) -> None:
    path = tmp_path / "clients.parquet"
    _table("capacity").to_parquet(path)
    res = hasfl_cli("diagnose", str(path), "--estimate", "est",
                          "--capacity", "pmax", "--truth", "tv", "--json", "--permutations", "200",
                          "--plot", str(tmp_path / "d.png"))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["verdict"] == "confounded" and out["columns"]["truth"] == "tv"
    assert (tmp_path / "d.png").stat().st_size > 1000
    bad = hasfl_cli("diagnose", str(path), "--estimate", "nope",
                          "--capacity", "pmax")
    assert bad.returncode == 2 and "estimate column 'nope' is not in the table" in bad.stderr
    assert "Traceback" not in bad.stderr
