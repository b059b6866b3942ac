"""Client partitions, capacities and ground-truth heterogeneity (paper Sections 3.1, 4.1, 4.4).

* :func:`dirichlet_partition` -- the seeded Dirichlet(alpha) label partition used
  for CIFAR-10 / EMNIST / digits (Section 4.1, alpha = 0.3).
* :func:`assign_capacities` -- each client's pmax from the capacity tiers; with the
  default counts 5/10/3/2 of 20 over {0.25, 0.5, 0.75, 1.0} the mean is exactly 0.525
  (Section 4.1) and Uniform's mean min(0.5, pmax) is 0.4375 ~ 0.44 (Table 3).
* :func:`tv_distance` -- the ground truth of Section 4.4: total-variation distance
  between a client's train label distribution and the global one.

Every random draw comes from its own stream of ``numpy.random.SeedSequence([seed,
stream])``, so partitions and capacities are independent and reproducible per seed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hasfl.errors import HasflError

STREAM_PARTITION = 1
STREAM_CAPACITY = 2


def rng_for(seed: int, stream: int) -> np.random.Generator:
    """The generator of one named random stream of a run seed."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))


class PartitionError(HasflError, RuntimeError):
    """The Dirichlet partition could not meet the minimum client size."""


def dirichlet_partition(
    labels: np.ndarray,
    n_clients: int,
    alpha: float,
    seed: int,
    *,
    min_size: int = 1,
    max_attempts: int = 1000,
) -> list[np.ndarray]:
    """Split sample indices over ``n_clients`` with Dirichlet(alpha) label proportions.

    For every class k a proportion vector q_k ~ Dir(alpha * 1_N) is drawn and the
    (shuffled) indices of class k are cut into N consecutive pieces of sizes
    proportional to q_k. If any client ends with fewer than ``min_size`` samples the
    whole draw is repeated, at most ``max_attempts`` times.

    Returns one sorted int64 index array per client; together they cover every
    index exactly once.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {labels.shape}")
    if n_clients * min_size > len(labels):
        raise PartitionError(
            f"cannot give {n_clients} clients at least {min_size} samples each from {len(labels)} samples "
            "(lower partition.min_client_size or federation.clients)")
    rng = rng_for(seed, STREAM_PARTITION)
    classes = np.unique(labels)
    by_class = [np.flatnonzero(labels == k) for k in classes]
    sizes: np.ndarray = np.zeros(n_clients, dtype=np.int64)
    for _ in range(max_attempts):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for idx in by_class:
            idx = rng.permutation(idx)
            q = rng.dirichlet(np.full(n_clients, alpha))
            cuts = (np.cumsum(q)[:-1] * len(idx)).astype(np.int64)
            for client, piece in enumerate(np.split(idx, cuts)):
                parts[client].append(piece)
        sizes = np.array([sum(len(p) for p in ps) for ps in parts])
        if sizes.min() >= min_size:
            return [np.sort(np.concatenate(ps)).astype(np.int64) for ps in parts]
    raise PartitionError(
        f"Dirichlet(alpha={alpha}) partition of {len(labels)} samples over {n_clients} clients gave a client "
        f"with fewer than partition.min_client_size={min_size} samples in all {max_attempts} attempts "
        f"(smallest in the last attempt: {int(sizes.min())}); raise partition.alpha or partition.max_attempts, "
        "or lower partition.min_client_size")


def assign_capacities(tiers: Sequence[float], counts: Sequence[int], seed: int, *, shuffle: bool = True) -> np.ndarray:
    """pmax per client: ``counts[j]`` clients get ``tiers[j]``, shuffled per seed if asked."""
    if len(tiers) != len(counts):
        raise ValueError(f"{len(counts)} capacity counts for {len(tiers)} tiers")
    pmax = np.repeat(np.asarray(tiers, dtype=np.float64), np.asarray(counts, dtype=np.int64))
    if shuffle:
        pmax = rng_for(seed, STREAM_CAPACITY).permutation(pmax)
    return pmax


def distribution(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Empirical distribution of integer ``labels`` over ``num_classes`` classes."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes).astype(np.float64)
    total = counts.sum()
    if total == 0:
        raise ValueError("distribution of an empty label set")
    return counts / total


def tv_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Total-variation distance 0.5 * sum |p - q| between two distributions (in [0, 1])."""
    return float(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum())
