"""The update-divergence heterogeneity estimate (paper Eqs. 4-5, Algorithm 1 lines 20-25).

Eq. 4, restricted to client i's own coordinates m_i:

    H_hat_i = ||m_i * (Delta_i - Delta_bar)||^2 / (||m_i * Delta_bar||^2 + eps)

Eq. 5, exponential smoothing with H_tilde(0) = 1:

    H_tilde_i <- beta * H_tilde_i + (1 - beta) * H_hat_i

and, every T_norm rounds, all H_tilde are rescaled so their mean is 1 (Section
3.2: "rescaling all estimates ... preserving relative ordering").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import Tensor

from hasfl.models.slicing import SliceRule, gather


def divergence(delta: Mapping[str, Tensor], delta_bar: Mapping[str, Tensor], rules: Mapping[str, SliceRule],
               keys: Iterable[str], eps: float) -> float:
    """Eq. 4 for one client: its update vs the aggregate on its own coordinates."""
    keys = list(keys)
    device = delta_bar[keys[0]].device if keys else None
    num = torch.zeros((), dtype=torch.float64, device=device)
    den = torch.zeros((), dtype=torch.float64, device=device)
    for k in keys:
        bar = gather(delta_bar[k], rules[k])
        d = delta[k].view(bar.shape)
        num += (d - bar).double().pow(2).sum()
        den += bar.double().pow(2).sum()
    return float(num / (den + eps))


class HeterogeneityTracker:
    """Smoothed estimates H_tilde for all N clients (Eq. 5) with periodic normalisation."""

    def __init__(self, n_clients: int, beta: float, t_norm: int) -> None:
        self.h_tilde = np.ones(n_clients, dtype=np.float64)
        self.beta = float(beta)
        self.t_norm = int(t_norm)

    def update(self, clients: np.ndarray, h_hat: np.ndarray) -> None:
        """Eq. 5 for the participants ``clients`` with their Eq. 4 estimates ``h_hat``."""
        self.h_tilde[clients] = self.beta * self.h_tilde[clients] + (1.0 - self.beta) * np.asarray(h_hat)

    def normalize_if_due(self, t: int) -> bool:
        """Every T_norm rounds (t > 0, t mod T_norm = 0) rescale so mean(H_tilde) = 1."""
        if t > 0 and t % self.t_norm == 0:
            mean = self.h_tilde.mean()
            if mean > 0 and np.isfinite(mean):
                self.h_tilde /= mean
            return True
        return False


# --- capacity-separable estimators (the paper's Section 5 "natural next step") -------------
#: Names of the per-client heterogeneity estimates every run logs (config block ``estimators``):
#: E0 ``update`` (Eqs. 4-5), E1 ``within_tier``, E2 ``probe``, E3 ``reported``.
ESTIMATORS = ("update", "within_tier", "probe", "reported")


def within_tier(h_tilde: np.ndarray, pmax: np.ndarray) -> np.ndarray:
    """E1: the update estimate with the capacity tiers taken out.

    Per tier (clients of equal pmax), the z-score of log H~ among that tier's clients: only
    within-tier variation is left. A tier with one member, or whose members all have the
    same estimate, gets 0 (no within-tier information).
    """
    logs = np.log(np.maximum(np.asarray(h_tilde, dtype=np.float64), 1e-300))
    out = np.zeros_like(logs)
    for tier in np.unique(pmax):
        members = np.flatnonzero(pmax == tier)
        if len(members) < 2:
            continue
        sd = logs[members].std(ddof=1)
        if sd > 0 and np.isfinite(sd):
            out[members] = (logs[members] - logs[members].mean()) / sd
    return out


def reported_tv(labels: Mapping[int, np.ndarray], n_clients: int, num_classes: int, epsilon: float | None,
                rng: np.random.Generator) -> np.ndarray:
    """E3: each client reports its label histogram once (next-character histogram for
    Shakespeare); the server computes the TV distance of each report to the aggregate of all
    reports weighted by their sizes. With ``epsilon`` the counts carry Laplace noise of scale
    1/epsilon (sensitivity 1: one sample added or removed), clipped at 0 -- epsilon-differential
    privacy for each report; None reports exact counts. Either way it discloses label
    information that Eqs. 4-5 do not ask for.
    """
    counts = np.zeros((n_clients, num_classes), dtype=np.float64)
    for c, y in labels.items():
        counts[c] = np.bincount(np.asarray(y, dtype=np.int64), minlength=num_classes)[:num_classes]
    if epsilon is not None:
        counts = np.maximum(counts + rng.laplace(0.0, 1.0 / float(epsilon), size=counts.shape), 0.0)
    totals = counts.sum(axis=1, keepdims=True)
    dists = np.divide(counts, totals, out=np.full_like(counts, 1.0 / num_classes), where=totals > 0)
    pooled = counts.sum(axis=0) / max(counts.sum(), 1e-300)
    return 0.5 * np.abs(dists - pooled).sum(axis=1)


class Estimates:
    """The estimates of all N clients the round loop keeps (:data:`ESTIMATORS`).

    E0 (``update``, Eqs. 4-5) and E2 (``probe``) are smoothed by Eq. 5 and normalised every
    T_norm rounds alike; E1 (``within_tier``) is a function of E0 and the tiers; E3
    (``reported``) is fixed when the clients report, before round 0.
    """

    def __init__(self, n_clients: int, beta: float, t_norm: int, pmax: np.ndarray, reported: np.ndarray) -> None:
        self.update = HeterogeneityTracker(n_clients, beta, t_norm)
        self.probe = HeterogeneityTracker(n_clients, beta, t_norm)
        self.pmax, self.reported = np.asarray(pmax), np.asarray(reported, dtype=np.float64)

    def observe(self, clients: np.ndarray, h_hat: np.ndarray, h_probe: np.ndarray) -> None:
        """Eq. 5 for E0 (the updates' Eq. 4) and E2 (the probes' Eq. 4) of this round's participants."""
        self.update.update(clients, h_hat)
        self.probe.update(clients, h_probe)

    def normalize_if_due(self, t: int) -> None:
        """Section 3.2's rescaling every T_norm rounds, for E0 and E2."""
        self.update.normalize_if_due(t)
        self.probe.normalize_if_due(t)

    def values(self) -> dict[str, np.ndarray]:
        """Each estimator's current per-client values."""
        return {"update": self.update.h_tilde, "within_tier": within_tier(self.update.h_tilde, self.pmax),
                "probe": self.probe.h_tilde, "reported": self.reported}

    def state(self) -> dict[str, np.ndarray]:
        """What a checkpoint keeps (E1 and E3 follow from it and the data)."""
        return {"update": self.update.h_tilde, "probe": self.probe.h_tilde}

    def load_state(self, state: Mapping[str, np.ndarray]) -> None:
        self.update.h_tilde, self.probe.h_tilde = state["update"], state["probe"]
