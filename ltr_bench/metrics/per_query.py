"""Per-query metric values on a ranked batch: each returns ``(values[Q], defined[Q])``.

The ``no_relevant`` policy for queries where a metric is undefined is applied by the callers
(:mod:`ltr_bench.metrics.padded`, :mod:`ltr_bench.metrics.flat`).
"""

from __future__ import annotations

import numpy as np

from ltr_bench.metrics.names import MetricSpec
from ltr_bench.metrics.ranked import Ranked, gains, position_discounts

_Raw = tuple[np.ndarray, np.ndarray]


def _ndcg(r: Ranked, k: int | None) -> _Raw:
    """NDCG@k (``k=None``: whole query); defined where IDCG > 0."""
    g = gains(r.labels(k))  # padding has label 0, gain 0
    disc = position_discounts(g.shape[1])
    dcg = (g * disc).sum(axis=1)
    idcg = (r.ideal_gains[:, : g.shape[1]] * disc).sum(axis=1)
    defined = idcg > 0
    # min: DCG and IDCG of an ideal ranking may round apart in the last bit
    return np.minimum(dcg / np.where(defined, idcg, 1.0), 1.0), defined


def _average_precision(r: Ranked, threshold: float) -> _Raw:
    relevant = r.relevant(threshold)
    pos = np.arange(1, relevant.shape[1] + 1, dtype=np.float64)
    prec_at = relevant.cumsum(axis=1, dtype=np.int64) / pos
    n_rel = relevant.sum(axis=1).astype(np.float64)
    defined = n_rel > 0
    return (prec_at * relevant).sum(axis=1) / np.maximum(n_rel, 1.0), defined


def _precision(r: Ranked, k: int, threshold: float) -> _Raw:
    hits = r.relevant(threshold, k).sum(axis=1).astype(np.float64)
    return hits / k, r.has_relevant(threshold)


def _reciprocal_rank(r: Ranked, threshold: float) -> _Raw:
    rel = r.relevant(threshold)
    defined = np.asarray(rel.any(axis=1))
    first = rel.argmax(axis=1) if rel.shape[1] else np.zeros(rel.shape[0], dtype=np.int64)
    return np.where(defined, 1.0 / (first + 1.0), 0.0), defined


def _wta(r: Ranked, threshold: float) -> _Raw:
    return r.relevant(threshold, 1)[:, 0].astype(np.float64), r.has_relevant(threshold)


def _err(r: Ranked, k: int | None, max_grade: float | None) -> _Raw:
    if max_grade is None:
        max_grade = float(r.raw_labels.max()) if r.raw_labels.size else 0.0
    stop = gains(r.labels(k)) / (2.0**max_grade)
    # P(user reaches rank i) = prod_{j < i} (1 - R_j): an exclusive cumulative product.
    reach = np.cumprod(1.0 - stop, axis=1)
    reach = np.concatenate([np.ones_like(reach[:, :1]), reach[:, :-1]], axis=1)
    pos = np.arange(1, stop.shape[1] + 1, dtype=np.float64)
    defined = ((r.input_labels > 0) & r.mask).any(axis=1)
    return (stop * reach / pos).sum(axis=1), defined


def _pair_accuracy(r: Ranked) -> _Raw:
    """Correctly ordered pairs / pairs with different labels, counted grade by grade: the
    document at rank p heads one correct pair per document ranked after it with a smaller grade.
    One pass per distinct grade over ``[Q, L]`` arrays (no ``[Q, L, L]`` pair matrix)."""
    labels = r.labels()
    q = labels.shape[0]
    if q == 0:
        return np.zeros(0), np.zeros(0, dtype=bool)
    levels, grade = np.unique(labels, return_inverse=True)
    grade = np.where(r.valid(), grade.reshape(labels.shape), len(levels))  # padding: no level
    correct = np.zeros(q, dtype=np.int64)
    sum_sq = np.zeros(q, dtype=np.int64)
    smaller_after = np.zeros(grade.shape, dtype=np.int64)  # documents after p with a lower grade
    for level in range(len(levels)):
        at = grade == level
        correct += np.where(at, smaller_after, 0).sum(axis=1)
        after = at[:, ::-1].cumsum(axis=1)[:, ::-1] - at  # documents of this level after p
        smaller_after += after
        sum_sq += at.sum(axis=1) ** 2
    n = r.n_docs.astype(np.int64)
    total = ((n * n - sum_sq) // 2).astype(np.float64)
    defined = total > 0
    return correct / np.maximum(total, 1.0), defined


def raw_metric(spec: MetricSpec, r: Ranked, threshold: float, max_grade: float | None) -> _Raw:
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
