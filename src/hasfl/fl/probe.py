"""E2, the probe estimate: Eq. 4 on updates of one fixed width for every client.

At each adaptation round every participant also computes a *probe update*: from the
current global weights w(t), at the same width for all clients (config
``estimators.probe.width``, default the smallest capacity tier), on a fixed, seeded number
of mini-batches (``estimators.probe.batches``) with the shared local optimiser. Eq. 4 is
applied to the probe updates against their own sample-weighted mean, and Eq. 5 smooths them
(same beta, same T_norm normalisation as E0). Width is then identical for every client by
construction, so a difference between probes cannot come from capacity. The probe changes
nothing in training: its modules are reloaded from w(t) before any client trains, and its
mini-batches come from their own random stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.fl.client import ClientData, LocalSGD, OptimConfig
from hasfl.fl.estimator import divergence
from hasfl.fl.runtime import SubModels
from hasfl.fl.sampling import STREAM_PROBE, stream_generator
from hasfl.models.slicing import PREFIX, Window

__all__ = ["Probe"]


class Probe:
    """Computes the probe divergences of one adaptation round (E2's H_hat)."""

    def __init__(self, width: float, batches: int, optim: OptimConfig, inputs: object, submodels: SubModels,
                 epsilon: float, seed: int) -> None:
        self.width, self.batches, self.seed, self.epsilon = float(width), int(batches), int(seed), float(epsilon)
        self.sgd = LocalSGD(replace(optim, local_epochs=1), inputs)
        self.submodels = submodels
        self.samples = 0  # samples the probes of the last round trained on (for the cost record)
        self.samples_of: dict[int, int] = {}  # the same per participant

    def paid(self, client: int, local_samples: float, costs: Any) -> tuple[float, float]:
        """What the last round's probe cost ``client`` when its method allocates by E2: the upload of its
        probe update (MB) and its forward MACs spread over the ``local_samples`` of its local training (so
        that they add to the round's per-sample ``train_mmacs``)."""
        c = costs(self.width)
        return float(c.upload_mb), float(c.macs) * self.samples_of.get(client, 0) / max(1.0, float(local_samples))

    def _subset(self, data: ClientData, t: int) -> ClientData:
        g = stream_generator(self.seed, STREAM_PROBE, t, data.client_id)
        n = min(data.n, self.batches * self.sgd.optim.batch_size)
        pick = torch.randperm(data.n, generator=g)[:n].to(data.index.device)
        return ClientData(data.client_id, data.index[pick], data.x, data.y)

    def divergences(self, t: int, participants: Sequence[int], w: Mapping[str, Tensor], data: Mapping[int, ClientData],
                    n_train: np.ndarray, lr: float, float_keys: list[str], param_keys: list[str],
                    window: Window = PREFIX) -> np.ndarray:
        """Eq. 4 of each participant's probe update against the probes' sample-weighted mean; the probes hold the
        units of the round's ``window`` (the method's), as its clients' sub-models do."""
        agg = CoordinateAggregator(w, float_keys)
        deltas = {}
        self.samples, self.samples_of = 0, {}
        with torch.random.fork_rng(devices=[]):  # building a probe module draws no number of the run
            for i in participants:
                module, rules = self.submodels.extract(self.width, w, window)
                subset = self._subset(data[i], t)
                self.sgd.train(module, subset, lr, stream_generator(self.seed, STREAM_PROBE, t, i, 1))
                deltas[i] = (SubModels.delta(module, rules, w, float_keys), rules)
                agg.add(deltas[i][0], rules, float(n_train[i]))
                self.samples += subset.n
                self.samples_of[i] = subset.n
        bar = agg.mean()
        return np.array([divergence(deltas[i][0], bar, deltas[i][1], param_keys, self.epsilon) for i in participants])
