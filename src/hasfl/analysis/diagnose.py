"""The capacity-grouped check of a heterogeneity estimate (paper Section 5: "any such method should
check its estimates against an analysis that groups clients by capacity").

:func:`diagnose` takes one table of per-client values from any federated-learning framework --
an estimate, the client's capacity, optionally the ground truth -- and asks how much of the
estimate capacity explains and whether a data signal is left once capacity is held fixed:

* r(estimate, capacity) with its confidence interval;
* the variance of the estimate explained by the capacity group (categorical, adjusted R^2) and,
  with a truth, by the truth (linear) and by both;
* the partial correlation r(estimate, truth | capacity) (Section 4.4's r(H~, TV | pmax));
* the correlation of estimate and truth *within* each capacity group, pooled over groups in
  Fisher's z;
* a permutation test within capacity groups: the truth is shuffled among the clients of each
  group (capacity structure kept), and the pooled within-group correlation of the data is
  compared with its permutation distribution (one-sided: the estimate rises with the truth).

The verdict: ``data signal`` when the permutation test rejects at ``alpha``; ``confounded`` when
it does not but capacity explains the estimate (the interval of r(estimate, capacity) excludes 0
or the capacity groups explain a significant share of the variance); ``inconclusive`` otherwise.
Without a truth the check can only say how much capacity explains (``confounded`` or
``inconclusive``). ``hasfl diagnose`` prints it; the workflow's Table 8 calls the same functions.

Every statistic above is invariant under ``x -> a x + b`` (a > 0) of the estimate, of the truth and
of a numeric capacity, so :func:`diagnose` first standardises each of them (:func:`standardise`:
centred on its mean, divided by its standard deviation, computed after an exact power-of-two
rescaling): an estimate in any unit (x 1e-150 or x 1e155) gives the same verdict and the same
statistics, to rounding. A constant estimate (spread <= 1e-12 of its magnitude) is ``inconclusive``
with that reason; a constant truth or capacity is kept as it is (the statistics it enters are
undefined, NaN).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats as sps

from hasfl.analysis.stats import fisher_pool, partial_corr, pearson
from hasfl.errors import HasflError

__all__ = ["PER_CLIENT", "VERDICTS", "DiagnoseError", "Diagnosis", "diagnose", "join_clients", "per_client", "read_table",
           "standardise", "within_group_r"]

#: How a per-round ledger (several rows per client, e.g. a run's participation.parquet) becomes one row per
#: client: its last round's row, or the mean of every numeric column over its rounds.
PER_CLIENT = ("last", "mean")

#: A column whose spread (max - min) is at most this share of its largest magnitude is constant.
CONSTANT_REL = 1e-12

VERDICTS = ("confounded", "data signal", "inconclusive")


class DiagnoseError(HasflError, ValueError):
    """Input that cannot be diagnosed; the message names the column or the file."""


@dataclass(frozen=True)
class Diagnosis:
    """What :func:`diagnose` found (NaN where a statistic is undefined)."""

    n: int
    groups: int
    r_capacity: float
    r_capacity_ci: tuple[float, float]
    adj_r2_capacity: float
    f_p_capacity: float
    adj_r2_truth: float
    adj_r2_both: float
    r_truth: float
    partial_r_truth: float
    within_r: float
    within_r_ci: tuple[float, float]
    within_groups: int
    permutation_p: float
    permutations: int
    alpha: float
    verdict: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able mapping."""
        return asdict(self)


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV or Parquet table, with one clear error for a missing or unreadable file."""
    p = Path(path)
    if not p.is_file():
        raise DiagnoseError(f"table '{p}' does not exist")
    try:
        return pd.read_parquet(p) if p.suffix.lower() in (".parquet", ".pq") else pd.read_csv(p)
    except Exception as exc:  # pandas / pyarrow raise many types
        raise DiagnoseError(f"table '{p}' is not a readable {'Parquet' if p.suffix == '.parquet' else 'CSV'} "
                            f"file ({type(exc).__name__}: {exc})") from exc


def per_client(df: pd.DataFrame, how: str = "last", key: str = "client_id") -> pd.DataFrame:
    """One row per client of a table with several rows per client (a per-round ledger such as a run's
    ``participation.parquet``): each client's row of its last ``round`` (``how="last"``; file order without a
    ``round`` column) or the mean of every numeric column over its rows (``"mean"``). A table with one row per
    client is returned as it is."""
    if how not in PER_CLIENT:
        raise DiagnoseError(f"--per-client must be one of {', '.join(PER_CLIENT)}, got {how!r}")
    if key not in df.columns or not df[key].duplicated().any():
        return df
    if how == "last":
        order = df.sort_values("round", kind="stable") if "round" in df.columns else df
        return order.groupby(key, sort=True).tail(1).sort_values(key).reset_index(drop=True)
    numeric = [c for c in df.columns if c != key and pd.api.types.is_numeric_dtype(df[c])]
    return df.groupby(key, sort=True)[numeric].mean().reset_index()


def join_clients(df: pd.DataFrame, other: pd.DataFrame, name: str, key: str = "client_id") -> pd.DataFrame:
    """``df`` with the columns of the per-client table ``other`` (file ``name``) it lacks, matched on ``key``
    (e.g. a ledger joined with the run's or the data stage's clients.parquet for pmax and tv)."""
    for frame, what in ((df, "the table"), (other, f"'{name}'")):
        if key not in frame.columns:
            raise DiagnoseError(f"--join: {what} has no '{key}' column to match clients on; columns: "
                                f"{', '.join(map(str, frame.columns))}")
    if other[key].duplicated().any():
        raise DiagnoseError(f"--join: '{name}' has several rows for a client (e.g. {key} "
                            f"{other[key][other[key].duplicated()].iloc[0]!r}); join a table of one row per client")
    extra = [c for c in other.columns if c == key or c not in df.columns]
    missing = ~df[key].isin(other[key])
    if bool(missing.any()):
        raise DiagnoseError(f"--join: '{name}' has no row for client(s) "
                            f"{', '.join(map(str, sorted(df.loc[missing, key].unique())[:5]))}")
    return df.merge(other[extra], on=key, how="left", validate="many_to_one")


def _column(df: pd.DataFrame, name: str, what: str) -> np.ndarray:
    if name not in df.columns:
        raise DiagnoseError(f"{what} column '{name}' is not in the table; columns: {', '.join(map(str, df.columns))}")
    values = pd.to_numeric(df[name], errors="coerce")
    bad = values.isna() & df[name].notna()
    if bad.any():
        raise DiagnoseError(f"{what} column '{name}' has non-numeric values, e.g. {df[name][bad].iloc[0]!r} "
                            f"(row {int(np.flatnonzero(bad.to_numpy())[0])})")
    out = values.to_numpy(dtype=np.float64)
    if not np.isfinite(out).all():
        raise DiagnoseError(f"{what} column '{name}' has NaN or infinite values "
                            f"({int((~np.isfinite(out)).sum())} of {len(out)} rows)")
    return out


def is_constant(x: np.ndarray) -> bool:
    """Whether ``x`` has no spread relative to its own magnitude (scale invariant, unlike an absolute bound)."""
    return bool(np.ptp(x) <= CONSTANT_REL * float(np.abs(x).max())) if x.size else True


def standardise(x: np.ndarray) -> np.ndarray:
    """``(x - mean) / sd`` of finite ``x`` (population sd), without overflow or underflow at any magnitude:
    ``x`` is first multiplied by the power of two that brings its largest magnitude into [0.5, 1) (exact),
    so ``standardise(a * x + b)`` equals ``standardise(x)`` to rounding for every a > 0. A constant ``x``
    (:func:`is_constant`) is returned unchanged."""
    x = np.asarray(x, dtype=np.float64)
    if is_constant(x):
        return x
    _, exp = np.frexp(float(np.abs(x).max()))
    y = np.ldexp(x, -int(exp))
    y = y - y.mean()
    return y / math.sqrt(float(y @ y) / len(y))


def within_group_r(estimate: np.ndarray, truth: np.ndarray, groups: np.ndarray) -> tuple[float, int, Any]:
    """Correlation of estimate and truth within each group, pooled over groups in Fisher's z
    (groups with fewer than 4 clients or a constant variable are left out)."""
    rs, ns = [], []
    for g in np.unique(groups):
        m = groups == g
        r = pearson(estimate[m], truth[m]) if m.sum() >= 4 else math.nan
        if math.isfinite(r):
            rs.append(r)
            ns.append(int(m.sum()))
    pooled = fisher_pool(rs, ns)
    return pooled.r, pooled.n_runs, pooled


#: Values of one block of permuted truths (float64: 32 MiB).
CHUNK = 1 << 22


def _permutation_p(e: np.ndarray, tv: np.ndarray, groups: np.ndarray, observed: float, permutations: int,
                   seed: int) -> float:
    """One-sided p-value of the pooled within-group correlation when the truth is shuffled within
    each capacity group ((hits + 1) / (permutations + 1)). Vectorised over permutations."""
    rng = np.random.default_rng(seed)
    z_sum, w_sum = np.zeros(permutations), 0.0
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        if len(idx) < 4 or np.ptp(e[idx]) == 0 or np.ptp(tv[idx]) == 0:
            continue  # as within_group_r: such a group carries no correlation
        ec = e[idx] - e[idx].mean()
        r = np.empty(permutations)
        # in blocks of at most CHUNK values: the same draws in the same order as one (permutations x n) array, in
        # bounded memory (a million clients were a 3.7 GiB array)
        rows = max(1, CHUNK // len(idx))
        for lo in range(0, permutations, rows):
            hi = min(permutations, lo + rows)
            perms = rng.permuted(np.broadcast_to(tv[idx], (hi - lo, len(idx))), axis=1)
            tc = perms - perms.mean(axis=1, keepdims=True)
            r[lo:hi] = (tc @ ec) / np.sqrt((tc * tc).sum(axis=1) * float(ec @ ec))
        w = len(idx) - 3.0
        z_sum += w * np.arctanh(np.clip(r, -1 + 1e-12, 1 - 1e-12))
        w_sum += w
    if w_sum <= 0:
        return math.nan
    pooled = np.tanh(z_sum / w_sum)
    hits = int((pooled >= observed - 1e-12).sum())
    return (hits + 1) / (permutations + 1)


def _f_test_p(y: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """Adjusted R^2 of y on the groups (categorical) and the F test's p-value."""
    levels = np.unique(groups)
    n, k = len(y), len(levels)
    if k < 2 or n <= k or np.ptp(y) == 0:
        return math.nan, math.nan
    grand = y.mean()
    between = sum(((groups == g).sum() * (y[groups == g].mean() - grand) ** 2) for g in levels)
    total = float(((y - grand) ** 2).sum())
    within = total - between
    r2 = between / total
    adj = 1.0 - (1.0 - r2) * (n - 1) / (n - k)
    if within <= 0:
        return adj, 0.0
    f = (between / (k - 1)) / (within / (n - k))
    return float(adj), float(sps.f.sf(f, k - 1, n - k))


