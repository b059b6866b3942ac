"""The server's step (Algorithm 1 line 19) and the method state that lives on the server.

:class:`ServerStep` applies the aggregated update, w(t+1) = w(t) + Delta_bar(t), and has no
state: every method but SCAFFOLD uses it. :class:`ScaffoldServer` owns SCAFFOLD's control
variates (Karimireddy et al. 2020): the server variate c, and, as a simulation keeps every
client's state on one machine, each client's c_i. Its client half
(:class:`hasfl.fl.client.ScaffoldClient`) reads them before local training and hands back
the new c_i after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from hasfl.fl.aggregation import CoordinateAggregator

__all__ = ["ScaffoldServer", "ServerStep"]


class ServerStep:
    """Algorithm 1 line 19: w <- w + Delta_bar. No state."""

    def begin_round(self) -> None:
        """Called once per round before the participants train."""

    def aggregator(self, global_state: Mapping[str, Tensor], keys: list[str]) -> CoordinateAggregator:
        """The round's sums of Algorithm 1 lines 17-18: the coordinate-wise mean weighted by :meth:`client_weight`
        over the participants holding each coordinate (a method that averages otherwise returns its own)."""
        return CoordinateAggregator(global_state, keys)

    def client_weight(self, n_samples: int) -> float:
        """Weight of a participant's update in the coordinate-wise mean (Algorithm 1 line 18: n_i)."""
        return float(n_samples)

    def step(self, global_state: dict[str, Tensor], delta_bar: Mapping[str, Tensor], keys: list[str]) -> None:
        """Apply the aggregated update to the global state (in place)."""
        with torch.no_grad():
            for k in keys:
                global_state[k].add_(delta_bar[k], alpha=self.global_lr())

    def global_lr(self) -> float:
        """Step size of the server update (1 for Algorithm 1)."""
        return 1.0

    def kept_models(self) -> dict[int, dict[str, Any]]:
        """The local model each client keeps for its authors' evaluation (a personalized method's: client id ->
        ``{"p": its trained width, "state": the module's state_dict}``), written to the run's ``local_models.pt``;
        none here."""
        return {}

    def state(self) -> dict[str, Any]:
        """Server-side method state carried across rounds (checkpointed); none here."""
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state`."""


class ScaffoldServer(ServerStep):
    """SCAFFOLD's server: global step eta_g * Delta_bar, then c <- c + (1/N) sum_{i in S} (c_i+ - c_i).

    ``global_lr`` is eta_g (method param ``global_lr``, 1 by default); N is the number of
    clients of the federation (option II of Karimireddy et al. 2020, Algorithm 1 line 17).
    ``weighting`` (method param): ``participants`` averages the updates with equal weights,
    x <- x + eta_g / |S| sum_i dy_i, as Karimireddy et al.'s server step; ``samples`` weights
    them by n_i like every other method (docs/decisions.md, "SCAFFOLD's server step").
    """

    WEIGHTINGS = ("participants", "samples")

    def __init__(self, n_clients: int, global_lr: float = 1.0, weighting: str = "participants") -> None:
        if weighting not in self.WEIGHTINGS:
            raise ValueError(f"method_params.scaffold.weighting is {weighting!r}; expected one of "
                             f"{', '.join(self.WEIGHTINGS)}")
        self.n_clients, self._global_lr, self.weighting = int(n_clients), float(global_lr), weighting
        self.c: dict[str, Tensor] | None = None
        self.c_i: dict[int, dict[str, Tensor]] = {}
        self._dc: list[dict[str, Tensor]] = []

    def global_lr(self) -> float:
        return self._global_lr

    def client_weight(self, n_samples: int) -> float:
        return 1.0 if self.weighting == "participants" else float(n_samples)

    def begin_round(self) -> None:
        self._dc = []

    def variates(self, client: int, model: nn.Module) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """(c, c_i) for ``client``, both zero before its first round (shapes of ``model``)."""
        if self.c is None:
            self.c = {n: torch.zeros_like(q) for n, q in model.named_parameters()}
        if client not in self.c_i:
            self.c_i[client] = {n: torch.zeros_like(self.c[n]) for n, _ in model.named_parameters()}
        return self.c, self.c_i[client]

    def receive(self, client: int, new_c_i: dict[str, Tensor]) -> None:
        """The client's updated c_i (its change enters the server variate at :meth:`step`)."""
        self._dc.append({n: new_c_i[n] - self.c_i[client][n] for n in new_c_i})
        self.c_i[client] = new_c_i

    def step(self, global_state: dict[str, Tensor], delta_bar: Mapping[str, Tensor], keys: list[str]) -> None:
        super().step(global_state, delta_bar, keys)
        if self.c is None:
            return
        for dc in self._dc:
            for n in self.c:
                self.c[n].add_(dc[n], alpha=1.0 / self.n_clients)

    def state(self) -> dict[str, Any]:
        return {"c": self.c, "c_i": self.c_i}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.c, self.c_i = state["c"], dict(state["c_i"])
