"""FedLPS's learned pruning ratio (Xue et al. 2025; official code ``sunnyxuejj/FedLPS-main`` @b499bbb, read in
docs/peers/fedlps-official.md): each client's bandit over ratio intervals ("P-UCBV") and the reward it learns from.

The ratio choice is the part of FedLPS whose output Section 4.7 asks about (does a learned ratio track capacity,
data, or both): the participation ledger's ``p`` is each participant's ``min(capacity, action)`` per round. Around it
the method runs in this project's protocol (docs/decisions.md "Who inherits the confound"):

* the sub-model of rate p is the prefix slice of width p (Algorithm 2), where the official code masks the output
  channels of a full-width model by learned scores, which in practice keep its first k - 1 channels
  (docs/peers/fedlps-official.md section 4, verified there); no personal layers (the official "personal" classifier
  is averaged with the rest, section 5);
* the server (:class:`FedLPSServer`) takes the official unweighted mean over every participant, a coordinate a
  participant does not hold counting as its unchanged global value (``agg/avg.py:9-24``), plus ``noise`` x N(0, 1)
  per coordinate (``--dp``, 0.001); it holds each client's bandit and accuracy record across rounds, as the official
  client objects do, so they are checkpointed with it;
* the client (:class:`FedLPSClient`) counts its training accuracy over its local batches
  (``Hetero_Client.py:249-256, 286-287``) and credits its reward after training, with train FLOPs = batches x 3 x
  2 x the sub-model's per-sample MACs (``count_training_flops``: 3 x multiply-add FLOPs, biases and the mask's
  FLOPs left out) and its float32 parameters as the upload;
* each client keeps its last local model trained at a rate above 0.25 (``Hetero_Client.py:258-267``:
  ``final_parameters`` after each local epoch while ``rate > mask_rate_list[2]``), the server holding it
  (:meth:`FedLPSServer.kept_models`, the run's ``local_models.pt``) for the authors' evaluation of each client on
  its own test split (``FedLPS.py:242-261``; :mod:`hasfl.analysis.per_run.personal_accuracy`);
* capacities are the data stage's pmax for the whole run (the official code redraws a level every round, its
  ``dynamic`` split mode); the reward's constants follow the dataset's family (:data:`DATASET_FAMILY`).

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

Randomness: the official draws from Python's unseeded ``random``, one stream for every client; here from the run's
policy generator (checkpointed by the engine), in the order of S(t): ``random()`` for the exploration flag and the
action, ``integers`` for the random arm, in the official order. The server's noise has its own torch generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hasfl.fl.aggregation import CoordinateAggregator
from hasfl.fl.client import LocalSGD, OptimConfig
from hasfl.fl.methods import Method, MethodContext
from hasfl.fl.policies import AllocationPolicy
from hasfl.fl.server import ServerStep
from hasfl.models.family import ModelFamily
from hasfl.models.slicing import SliceRule, scatter_add_

__all__ = ["ARMS", "DATASET_CONSTANTS", "DATASET_FAMILY", "KEEP_ABOVE", "Draws", "FedLPSClient", "FedLPSServer",
           "LearnedRatioPolicy", "RatioBandit", "arm_of_rate", "fedlps", "reward", "utility"]

#: The initial arms' bounds (``np.linspace(0.5, 1, 6)``, ``Hetero_Client.py:84-85``).
ARMS = tuple(float(a) for a in np.linspace(0.5, 1, 6))

#: The reward's (C, B) per official dataset family (``FedLPS.py:207-220``): compute and upload capacities.
DATASET_CONSTANTS: Mapping[str, tuple[float, float]] = {"cifar": (672000.0, 14.9), "reddit": (67200.0, 14.9),
                                                      "mnist": (2788.128, 1.0)}


#: Which official constants a dataset of this project takes: the MNIST family's for the small image sets, CIFAR's for
#: CIFAR-10, Reddit's (next-word prediction) for Shakespeare's next character.
DATASET_FAMILY: Mapping[str, str] = {"digits": "mnist", "fashion_mnist": "mnist", "emnist": "mnist",
                                     "cifar10": "cifar", "shakespeare": "reddit"}

#: The numpy stream of a run seed the server's noise is drawn from (beside hasfl.fl.sampling's and cyclic's)
STREAM_NOISE = 9

#: A client keeps its local model when it trained at a rate above this one (``Hetero_Client.py:258``: the official
#: capacity levels' third, ``mask_rate_list[2]`` = 1/4).
KEEP_ABOVE = 0.25


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


class AllParticipants(CoordinateAggregator):
    """The official mean (``agg/avg.py:9-24``): every participant weighs 1 at every coordinate, one it does not hold
    adding a zero update (its unchanged global value)."""

    def add(self, delta: Mapping[str, Tensor], rules: Mapping[str, SliceRule], n_samples: float,
            skip: Iterable[str] = ()) -> None:
        left_out = set(skip)
        for k in self.keys:
            if k in left_out:
                continue
            scatter_add_(self._sum[k], rules[k], delta[k], alpha=1.0)
            self._weight[k].add_(1.0)


class FedLPSServer(ServerStep):
    """The unweighted mean over every participant plus ``noise`` x N(0, 1) per coordinate, and every client's bandit
    and accuracy record across rounds (module docstring)."""

    def __init__(self, rounds: int, clients: int, per_round: int, seed: int, noise: float) -> None:
        self.rounds, self.clients, self.per_round, self.noise = int(rounds), int(clients), int(per_round), float(noise)
        self.bandits: dict[int, RatioBandit] = {}
        self.accuracies: dict[int, list[float]] = {}
        self.kept: dict[int, dict[str, Any]] = {}
        self.generator = torch.Generator().manual_seed(int(np.random.SeedSequence([int(seed), STREAM_NOISE])
                                                           .generate_state(1)[0]))

    def bandit(self, client: int) -> RatioBandit:
        if client not in self.bandits:
            self.bandits[client] = RatioBandit.new(self.rounds, self.clients, self.per_round)
        return self.bandits[client]

    def accuracy_record(self, client: int) -> list[float]:
        """The client's training accuracies, starting with the official record's 0 (``Hetero_Client.py:95``)."""
        return self.accuracies.setdefault(client, [0.0])

    def keep(self, client: int, rate: float, model: nn.Module) -> None:
        """The client's local model after training at ``rate`` replaces the one it kept (module docstring)."""
        self.kept[client] = {"p": float(rate),
                             "state": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}}

    def kept_models(self) -> dict[int, dict[str, Any]]:
        return dict(self.kept)

    def aggregator(self, global_state: Mapping[str, Tensor], keys: list[str]) -> CoordinateAggregator:
        return AllParticipants(global_state, keys)

    def client_weight(self, n_samples: int) -> float:
        return 1.0

    def step(self, global_state: dict[str, Tensor], delta_bar: Mapping[str, Tensor], keys: list[str]) -> None:
        super().step(global_state, delta_bar, keys)
        if self.noise:
            with torch.no_grad():
                for k in keys:
                    draw = torch.randn(global_state[k].shape, generator=self.generator, dtype=torch.float32)
                    global_state[k].add_(draw.to(global_state[k].device, global_state[k].dtype), alpha=self.noise)

    def state(self) -> dict[str, Any]:
        return {"bandits": {str(i): b.state() for i, b in sorted(self.bandits.items())},
                "accuracies": {str(i): list(a) for i, a in sorted(self.accuracies.items())},
                "kept": {str(i): k for i, k in sorted(self.kept.items())},
                "generator": self.generator.get_state().clone()}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.bandits = {int(i): RatioBandit.from_state(b) for i, b in state["bandits"].items()}
        self.accuracies = {int(i): [float(x) for x in a] for i, a in state["accuracies"].items()}
        self.kept = {int(i): {"p": float(k["p"]), "state": dict(k["state"])} for i, k in state["kept"].items()}
        self.generator.set_state(state["generator"])


