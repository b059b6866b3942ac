"""FedLPS's learned pruning ratio (Xue et al. 2025; official code ``sunnyxuejj/FedLPS-main`` @b499bbb, read in
docs/peers/fedlps-official.md): each client's bandit over ratio intervals ("P-UCBV") and the reward it learns from.

This module holds the ratio choice only, the part of FedLPS whose output Section 4.7 asks about (does a learned
ratio track capacity, data, or both); the method's builder and its registry entry come with its client (the channel
masks, the personal layers) and server (the unweighted mean with noise), docs/peers/fedlps-official.md sections 4-6.

The rule, as the official code runs it (``Hetero_Client.py:84-89, 117-151``; ``FedLPS.py:30-31, 192-194, 207-227``):

* a client starts with the five arms ``[0.5, 0.6], ..., [0.9, 1.0]`` (``linspace(0.5, 1, 6)``), a reward list
  ``[0.0]`` per arm keyed by its lower bound (in insertion order), and a pull count of 1 per arm;
* each time the client is sampled, with T = rounds / (clients x fraction) and phi = T / K^2 (K arms now), every
  reward list j (in the dict's insertion order, which splits break away from the arms' order) scores
  ``mean + sqrt(0.5 (|var| + 2) ln(phi T es0) / (4 pulls[j]))`` where the log is positive, else its mean; with
  probability ep a uniform random arm is taken, else the arg max; the action is uniform in the arm, which splits at
  it (the right child keyed by the action, its rewards a copy of the parent's; both children inherit the pull count,
  the right one + 1); then es0 halves, m counts the calls and ep = 1 / m (so ep is 1 on the first two calls);
* the client trains at ``min(capacity rate, action)``;
* the reward is ``(U(acc) - U(best earlier acc)) / (3 flops / 1e6 / C / capacity rate + upload MB / B)`` with
  ``U(x) = 10 - 20 / (1 + exp(0.35 x))``, acc the client's training accuracy as a fraction (its record starting at
  0), C and B the dataset's constants (CIFAR: 672000 and 14.9; MNIST: 2788.128 and 1);
* it is appended to the arm found by the official scan: the arm before the first whose lower bound exceeds the
  trained rate, the first arm when none does, and the last one (index -1) when the first already does.

Randomness: the official draws from Python's unseeded ``random``; here from a seeded numpy generator per client,
``random()`` for the exploration flag and the action, ``integers`` for the random arm, in the official order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["ARMS", "DATASET_CONSTANTS", "Draws", "RatioBandit", "arm_of_rate", "reward", "utility"]

#: The initial arms' bounds (``np.linspace(0.5, 1, 6)``, ``Hetero_Client.py:84-85``).
ARMS = tuple(float(a) for a in np.linspace(0.5, 1, 6))

#: The reward's (C, B) per official dataset family (``FedLPS.py:207-220``): compute and upload capacities.
DATASET_CONSTANTS: Mapping[str, tuple[float, float]] = {"cifar": (672000.0, 14.9), "reddit": (67200.0, 14.9),
                                                      "mnist": (2788.128, 1.0)}


def utility(x: float) -> float:
    """``U(x) = 10 - 20 / (1 + exp(0.35 x))`` (``FedLPS.py:30-31``)."""
    return 10.0 - 20.0 / (1.0 + math.exp(0.35 * x))


def reward(accuracies: list[float], train_flops: float, upload_bits: float, capacity_rate: float,
           constants: tuple[float, float]) -> float:
    """The bandit's reward after a client's training (``FedLPS.py:207-220``): the gain in U of its latest training
    accuracy over the best earlier one (``accuracies``, the record starting with 0), over the modelled compute time
    (3 x ``train_flops``, charged at ``capacity_rate``) plus upload time (``upload_bits``)."""
    if len(accuracies) < 2:
        raise ValueError("fedlps: the reward needs the record's initial 0 and the latest accuracy")
    c, b = constants
    gain = utility(accuracies[-1]) - utility(max(accuracies[:-1]))
    return gain / (3.0 * train_flops / 1e6 / c / capacity_rate + upload_bits / 8.0 / 2.0**20 / b)


def arm_of_rate(arms: list[list[float]], rate: float) -> int:
    """The arm the official scan credits a reward of trained ``rate`` to (``FedLPS.py:222-226``): the one before the
    first whose lower bound exceeds ``rate``; 0 when none does; -1 (the last arm) when the first already does."""
    for i, (low, _) in enumerate(arms):
        if low > rate:
            return i - 1
    return 0


class Draws(Protocol):
    """The random draws of the bandit (a ``numpy.random.Generator``)."""

    def random(self) -> float: ...

    def integers(self, low: int, high: int) -> Any: ...


@dataclass
class RatioBandit:
    """One client's P-UCBV state (module docstring); :meth:`state` / :meth:`load_state` checkpoint it."""

    horizon: float  # T = rounds / (clients x fraction)
    arms: list[list[float]]
    rewards: dict[float, list[float]]  # by lower bound, in insertion order
    pulls: list[float]
    calls: int = 0
    es0: float = 1.0
    ep: float = 1.0

    @classmethod
    def new(cls, rounds: int, clients: int, per_round: int) -> RatioBandit:
        arms = [[ARMS[i], ARMS[i + 1]] for i in range(len(ARMS) - 1)]
        return cls(horizon=rounds / (clients * (per_round / clients)), arms=arms,
                   rewards={low: [0.0] for low, _ in arms}, pulls=[1.0] * len(arms))

    def scores(self) -> list[float]:
        """Each reward list's score, in the dict's insertion order (``Hetero_Client.py:124-132``)."""
        phi = self.horizon / len(self.arms) ** 2
        log = math.log(phi * self.horizon * self.es0)
        out = []
        for j, record in enumerate(self.rewards.values()):
            r, v = float(np.mean(record)), float(np.var(record))
            out.append(r + math.sqrt(0.5 * (abs(v) + 2.0) * log / (4.0 * self.pulls[j])) if log > 0 else r)
        return out

    def choose(self, draws: Draws) -> float:
        """The next action (``Hetero_Client.py:117-151``): an arm by the exploration flag or the scores, a uniform
        draw in it, and the arm split there."""
        if self.calls == 0:
            self.es0, self.ep = 1.0, 1.0
        scores = self.scores()
        if draws.random() < self.ep:
            k = int(draws.integers(0, len(self.arms)))
        else:
            k = int(np.argmax(np.array(scores)))
        low, high = self.arms[k]
        action = low + (high - low) * draws.random()  # random.uniform(low, high)
        self.arms[k] = [low, action]
        self.arms.insert(k + 1, [action, high])
        self.rewards[action] = list(self.rewards[self.arms[k][0]])
        self.pulls.insert(k, self.pulls[k])
        self.pulls[k + 1] += 1.0
        self.calls += 1
        self.es0 /= 2.0
        self.ep = 1.0 / self.calls
        return action

    def record(self, rate: float, value: float) -> None:
        """Append a reward for a client that trained at ``rate`` (:func:`arm_of_rate`)."""
        self.rewards[self.arms[arm_of_rate(self.arms, rate)][0]].append(float(value))

    def state(self) -> dict[str, Any]:
        """A JSON-able copy (reward keys as their float's repr, in insertion order)."""
        return {"horizon": self.horizon, "arms": [list(a) for a in self.arms],
                "rewards": [[k, list(v)] for k, v in self.rewards.items()], "pulls": list(self.pulls),
                "calls": self.calls, "es0": self.es0, "ep": self.ep}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> RatioBandit:
        return cls(horizon=float(state["horizon"]), arms=[[float(a), float(b)] for a, b in state["arms"]],
                   rewards={float(k): [float(x) for x in v] for k, v in state["rewards"]},
                   pulls=[float(p) for p in state["pulls"]], calls=int(state["calls"]), es0=float(state["es0"]),
                   ep=float(state["ep"]))