def _adj_r2(y: np.ndarray, columns: list[np.ndarray]) -> float:
    design = np.column_stack([np.ones_like(y), *columns])
    n, k = design.shape
    if n <= k or np.ptp(y) == 0:
        return math.nan
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ beta
    r2 = 1.0 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum())
    return 1.0 - (1.0 - r2) * (n - 1) / (n - k)


def _dummies(groups: np.ndarray) -> list[np.ndarray]:
    return [(groups == g).astype(np.float64) for g in np.unique(groups)[1:]]


def diagnose(df: pd.DataFrame, estimate: str, capacity: str, truth: str | None = None, group: str | None = None, *,
             alpha: float = 0.05, permutations: int = 2000, seed: int = 0) -> Diagnosis:
    """The capacity-grouped analysis of ``df[estimate]`` (see the module docstring).

    ``capacity`` is numeric (e.g. pmax); ``group`` a column of capacity groups (default: the
    distinct capacity values, i.e. the tiers). The permutation test draws from ``seed``.
    """
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and 0.0 < alpha <= 0.5):
        raise DiagnoseError(f"alpha {alpha!r}: expected a test level in (0, 0.5], e.g. 0.05 (a level of 5 would call "
                            "pure noise a data signal)")
    if not (isinstance(permutations, int) and permutations >= 1):
        raise DiagnoseError(f"permutations {permutations!r}: expected a whole number of at least 1, e.g. 2000")
    if len(df) == 0:
        raise DiagnoseError("the table has no rows")
    e = _column(df, estimate, "estimate")
    cap = _column(df, capacity, "capacity")
    if group is not None:
        if group not in df.columns:
            raise DiagnoseError(f"group column '{group}' is not in the table; columns: {', '.join(map(str, df.columns))}")
        if df[group].isna().any():
            raise DiagnoseError(f"group column '{group}' has missing values")
        groups = pd.factorize(df[group])[0].astype(np.float64)
    else:
        groups = cap
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise DiagnoseError(f"fewer than 2 capacity groups in '{group or capacity}' ({n_groups}): capacity cannot "
                            "explain anything; use a table with clients of several capacities")
    if len(e) < 4:
        raise DiagnoseError(f"{len(e)} rows: at least 4 clients are needed")
    tv_raw = _column(df, truth, "truth") if truth is not None else None
    if is_constant(e):
        return _constant_estimate(len(e), n_groups, alpha, permutations if truth is not None else None)
    # every statistic below is invariant under x -> a x + b (a > 0): computed on the standardised columns
    e, cap = standardise(e), standardise(cap)
    r_cap = pearson(e, cap)
    z_half = float(sps.norm.ppf(1 - alpha / 2)) / math.sqrt(max(len(e) - 3, 1))
    r_cap_ci = ((math.tanh(math.atanh(max(min(r_cap, 1 - 1e-12), -1 + 1e-12)) - z_half),
                 math.tanh(math.atanh(max(min(r_cap, 1 - 1e-12), -1 + 1e-12)) + z_half))
                if math.isfinite(r_cap) else (math.nan, math.nan))
    adj_cap, f_p = _f_test_p(e, groups)
    capacity_explains = ((math.isfinite(r_cap_ci[0]) and (r_cap_ci[0] > 0 or r_cap_ci[1] < 0))
                         or (math.isfinite(f_p) and f_p < alpha))
    nan2 = (math.nan, math.nan)
    if truth is None:
        verdict = "confounded" if capacity_explains else "inconclusive"
        reason = (f"capacity explains the estimate (r = {r_cap:.2f}, adj. R^2 of the groups {adj_cap:.2f}, F test "
                  f"p = {f_p:.3g}); without a truth column no data signal can be tested" if capacity_explains else
                  f"capacity explains no significant share (r = {r_cap:.2f}, F test p = {f_p:.3g}); without a truth "
                  "column nothing more can be said")
        return Diagnosis(len(e), n_groups, r_cap, r_cap_ci, adj_cap, f_p, math.nan, math.nan, math.nan, math.nan,
                         math.nan, nan2, 0, math.nan, 0, alpha, verdict, reason)
    tv = standardise(tv_raw)
    adj_truth = _adj_r2(e, [tv])
    adj_both = _adj_r2(e, [*_dummies(groups), tv])
    r_truth = pearson(e, tv)
    partial = partial_corr(e, tv, cap)
    within, n_within, pooled = within_group_r(e, tv, groups)
    within_ci = pooled.interval(1 - alpha) if n_within else nan2
    perm_p = math.nan
    if n_within and permutations > 0:
        perm_p = _permutation_p(e, tv, groups, within, permutations, seed)
    if math.isfinite(perm_p) and perm_p < alpha:
        verdict = "data signal"
        reason = (f"within capacity groups the estimate rises with the truth (pooled r = {within:.2f}, permutation "
                  f"p = {perm_p:.3g} < {alpha}); capacity alone explains adj. R^2 = {adj_cap:.2f}")
    elif capacity_explains:
        verdict = "confounded"
        reason = (f"capacity explains the estimate (r = {r_cap:.2f}, adj. R^2 of the groups {adj_cap:.2f} vs "
                  f"{adj_truth:.2f} of the truth) and no data signal is left within groups (pooled r = {within:.2f}, "
                  f"permutation p = {perm_p:.3g})")
    else:
        verdict = "inconclusive"
        reason = (f"neither capacity (r = {r_cap:.2f}, F test p = {f_p:.3g}) nor the truth within groups "
                  f"(pooled r = {within:.2f}, permutation p = {perm_p:.3g}) explains the estimate at alpha = {alpha}")
    return Diagnosis(len(e), n_groups, r_cap, r_cap_ci, adj_cap, f_p, adj_truth, adj_both, r_truth, partial, within,
                     within_ci, n_within, perm_p, int(permutations), alpha, verdict, reason)


