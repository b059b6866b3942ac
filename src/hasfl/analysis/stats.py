"""Small statistics used by the tables and findings (conventions in docs/decisions.md).

* :func:`mean_std` -- mean and *sample* standard deviation (ddof = 1) over seeds,
  the convention of "mean +- std over three seeds" (paper Tables 3-7).
* :func:`pearson`, :func:`partial_corr` -- Table 5. The partial correlation is the
  correlation of the OLS residuals of both variables on the control (statsmodels);
  :func:`partial_corr_closed_form` is the textbook formula from the three pairwise
  correlations, used to cross-check it.
* :func:`variance_decomposition` -- share of the variance of log H~ explained by the
  capacity tier (categorical) and by TV, alone and jointly (OLS R^2 and adjusted R^2).
* :func:`paired_ci` -- matched-budget comparison: paired differences, Student-t
  confidence interval and paired t-test
  (a one-sample t-test of the differences, identical to scipy's ttest_rel).
* :func:`permutation_corr_p`, :func:`stratified_permutation_corr` -- a correlation's permutation test, alone
  and pooled over runs with ``y`` permuted within each run (F1d's free clients).
* :func:`fisher_pool` -- correlations of several runs pooled in Fisher's z (fixed
  effect, weights n - 3 - k for k controlled variables), with Cochran's Q.
* :func:`variance_ratio` -- ratio of two seed-to-seed standard deviations with its
  F-distribution interval (Section 4.3's "spread roughly doubles").
* Power: :func:`t_mde`, :func:`t_equivalence_margin`, :func:`z_mde`,
  :func:`z_equivalence_margin`, :func:`variance_ratio_mde` -- the smallest effect a test
  detects with the configured power (docs/decisions.md "Findings").

Every function returns NaN (never raises) where a statistic is undefined: fewer
points than needed, or a constant variable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as sps
from scipy.integrate import quad
from scipy.optimize import brentq

__all__ = [
    "PairedCI",
    "PooledCorrelation",
    "VarianceRatio",
    "fisher_pool",
    "fisher_pool_hksj",
    "t_equivalence_margin",
    "t_mde",
    "variance_ratio",
    "variance_ratio_mde",
    "z_equivalence_margin",
    "z_mde",
    "mean_std",
    "paired_ci",
    "permutation_corr_p",
    "StratifiedPermutation",
    "stratified_permutation_corr",
    "partial_corr",
    "partial_corr_closed_form",
    "pearson",
    "variance_decomposition",
]

_NAN = float("nan")


def _arr(x: Sequence[float] | np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).ravel()


def mean_std(values: Sequence[float] | np.ndarray) -> tuple[float, float, int]:
    """``(mean, sample std with ddof=1, n)`` of the finite values; std is NaN for n < 2."""
    v = _arr(values)
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n == 0:
        return _NAN, _NAN, 0
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if n >= 2 else _NAN
    return mean, std, n


def _constant(v: np.ndarray) -> bool:
    return bool(np.ptp(v) <= 1e-12 * max(1.0, float(np.abs(v).max())))


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Pearson correlation; NaN for fewer than 3 points, non-finite values or a constant variable."""
    a, b = _arr(x), _arr(y)
    if a.size != b.size:
        raise ValueError(f"pearson: x has {a.size} values, y has {b.size}")
    if a.size < 3 or not (np.isfinite(a).all() and np.isfinite(b).all()) or _constant(a) or _constant(b):
        return _NAN
    a, b = a - a.mean(), b - b.mean()
    r = float(a @ b / math.sqrt(float(a @ a) * float(b @ b)))
    return max(-1.0, min(1.0, r))


