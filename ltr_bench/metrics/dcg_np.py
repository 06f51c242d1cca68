"""DCG building blocks in NumPy: gains ``2^r - 1``, discounts ``1 / log2(rank + 1)``, ideal DCG.

The NumPy twins of :mod:`ltr_bench.metrics.dcg`, step for step, so both give the same bits
(float64; sums in torch's order, :func:`~ltr_bench.metrics.row_sums.row_sums`). Two limits, where
NumPy's ``exp2``/``log2`` and torch's (SLEEF's) round differently: gains of fractional grades
(``2^0.5``) may differ in the last bit, and so may a few discounts of ranks beyond the longest
LETOR query (1251 documents): the first such rank depends on the CPU's vector unit (measured: 1621
on an AVX2 x86-64, 7956 on an AVX-512 one).
"""

from __future__ import annotations

import numpy as np

from ltr_bench.metrics.row_sums import row_sums


def gains(labels: np.ndarray) -> np.ndarray:
    """NDCG gain ``2^r - 1`` of relevance labels (any shape), as float64."""
    return np.exp2(labels.astype(np.float64, copy=False)) - 1.0


def position_discounts(width: int) -> np.ndarray:
    """``[width]`` discounts ``1 / log2(rank + 1)`` of ranks ``1..width``."""
    return 1.0 / np.log2(np.arange(1, width + 1, dtype=np.float64) + 1.0)


def grade_counts(labels: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """``[Q, G]`` how many documents of each query hold each grade, highest grade first, for
    integer grades in 0..63 (what the sort-free IDCG needs); None for other labels."""
    if labels.dtype.kind not in "biu" or not labels.size:
        return None
    lab = np.where(mask, labels, 0)
    top = int(lab.max())
    if int(lab.min()) < 0 or top + 1 > 64:
        return None
    counts = np.empty((lab.shape[0], top + 1), dtype=np.int64)
    for grade in range(1, top + 1):  # a few grades: one pass each over the batch
        counts[:, top - grade] = np.count_nonzero(lab == grade, axis=1)
    counts[:, top] = np.count_nonzero(mask, axis=1) - counts[:, :top].sum(axis=1)  # grade 0
    return counts


def ideal_dcg(
    labels: np.ndarray, mask: np.ndarray, k: int | None = None, counts: np.ndarray | None = None
) -> np.ndarray:
    """``[Q]`` IDCG@k: the DCG@k of each query's labels sorted in descending order.

    Integer grades take the sort-free path of :func:`ltr_bench.metrics.dcg.ideal_dcg`: per-grade
    counts (:func:`grade_counts`, or ``counts`` computed once for several cut-offs) place each
    grade on a run of ideal ranks, whose discounts are a difference of discount prefix sums.
    """
    width = labels.shape[1]
    kk = width if k is None else min(k, width)
    counts = grade_counts(labels, mask) if counts is None else counts
    if counts is not None:
        end = counts.cumsum(1)
        prefix = np.concatenate([np.zeros(1), position_discounts(kk).cumsum(0)])
        run = prefix[np.minimum(end, kk)] - prefix[np.minimum(end - counts, kk)]
        n_grades = counts.shape[1]
        grade_gain = gains(np.arange(n_grades - 1, -1, -1, dtype=np.float64))
        return row_sums(run * grade_gain)
    g = np.where(mask, gains(labels), 0.0)
    g = -np.sort(-g, axis=1)[:, :kk]
    return row_sums(g * position_discounts(g.shape[1]))
