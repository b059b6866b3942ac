"""Issue 38: every statistic of the findings that statsmodels also provides is pinned to it at 1e-9
(or uses it): the noncentral-t minimum detectable effect (``stats.power.TTestPower``), DerSimonian-Laird
pooling (``stats.meta_analysis.combine_effects``), TOST (``stats.weightstats.ttost_paired``) and Holm's
step-down (``stats.multitest.multipletests``, which :func:`hasfl.analysis.findings.kernel.holm` calls)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.meta_analysis import combine_effects
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from hasfl.analysis import stats
from hasfl.analysis.findings.kernel import CONTRADICTED, INCONCLUSIVE, SUPPORTED, Settings, holm, t_equivalence_unit

TOL = 1e-9


@pytest.mark.parametrize("n", [2, 3, 5, 10, 30])
@pytest.mark.parametrize(("alpha", "power"), [(0.05, 0.8), (0.025, 0.9), (0.1, 0.5)])
def test_t_mde_has_the_asked_power_under_statsmodels_ttestpower(n, alpha, power):
    """t_mde is the effect at which statsmodels' noncentral-t power of the one-sample t test is ``power``,
    one-sided ("larger") and two-sided (both tails counted, as ours)."""
    for two_sided, alternative in ((False, "larger"), (True, "two-sided")):
        if n == 2 and two_sided:
            continue  # df = 1: scipy's nct (which statsmodels calls) is NaN there; ours integrates (test below)
        d = stats.t_mde(n, 1.0, alpha, power, two_sided=two_sided)
        got = TTestPower().power(effect_size=d, nobs=n, alpha=alpha, alternative=alternative)
        assert got == pytest.approx(power, abs=TOL), (n, two_sided, got)
        assert stats.t_mde(n, 2.5, alpha, power, two_sided=two_sided) == pytest.approx(2.5 * d, rel=TOL)


def test_t_mde_at_one_degree_of_freedom_by_its_own_integral():
    """df = 1 one-sided, where scipy's nct.sf is NaN: the power at t_mde, integrated over the chi-square, is 0.8."""
    import scipy.stats as sps
    from scipy.integrate import quad

    d = stats.t_mde(2, 1.0, 0.05, 0.8)
    crit, ncp = float(sps.t.ppf(0.95, 1)), d * math.sqrt(2)
    p = quad(lambda v: float(sps.norm.sf(crit * math.sqrt(v) - ncp)) * float(sps.chi2.pdf(v, 1)), 0, math.inf,
             limit=200)[0]
    assert p == pytest.approx(0.8, abs=1e-7)


@pytest.mark.parametrize("rs", [[0.15, 0.58, -0.39], [0.1, 0.1, 0.1], [0.3, -0.2, 0.5, 0.05], [0.9, -0.9]])
@pytest.mark.parametrize("n_controls", [0, 1])
def test_fisher_pools_equal_statsmodels_combine_effects(rs, n_controls):
    """fisher_pool (fixed effect) and fisher_pool_random (DerSimonian-Laird) on Fisher's z, variances
    1 / (n - 3 - k): the same pooled z, se, Cochran's Q and tau^2 as combine_effects(method_re="dl")."""
    ns = np.array([20, 14, 31, 9][: len(rs)], dtype=float)
    z = np.arctanh(np.array(rs, dtype=float))
    w = ns - 3 - n_controls
    ref = combine_effects(z, 1.0 / w, method_re="dl")
    fixed = stats.fisher_pool(rs, ns, n_controls)
    rand = stats.fisher_pool_random(rs, ns, n_controls)
    assert fixed.z == pytest.approx(ref.mean_effect_fe, abs=TOL)
    assert fixed.se == pytest.approx(ref.sd_eff_w_fe, abs=TOL)
    assert fixed.q == pytest.approx(ref.q, abs=TOL)
    if ref.tau2 > 0:
        assert rand.z == pytest.approx(ref.mean_effect_re, abs=TOL)
        assert rand.se == pytest.approx(ref.sd_eff_w_re, abs=TOL)
    else:  # statsmodels 0.15 leaves DerSimonian-Laird's tau^2 negative when Q < k - 1; DL truncates it at 0
        assert (rand.z, rand.se) == (pytest.approx(fixed.z, abs=TOL), pytest.approx(fixed.se, abs=TOL))
    tau2 = max(0.0, float(ref.tau2))
    assert 1.0 / rand.se ** 2 == pytest.approx(float(np.sum(1.0 / (1.0 / w + tau2))), rel=TOL)


@pytest.mark.parametrize("values", [[0.1, -0.1, 0.0], [1.5, 2.5, 0.4, 1.9], [-0.3, 0.2, 0.9, -1.1, 0.0]])
@pytest.mark.parametrize("margin", [2.0, 1.0])
def test_tost_p_equals_statsmodels_ttost_paired(values, margin):
    """A TOST unit's p_supported (the larger of its two one-sided p) is ttost_paired's p at +-margin."""
    st = Settings(alpha=0.05, power=0.8, th={})
    x = np.array(values, dtype=float)
    u = t_equivalence_unit("d", x, margin, st)
    p, _, _ = ttost_paired(x, np.zeros_like(x), -margin, margin)
    assert u["p_supported"] == pytest.approx(float(p), abs=TOL)


def test_holm_keeps_exactly_what_statsmodels_multipletests_rejects():
    """holm() (the findings' and a conjunction's correction of their contradictions) keeps a contradicted unit's
    verdict exactly when multipletests(method="holm") rejects its p_contradicted among the units' p_contradicted, and
    records the adjusted p; a supported unit (an intersection-union test) keeps its verdict uncorrected."""
    import gc

    gc.freeze()  # multipletests' Holm branch runs gc.collect() on every call: only new objects are collected
    try:
        _holm_against_multipletests()
    finally:
        gc.unfreeze()


def _holm_against_multipletests() -> None:
    from hasfl.analysis.findings.kernel import holm_step_down

    rng = np.random.default_rng(38)
    for _ in range(200):
        k = int(rng.integers(2, 7))
        ps = rng.uniform(0.0, 0.08, size=k)
        verdicts = rng.choice([SUPPORTED, CONTRADICTED], size=k)
        pc = np.where(verdicts == CONTRADICTED, ps, 0.9)
        units = [{"unit": f"u{i}", "verdict": str(v), "reason": "r",
                  "p_supported": float(p) if v == SUPPORTED else 0.9,
                  "p_contradicted": float(q)} for i, (p, q, v) in enumerate(zip(ps, pc, verdicts))]
        holm(units, 0.05)
        reject, adjusted, _, _ = multipletests(pc, alpha=0.05, method="holm")
        order = np.argsort(pc, kind="stable")
        own_reject, own_adjusted = holm_step_down(pc[order], 0.05)
        assert (own_reject == reject[order]).all() and (own_adjusted == adjusted[order]).all()  # bit for bit
        for u, rej, adj, v in zip(units, reject, adjusted, verdicts, strict=True):
            if v == SUPPORTED:
                assert u["verdict"] == SUPPORTED
            else:
                assert u["verdict"] == (CONTRADICTED if rej else INCONCLUSIVE)
            assert u["p_holm"] == pytest.approx(float(adj), abs=TOL)