def _residuals(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Residuals of the OLS fit y ~ 1 + z (statsmodels)."""
    import statsmodels.api as sm  # ~1 s to import: only when a table needs it

    design = sm.add_constant(z.reshape(len(z), -1), has_constant="add")
    return np.asarray(sm.OLS(y, design).fit().resid, dtype=np.float64)


def partial_corr(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                 z: Sequence[float] | np.ndarray) -> float:
    """r(x, y | z): correlation of the residuals of x and y after OLS regression on z.

    NaN when fewer than 4 points, a non-finite value, or x, y or z is constant.
    """
    a, b, c = _arr(x), _arr(y), _arr(z)
    if not (a.size == b.size == c.size):
        raise ValueError(f"partial_corr: lengths differ ({a.size}, {b.size}, {c.size})")
    finite = np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(c).all()
    if a.size < 4 or not finite or _constant(a) or _constant(b) or _constant(c):
        return _NAN
    return pearson(_residuals(a, c), _residuals(b, c))


def partial_corr_closed_form(r_xy: float, r_xz: float, r_yz: float) -> float:
    """(r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2)); NaN when undefined."""
    den = (1.0 - r_xz**2) * (1.0 - r_yz**2)
    if not math.isfinite(den) or den <= 0.0:
        return _NAN
    return (r_xy - r_xz * r_yz) / math.sqrt(den)


def _ols_r2(y: np.ndarray, columns: list[np.ndarray]) -> tuple[float, float]:
    import statsmodels.api as sm

    design = sm.add_constant(np.column_stack(columns), has_constant="add")
    fit = sm.OLS(y, design).fit()
    return float(fit.rsquared), float(fit.rsquared_adj)


def _dummies(levels: np.ndarray) -> list[np.ndarray]:
    """Treatment coding of a categorical factor: one 0/1 column per level but the first."""
    cats = np.unique(levels)
    return [(levels == c).astype(np.float64) for c in cats[1:]]


def variance_decomposition(log_h: Sequence[float] | np.ndarray, tier: Sequence[float] | np.ndarray,
                           tv: Sequence[float] | np.ndarray) -> dict[str, float]:
    """OLS R^2 (and adjusted R^2) of ``log_h`` on C(tier), on TV, and on both.

    The tier enters as a categorical factor (one indicator per level but the first),
    so no linear form of the capacity effect is assumed. Keys: ``r2_tier``,
    ``r2_tv``, ``r2_joint`` and ``adj_r2_*`` likewise, plus ``r2_tv_given_tier``
    (= r2_joint - r2_tier, what TV adds beyond the tiers) and ``r2_tier_given_tv``.
    All NaN where log_h is constant or non-finite, or there are too few clients.
    """
    y, t, v = _arr(log_h), _arr(tier), _arr(tv)
    keys = ("r2_tier", "r2_tv", "r2_joint", "adj_r2_tier", "adj_r2_tv", "adj_r2_joint",
            "r2_tv_given_tier", "r2_tier_given_tv")
    out = dict.fromkeys(keys, _NAN)
    if not (y.size == t.size == v.size):
        raise ValueError(f"variance_decomposition: lengths differ ({y.size}, {t.size}, {v.size})")
    tier_cols = _dummies(t)
    n_joint = 1 + len(tier_cols) + 1
    if not (np.isfinite(y).all() and np.isfinite(t).all() and np.isfinite(v).all()) or _constant(y) or y.size <= n_joint:
        return out
    if tier_cols:
        out["r2_tier"], out["adj_r2_tier"] = _ols_r2(y, tier_cols)
    else:  # a single tier explains nothing
        out["r2_tier"], out["adj_r2_tier"] = 0.0, 0.0
    if _constant(v):
        out["r2_tv"], out["adj_r2_tv"] = 0.0, 0.0
        out["r2_joint"], out["adj_r2_joint"] = out["r2_tier"], out["adj_r2_tier"]
    else:
        out["r2_tv"], out["adj_r2_tv"] = _ols_r2(y, [v])
        out["r2_joint"], out["adj_r2_joint"] = _ols_r2(y, [*tier_cols, v])
    out["r2_tv_given_tier"] = out["r2_joint"] - out["r2_tier"]
    out["r2_tier_given_tv"] = out["r2_joint"] - out["r2_tv"]
    return out


@dataclass(frozen=True)
class PairedCI:
    """Paired comparison of ``a - b`` over seeds: mean, sample sd, t interval, paired t-test."""

    n: int
    mean_diff: float
    sd_diff: float
    ci_low: float
    ci_high: float
    t_stat: float
    p_value: float
    level: float

    def covers(self, value: float = 0.0) -> bool | None:
        """Whether the interval contains ``value``; None when it is undefined."""
        if not (math.isfinite(self.ci_low) and math.isfinite(self.ci_high)):
            return None
        return self.ci_low <= value <= self.ci_high

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def paired_ci(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, level: float = 0.95) -> PairedCI:
    """Student-t confidence interval of mean(a - b) and the paired t-test.

    mean +- t_{(1+level)/2, n-1} * sd / sqrt(n), sd with ddof = 1. For n < 2 the
    interval and the test are NaN. When all differences are equal the interval has
    zero width and the test is NaN (sd = 0).
    """
    x, y = _arr(a), _arr(b)
    if x.size != y.size:
        raise ValueError(f"paired_ci: {x.size} vs {y.size} values")
    d = x - y
    d = d[np.isfinite(d)]
    n = int(d.size)
    if n == 0:
        return PairedCI(0, _NAN, _NAN, _NAN, _NAN, _NAN, _NAN, level)
    mean = float(d.mean())
    if n < 2:
        return PairedCI(n, mean, _NAN, _NAN, _NAN, _NAN, _NAN, level)
    sd = float(d.std(ddof=1))
    half = float(sps.t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    if sd > 0:
        res = sps.ttest_1samp(d, 0.0)
        t_stat, p_value = float(res.statistic), float(res.pvalue)
    else:
        t_stat, p_value = _NAN, _NAN
    return PairedCI(n, mean, sd, mean - half, mean + half, t_stat, p_value, level)


def permutation_corr_p(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, exact_max: int = 9,
                       n_perm: int = 9999, seed: int = 0) -> tuple[float, bool]:
    """Two-sided permutation p of Pearson's r(x, y): the share of the orderings of ``y`` whose |r| is at least
    the observed one (up to 1e-12). Every one of the n! orderings when n <= ``exact_max`` (exact; the
    observed one among them); else ``n_perm`` random ones from ``seed`` plus the observed, ``(b + 1) /
    (n_perm + 1)``. Returns ``(p, exact)``; NaN when r is undefined (:func:`pearson`)."""
    a, b = _arr(x), _arr(y)
    r = pearson(a, b)
    if not math.isfinite(r):
        return _NAN, False
    a = (a - a.mean()) / np.sqrt(((a - a.mean()) ** 2).sum())
    b = (b - b.mean()) / np.sqrt(((b - b.mean()) ** 2).sum())
    n = a.size
    if n <= exact_max:
        import itertools

        perms = np.array(list(itertools.permutations(range(n))), dtype=np.intp)
        rs = b[perms] @ a
        return float(np.mean(np.abs(rs) >= abs(r) - 1e-12)), True
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((n_perm, n)), axis=1)
    rs = b[perms] @ a
    return float((np.sum(np.abs(rs) >= abs(r) - 1e-12) + 1) / (n_perm + 1)), False


@dataclass(frozen=True)
class StratifiedPermutation:
    """A correlation pooled over strata (runs) and its stratified permutation test
    (:func:`stratified_permutation_corr`).

    ``r``: ``sum((n_i - 1) r_i) / sum(n_i - 1)`` over the strata read; ``p``: two-sided permutation p of that
    statistic; ``exact``: every joint ordering enumerated; ``n_strata`` / ``n``: strata read and their points."""

    r: float
    p: float
    exact: bool
    n_strata: int
    n: int


def _stratum_terms(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` centred and scaled to unit norm, so ``y[perm] @ x`` is Pearson's r of that ordering."""
    a, b = x - x.mean(), y - y.mean()
    return a / np.sqrt((a ** 2).sum()), b / np.sqrt((b ** 2).sum())


