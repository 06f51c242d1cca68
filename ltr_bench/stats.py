"""Statistics for comparing rankers over folds / splits, as in the papers' Sect. 4.4 and 5.1.

- :func:`corrected_resampled_ttest`: Nadeau & Bengio (2003) corrected resampled t-test for two
  models scored on the same n train/test splits. The splits share training data, so the naive
  paired t-test underestimates the variance; the correction replaces ``1/n`` by
  ``1/n + n_test/n_train``.
- :func:`friedman_nemenyi`: Friedman test over a models x folds matrix, the Nemenyi post-hoc
  test (scikit-posthocs), average ranks and Demsar's (2006) critical difference.
- :func:`format_mean_se`: the papers' ``0.720(12)`` notation for mean and standard error.
- :func:`bayesian_correlated_ttest` (beyond the papers): Corani & Benavoli's (2015) Bayesian
  correlated t-test with a region of practical equivalence (ROPE): the probabilities that A is
  better, that A and B are practically equivalent, that B is better.
- :func:`paired_randomization_test`, :func:`paired_ttest`, :func:`holm` and
  :func:`win_tie_loss`: per-query comparisons of two rankers on one split.

Matrices of scores are ``pandas.DataFrame`` objects with one row per model and one column per
fold (or split); higher scores are better unless stated otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from itertools import combinations

import numpy as np
import pandas as pd
import scikit_posthocs as sp
from numpy.typing import ArrayLike
from scipy import stats as sst

MISSING = "–"  # shown for a missing value in every table


# --------------------------------------------------------------------------- mean(SE) notation


def mean_se(values: ArrayLike) -> tuple[float, float, int]:
    """Mean, standard error (``std(ddof=1) / sqrt(n)``) and count of the non-NaN values.

    The SE is NaN for fewer than two values; the mean is NaN for none.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    se = float(x.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return float(x.mean()), se, n


def _round_half_up(x: float, decimals: int) -> Decimal:
    """``x`` rounded half-up to ``decimals`` places (textbook rounding; no "-0.000")."""
    value = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return value.copy_abs() if value.is_zero() else value


def format_mean_se(mean: float, se: float, digits: int = 2, zero_decimals: int = 3) -> str:
    """``mean`` and standard error ``se`` in the papers' notation: ``(0.7200, 0.0121) -> "0.720(12)"``.

    The SE keeps ``digits`` significant digits, written in units of the last digit shown of the
    mean. The mean is never rounded to coarser than whole units, so a large SE is written in full:
    ``(2215, 351) -> "2215(351)"``, ``(67.3, 6.2) -> "67.3(62)"``. ``se == 0`` (or below
    ``1e-10 * |mean|``, float noise) gives ``zero_decimals`` decimals and ``(0)``; a NaN SE (one
    fold) gives the mean alone; a NaN mean gives ``"–"``. ``digits=1`` gives the style of the
    paper's Table 3, ``(67.2, 6.1) -> "67(6)"``.
    """
    if mean is None or not math.isfinite(mean):
        return MISSING
    if se is None or math.isnan(se):
        return f"{_round_half_up(mean, zero_decimals):f}"
    if se < 0 or math.isinf(se):
        raise ValueError(f"standard error must be finite and >= 0, got {se}")
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits}")
    if se <= 1e-10 * abs(mean):  # zero, or float noise of identical values (std = 4e-17)
        return f"{_round_half_up(mean, zero_decimals):f}(0)"
    exponent = math.floor(math.log10(se))
    decimals = digits - 1 - exponent
    # Rounding can carry into a new digit (0.0996 -> 0.10): then show one decimal fewer.
    if _round_half_up(se, decimals) >= Decimal(10) ** (exponent + 1):
        decimals -= 1
    decimals = max(decimals, 0)
    se_units = int(Decimal(repr(float(se))).scaleb(decimals).quantize(Decimal(1), ROUND_HALF_UP))
    return f"{_round_half_up(mean, decimals):f}({se_units})"


# --------------------------------------------------------------------------- corrected t-test


@dataclass(frozen=True)
class TTestResult:
    """Result of a (corrected) paired t-test of model a against model b."""

    t: float
    p: float  # two-sided
    df: int
    mean_diff: float  # mean of a - b; > 0 means a scored higher
    n: int  # number of paired splits used