def _constant_estimate(n: int, n_groups: int, alpha: float, permutations: int | None) -> Diagnosis:
    """The diagnosis of an estimate with no spread (``permutations``: None without a truth): nothing can
    explain it, every statistic is undefined."""
    nan2 = (math.nan, math.nan)
    return Diagnosis(n, n_groups, math.nan, nan2, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan,
                     math.nan, nan2, 0, math.nan, int(permutations or 0), alpha, "inconclusive",
                     "the estimate is constant (zero variance): neither capacity nor "
                     + ("the truth" if permutations is not None else "anything else") + " can explain it")


def render(d: Diagnosis, estimate: str, capacity: str, truth: str | None) -> str:
    """A few lines for a terminal."""
    lines = [f"hasfl diagnose: {d.n} clients in {d.groups} capacity groups; estimate '{estimate}', capacity "
             f"'{capacity}'" + (f", truth '{truth}'" if truth else ""),
             f"  r(estimate, capacity)            {d.r_capacity:+.3f}  [{d.r_capacity_ci[0]:+.3f}, "
             f"{d.r_capacity_ci[1]:+.3f}]",
             f"  adj. R^2 by capacity group       {d.adj_r2_capacity:.3f}  (F test p = {d.f_p_capacity:.3g})"]
    if truth:
        lines += [f"  adj. R^2 by truth / by both      {d.adj_r2_truth:.3f} / {d.adj_r2_both:.3f}",
                  f"  r(estimate, truth)               {d.r_truth:+.3f}",
                  f"  partial r(estimate, truth | cap) {d.partial_r_truth:+.3f}",
                  f"  within-group r (pooled, {d.within_groups} groups) {d.within_r:+.3f}  "
                  f"[{d.within_r_ci[0]:+.3f}, {d.within_r_ci[1]:+.3f}]",
                  f"  permutation test within groups   p = {d.permutation_p:.4g} ({d.permutations} permutations)"]
    lines.append(f"  verdict: {d.verdict} -- {d.reason}")
    return "\n".join(lines)


def plot(df: pd.DataFrame, estimate: str, capacity: str, truth: str | None, out: str | Path,
         title: str | None = None) -> None:
    """Estimate against the truth (or against capacity without one), coloured by capacity group."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not Path(out).parent.is_dir():
        raise DiagnoseError(f"--plot {out}: its folder '{Path(out).parent}' does not exist; name a PNG in a folder "
                            "that does")
    fig, ax = plt.subplots(figsize=(5.0, 3.6), constrained_layout=True)
    x_col = truth or capacity
    for g in sorted(df[capacity].unique()):
        sub = df[df[capacity] == g]
        ax.scatter(sub[x_col], sub[estimate], s=22, label=f"{capacity} = {g:g}", alpha=0.85)
    ax.set_xlabel(x_col)
    ax.set_ylabel(estimate)
    ax.legend(fontsize=7, title="capacity group", title_fontsize=7, loc="best", frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def as_json(d: Diagnosis, columns: Mapping[str, str | None]) -> dict[str, Any]:
    """The diagnosis with the column names it was run on."""
    return {"columns": dict(columns), **d.as_dict()}
