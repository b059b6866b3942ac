"""Shuffled sub-model partitions (Deng, Qiao and Mahdavi 2025, "On the convergence and stability of distributed
sub-model training", arXiv 2511.06132, in the paper's reference list): coverage by construction.

What the authors' abstract fixes (their algorithm's text and code were not reachable from this project's machines;
docs/decisions.md "Who inherits the confound" says what is read and what is chosen): "the full model is partitioned
into several sub-models in advance, and the server shuffles those sub-models, sends each of them to clients at each
round, and by the end of local updating period, clients send back the updated sub-models, and server averages them".
Here, with ``K = method_params.shuffled.partitions``:

* **The partition** (:func:`hasfl.models.partition.blocks`), drawn once from the run's seed before round 0: every
  parameter coordinate of the full model (``named_parameters()``, batch norm's affine ones included: "the full
  model") belongs to exactly one of K blocks. Per parameter tensor, a permutation of its coordinates hands them out in
  turn, the j-th to block ``j mod K``, so each block holds about 1/K of every layer. A sub-model is a block of
  coordinates, not a set of units: a partition of each layer's units would leave the weights between two pieces in
  no sub-model past the first layer, and the guarantee the authors prove is for the parameter vector.
* **The shuffle** (:func:`deal`): each round t a fresh permutation of the K sub-models (stream :data:`STREAM_SHUFFLE`,
  t) is dealt to the participants in the order of S(t), one sub-model each, and a further permutation follows when
  the round has more participants than sub-models. With at least K participants every sub-model goes out every
  round: every coordinate is trained every round, whatever the capacities.
* **A participant** (:class:`ShuffledClient`) holds its sub-model only: its network is ``w * m_k`` (the other
  blocks' coordinates set to 0 before its first step), so the gradient is the sub-network's; its step moves the
  block's coordinates alone (their gradients alone enter clipping, weight decay and momentum) and it uploads the
  block's float32 values (the server knows the partition: no indices); its update outside the block is 0. Its
  forward pass is the dense full model's (Table 1's MACs of width 1: a coordinate block saves none), as FIARSE's
  masks.
* **The server** (:class:`HeldMean`) averages each coordinate over the participants whose sub-model holds it,
  weighted by n_i as Algorithm 1 line 18 does for every method (the abstract says "averages"); a coordinate no
  participant held keeps its value. Batch-norm running statistics are averaged over every participant.
* **Capacities do not enter**: the authors' sub-models are equal and assigned by the shuffle alone, so every
  participant, whatever its pmax, gets one block (allocated width 1, the whole model's forward pass; a share 1/K of
  the coordinates). The method is thus an equal-size control of Section 4.7's populations, not a capacity-sized one.

The participation ledger records a participant's sub-model as window ``partition/K`` (:data:`hasfl.registry.
PARTITION_WINDOW`) with ``window_shift`` = its block k; the blocks' sizes per tensor follow from K alone, so Table 4c
counts coverage from the ledger (:func:`hasfl.analysis.per_run.coverage_over_time.partition_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.fl.client import LocalSGD, OptimConfig
from hasfl.fl.methods import Method, MethodContext
from hasfl.fl.policies import FullModelPolicy
from hasfl.fl.server import ServerStep
from hasfl.models.cost import Cost
from hasfl.models.partition import blocks, parameter_shapes
from hasfl.models.slicing import PREFIX, Window
from hasfl.registry import PARTITION_WINDOW

__all__ = ["STREAM_SHUFFLE", "HeldMean", "PartitionHolding", "ShuffleDealer", "ShuffledClient", "deal", "shuffled"]

#: The numpy stream of a run seed the per-round shuffles come from (the partition's:
#: :data:`hasfl.models.partition.STREAM`)
STREAM_SHUFFLE = 11


def deal(seed: int, t: int, participants: int, partitions: int) -> list[int]:
    """The sub-model of each of round ``t``'s ``participants`` (in the order of S(t)): one fresh permutation of the K
    sub-models after another, dealt in turn."""
    k = _partitions(partitions)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), STREAM_SHUFFLE, int(t)]))
    deck: list[int] = []
    while len(deck) < participants:
        deck.extend(int(b) for b in rng.permutation(k))
    return deck[:participants]


def _partitions(partitions: Any) -> int:
    if isinstance(partitions, bool) or not isinstance(partitions, (int, np.integer)) or partitions < 1:
        raise ValueError(f"method_params.shuffled.partitions is {partitions!r}; expected an integer >= 1 (the number "
                         "of sub-models the model is partitioned into)")
    return int(partitions)


@dataclass(frozen=True)
class PartitionHolding:
    """What the participation ledger records of a participant (``kind`` / ``shift`` as a window's): its block of the K
    (window ``partition/K``, shift the block)."""

    block: int
    partitions: int

    @property
    def kind(self) -> str:
        return f"{PARTITION_WINDOW}/{self.partitions}"

    @property
    def shift(self) -> int:
        return self.block


class ShuffledClient(LocalSGD):
    """A participant holding one block of the partition (module docstring): the sub-network ``w * m_k`` trained, the
    other coordinates kept at their received values."""

    def __init__(self, optim: OptimConfig, inputs_fn: Any, blocks: Mapping[str, Tensor], partitions: int) -> None:
        super().__init__(optim, inputs_fn)
        self.blocks, self.partitions = dict(blocks), int(partitions)
        self.assigned: dict[int, int] = {}  # this round's sub-model per participant (ShuffleDealer)
        self.block = -1
        self.masks: dict[str, Tensor] = {}
        self._received: dict[str, Tensor] = {}
        self._numel = sum(int(b.numel()) for b in self.blocks.values())

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        """The participant receives its sub-model only: the other blocks' coordinates are 0 in its network."""
        if client not in self.assigned:
            raise ValueError(f"shuffled: client {client} trains without a dealt sub-model (the dealer runs first)")
        self.block = self.assigned[client]
        params = dict(model.named_parameters())
        if set(params) != set(self.blocks):
            raise ValueError("shuffled: the trained module is not the partitioned full model "
                             f"({sorted(set(params) ^ set(self.blocks))[:3]} differ)")
        with torch.no_grad():
            self.masks = {n: torch.empty_like(q, dtype=torch.bool).copy_(self.blocks[n].to(q.device) == self.block)
                          for n, q in params.items()}
            self._received = {n: q.detach().clone() for n, q in params.items()}
            for n, q in params.items():
                q.mul_(self.masks[n])

    def after_backward(self, model: nn.Module) -> None:
        """The step moves the block alone: the other coordinates' gradients are dropped before clipping, so weight
        decay and momentum (of a coordinate at 0 with no gradient) leave them at 0."""
        with torch.no_grad():
            for n, q in model.named_parameters():
                if q.grad is not None:
                    q.grad.mul_(self.masks[n])

    def end_client(self, client: int, model: nn.Module, steps: int, lr: float) -> None:
        """Back to the received values outside the block, so the participant's update there is 0 (the server's mean
        ignores it, and the estimators see no update where it held nothing)."""
        with torch.no_grad():
            for n, q in model.named_parameters():
                q.copy_(torch.where(self.masks[n], q, self._received[n]))
        self._received = {}

    def forward_macs(self, costs: Callable[[float], Cost], p: float, p_trained: float) -> float:
        """Dense forward MACs of the whole model: a coordinate block saves none."""
        return float(costs(1.0).macs)

    def upload_mb(self, costs: Callable[[float], Cost], p: float, p_trained: float) -> float:
        """One block's float32 values (about 1/K of the parameters; no indices, the server knows the partition)."""
        return self._numel / self.partitions * 4 / 1e6

    def held(self, window: Any) -> PartitionHolding:
        return PartitionHolding(self.block, self.partitions)


class ShuffleDealer:
    """The per-round shuffle (:func:`deal`) as the round loop's window sampler: it deals the round's sub-models to the
    client before anyone trains; every participant's module is the whole model. Nothing to checkpoint: a round's deal
    is a function of the seed and t."""

    def __init__(self, client: ShuffledClient, seed: int) -> None:
        self.client, self.seed = client, int(seed)

    def windows(self, t: int, participants: Sequence[int], trained: Sequence[float]) -> list[Window]:
        self.client.assigned = dict(zip(participants, deal(self.seed, t, len(participants), self.client.partitions),
                                        strict=True))
        return [PREFIX] * len(participants)

    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Stateless (class docstring)."""


class HeldMean(CoordinateAggregator):
    """Algorithm 1 line 18 with the participant's block as its mask: per coordinate the n_i-weighted mean over the
    participants whose sub-model holds it; entries that are no parameters (batch-norm statistics) over all."""

    def __init__(self, global_state: Mapping[str, Tensor], keys: list[str], client: ShuffledClient) -> None:
        super().__init__(global_state, keys)
        self.client = client

    def held(self, key: str, delta: Tensor) -> Tensor | None:
        mask = self.client.masks.get(key)
        return None if mask is None else mask.to(torch.float32)


class ShuffledServer(ServerStep):
    """The block-masked mean (:class:`HeldMean`), line 19's step."""

    def __init__(self, client: ShuffledClient) -> None:
        self.client = client

    def aggregator(self, global_state: Mapping[str, Tensor], keys: list[str]) -> CoordinateAggregator:
        return HeldMean(global_state, keys, self.client)


def shuffled(ctx: MethodContext) -> Method:
    """Deng et al.'s shuffled sub-model partitions (module docstring): K blocks of coordinates fixed from the seed,
    dealt to the participants by a fresh shuffle each round, averaged over their holders."""
    partitions = _partitions(ctx.params.get("partitions"))
    client = ShuffledClient(ctx.optim, ctx.inputs, blocks(parameter_shapes(ctx.family), partitions,
                                                          int(ctx.run_cfg["seed"])), partitions)
    return Method(FullModelPolicy(ctx.pmax), client, server=ShuffledServer(client),
                  sampler=ShuffleDealer(client, int(ctx.run_cfg["seed"])))