def stratified_permutation_corr(strata: Sequence[tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray]],
                                *, exact_max: int = 200_000, n_perm: int = 9999,
                                seed: int = 0) -> StratifiedPermutation:
    """Pearson's r pooled over strata and its stratified permutation test: ``y`` permuted within each stratum,
    independently across strata, the statistic ``T = sum((n_i - 1) r_i)`` (each stratum weighted by the
    inverse of r_i's permutation variance ``1 / (n_i - 1)``, the exact counterpart of Fisher's ``n_i - 3``).

    Two-sided p: the share of joint orderings with ``|T*| >= |T|`` (up to 1e-12); every joint ordering when their
    number ``prod(n_i!)`` is at most ``exact_max`` (exact), else ``n_perm`` random joint orderings from ``seed``
    plus the observed one, ``(b + 1) / (n_perm + 1)``. A stratum with fewer than 3 points or a constant variable
    carries no correlation and is left out; none left: NaN."""
    terms = []
    for x, y in strata:
        a, b = _arr(x), _arr(y)
        if a.size != b.size:
            raise ValueError(f"stratified_permutation_corr: a stratum has {a.size} x and {b.size} y values")
        if a.size >= 3 and math.isfinite(pearson(a, b)):
            terms.append(_stratum_terms(a, b))
    if not terms:
        return StratifiedPermutation(_NAN, _NAN, False, 0, 0)
    weights = np.array([a.size - 1.0 for a, _ in terms])
    observed = float(sum(w * (b @ a) for w, (a, b) in zip(weights, terms, strict=True)))
    total = observed / float(weights.sum())
    n = int(sum(a.size for a, _ in terms))
    orderings = math.prod(math.factorial(a.size) for a, _ in terms)
    if orderings <= exact_max:
        import itertools

        joint = np.zeros(1)
        for w, (a, b) in zip(weights, terms, strict=True):
            perms = np.array(list(itertools.permutations(range(a.size))), dtype=np.intp)
            joint = (joint[:, None] + w * (b[perms] @ a)[None, :]).ravel()
        p = float(np.mean(np.abs(joint) >= abs(observed) - 1e-12))
        return StratifiedPermutation(total, p, True, len(terms), n)
    rng = np.random.default_rng(seed)
    draws = np.zeros(n_perm)
    for w, (a, b) in zip(weights, terms, strict=True):
        perms = np.argsort(rng.random((n_perm, a.size)), axis=1)
        draws += w * (b[perms] @ a)
    p = float((np.sum(np.abs(draws) >= abs(observed) - 1e-12) + 1) / (n_perm + 1))
    return StratifiedPermutation(total, p, False, len(terms), n)


