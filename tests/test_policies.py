"""Width-allocation policies (hasfl.fl.policies; paper Section 3.3, Figures 1-2, Eq. 6 and the
coverage guarantee; the FjORD and random-budget baselines of Section 4)."""

from __future__ import annotations

import numpy as np
import pytest

from hasfl.fl.policies import (
    FjordPolicy,
    FullModelPolicy,
    HasflPolicy,
    RandomBudgetPolicy,
    StaticPolicy,
    UniformPolicy,
    coverage_guarantee,
)
from hasfl.fl.sampling import participant_schedule

FIG1_PMAX = np.array([0.3, 0.8, 0.5])
FIG1_H = np.array([2.1, 0.3, 1.2])


def policy(pmax, coverage: bool) -> HasflPolicy:
    return HasflPolicy(np.asarray(pmax, dtype=float), p_min=0.4, gamma=0.25, epsilon=1e-8, coverage=coverage)


# --------------------------------------------------------------------------- HAS-FL's rule (Eq. 6)
def test_figure1_allocation_with_coverage() -> None:
    h_bar = FIG1_H.mean()  # 1.2
    eq6 = 0.4 + 0.25 * FIG1_H / (h_bar + 1e-8)  # 0.8375, 0.4625, 0.65
    np.testing.assert_allclose(eq6, [0.8375, 0.4625, 0.65], atol=1e-8)
    p = policy(FIG1_PMAX, coverage=True).allocation(FIG1_H)
    # Client 1: its cap 0.3; client 2: 0.8 via the coverage guarantee; client N: its cap 0.5.
    np.testing.assert_allclose(p, [0.3, 0.8, 0.5], rtol=0, atol=1e-12)
    # Only H relative to the average matters (Figure 1 shows H relative to the average).
    np.testing.assert_allclose(policy(FIG1_PMAX, True).allocation(7.0 * FIG1_H), p, atol=1e-9)


def test_figure1_allocation_without_coverage() -> None:
    p = policy(FIG1_PMAX, coverage=False).allocation(FIG1_H)
    np.testing.assert_allclose(p, [0.3, 0.4 + 0.25 * 0.3 / 1.2, 0.5], rtol=0, atol=1e-8)
    assert p[1] < FIG1_PMAX[1]


def test_policy_adapt_applies_allocation() -> None:
    pol = policy(FIG1_PMAX, coverage=True)
    np.testing.assert_array_equal(pol.p, FIG1_PMAX)  # Algorithm 1 line 3: p(0) = pmax
    pol.adapt(FIG1_H)
    np.testing.assert_allclose(pol.p, [0.3, 0.8, 0.5], atol=1e-12)
    widths = pol.widths(0, np.array([2, 0]), np.random.default_rng(0))
    np.testing.assert_allclose(widths, [0.5, 0.3])
    np.testing.assert_array_equal(pol.trained_widths(np.array([2, 0]), widths), widths)  # trains what it is allocated


def test_coverage_guarantee_all_top_clients() -> None:
    p = coverage_guarantee(np.array([0.4, 0.45, 0.6, 0.5]), np.array([1.0, 0.5, 1.0, 0.75]))
    np.testing.assert_array_equal(p, [1.0, 0.45, 1.0, 0.5])


@pytest.mark.parametrize("pmax", [1.0, 0.6, 0.3])
def test_figure2_curves(pmax: float) -> None:
    """p = min(pmax, 0.4 + 0.25 h), h = H / H_bar: linear from 0.4, then a plateau at pmax."""
    grid = np.linspace(0.0, 3.0, 31)
    got = []
    for h in grid:
        h_tilde = np.array([h, (4.0 - h) / 3, (4.0 - h) / 3, (4.0 - h) / 3])  # mean exactly 1
        assert h_tilde.mean() == pytest.approx(1.0, abs=1e-12)
        got.append(policy([pmax, 1.0, 1.0, 1.0], coverage=False).allocation(h_tilde)[0])
    got = np.array(got)
    np.testing.assert_allclose(got, np.minimum(pmax, 0.4 + 0.25 * grid), atol=1e-7)
    kink = (pmax - 0.4) / 0.25
    rising, flat = grid < kink - 1e-9, grid > kink + 1e-9
    if rising.sum() >= 2:
        np.testing.assert_allclose(np.diff(got[rising]) / np.diff(grid[rising]), 0.25, atol=1e-6)
    assert np.all(got[flat] == pmax)
    assert got.max() <= pmax


