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

from hasfl.models.slicing import SliceRule, region


def divergence(delta: Mapping[str, Tensor], delta_bar: Mapping[str, Tensor], rules: Mapping[str, SliceRule],
               keys: Iterable[str], eps: float) -> float:
    """Eq. 4 for one client: its update vs the aggregate on its own coordinates."""
    keys = list(keys)
    device = delta_bar[keys[0]].device if keys else None
    num = torch.zeros((), dtype=torch.float64, device=device)
    den = torch.zeros((), dtype=torch.float64, device=device)
    for k in keys:
        bar = region(delta_bar[k], rules[k])
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