# --- pooled correlations (F1, F6) ------------------------------------------------------------


@dataclass(frozen=True)
class PooledCorrelation:
    """Correlations of several runs pooled in Fisher's z (fixed effect, or random effects with ``df``).

    ``z = sum(w_i atanh(r_i)) / sum(w_i)`` with ``w_i = n_i - 3 - k`` (``k`` controlled
    variables: 0 for a correlation, 1 for a partial correlation given one variable);
    ``se = 1 / sqrt(sum(w_i))``. ``q`` is Cochran's heterogeneity statistic
    ``sum(w_i (z_i - z)^2)`` and ``q_p`` its chi-square(n_runs - 1) upper tail. ``df``: the degrees of
    freedom of the t reference of the interval (infinite: the normal; :func:`fisher_pool_hksj`: runs - 1);
    ``tau2``: the between-run variance of the random-effects pool (0 for the fixed effect).
    """

    n_runs: int
    n_obs: int
    weight: float
    r: float
    z: float
    se: float
    q: float
    q_p: float
    df: float = math.inf
    tau2: float = 0.0
    #: Which standard error the interval uses (:func:`fisher_pool_hksj`); "" for a fixed-effect pool.
    se_rule: str = ""

    def crit(self, tail: float) -> float:
        """The reference distribution's quantile at ``tail`` (normal, or t with ``df``)."""
        return float(sps.norm.ppf(tail)) if not math.isfinite(self.df) else float(sps.t.ppf(tail, self.df))

    def interval(self, level: float) -> tuple[float, float]:
        """Two-sided ``level`` interval of the pooled correlation (back-transformed with tanh)."""
        if not (self.n_runs and math.isfinite(self.se)):
            return _NAN, _NAN
        half = self.crit(0.5 + level / 2.0) * self.se
        return math.tanh(self.z - half), math.tanh(self.z + half)


#: :attr:`PooledCorrelation.se_rule` of :func:`fisher_pool_hksj`.
HKSJ_PLAIN = "plain Hartung-Knapp (equal weights, 3 or more runs: exact)"
HKSJ_MODIFIED = "Hartung-Knapp floored at the random-effects se (unequal weights or 2 runs)"


def _fisher_terms(rs: Sequence[float], ns: Sequence[int], n_controls: int) -> tuple[np.ndarray, np.ndarray]:
    """Fisher's z of the runs with a finite correlation and a positive weight, and their weights ``n - 3 - k``."""
    r, n = _arr(rs), _arr(ns)
    w = n - 3.0 - float(n_controls)
    keep = np.isfinite(r) & np.isfinite(w) & (w > 0)
    return np.arctanh(np.clip(r[keep], -1.0 + 1e-12, 1.0 - 1e-12)), w[keep]


