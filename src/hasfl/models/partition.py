"""A partition of a model's parameter coordinates into K blocks, drawn from a seed before training: the sub-models of
Deng, Qiao and Mahdavi's shuffled sub-model training (arXiv 2511.06132; the method :mod:`hasfl.fl.methods.shuffled`).
One rule read by the training, which deals the blocks, and by the analysis, which counts their coverage (Table 4c)
and evaluates them (the sub-model accuracy).

Per parameter tensor (``named_parameters()`` of the full model, in order), a permutation of its coordinates (numpy
stream :data:`STREAM` of the seed, the tensor's place) hands them out in turn, the j-th to block ``j mod K``: each
block holds ``n // K`` or ``n // K + 1`` of a tensor's ``n`` coordinates, the first ``n mod K`` blocks the larger
count (:func:`block_sizes`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from hasfl.models.family import ModelFamily

__all__ = ["STREAM", "block_sizes", "blocks", "parameter_shapes"]

#: The numpy stream of a run seed the partition comes from (beside hasfl.fl.sampling's 3-7, FedEcover's 8, FedLPS's
#: 9 and the shuffle's 11).
STREAM = 10


def parameter_shapes(family: ModelFamily) -> dict[str, tuple[int, ...]]:
    """The shapes of the full model's parameters, in ``named_parameters()`` order (built without drawing from torch's
    global generator)."""
    with torch.random.fork_rng(devices=[]):
        return {n: tuple(q.shape) for n, q in family.build(1.0).named_parameters()}


def blocks(shapes: Mapping[str, tuple[int, ...]], partitions: int, seed: int) -> dict[str, Tensor]:
    """The block (0 .. K-1, ``partitions`` = K >= 1) of every coordinate of each parameter of ``shapes`` (module
    docstring)."""
    if partitions < 1:
        raise ValueError(f"a partition into {partitions} blocks; expected K >= 1")
    out: dict[str, Tensor] = {}
    for place, (name, shape) in enumerate(shapes.items()):
        n = int(np.prod(shape, dtype=np.int64))
        order = np.random.default_rng(np.random.SeedSequence([int(seed), STREAM, place])).permutation(n)
        block = np.empty(n, dtype=np.int64)
        block[order] = np.arange(n, dtype=np.int64) % int(partitions)
        out[name] = torch.from_numpy(block).reshape(shape)
    return out


def block_sizes(numel: int, partitions: int) -> np.ndarray:
    """How many of a tensor's ``numel`` coordinates each of the K blocks holds (``numel // K`` each, one more for the
    first ``numel mod K``): what :func:`blocks` deals, from K alone."""
    return np.array([numel // partitions + (k < numel % partitions) for k in range(partitions)], dtype=np.int64)
