"""Per-query metric values on a ranked batch: each returns ``(values[Q], defined[Q])``.

The ``no_relevant`` policy for queries where a metric is undefined is applied by the callers
(:mod:`ltr_bench.metrics.padded`, :mod:`ltr_bench.metrics.flat`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr_bench.metrics.dcg import gains, ideal_dcg, position_discounts
from ltr_bench.metrics.names import MetricSpec
from ltr_bench.metrics.ranked import Ranked

# Counts per chunk of the pair-accuracy pass (a few int64 temporaries of that size).
_PAIR_COUNT_ELEMENTS = 1 << 20

# Each raw metric returns (values[Q], defined[Q]); policies are applied afterwards.
_Raw = tuple[Tensor, Tensor]


def ndcg_values(r: Ranked, k: int | None) -> _Raw:
    """NDCG@k (``k=None``: whole query); defined where IDCG > 0."""
    g = gains(r.labels(k))  # padding has label 0, gain 0
    dcg = (g * position_discounts(g.shape[1], g.device, g.dtype)).sum(dim=1)
    idcg = ideal_dcg(r.input_labels, r.mask, k)
    defined = idcg > 0
    # clamp: the two sums are accumulated in different orders (last-bit rounding only)
    return (dcg / torch.where(defined, idcg, 1.0)).clamp(max=1.0), defined


def _average_precision(r: Ranked, threshold: float) -> _Raw:
    rel = r.relevant(threshold).to(r.dtype)
    pos = torch.arange(1, rel.shape[1] + 1, device=rel.device, dtype=rel.dtype)
    prec_at = rel.cumsum(dim=1) / pos
    n_rel = rel.sum(dim=1)
    defined = n_rel > 0
    return (prec_at * rel).sum(dim=1) / n_rel.clamp(min=1), defined


def _precision(r: Ranked, k: int, threshold: float) -> _Raw:
    hits = r.relevant(threshold, k).sum(dim=1).to(r.dtype)
    return hits / k, r.has_relevant(threshold)


def _reciprocal_rank(r: Ranked, threshold: float) -> _Raw:
    rel = r.relevant(threshold)
    defined = rel.any(dim=1)
    first = rel.to(torch.uint8).argmax(dim=1)  # index of the first maximum
    rr = 1.0 / (first.to(r.dtype) + 1.0)
    return torch.where(defined, rr, 0.0), defined


def _wta(r: Ranked, threshold: float) -> _Raw:
    return r.relevant(threshold, 1)[:, 0].to(r.dtype), r.has_relevant(threshold)


def _err(r: Ranked, k: int | None, max_grade: float | None) -> _Raw:
    if max_grade is None:
        max_grade = float(r.raw_labels.max()) if r.raw_labels.numel() else 0.0
    stop = gains(r.labels(k)) / (2.0**max_grade)
    # P(user reaches rank i) = prod_{j < i} (1 - R_j): an exclusive cumulative product.
    reach = torch.cumprod(1.0 - stop, dim=1)
    reach = torch.cat([torch.ones_like(reach[:, :1]), reach[:, :-1]], dim=1)
    pos = torch.arange(1, stop.shape[1] + 1, device=stop.device, dtype=stop.dtype)
    defined = ((r.input_labels > 0) & r.mask).any(dim=1)
    return (stop * reach / pos).sum(dim=1), defined


def _pair_accuracy(r: Ranked, max_elements: int = _PAIR_COUNT_ELEMENTS) -> _Raw:
    """Correctly ordered pairs / pairs with different labels, by counting grades below each rank.

    For the document at rank p, the correctly ordered pairs it heads are the documents ranked after
    it with a smaller label. With ``G`` distinct labels this needs ``[Q, L, G]`` counts instead of
    the ``[Q, L, L]`` pair matrix; rows are processed in chunks of at most ``max_elements``
    counts (a few int64 temporaries of that size) to bound memory.
    """
    labels = r.labels()
    q, width = labels.shape
    if q == 0:
        return labels.new_zeros(0), torch.zeros(0, dtype=torch.bool, device=labels.device)
    levels, grade = torch.unique(labels, return_inverse=True)
    n_levels = len(levels)
    grade = torch.where(r.valid(), grade, n_levels)  # padding -> an extra level, dropped below
    rows = max(1, max_elements // (width * (n_levels + 1)))
    correct, total = [], []
    for start in range(0, q, rows):  # chunks of queries, not one query at a time
        gc = grade[start : start + rows]
        onehot = F.one_hot(gc, n_levels + 1)[..., :n_levels]  # [C, L, G]
        after = onehot.flip(1).cumsum(1).flip(1) - onehot  # counts of each grade ranked below
        below = after.cumsum(2) - after  # ... with a strictly smaller grade
        hit = below.gather(2, gc.clamp(max=n_levels - 1).unsqueeze(2)).squeeze(2)
        correct.append((hit * (gc < n_levels)).sum(1))
        counts = onehot.sum(1)
        n = counts.sum(1)
        total.append((n * n - (counts * counts).sum(1)) // 2)
    correct_t, total_t = torch.cat(correct).to(r.dtype), torch.cat(total).to(r.dtype)
    defined = total_t > 0
    return correct_t / total_t.clamp(min=1), defined


def raw_metric(spec: MetricSpec, r: Ranked, threshold: float, max_grade: float | None) -> _Raw:
    if spec.kind == "ndcg":
        return ndcg_values(r, spec.k)
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