def fisher_pool_random(rs: Sequence[float], ns: Sequence[int], n_controls: int = 0) -> PooledCorrelation:
    """Random-effects pool of the correlations ``rs`` (DerSimonian-Laird on Fisher's z).

    The between-run variance ``tau^2 = max(0, (Q - (k - 1)) / (W - sum(w_i^2) / W))`` (``W = sum(w_i)``,
    ``w_i = n_i - 3 - n_controls``, Q Cochran's statistic) is added to each run's sampling variance
    ``1 / w_i``; ``z = sum(w*_i z_i) / sum(w*_i)`` with ``w*_i = 1 / (1 / w_i + tau^2)`` and
    ``se = 1 / sqrt(sum(w*_i))``. With tau^2 = 0 it equals :func:`fisher_pool`. ``q`` / ``q_p`` are the
    fixed-effect heterogeneity statistics it was computed from.
    """
    fixed = fisher_pool(rs, ns, n_controls)
    if fixed.n_runs < 2:
        return fixed
    z_i, w = _fisher_terms(rs, ns, n_controls)
    total = float(w.sum())
    tau2 = max(0.0, (fixed.q - (z_i.size - 1)) / (total - float((w ** 2).sum()) / total))
    w_star = 1.0 / (1.0 / w + tau2)
    z = float((w_star * z_i).sum() / w_star.sum())
    return PooledCorrelation(fixed.n_runs, fixed.n_obs, float(w_star.sum()), math.tanh(z), z,
                             1.0 / math.sqrt(float(w_star.sum())), fixed.q, fixed.q_p)


#: The fewest runs at which the plain Hartung-Knapp interval is used when the runs weigh the same (exact there).
HKSJ_PLAIN_MIN_RUNS = 3


def fisher_pool_hksj(rs: Sequence[float], ns: Sequence[int], n_controls: int = 0) -> PooledCorrelation:
    """Random-effects pool of the runs' correlations with the Hartung-Knapp-Sidik-Jonkman interval.

    statsmodels' ``combine_effects`` on Fisher's z (``z_i``, sampling variance ``1 / w_i``, ``w_i = n_i - 3 -
    n_controls``) with Paule-Mandel's between-run variance (``method_re="iterated"``; statsmodels 0.15's
    DerSimonian-Laird, ``"chi2"``, returns a negative tau^2 when Cochran's Q < runs - 1, measured: -0.059 on three
    equal correlations, and a NaN standard error with it); the standard error is Hartung-Knapp's (the weighted
    spread of the runs around the pooled z, so the seed-to-seed variance enters the interval even where Cochran's Q
    does not reject), and the interval's reference is t with ``runs - 1`` degrees of freedom.

    Which Hartung-Knapp (``se_rule``): where the runs weigh the same (equal ``n_i``) and there are at least
    :data:`HKSJ_PLAIN_MIN_RUNS`, the plain one: there the z_i are exchangeable normals and the interval is the t
    interval of their mean, exact whatever tau^2 (measured: 90.3% coverage at a nominal 90% with 3 runs,
    ``tests/test_calibration.py``); runs whose z are all equal have no spread to read (a degenerate interval), and
    take the modified rule. Elsewhere the modified rule (Roever et al. 2015: never below the random-effects
    se), for unequal weights, where the plain rule can be too narrow; at 3 equal-weight runs that floor covered 99.8%
    for a nominal 90%. With one run there is no between-run variance to estimate: the fixed effect (normal
    reference) is returned.
    """
    fixed = fisher_pool(rs, ns, n_controls)
    if fixed.n_runs < 2:
        return fixed
    import warnings

    from statsmodels.stats.meta_analysis import combine_effects

    z_i, w = _fisher_terms(rs, ns, n_controls)

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        # statsmodels divides by Q / (k - 1) for I^2 (and warns on sample intervals without sizes), both unused
        warnings.simplefilter("ignore")
        res = combine_effects(z_i, 1.0 / w, method_re="iterated", use_t=True)
    z = float(res.mean_effect_re)
    # equal values have no spread to read a t interval from (a degenerate, or hand-made, input): the floored rule
    plain = z_i.size >= HKSJ_PLAIN_MIN_RUNS and bool(np.all(w == w[0])) and float(np.ptp(z_i)) > 1e-12
    se = float(res.sd_eff_w_re_hksj) if plain else max(float(res.sd_eff_w_re_hksj), float(res.sd_eff_w_re))
    return PooledCorrelation(fixed.n_runs, fixed.n_obs, float(res.w_total_re), math.tanh(z), z, se, fixed.q,
                             fixed.q_p, df=float(z_i.size - 1), tau2=float(res.tau2),
                             se_rule=HKSJ_PLAIN if plain else HKSJ_MODIFIED)


