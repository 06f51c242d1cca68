"""Per-query metric values in NumPy on a ranked batch: each returns ``(values[Q], defined[Q])``.

The twins of :mod:`ltr_bench.metrics.per_query`, step for step, so the flat evaluation gives the
same bits as the padded torch functions without importing torch (sums in torch's order,
:func:`~ltr_bench.metrics.row_sums.row_sums`; every other step is exactly rounded or exact).
"""

from __future__ import annotations

import numpy as np

from ltr_bench.metrics.dcg_np import gains, ideal_dcg, position_discounts
from ltr_bench.metrics.names import MetricSpec
from ltr_bench.metrics.ranked_np import RankedRows
from ltr_bench.metrics.row_sums import row_sums

# Counts per chunk of the pair-accuracy pass (a few int64 temporaries of that size).
_PAIR_COUNT_ELEMENTS = 1 << 20

_Raw = tuple[np.ndarray, np.ndarray]


def _ndcg(r: RankedRows, k: int | None) -> _Raw:
    """NDCG@k (``k=None``: whole query); defined where IDCG > 0."""
    g = gains(r.labels(k))  # padding has label 0, gain 0
    dcg = row_sums(g * position_discounts(g.shape[1]))
    idcg = ideal_dcg(r.input_labels, r.mask, k)
    defined = idcg > 0
    return np.minimum(dcg / np.where(defined, idcg, 1.0), 1.0), defined


def _average_precision(r: RankedRows, threshold: float) -> _Raw:
    rel = r.relevant(threshold).astype(np.float64)
    pos = np.arange(1, rel.shape[1] + 1, dtype=np.float64)
    prec_at = rel.cumsum(axis=1) / pos
    n_rel = rel.sum(axis=1)  # whole numbers: exact in any order
    defined = n_rel > 0
    return row_sums(prec_at * rel) / np.maximum(n_rel, 1.0), defined


def _precision(r: RankedRows, k: int, threshold: float) -> _Raw:
    hits = r.relevant(threshold, k).sum(axis=1).astype(np.float64)
    return hits / k, r.has_relevant(threshold)


def _reciprocal_rank(r: RankedRows, threshold: float) -> _Raw:
    rel = r.relevant(threshold)
    defined = np.asarray(rel.any(axis=1))
    first = rel.argmax(axis=1) if rel.shape[1] else np.zeros(rel.shape[0], dtype=np.int64)
    rr = 1.0 / (first.astype(np.float64) + 1.0)
    return np.where(defined, rr, 0.0), defined


def _wta(r: RankedRows, threshold: float) -> _Raw:
    return r.relevant(threshold, 1)[:, 0].astype(np.float64), r.has_relevant(threshold)


def _err(r: RankedRows, k: int | None, max_grade: float | None) -> _Raw:
    if max_grade is None:
        max_grade = float(r.raw_labels.max()) if r.raw_labels.size else 0.0
    stop = gains(r.labels(k)) / (2.0**max_grade)
    # P(user reaches rank i) = prod_{j < i} (1 - R_j): an exclusive cumulative product.
    reach = np.cumprod(1.0 - stop, axis=1)
    reach = np.concatenate([np.ones_like(reach[:, :1]), reach[:, :-1]], axis=1)
    pos = np.arange(1, stop.shape[1] + 1, dtype=np.float64)
    defined = ((r.input_labels > 0) & r.mask).any(axis=1)
    return row_sums(stop * reach / pos), defined


def _pair_accuracy(r: RankedRows, max_elements: int = _PAIR_COUNT_ELEMENTS) -> _Raw:
    """Correctly ordered pairs / pairs with different labels, by counting grades below each rank
    (see :func:`ltr_bench.metrics.per_query._pair_accuracy`); integer counts, in chunks."""
    labels = r.labels()
    q, width = labels.shape
    if q == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    levels, grade = np.unique(labels, return_inverse=True)
    grade = grade.reshape(labels.shape)
    n_levels = len(levels)
    grade = np.where(r.valid(), grade, n_levels)  # padding -> an extra level, dropped below
    rows = max(1, max_elements // (width * (n_levels + 1)))
    correct, total = [], []
    for start in range(0, q, rows):  # chunks of queries, not one query at a time
        gc = grade[start : start + rows]
        onehot = np.eye(n_levels + 1, dtype=np.int64)[gc][..., :n_levels]  # [C, L, G]
        after = onehot[:, ::-1].cumsum(1)[:, ::-1] - onehot  # counts of each grade ranked below
        below = after.cumsum(2) - after  # ... with a strictly smaller grade
        index = np.minimum(gc, n_levels - 1)[..., None]
        hit = np.take_along_axis(below, index, axis=2)[..., 0]
        correct.append((hit * (gc < n_levels)).sum(1))
        counts = onehot.sum(1)
        n = counts.sum(1)
        total.append((n * n - (counts * counts).sum(1)) // 2)
    correct_f = np.concatenate(correct).astype(np.float64)
    total_f = np.concatenate(total).astype(np.float64)
    defined = total_f > 0
    return correct_f / np.maximum(total_f, 1.0), defined


def raw_metric(spec: MetricSpec, r: RankedRows, threshold: float, max_grade: float | None) -> _Raw:
    """``(values[Q], defined[Q])`` of the metric ``spec`` on a ranked batch."""
    if spec.kind == "ndcg":
        return _ndcg(r, spec.k)
    if spec.kind == "map":
        return _average_precision(r, threshold)
    if spec.kind == "p":
        assert spec.k is not None
        return _precision(r, spec.k, threshold)
    if spec.kind == "mrr":
        return _reciprocal_rank(r, threshold)
    if spec.kind == "wta":
        return _wta(r, threshold)
    if spec.kind == "err":
        return _err(r, spec.k, max_grade)
    if spec.kind == "pair_acc":
        return _pair_accuracy(r)
    raise AssertionError(spec)