def _paired_split_scores(scores_a: ArrayLike, scores_b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Two 1-d float arrays of equal length >= 2 without NaN (per-split scores of two models)."""
    a = np.asarray(scores_a, dtype=float)
    b = np.asarray(scores_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-d score arrays of equal length, got {a.shape} and {b.shape}")
    if a.size < 2:
        raise ValueError(f"need at least 2 paired scores, got {a.size}")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("scores contain NaN; drop unpaired splits first")
    return a, b


def corrected_resampled_ttest(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    *,
    n_train: float | ArrayLike,
    n_test: float | ArrayLike,
) -> TTestResult:
    """Nadeau-Bengio corrected resampled t-test (two-sided) for paired per-split scores.

    ``t = mean(d) / sqrt((1/n + n_test/n_train) * var(d))`` with ``d = a - b``, ``var`` the
    sample variance (ddof=1) and ``n - 1`` degrees of freedom. ``n_train``/``n_test`` are the
    training and test set sizes (scalars or one per split; per-split ratios are averaged).
    With ``n_test = 0`` this is the ordinary paired t-test (``scipy.stats.ttest_rel``).
    Zero variance gives p = 1 for identical scores and p = 0 for a constant non-zero difference.
    """
    a, b = _paired_split_scores(scores_a, scores_b)
    n = a.size
    n_tr = np.broadcast_to(np.asarray(n_train, dtype=float), a.shape)
    n_te = np.broadcast_to(np.asarray(n_test, dtype=float), a.shape)
    if (n_tr <= 0).any() or (n_te < 0).any():
        raise ValueError("n_train must be > 0 and n_test >= 0")
    ratio = float(np.mean(n_te / n_tr))
    d = a - b
    mean_d = float(d.mean())
    var_d = float(d.var(ddof=1))
    if var_d == 0.0:
        t = 0.0 if mean_d == 0.0 else math.copysign(math.inf, mean_d)
    else:
        t = mean_d / math.sqrt((1.0 / n + ratio) * var_d)
    p = float(2.0 * sst.t.sf(abs(t), n - 1))
    return TTestResult(t=t, p=p, df=n - 1, mean_diff=mean_d, n=n)


def _common_fold_pairs(scores: pd.DataFrame, test_train_ratio: float | pd.Series):
    """For every pair ``i < j`` of models (rows): ``(i, j, a, b, ratio)`` with their scores on the
    folds where both have a value (pairs with fewer than 2 such folds are skipped) and the mean
    ``n_test / n_train`` over those folds (``test_train_ratio``: scalar or Series by fold)."""
    for i, j in combinations(range(len(scores.index)), 2):
        a, b = scores.iloc[i], scores.iloc[j]
        common = a.notna() & b.notna()
        if common.sum() < 2:
            continue
        if isinstance(test_train_ratio, pd.Series):
            ratio = float(test_train_ratio.reindex(scores.columns[common.to_numpy()]).mean())
        else:
            ratio = float(test_train_ratio)
        yield i, j, a[common], b[common], ratio


def pairwise_corrected_ttests(
    scores: pd.DataFrame, test_train_ratio: float | pd.Series
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Corrected t-test between every pair of models (rows of ``scores``; columns = folds).

    Each pair uses the folds where both have a value; ``test_train_ratio`` is ``n_test/n_train``,
    a scalar or a Series indexed like the columns (averaged over the folds used). Returns the
    symmetric p-value matrix (NaN on the diagonal and for pairs with < 2 common folds) and the
    matrix of mean differences ``row - column`` over the common folds.
    """
    models = list(scores.index)
    pvals = pd.DataFrame(np.nan, index=models, columns=models)
    diffs = pd.DataFrame(np.nan, index=models, columns=models)
    for i, j, a, b, ratio in _common_fold_pairs(scores, test_train_ratio):
        res = corrected_resampled_ttest(a, b, n_train=1.0, n_test=ratio)
        pvals.iat[i, j] = pvals.iat[j, i] = res.p
        diffs.iat[i, j], diffs.iat[j, i] = res.mean_diff, -res.mean_diff
    return pvals, diffs


# --------------------------------------------------------------------------- Friedman / Nemenyi


def nemenyi_q_alpha(k: int, alpha: float = 0.05) -> float:
    """Critical value of the Nemenyi test: studentized range quantile (k groups, df = inf) / sqrt(2).

    Demsar (2006), Table 5(a): k=2: 1.960, k=3: 2.343, k=4: 2.569, k=5: 2.728, ...
    """
    if k < 2:
        raise ValueError(f"need at least 2 models, got {k}")
    return float(sst.studentized_range.ppf(1.0 - alpha, k, np.inf) / math.sqrt(2.0))


def critical_difference(k: int, n_blocks: int, alpha: float = 0.05) -> float:
    """Demsar's critical difference of average ranks: ``q_alpha * sqrt(k (k+1) / (6 N))``."""
    if n_blocks < 1:
        raise ValueError(f"need at least 1 block (fold), got {n_blocks}")
    return nemenyi_q_alpha(k, alpha) * math.sqrt(k * (k + 1) / (6.0 * n_blocks))


def average_ranks(scores: pd.DataFrame, higher_is_better: bool = True) -> pd.Series:
    """Average rank of each model (rows) over the folds (columns); 1 = best, ties share ranks."""
    values = scores.to_numpy(dtype=float)
    ranks = sst.rankdata(-values if higher_is_better else values, axis=0, method="average")
    return pd.Series(ranks.mean(axis=1), index=scores.index, name="avg_rank")


@dataclass(frozen=True)
class FriedmanResult:
    """Friedman test, Nemenyi post-hoc p-values, average ranks and the critical difference."""

    statistic: float  # Friedman chi-square (NaN for k < 3, which scipy does not test)
    p: float
    n_blocks: int  # folds used (those where every model has a value)
    n_models: int
    avg_ranks: pd.Series  # sorted, best (lowest) first
    nemenyi_p: pd.DataFrame  # symmetric, 1 on the diagonal
    cd: float
    alpha: float

    def significant_pairs(self) -> list[tuple[str, str, float]]:
        """(better, worse, p) for every pair with Nemenyi p < alpha, best-ranked first."""
        out = []
        order = list(self.avg_ranks.index)
        for i, j in combinations(range(len(order)), 2):
            p = float(self.nemenyi_p.loc[order[i], order[j]])
            if p < self.alpha:
                out.append((order[i], order[j], p))
        return out

    def groups(self) -> list[tuple[str, ...]]:
        """Maximal runs of models (by rank) whose average ranks differ by at most the CD."""
        return cd_groups(self.avg_ranks, self.cd)


def cd_groups(avg_ranks: pd.Series, cd: float) -> list[tuple[str, ...]]:
    """Maximal sets of rank-consecutive models spanning at most ``cd`` (the CD diagram's bars).

    Single models are not returned as groups.
    """
    r = avg_ranks.sort_values()
    names, vals = list(r.index), r.to_numpy()
    spans = []
    for i in range(len(vals)):
        j = int(np.searchsorted(vals, vals[i] + cd, side="right")) - 1
        if j > i and (not spans or j > spans[-1][1]):
            spans.append((i, j))
    return [tuple(names[i : j + 1]) for i, j in spans]


def friedman_nemenyi(
    scores: pd.DataFrame, alpha: float = 0.05, higher_is_better: bool = True
) -> FriedmanResult:
    """Friedman test and Nemenyi post-hoc over ``scores`` (rows = models, columns = folds).

    Folds where any model lacks a value are dropped (the tests need complete blocks). The
    Friedman statistic comes from ``scipy.stats.friedmanchisquare`` (k >= 3; NaN for k = 2), the
    pairwise p-values from ``scikit_posthocs.posthoc_nemenyi_friedman``.
    """
    complete = scores.loc[:, scores.notna().all(axis=0)]
    k, n = complete.shape
    if k < 2 or n < 2:
        raise ValueError(f"need >= 2 models and >= 2 complete folds, got {k} models, {n} folds")
    if k >= 3:
        stat, p = sst.friedmanchisquare(*complete.to_numpy(dtype=float))
        stat, p = float(stat), float(p)
    else:
        stat, p = math.nan, math.nan
    oriented = complete if higher_is_better else -complete
    nem = sp.posthoc_nemenyi_friedman(oriented.T.reset_index(drop=True))
    nem.index = nem.columns = list(complete.index)
    ranks = average_ranks(complete, higher_is_better).sort_values(kind="stable")
    return FriedmanResult(
        statistic=stat,
        p=p,
        n_blocks=n,
        n_models=k,
        avg_ranks=ranks,
        nemenyi_p=nem,
        cd=critical_difference(k, n, alpha),
        alpha=alpha,
    )


# --------------------------------------------------------------------------- Bayesian correlated t-test


@dataclass(frozen=True)
class BayesResult:
    """Posterior probabilities of the Bayesian correlated t-test for ``A - B``."""

    p_a_better: float  # P(mean difference > rope)
    p_equivalent: float  # P(|mean difference| <= rope)
    p_b_better: float  # P(mean difference < -rope)
    mean_diff: float
    scale: float  # of the Student posterior (0: a point mass at mean_diff)
    df: int
    rope: float
    n: int


def bayesian_correlated_ttest(
    scores_a: ArrayLike, scores_b: ArrayLike, *, test_train_ratio: float, rope: float = 0.01
) -> BayesResult:
    """Corani & Benavoli's (2015) Bayesian correlated t-test for paired per-split scores.

    The posterior of the mean difference ``d = a - b`` is Student's t with ``n - 1`` degrees of
    freedom, location ``mean(d)`` and scale ``sqrt((1/n + rho/(1-rho)) var(d))``, where
    ``rho/(1-rho)`` is the correlation correction of Nadeau & Bengio: ``n_test / n_train``
    (``1/(k-1)`` for k-fold cross-validation). It gives the probabilities that A is better by more
    than ``rope``, that the two are within ``rope`` of each other (practically equivalent) and that
    B is better by more than ``rope``. Equal to ``baycomp.CorrelatedTTest.probs`` for k-fold CV.
    Zero variance makes the posterior a point mass at ``mean(d)``.
    """
    a, b = _paired_split_scores(scores_a, scores_b)
    n = a.size
    if test_train_ratio < 0 or rope < 0:
        raise ValueError(f"test_train_ratio and rope must be >= 0, got {test_train_ratio}, {rope}")
    d = a - b
    mean_d = float(d.mean())
    scale = math.sqrt((1.0 / n + test_train_ratio) * float(d.var(ddof=1)))
    if scale == 0.0:
        below = 1.0 if mean_d < -rope else 0.0
        above = 1.0 if mean_d > rope else 0.0
    else:
        below = float(sst.t.cdf(-rope, n - 1, loc=mean_d, scale=scale))
        above = float(sst.t.sf(rope, n - 1, loc=mean_d, scale=scale))
    return BayesResult(
        p_a_better=above,
        p_equivalent=max(0.0, 1.0 - above - below),
        p_b_better=below,
        mean_diff=mean_d,
        scale=scale,
        df=n - 1,
        rope=rope,
        n=n,
    )


def pairwise_bayesian_ttests(
    scores: pd.DataFrame, test_train_ratio: float | pd.Series, rope: float = 0.01
) -> pd.DataFrame:
    """:func:`bayesian_correlated_ttest` for every ordered pair of models (rows of ``scores``).

    One row per unordered pair ``(a, b)`` with ``a`` before ``b`` in the index: columns ``a``,
    ``b``, ``p_a_better``, ``p_equivalent``, ``p_b_better``, ``mean_diff``, ``n``. Each pair uses
    the folds where both have a value (pairs with fewer than 2 are left out).
    """
    rows = []
    models = list(scores.index)
    for i, j, a, b, ratio in _common_fold_pairs(scores, test_train_ratio):
        r = bayesian_correlated_ttest(a, b, test_train_ratio=ratio, rope=rope)
        rows.append(
            {
                "a": models[i],
                "b": models[j],
                "p_a_better": r.p_a_better,
                "p_equivalent": r.p_equivalent,
                "p_b_better": r.p_b_better,
                "mean_diff": r.mean_diff,
                "n": r.n,
            }
        )
    cols = ["a", "b", "p_a_better", "p_equivalent", "p_b_better", "mean_diff", "n"]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------- per-query tests


def _paired(values_a: ArrayLike, values_b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(values_a, dtype=float)
    b = np.asarray(values_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-d arrays of equal length, got {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    if keep.sum() < 2:
        raise ValueError(f"need at least 2 queries with both values, got {int(keep.sum())}")
    return a[keep], b[keep]


def paired_randomization_test(
    values_a: ArrayLike, values_b: ArrayLike, *, n_resamples: int = 9999, seed: int = 0
) -> float:
    """Two-sided paired randomization (sign-flip) test of ``mean(a - b) = 0`` over queries.

    Under the null each query's pair of values is exchangeable, so the sign of each difference is
    flipped at random; ``scipy.stats.permutation_test`` does it (exactly when ``2**n`` does not
    exceed ``n_resamples``). Queries where either value is NaN are left out. Returns the p-value.
    """
    a, b = _paired(values_a, values_b)
    res = sst.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(res.pvalue)


def paired_ttest(values_a: ArrayLike, values_b: ArrayLike) -> float:
    """Two-sided paired t-test over queries (``scipy.stats.ttest_rel``); p = 1 for identical values."""
    a, b = _paired(values_a, values_b)
    if np.array_equal(a, b):
        return 1.0
    return float(sst.ttest_rel(a, b).pvalue)


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values (family-wise error control), in input order.

    ``p_(i)`` sorted ascending becomes ``max_{j<=i} min(1, (m - j + 1) p_(j))``; NaNs stay NaN and
    do not count towards ``m``.
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    vals = p[ok]
    order = np.argsort(vals, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * vals[order]))
    back = np.empty(m)
    back[order] = adjusted
    out[ok] = back
    return out


def win_tie_loss(values: pd.DataFrame, baseline: str, tol: float = 0.0) -> pd.DataFrame:
    """Per-query wins, ties and losses of every model (columns of ``values``) against ``baseline``.

    ``values`` has one row per query and one column per model. A model wins a query when its value
    exceeds the baseline's by more than ``tol``, loses when it is below by more than ``tol``, else
    ties; queries where either value is NaN are not counted. Rows: the other models.
    """
    if baseline not in values.columns:
        raise ValueError(f"baseline {baseline!r} is not one of the models {list(values.columns)}")
    base = values[baseline].to_numpy(dtype=float)
    rows = {}
    for model in values.columns:
        if model == baseline:
            continue
        d = values[model].to_numpy(dtype=float) - base
        d = d[~np.isnan(d)]
        rows[model] = {
            "win": int((d > tol).sum()),
            "tie": int((np.abs(d) <= tol).sum()),
            "loss": int((d < -tol).sum()),
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=["win", "tie", "loss"])


def per_query_comparison(
    values: pd.DataFrame, *, n_resamples: int = 9999, seed: int = 0
) -> pd.DataFrame:
    """Randomization and paired t-test p-values for every pair of models, Holm-adjusted over pairs.

    ``values``: one row per query of one split, one column per model (e.g. NDCG@10 per query).
    Rows: one per pair ``(a, b)``, with ``mean_diff`` (a - b), ``p_randomization``,
    ``p_ttest`` and their Holm-adjusted versions ``p_randomization_holm``, ``p_ttest_holm``.
    """
    rows = []
    for a, b in combinations(values.columns, 2):
        x, y = values[a].to_numpy(dtype=float), values[b].to_numpy(dtype=float)
        keep = ~(np.isnan(x) | np.isnan(y))
        rows.append(
            {
                "a": a,
                "b": b,
                "n_queries": int(keep.sum()),
                "mean_diff": float(np.mean(x[keep] - y[keep])),
                "p_randomization": paired_randomization_test(
                    x, y, n_resamples=n_resamples, seed=seed
                ),
                "p_ttest": paired_ttest(x, y),
            }
        )
    out = pd.DataFrame(
        rows, columns=["a", "b", "n_queries", "mean_diff", "p_randomization", "p_ttest"]
    )
    out["p_randomization_holm"] = holm(out["p_randomization"])
    out["p_ttest_holm"] = holm(out["p_ttest"])
    return out
