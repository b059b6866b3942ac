"""FedLPS's own evaluation (tables/personal_accuracy.parquet): each client's kept local model, else the global model,
on the client's own test split with test-batch statistics (FedLPS-main ``FedLPS.py:240-275``,
``Hetero_Client.py:113-115, 258-267``), checked against a direct evaluation written here; the image clients' splits
against the rule (per label as many test samples as train samples, capped, without replacement, seeded)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from hasfl.analysis.per_run import personal_accuracy as pa
from hasfl.analysis.per_run.base import RunInputs
from hasfl.analysis.tables import personal_accuracy as table
from hasfl.models.bn import batch_statistics, model_at


def test_an_image_clients_split_has_its_train_label_counts_capped_by_the_test_set():
    train = np.array([3, 3, 3, 1, 7, 7])
    test = np.array([3, 1, 1, 7, 3, 0, 0, 1])  # label 3 twice, 1 thrice, 7 once
    split = pa.own_test_split(train, test, seed=42, client=5)
    assert len(split) == len(set(split.tolist()))  # without replacement
    got = dict(zip(*np.unique(test[split], return_counts=True), strict=True))
    assert got == {1: 1, 3: 2, 7: 1}  # label 3: 3 wanted, 2 held; label 7: 2 wanted, 1 held
    assert np.array_equal(split, pa.own_test_split(train, test, seed=42, client=5))
    big = np.repeat(np.arange(10), 50)
    many = np.repeat(np.arange(10), 5)
    draws = {tuple(pa.own_test_split(many, big, seed=s, client=c).tolist()) for s, c in ((42, 0), (42, 1), (43, 0))}
    assert len(draws) == 3  # another client or seed, another draw
    shuffled = pa.own_test_split(many, big, seed=42, client=0)
    assert not np.array_equal(big[shuffled], np.sort(big[shuffled]))  # one shuffled order, not label blocks


def _direct(model: torch.nn.Module, bundle, index: np.ndarray, batch: int) -> float:
    """Accuracy (%) on test samples ``index`` in that order, batches of ``batch``, as the official ``evaluate``."""
    model.eval()
    correct = 0
    for s in range(0, len(index), batch):
        b = torch.as_tensor(index[s:s + batch])
        correct += int((model(bundle.inputs(bundle.test_x[b])).argmax(1) == bundle.test_y[b]).sum())
    return 100.0 * correct / len(index)


def test_a_fedlps_run_is_evaluated_client_by_client_with_its_kept_models(engine_cfg, federate, digits,
                                                                         digits_family, one_thread):
    """Every client is a row; a client that kept a model is evaluated with that model at its width, one that did
    not with the final global model, both with test-batch statistics; the table's run mean is the unweighted mean
    over the clients (the official report)."""
    res = federate(engine_cfg(rounds=6, warmup=2), "fedlps")
    kept = res.kept_models
    part, clients = digits.partition, digits.clients
    train = part[part["split"] == "train"]
    splits = {int(c): pa.own_test_split(digits.bundle.train_y.numpy()[train.loc[train["client_id"] == c,
                                                                                   "sample_index"].to_numpy()],
                                        digits.bundle.test_y.numpy(), digits.seed, int(c))
              for c in clients["client_id"]}
    glob = model_at(digits_family, 1.0, res.final_state, "batch")
    rows = pa.client_rows("digits", "fedlps", digits.seed, "completed", clients, splits, kept, glob, digits_family,
                          digits.bundle, 16)
    assert [r["client_id"] for r in rows] == clients["client_id"].tolist()
    assert {r["client_id"] for r in rows if r["model"] == "local"} == set(kept) and 0 < len(kept) < len(rows)
    for r in rows:
        cid = r["client_id"]
        g = _direct(batch_statistics(model_at(digits_family, 1.0, res.final_state, "per_width")), digits.bundle,
                    splits[cid], 16)
        assert r["global_acc_pct"] == pytest.approx(g, abs=1e-9) and r["n_test"] == len(splits[cid])
        if cid in kept:
            m = digits_family.build(kept[cid]["p"])
            m.load_state_dict(kept[cid]["state"])
            assert r["p_local"] == kept[cid]["p"]
            assert r["acc_pct"] == pytest.approx(_direct(batch_statistics(m), digits.bundle, splits[cid], 16), abs=1e-9)
        else:
            assert r["acc_pct"] == r["global_acc_pct"] and math.isnan(r["p_local"])
    assert any(r["acc_pct"] != r["global_acc_pct"] for r in rows if r["model"] == "local")
    df = pd.DataFrame(rows, columns=pa.COLUMNS)
    means = table.run_means(df)
    assert len(means) == 1 and means["local_models"].iloc[0] == len(kept)
    assert means["acc_pct"].iloc[0] == pytest.approx(np.mean([r["acc_pct"] for r in rows]))
    summary = table.summary_frame(pd.concat([df, df.assign(seed=digits.seed + 1)]))
    assert summary["seeds"].tolist() == [2]


def test_a_run_that_did_not_complete_has_its_clients_without_accuracies(digits, digits_family):
    rows = pa.client_rows("digits", "fedlps", 1, "diverged", digits.clients, {int(c): np.arange(4)
                          for c in digits.clients["client_id"]}, {}, None, digits_family, digits.bundle, 16)
    assert all(math.isnan(r["acc_pct"]) and math.isnan(r["global_acc_pct"]) for r in rows)
    df = pd.DataFrame(rows, columns=pa.COLUMNS)
    assert table.summary_frame(df).empty and "1 of 1 runs left out" in table.display(df)[-1][1]


def test_a_text_client_is_evaluated_on_the_data_stages_own_test_samples(digits, tmp_path):
    """Where the data stage gives clients test samples (Shakespeare's roles), those are the split, in order."""
    part = pd.DataFrame({"client_id": [0, 0, 1, 0, 1], "split": ["train", "test", "test", "test", "train"],
                         "sample_index": [4, 9, 2, 1, 5]})
    clients = pd.DataFrame({"client_id": [0, 1], "pmax": [1.0, 0.5]})
    run = RunInputs("digits", "fedlps", 42, {}, {}, {}, {})
    run.cache[("bundle", "digits")] = digits.bundle
    splits = pa._splits(run, part, clients)
    assert splits[0].tolist() == [9, 1] and splits[1].tolist() == [2]


def test_the_evaluation_refuses_a_run_without_the_data_stage_tables(tmp_path):
    files = {n: tmp_path / n for n in pa.RUN_FILES}
    run = RunInputs("digits", "fedlps", 42, files, {}, {}, {})
    with pytest.raises(ValueError, match="partition.parquet and clients.parquet"):
        pa.evaluate_run(run)
    with pytest.raises(ValueError, match="lacks local_models.pt"):
        pa.evaluate_run(RunInputs("digits", "fedlps", 42, {"final.pt": tmp_path / "final.pt"}, {}, {}, {}))