def fisher_pool(rs: Sequence[float], ns: Sequence[int], n_controls: int = 0) -> PooledCorrelation:
    """Pool the correlations ``rs`` of runs with ``ns`` observations each (see :class:`PooledCorrelation`).

    Runs whose correlation is not finite or whose weight ``n - 3 - n_controls`` is not
    positive are left out; with none left every statistic is NaN. ``|r| = 1`` is
    clipped to ``1 - 1e-12`` so that z stays finite.
    """
    r, n = _arr(rs), _arr(ns)
    if r.size != n.size:
        raise ValueError(f"fisher_pool: {r.size} correlations but {n.size} sizes")
    w = n - 3.0 - float(n_controls)
    keep = np.isfinite(r) & np.isfinite(w) & (w > 0)
    r, n, w = r[keep], n[keep], w[keep]
    if r.size == 0:
        return PooledCorrelation(0, 0, 0.0, _NAN, _NAN, _NAN, _NAN, _NAN)
    z_i = np.arctanh(np.clip(r, -1.0 + 1e-12, 1.0 - 1e-12))
    total = float(w.sum())
    z = float((w * z_i).sum() / total)
    q = float((w * (z_i - z) ** 2).sum())
    q_p = float(sps.chi2.sf(q, r.size - 1)) if r.size > 1 else _NAN
    return PooledCorrelation(int(r.size), int(n.sum()), total, math.tanh(z), z, 1.0 / math.sqrt(total), q, q_p)


# --- seed-to-seed spread (F2a-spread) ----------------------------------------------------------


@dataclass(frozen=True)
class VarianceRatio:
    """sd(a) / sd(b) over seeds with the F interval of the variance ratio (square-rooted)."""

    n_a: int
    n_b: int
    sd_a: float
    sd_b: float
    ratio: float
    low: float
    high: float
    level: float


def variance_ratio(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, level: float) -> VarianceRatio:
    """``sd(a) / sd(b)`` (ddof = 1) and its two-sided ``level`` interval.

    The interval inverts the F test: ``s_a^2 / s_b^2 ~ (sigma_a^2 / sigma_b^2) F(n_a - 1, n_b - 1)``
    for independent normal samples. Seeds pair the two methods; a positive correlation
    between the paired values only narrows the true sampling distribution, so the F
    interval is conservative for them. NaN unless both have >= 2 finite values and
    ``sd(b) > 0``.
    """
    x, y = _arr(a), _arr(b)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if x.size < 2 or y.size < 2:
        return VarianceRatio(int(x.size), int(y.size), _NAN, _NAN, _NAN, _NAN, _NAN, level)
    sa, sb = float(x.std(ddof=1)), float(y.std(ddof=1))
    if sb <= 0.0:
        return VarianceRatio(int(x.size), int(y.size), sa, sb, _NAN, _NAN, _NAN, level)
    f = (sa / sb) ** 2
    d1, d2 = x.size - 1, y.size - 1
    lo = f / float(sps.f.ppf(0.5 + level / 2.0, d1, d2))
    hi = f / float(sps.f.ppf(0.5 - level / 2.0, d1, d2))
    return VarianceRatio(int(x.size), int(y.size), sa, sb, math.sqrt(f), math.sqrt(lo), math.sqrt(hi), level)


def variance_ratio_mde(n_a: int, n_b: int, alpha: float, power: float) -> float:
    """Smallest true sd ratio sigma_a / sigma_b that the one-sided F test at ``alpha`` detects with ``power``.

    The test rejects when ``F_obs > F_{1-alpha}``; under a true variance ratio ``lambda``,
    ``F_obs / lambda ~ F``, so power = P(F > F_{1-alpha} / lambda) and
    ``lambda = F_{1-alpha} / F_{1-power}``. NaN for fewer than 2 seeds on either side.
    """
    if n_a < 2 or n_b < 2:
        return _NAN
    d1, d2 = n_a - 1, n_b - 1
    return math.sqrt(float(sps.f.ppf(1.0 - alpha, d1, d2)) / float(sps.f.ppf(1.0 - power, d1, d2)))