class LearnedRatioPolicy(AllocationPolicy):
    """p_i(t) = min(pmax_i, the client's bandit action) (``FedLPS.py:192-194``), drawn in the order of S(t); ``p``
    keeps each client's latest learned ratio (its capacity until it is first sampled), so a run's final allocation
    (``p_final``, Table 10's r(p, TV | pmax)) is what the bandits learned."""

    def __init__(self, pmax: np.ndarray, server: FedLPSServer) -> None:
        self.server = server
        super().__init__(pmax)

    def widths(self, t: int, participants: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.array([min(float(self.pmax[i]), self.server.bandit(int(i)).choose(rng)) for i in participants],
                       dtype=np.float64)
        self.p[participants] = out
        return out.copy()


class FedLPSClient(LocalSGD):
    """Local SGD that counts its training accuracy and credits the client's bandit with the reward after training
    (module docstring)."""

    def __init__(self, optim: OptimConfig, inputs_fn: Any, server: FedLPSServer, pmax: np.ndarray,
                 family: ModelFamily, constants: tuple[float, float]) -> None:
        super().__init__(optim, inputs_fn)
        self.server, self.pmax, self.family, self.constants = server, pmax, family, constants
        self._correct = self._total = 0
        self._rates = (1.0, 1.0)

    def begin_client(self, client: int, model: nn.Module, p: float, p_trained: float) -> None:
        self._correct = self._total = 0
        self._rates = (float(p), float(p_trained))

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        out = model(x)
        with torch.no_grad():
            self._correct += int((out.argmax(1) == y).sum())
            self._total += int(y.numel())
        return F.cross_entropy(out, y)

    def end_client(self, client: int, model: nn.Module, steps: int, lr: float) -> None:
        p, p_trained = self._rates
        record = self.server.accuracy_record(client)
        record.append(self._correct / self._total if self._total else 0.0)
        cost = self.family.cost(p_trained)
        value = reward(record, steps * 3.0 * 2.0 * float(cost.macs), 32.0 * float(cost.params),
                       float(self.pmax[client]), self.constants)
        self.server.bandit(client).record(p, value)
        if p_trained > KEEP_ABOVE:
            self.server.keep(client, p_trained, model)


def fedlps(ctx: MethodContext) -> Method:
    """FedLPS in this project's protocol (module docstring): the learned ratio, prefix sub-models, the official mean
    with ``method_params.fedlps.noise``."""
    fed = ctx.run_cfg["federation"]
    dataset = str(ctx.run_cfg["dataset"])
    if dataset not in DATASET_FAMILY:
        raise ValueError(f"fedlps: no reward constants for dataset '{dataset}'; expected one of "
                         f"{', '.join(DATASET_FAMILY)}")
    server = FedLPSServer(int(fed["rounds"]), int(fed["clients"]), int(fed["clients_per_round"]),
                          int(ctx.run_cfg["seed"]), float(ctx.params["noise"]))
    client = FedLPSClient(ctx.optim, ctx.inputs, server, ctx.pmax, ctx.family,
                          DATASET_CONSTANTS[DATASET_FAMILY[dataset]])
    return Method(LearnedRatioPolicy(ctx.pmax, server), client, server=server)
