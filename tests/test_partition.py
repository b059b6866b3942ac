"""Dirichlet partition, capacities and TV ground truth (issue 2, section 4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hasfl.data.base import DatasetBundle
from hasfl.data.partition import PartitionError, assign_capacities, dirichlet_partition, distribution, tv_distance
from hasfl.data.stage import build_tables

LABELS = np.random.default_rng(0).integers(0, 10, size=2000)


def test_partition_deterministic_per_seed():
    a = dirichlet_partition(LABELS, 20, 0.3, 42, min_size=10)
    b = dirichlet_partition(LABELS, 20, 0.3, 42, min_size=10)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_partition_differs_across_seeds():
    a = dirichlet_partition(LABELS, 20, 0.3, 42, min_size=10)
    b = dirichlet_partition(LABELS, 20, 0.3, 43, min_size=10)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_partition_covers_dataset_exactly_once():
    parts = dirichlet_partition(LABELS, 20, 0.3, 7, min_size=10)
    assert sum(len(p) for p in parts) == len(LABELS)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(LABELS)))
    assert min(len(p) for p in parts) >= 10


def test_small_alpha_is_more_skewed_than_large():
    glob = distribution(LABELS, 10)
    def mean_tv(alpha):
        parts = dirichlet_partition(LABELS, 20, alpha, 3, min_size=1)
        return np.mean([tv_distance(distribution(LABELS[p], 10), glob) for p in parts])
    assert mean_tv(0.1) > mean_tv(100.0) + 0.3


def test_partition_fails_clearly_after_bounded_attempts():
    with pytest.raises(PartitionError, match="min_client_size=90 .* in all 3 attempts"):
        dirichlet_partition(LABELS, 20, 0.05, 1, min_size=90, max_attempts=3)
    with pytest.raises(PartitionError, match="cannot give 20 clients at least 500"):
        dirichlet_partition(LABELS, 20, 0.3, 1, min_size=500)


def test_capacity_counts_and_mean():
    pmax = assign_capacities([0.25, 0.5, 0.75, 1.0], [5, 10, 3, 2], seed=42)
    values, counts = np.unique(pmax, return_counts=True)
    assert values.tolist() == [0.25, 0.5, 0.75, 1.0] and counts.tolist() == [5, 10, 3, 2]
    assert pmax.mean() == pytest.approx(0.525)
    assert np.minimum(0.5, pmax).mean() == pytest.approx(0.4375)  # Uniform's avg p, Table 3: 0.44
    other = assign_capacities([0.25, 0.5, 0.75, 1.0], [5, 10, 3, 2], seed=43)
    assert not np.array_equal(pmax, other)
    assert np.array_equal(pmax, assign_capacities([0.25, 0.5, 0.75, 1.0], [5, 10, 3, 2], seed=42))
    unshuffled = assign_capacities([0.25, 0.5, 0.75, 1.0], [5, 10, 3, 2], seed=42, shuffle=False)
    assert unshuffled.tolist() == sorted(unshuffled.tolist())


def test_tv_distance_known_values():
    assert tv_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == 1.0
    assert tv_distance(np.array([0.5, 0.5]), np.array([0.5, 0.5])) == 0.0
    assert tv_distance(np.array([0.7, 0.2, 0.1]), np.array([0.5, 0.25, 0.25])) == pytest.approx(0.2)


def _bundle(labels: np.ndarray) -> DatasetBundle:
    n = len(labels)
    return DatasetBundle(name="toy", task="image", train_x=torch.zeros(n, 1, 2, 2, dtype=torch.uint8),
                         train_y=torch.from_numpy(labels).long(), test_x=torch.zeros(5, 1, 2, 2, dtype=torch.uint8),
                         test_y=torch.zeros(5, dtype=torch.long), num_classes=10, input_shape=(1, 2, 2))


DATA_CFG = {"clients": 20, "capacity": {"tiers": [0.25, 0.5, 0.75, 1.0], "counts": [5, 10, 3, 2], "shuffle": True},
            "partition": {"alpha": 0.3, "min_client_size": 10, "max_attempts": 100}}


def test_client_table_tv_matches_direct_computation():
    partition, clients = build_tables(_bundle(LABELS), DATA_CFG, seed=42)
    assert clients["n_train"].sum() == len(LABELS)
    assert ((clients["tv"] >= 0) & (clients["tv"] <= 1)).all()
    glob = np.bincount(LABELS, minlength=10) / len(LABELS)
    for c in range(20):
        idx = partition.query("client_id == @c and split == 'train'")["sample_index"].to_numpy()
        local = np.bincount(LABELS[idx], minlength=10) / len(idx)
        assert clients.loc[c, "tv"] == pytest.approx(0.5 * np.abs(local - glob).sum(), abs=1e-12)
        assert clients.loc[c, "n_train"] == len(idx)
    assert sorted(clients["pmax"].tolist()) == sorted([0.25] * 5 + [0.5] * 10 + [0.75] * 3 + [1.0] * 2)
    assert list(clients.columns) == ["client_id", "pmax", "n_train", "n_test", "tv"]
    assert list(partition.columns) == ["client_id", "split", "sample_index"]