# --- power: minimum detectable effects -----------------------------------------------------------


def t_mde(n: int, sd: float, alpha: float, power: float, *, two_sided: bool = False) -> float:
    """Minimum detectable mean (distance from the null value) of a one-sample t test on ``n`` values.

    Exact under the noncentral t distribution, with the observed ``sd`` taken as the true one: the
    smallest ``delta`` at which the test at level ``alpha`` (one-sided, or two-sided with both tails
    counted) rejects with probability ``power``, the statistic having ``n - 1`` degrees of freedom and
    noncentrality ``delta * sqrt(n) / sd``. (The textbook approximation ``(t_{1-a} + t_{power}) sd /
    sqrt(n)`` is 5 % optimistic two-sided at n = 3: 3.10 sd instead of 3.26.) NaN for n < 2 or a
    non-finite / zero sd.
    """
    if n < 2 or not math.isfinite(sd) or sd <= 0.0:
        return _NAN
    df = n - 1
    crit = float(sps.t.ppf(1.0 - (alpha / 2.0 if two_sided else alpha), df))

    def shortfall(d: float) -> float:  # power at a standardised mean d, minus the power asked for
        ncp = d * math.sqrt(n)

        # scipy's nct returns NaN in parts of this range: at df = 1 for the upper tail (then, with
        # T = (Z + ncp) / sqrt(V / df) and V ~ chi2(df), the normal tail is integrated over V), and for
        # the far lower tail (then it is below any float that matters: 0)
        upper = float(sps.nct.sf(crit, df, ncp))
        if not math.isfinite(upper):
            upper = float(quad(lambda v: float(sps.norm.sf(crit * math.sqrt(v / df) - ncp))
                               * float(sps.chi2.pdf(v, df)), 0.0, math.inf, limit=200)[0])
        lower = float(sps.nct.cdf(-crit, df, ncp)) if two_sided else 0.0
        p = upper + (lower if math.isfinite(lower) else 0.0)
        return p - power

    hi = 1.0
    while shortfall(hi) < 0.0:
        hi *= 2.0
    return float(brentq(shortfall, 0.0, hi, xtol=1e-12)) * sd


def t_equivalence_margin(n: int, sd: float, alpha: float, power: float) -> float:
    """Smallest equivalence margin a TOST on ``n`` values establishes with ``power`` when the true mean is 0.

    ``(t_{1-alpha, n-1} + t_{(1+power)/2, n-1}) * sd / sqrt(n)`` (same approximation as :func:`t_mde`).
    """
    if n < 2 or not math.isfinite(sd) or sd <= 0.0:
        return _NAN
    df = n - 1
    return (float(sps.t.ppf(1.0 - alpha, df)) + float(sps.t.ppf(0.5 + power / 2.0, df))) * sd / math.sqrt(n)


def _q(tail: float, df: float) -> float:
    """The normal quantile at ``tail``, or t's with ``df`` degrees of freedom when ``df`` is finite."""
    return float(sps.norm.ppf(tail)) if not math.isfinite(df) else float(sps.t.ppf(tail, df))


def z_mde(se: float, alpha: float, power: float, *, two_sided: bool = False, df: float = math.inf) -> float:
    """Minimum detectable distance (in Fisher z units) of a z test with standard error ``se`` (a t reference
    with ``df`` degrees of freedom when finite: the random-effects pool, :func:`fisher_pool_hksj`)."""
    if not math.isfinite(se) or se <= 0.0:
        return _NAN
    a = alpha / 2.0 if two_sided else alpha
    return (_q(1.0 - a, df) + _q(power, df)) * se


def z_equivalence_margin(se: float, alpha: float, power: float, df: float = math.inf) -> float:
    """Smallest equivalence margin (Fisher z units) a TOST with standard error ``se`` establishes with
    ``power`` when the true value is 0: ``(z_{1-alpha} + z_{(1+power)/2}) * se`` (exact for a known se; t
    quantiles with ``df`` when finite)."""
    if not math.isfinite(se) or se <= 0.0:
        return _NAN
    return (_q(1.0 - alpha, df) + _q(0.5 + power / 2.0, df)) * se
