"""DCG building blocks in NumPy: gains ``2^r - 1``, discounts ``1 / log2(rank + 1)``, ideal DCG.

The NumPy twins of :mod:`ltr_bench.metrics.dcg`, step for step, so both give the same bits
(float64; sums in torch's order, :func:`~ltr_bench.metrics.row_sums.row_sums`). Two limits, where
NumPy's ``exp2``/``log2`` and torch's (SLEEF's) round differently: gains of fractional grades
(``2^0.5``) may differ in the last bit, and so may a few discounts of ranks beyond 7955 (the
first such rank on the x86-64 machine measured; LETOR queries hold at most 1251 documents).
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


def ideal_dcg(labels: np.ndarray, mask: np.ndarray, k: int | None = None) -> np.ndarray:
    """``[Q]`` IDCG@k: the DCG@k of each query's labels sorted in descending order.

    Integer grades take the sort-free path of :func:`ltr_bench.metrics.dcg.ideal_dcg`: per-grade
    counts place each grade on a run of ideal ranks, whose discounts are a difference of discount
    prefix sums.
    """
    width = labels.shape[1]
    kk = width if k is None else min(k, width)
    if labels.dtype.kind in "biu" and labels.size:
        lab = np.where(mask, labels, 0).astype(np.int64)
        n_grades = int(lab.max()) + 1
        if int(lab.min()) >= 0 and n_grades <= 64:
            cell = np.arange(lab.shape[0])[:, None] * n_grades + lab  # (query, grade)
            counts = np.bincount(cell[mask], minlength=lab.shape[0] * n_grades)
            counts = counts.reshape(lab.shape[0], n_grades)[:, ::-1]  # grades high to low
            end = counts.cumsum(1)
            prefix = np.concatenate([np.zeros(1), position_discounts(kk).cumsum(0)])
            run = prefix[np.minimum(end, kk)] - prefix[np.minimum(end - counts, kk)]
            grade_gain = gains(np.arange(n_grades - 1, -1, -1, dtype=np.float64))
            return row_sums(run * grade_gain)
    g = np.where(mask, gains(labels), 0.0)
    g = -np.sort(-g, axis=1)[:, :kk]
    return row_sums(g * position_discounts(g.shape[1]))
