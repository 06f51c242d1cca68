"""Nadeau & Bengio's (2003) corrected resampled t-test for models scored on the same splits.

The splits share training data, so the naive paired t-test underestimates the variance; the
correction replaces ``1/n`` by ``1/n + n_test/n_train``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sst


@dataclass(frozen=True)
class TTestResult:
    """Result of a (corrected) paired t-test of model a against model b."""

    t: float
    p: float  # two-sided
    df: int
    mean_diff: float  # mean of a - b; > 0 means a scored higher
    n: int  # number of paired splits used


def paired_split_scores(scores_a: ArrayLike, scores_b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
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
    a, b = paired_split_scores(scores_a, scores_b)
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


def common_fold_pairs(
    scores: pd.DataFrame, test_train_ratio: float | pd.Series
) -> Iterator[tuple[int, int, pd.Series, pd.Series, float]]:
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
    for i, j, a, b, ratio in common_fold_pairs(scores, test_train_ratio):
        res = corrected_resampled_ttest(a, b, n_train=1.0, n_test=ratio)
        pvals.iat[i, j] = pvals.iat[j, i] = res.p
        diffs.iat[i, j], diffs.iat[j, i] = res.mean_diff, -res.mean_diff
    return pvals, diffs
