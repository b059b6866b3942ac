"""Who takes part in which round, and in which order each client sees its data (Section 4.1).

Every stream is drawn from the seed alone (docs/decisions.md, "Client sampling"), so every
method of one seed sees the same participants in the same rounds and each client the same
mini-batch order in the same round: methods differ only in what they do with them.
"""

from __future__ import annotations

import numpy as np
import torch

from hasfl.data.partition import rng_for

__all__ = ["STREAM_LOCAL", "STREAM_POLICY", "STREAM_PROBE", "STREAM_REPORT", "STREAM_SAMPLING", "local_generator",
           "participant_schedule", "policy_rng", "report_rng", "stream_generator"]

# numpy streams of one seed (1 and 2 are the data stage's partition and capacities)
STREAM_SAMPLING = 3
STREAM_POLICY = 4
STREAM_LOCAL = 5
STREAM_PROBE = 6   # E2's mini-batches (hasfl.fl.probe)
STREAM_REPORT = 7  # E3's Laplace noise (hasfl.fl.estimator.reported_tv)
# 8: FedEcover's unit draws (hasfl.models.cyclic.STREAM_WINDOWS: the analysis replays them without the engine)


def participant_schedule(seed: int, n_clients: int, per_round: int, rounds: int) -> list[np.ndarray]:
    """S(t) for every round (Algorithm 1 line 5); identical for every method of one seed."""
    rng = rng_for(seed, STREAM_SAMPLING)
    return [np.sort(rng.choice(n_clients, size=per_round, replace=False)) for _ in range(rounds)]


def policy_rng(seed: int) -> np.random.Generator:
    """The random stream of a method's allocation policy (FjORD's tiers, random-budget's draws)."""
    return rng_for(seed, STREAM_POLICY)


def report_rng(seed: int) -> np.random.Generator:
    """The random stream of E3's privacy noise (hasfl.fl.estimator.reported_tv)."""
    return rng_for(seed, STREAM_REPORT)


def local_generator(seed: int, t: int, client: int) -> torch.Generator:
    """Mini-batch order of one client in one round, independent of the method."""
    return stream_generator(seed, STREAM_LOCAL, t, client)


def stream_generator(seed: int, stream: int, *keys: int) -> torch.Generator:
    """A torch generator of stream ``stream`` of ``seed`` for ``keys`` (e.g. round, client)."""
    state = np.random.SeedSequence([seed, stream, *keys]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))
