"""Issue 26, item 6: ``hasfl diagnose`` standardises its columns, so the unit of the estimate (or of the
truth, or of a numeric capacity) changes neither its verdict nor its statistics. Before the fix an
estimate x 1e155 overflowed (confounded -> inconclusive) and one x 1e-150 had NaN correlations.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hasfl.analysis.diagnose import diagnose

STATS = ("r_capacity", "adj_r2_capacity", "f_p_capacity", "adj_r2_truth", "adj_r2_both", "r_truth",
         "partial_r_truth", "within_r", "permutation_p")
PAIRS = ("r_capacity_ci", "within_r_ci")


def table(kind: str, n: int = 120, seed: int = 3) -> pd.DataFrame:
    """An estimate that follows capacity (confounded) or the truth within tiers (data signal)."""
    rng = np.random.default_rng(seed)
    pmax = rng.choice([0.25, 0.5, 0.75, 1.0], size=n)
    tv = rng.uniform(0.1, 0.9, size=n)
    est = {"capacity": 2.0 - 1.5 * pmax + rng.normal(0, 0.05, n),
           "truth": 2.0 - 0.5 * pmax + tv + rng.normal(0, 0.1, n)}[kind]
    return pd.DataFrame({"est": est, "pmax": pmax, "tv": tv})


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def assert_same(d, ref) -> None:
    assert d.verdict == ref.verdict, d.reason
    for name in STATS:
        assert same(getattr(d, name), getattr(ref, name)), (name, getattr(d, name), getattr(ref, name))
    for name in PAIRS:
        assert all(same(x, y) for x, y in zip(getattr(d, name), getattr(ref, name), strict=True)), name
    assert (d.n, d.groups, d.within_groups) == (ref.n, ref.groups, ref.within_groups)


@pytest.mark.parametrize(("kind", "verdict"), [("capacity", "confounded"), ("truth", "data signal")])
def test_diagnose_does_not_depend_on_the_unit_of_the_estimate(kind, verdict):
    df = table(kind)
    ref = diagnose(df, "est", "pmax", "tv", permutations=300)
    assert ref.verdict == verdict, ref.reason
    for scale in (1e-150, 1e-20, 1e20, 1e155):
        assert_same(diagnose(df.assign(est=df["est"] * scale), "est", "pmax", "tv", permutations=300), ref)
    assert_same(diagnose(df.assign(est=df["est"] + 10.0), "est", "pmax", "tv", permutations=300), ref)  # a shift
    # the truth and a numeric capacity in other units too (the capacity groups stay the tiers)
    assert_same(diagnose(df.assign(tv=df["tv"] * 1e-200, pmax=df["pmax"] * 1e150), "est", "pmax", "tv",
                         permutations=300), ref)
    # without a truth: only what capacity explains, the same at every scale
    ref = diagnose(df, "est", "pmax")
    for scale in (1e-150, 1e155):
        assert_same(diagnose(df.assign(est=df["est"] * scale), "est", "pmax"), ref)


def test_a_constant_estimate_is_inconclusive_with_the_reason_at_any_scale():
    df = table("capacity")
    for value in (3.0, 3e-150, 3e155):
        d = diagnose(df.assign(est=value), "est", "pmax", "tv", permutations=100)
        assert d.verdict == "inconclusive" and "constant (zero variance)" in d.reason
        assert math.isnan(d.r_capacity) and math.isnan(d.partial_r_truth)
    # tiny but real spread is not constant: the spread counts relative to the magnitude, not in absolute terms
    d = diagnose(df.assign(est=df["est"] * 1e-150), "est", "pmax", "tv", permutations=100)
    assert d.verdict == "confounded" and d.r_capacity < -0.9


def test_standardise_is_exact_for_powers_of_two_and_keeps_a_constant():
    from hasfl.analysis.diagnose import standardise

    x = np.array([1.0, 2.0, 4.0, 7.0])
    z = standardise(x)
    assert z.mean() == pytest.approx(0.0, abs=1e-15) and (z * z).mean() == pytest.approx(1.0)
    assert np.array_equal(standardise(x * 2.0 ** 500), z) and np.array_equal(standardise(x * 2.0 ** -900), z)
    assert np.allclose(standardise(x * 1e155 + 3e155), z, rtol=1e-12, atol=1e-12)
    c = np.full(5, 1e300)
    assert np.array_equal(standardise(c), c)


def test_the_permutation_test_draws_the_same_permutations_in_bounded_memory(monkeypatch):
    """The truth's permutations are drawn in blocks (a million clients needed a 3.7 GiB array): the p-value is the
    one of a single (permutations x n) draw, and the peak memory of a large table stays bounded."""
    import tracemalloc

    from hasfl.analysis import diagnose as module

    df = table("truth", n=400)
    ref = diagnose(df, "est", "pmax", "tv", permutations=500)
    monkeypatch.setattr(module, "CHUNK", 7 * 101)  # blocks of about 7 permutations, a last one shorter
    assert diagnose(df, "est", "pmax", "tv", permutations=500).permutation_p == ref.permutation_p
    monkeypatch.undo()
    big = table("truth", n=400_000)
    tracemalloc.start()
    try:
        diagnose(big, "est", "pmax", "tv", permutations=200)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400 * 2**20, f"peak {peak / 2**20:.0f} MiB"  # one block is 32 MiB; one array was 640 MiB
