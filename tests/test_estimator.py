"""The heterogeneity estimator (hasfl.fl.estimator; paper Eqs. 4-5 and the T_norm normalisation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hasfl.fl.estimator import HeterogeneityTracker, divergence
from hasfl.models.slicing import SliceRule

ALL = slice(None)


def test_divergence_hand_example() -> None:
    delta_bar = {"w": torch.tensor([1.0, 2.0, 3.0, 4.0]), "v": torch.tensor([[1.0, 1.0], [1.0, 1.0]]),
                 "ignored": torch.tensor([50.0])}
    rules = {"w": SliceRule(None, (slice(0, 2),)), "v": SliceRule(None, (slice(0, 1), slice(0, 2))),
             "ignored": SliceRule(None, (ALL,))}
    delta = {"w": torch.tensor([2.0, 0.0]), "v": torch.tensor([[3.0, 1.0]]), "ignored": torch.tensor([0.0])}
    eps = 0.5
    # numerator: (2-1)^2 + (0-2)^2 + (3-1)^2 + (1-1)^2 = 9; denominator: 1 + 4 + 1 + 1 = 7
    h = divergence(delta, delta_bar, rules, ["w", "v"], eps)
    assert h == pytest.approx(9.0 / (7.0 + eps), rel=1e-12)
    # Unrestricted (the whole delta_bar, client zero outside its mask) would be inflated.
    unrestricted = (9.0 + 3**2 + 4**2 + 2 * 1.0) / (7.0 + 9 + 16 + 2 + eps)
    assert h != pytest.approx(unrestricted)


def test_tracker_ema_and_normalisation() -> None:
    tr = HeterogeneityTracker(3, beta=0.9, t_norm=4)
    np.testing.assert_array_equal(tr.h_tilde, [1.0, 1.0, 1.0])  # H~(0) = 1
    tr.update(np.array([0, 2]), np.array([3.0, 0.5]))
    np.testing.assert_allclose(tr.h_tilde, [0.9 + 0.3, 1.0, 0.9 + 0.05])
    tr.update(np.array([0]), np.array([2.0]))
    np.testing.assert_allclose(tr.h_tilde, [0.9 * 1.2 + 0.2, 1.0, 0.95])
    before = tr.h_tilde.copy()
    for t in (0, 1, 2, 3, 5):
        assert not tr.normalize_if_due(t)
    np.testing.assert_array_equal(tr.h_tilde, before)
    assert tr.normalize_if_due(4)
    assert tr.h_tilde.mean() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(tr.h_tilde, before / before.mean())
    np.testing.assert_array_equal(np.argsort(tr.h_tilde), np.argsort(before))
    assert tr.normalize_if_due(8)