# --------------------------------------------------------------------------- the baselines' policies
def test_static_uniform_and_full_model_allocations() -> None:
    """HeteroFL keeps pmax, Uniform caps p at pmax, the full-model methods train p = 1; none adapts
    to the estimates and every one trains the width it is allocated."""
    pmax = np.array([0.25, 0.5, 0.75, 1.0])
    part = np.array([3, 0, 2])
    for pol, expected in ((StaticPolicy(pmax), pmax), (UniformPolicy(pmax, 0.5), [0.25, 0.5, 0.5, 0.5]),
                          (FullModelPolicy(pmax), np.ones(4))):
        np.testing.assert_array_equal(pol.p, expected)
        pol.adapt(np.array([5.0, 0.1, 0.1, 0.1]))
        np.testing.assert_array_equal(pol.p, expected)
        w = pol.widths(0, part, np.random.default_rng(0))
        np.testing.assert_array_equal(w, np.asarray(expected)[part])
        np.testing.assert_array_equal(pol.trained_widths(part, w), w)


def test_random_budget_policy_widths(digits) -> None:
    pmax = digits.clients.sort_values("client_id")["pmax"].to_numpy(dtype=float)
    schedule = participant_schedule(digits.seed, len(pmax), 10, 30)
    target = 0.42  # attainable: between the floor and the mean pmax of the schedule
    pol = RandomBudgetPolicy(pmax, schedule, target, np.random.default_rng(0))
    assert abs(pol.achieved - target) < 1e-6
    per_client: dict[int, set[float]] = {}
    means = []
    for t, part in enumerate(schedule):
        w = pol.widths(t, part, np.random.default_rng(1))
        means.append(w.mean())
        assert np.all(w <= pmax[part] + 1e-12) and np.all(w >= RandomBudgetPolicy.P_FLOOR)
        assert np.all(w[pmax[part] == 1.0] == 1.0)  # coverage clients
        for i, p in zip(part, w, strict=True):
            per_client.setdefault(int(i), set()).add(float(p))
    assert np.mean(means) == pytest.approx(target, abs=1e-6)
    varying = [i for i, ps in per_client.items() if pmax[i] < 1.0 and len(ps) > 1]
    assert len(varying) >= 5, "random_budget widths should vary over rounds"
    with pytest.raises(RuntimeError):
        pol.widths(0, schedule[1], np.random.default_rng(1))


def test_fjord_policy_draws_only_allowed_tiers() -> None:
    tiers = [0.25, 0.5, 0.75, 1.0]
    pmax = np.array([0.25, 0.5, 0.75, 1.0, 0.5])
    pol = FjordPolicy(pmax, tiers)
    rng = np.random.default_rng(0)
    seen: dict[int, set[float]] = {i: set() for i in range(len(pmax))}
    for t in range(200):
        part = np.arange(len(pmax))
        w = pol.widths(t, part, rng)
        assert np.all(w <= pmax) and set(w) <= set(tiers)
        np.testing.assert_array_equal(pol.p, w)
        # the client trains (and uploads) its pmax width whatever it drew
        np.testing.assert_array_equal(pol.trained_widths(part, w), pmax)
        for i, p in enumerate(w):
            seen[i].add(float(p))
    for i, cap in enumerate(pmax):
        assert seen[i] == {x for x in tiers if x <= cap}
    np.testing.assert_array_equal(pol.trained_widths(np.array([4, 1]), np.array([0.25, 0.25])), [0.5, 0.5])
