"""Corani & Benavoli's (2015) Bayesian correlated t-test with a region of practical equivalence."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sst

from ltr_bench.stats.ttest import common_fold_pairs, paired_split_scores


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
    a, b = paired_split_scores(scores_a, scores_b)
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
    for i, j, a, b, ratio in common_fold_pairs(scores, test_train_ratio):
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
