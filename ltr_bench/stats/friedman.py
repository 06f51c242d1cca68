"""Friedman test over a models x folds matrix, Nemenyi post-hoc test and Demsar's (2006) critical
difference of average ranks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
import scikit_posthocs as sp
from scipy import stats as sst


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
    spans: list[tuple[int, int]] = []
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
