"""Ranking metrics: NDCG@k, MAP, P@k, MRR, WTA, ERR@k and pairwise accuracy.

Two layers:

* **Padded torch functions** (``ndcg_padded`` & co.) take ``scores[Q, L]``, ``labels[Q, L]`` and a
  boolean ``mask[Q, L]`` on any device and return one value per query, with no Python loop over
  queries. Rankers use them for training-time validation; LambdaRank reuses the building blocks
  :func:`gains`, :func:`discounts`, :func:`ranks_padded` and :func:`ideal_dcg`.
* **Flat NumPy API** (``ndcg_at_k``, ``average_precision``, ``evaluate``) for flat arrays: labels
  in query blocks delimited by ``offsets`` (anything shaped like :class:`QueryBlocks`, such as the
  data layer's ``QuerySet``), or a ``qid`` per document. Queries are padded in chunks of bounded
  size by :mod:`ltr_bench.data.padding`, so memory stays bounded for any number of queries.

Metrics know arrays and tensors only: no dataset type, no model, no logging.

Conventions (the same everywhere, and logged with every run through :attr:`EvalResult.policy`):

* Score ties are broken by document order: of two documents with equal scores, the one that comes
  first in the input ranks higher (a stable descending sort).
* NDCG@k (DirectRanker paper, Sect. 4.1): gain ``2^r - 1``, discount ``1 / log2(i + 1)`` for
  1-based rank ``i``; ``k`` larger than a query means the whole query; IDCG@k is the DCG@k of the
  query's own labels in ideal order.
* Binary metrics count a document as relevant when ``label >= threshold``. AP (Sect. 4.2, SortNet
  Sect. 3): the mean of P@i over the ranks ``i`` of the relevant documents, divided by the number of
  relevant documents. P@k divides by ``k`` even when the query has fewer documents (missing
  documents count as irrelevant, as in TREC and the LETOR evaluation script). MRR: reciprocal rank
  of the first relevant document. WTA (Burges, eq. 3): 1 if the top-ranked document is relevant,
  else 0 (the WTA *cost* of the paper is ``1 - WTA``).
* ERR@k (Chapelle et al. 2009): ``sum_r 1/r * R_r * prod_{i<r} (1 - R_i)`` with
  ``R = (2^g - 1) / 2^g_max``; ``g_max`` is a parameter, by default the largest label present.
* Pairwise accuracy (Burges, Sect. 2, "pair-wise error" = ``1 - pair_acc``): the fraction of
  document pairs of a query with different labels that the ranking puts in the right order.
* Queries where a metric is undefined -- above all queries without any relevant document -- follow
  the explicit ``no_relevant`` policy: ``"drop"`` (the papers' choice: excluded from the mean;
  padded functions return NaN for them), ``"zero"`` or ``"one"``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ltr_bench.data.padding import evaluation_chunks, pad_values
from ltr_bench.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "NoRelevantPolicy",
    "NO_RELEVANT_POLICIES",
    "TIE_BREAK",
    "DEFAULT_METRICS",
    "EvalResult",
    "QueryBlocks",
    "MetricSpec",
    "parse_metric",
    "gains",
    "discounts",
    "sort_order",
    "ranks_padded",
    "ideal_dcg",
    "has_relevant",
    "ndcg_padded",
    "average_precision_padded",
    "precision_padded",
    "reciprocal_rank_padded",
    "wta_padded",
    "err_padded",
    "pair_accuracy_padded",
    "metric_padded",
    "evaluate_padded",
    "mean_over_queries",
    "ndcg_at_k",
    "average_precision",
    "evaluate",
]

NoRelevantPolicy = Literal["drop", "zero", "one"]
NO_RELEVANT_POLICIES: tuple[str, ...] = ("drop", "zero", "one")
TIE_BREAK = "document_order"
DEFAULT_METRICS: tuple[str, ...] = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map", "mrr")

# Elements per padded chunk in the flat API (4M x float64 = 32 MB per [C, L] array).
_CHUNK_ELEMENTS = 1 << 22


# ====================================================================== building blocks
def _float_dtype(device: torch.device) -> torch.dtype:
    """float64 for exact evaluation; float32 only where the device has no float64 (MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def gains(labels: Tensor) -> Tensor:
    """NDCG gain ``2^r - 1`` of relevance labels (any shape); float labels keep their dtype."""
    labels = labels if labels.is_floating_point() else labels.to(_float_dtype(labels.device))
    return torch.exp2(labels) - 1.0


def discounts(ranks: Tensor) -> Tensor:
    """NDCG discount factor ``1 / log2(rank + 1)`` for 1-based ranks (any shape)."""
    ranks = ranks if ranks.is_floating_point() else ranks.to(_float_dtype(ranks.device))
    return 1.0 / torch.log2(ranks + 1.0)


def _is_prefix(mask: Tensor) -> bool:
    """True if every row's real documents come before its padding (as :mod:`ltr_bench.data.padding`
    pads)."""
    return mask.shape[1] < 2 or not bool((mask[:, 1:] & ~mask[:, :-1]).any())


def _stable_argsort(keys: Tensor) -> Tensor:
    """Row-wise stable ascending argsort of a float tensor (ties keep column order).

    On CPU NumPy's SIMD sorts are used, which are several times faster than
    ``torch.sort(stable=True)``: float32 keys become one integer per element, (order-preserving
    bits of the key, column), sorted once; float64 keys take an unstable argsort and then a sort of
    (tie group, column) to order ties. Other devices use the torch sort. All give the same order.
    """
    if keys.device.type != "cpu" or keys.shape[1] < 2:
        return torch.sort(keys, dim=1, stable=True).indices
    x = keys.numpy()
    width = x.shape[1]
    if x.dtype == np.float32:
        bits = (x + np.float32(0.0)).view(np.uint32)  # + 0.0 turns -0.0 into +0.0 (they tie)
        bits = np.where(bits >> 31, ~bits, bits | np.uint32(1 << 31))  # float order -> uint order
        composite = (bits.astype(np.uint64) << np.uint64(32)) | np.arange(width, dtype=np.uint64)
        composite.sort(axis=1)
        return torch.from_numpy((composite & np.uint64(0xFFFFFFFF)).astype(np.int64))
    shift = (width - 1).bit_length()
    idx = np.argsort(x, axis=1)
    ranked = np.sort(x, axis=1)  # = x[idx] row by row, but faster than a gather
    composite = np.zeros(x.shape, dtype=np.int64)  # tie group number, then the column
    np.cumsum(ranked[:, 1:] != ranked[:, :-1], axis=1, out=composite[:, 1:])
    np.left_shift(composite, shift, out=composite)
    composite |= idx
    composite.sort(axis=1)
    composite &= (1 << shift) - 1
    return torch.from_numpy(composite)


def _stable_top_k(keys: Tensor, k: int) -> Tensor:
    """``[Q, k]``: the first ``k`` columns of :func:`_stable_argsort` (the ``k`` smallest keys per
    row, ascending, ties by column), without sorting whole rows.

    A partition finds each row's k-th smallest key; every key up to it (the k smallest plus any
    ties with the k-th) is a candidate; the candidates, in column order, are few and get the stable
    sort. Costs O(L) per row instead of O(L log L).
    """
    if keys.device.type != "cpu" or k >= keys.shape[1]:
        return _stable_argsort(keys)[:, :k]
    x = keys.numpy()
    kth = np.partition(x, k - 1, axis=1)[:, k - 1 : k]
    candidate = x <= kth
    rows, cols = np.nonzero(candidate)  # row-major: columns ascending within a row
    counts = np.bincount(rows, minlength=x.shape[0])
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    sub_keys = np.full((x.shape[0], int(counts.max())), np.inf, dtype=x.dtype)
    sub_keys[rows, slot] = x[rows, cols]  # the fill sorts after every candidate
    sub_cols = np.zeros(sub_keys.shape, dtype=np.int64)
    sub_cols[rows, slot] = cols
    order = _stable_argsort(torch.from_numpy(sub_keys))[:, :k].numpy()
    return torch.from_numpy(np.take_along_axis(sub_cols, order, axis=1))


def _ranking_keys(scores: Tensor, mask: Tensor) -> tuple[Tensor, Tensor | None]:
    """Keys whose stable ascending sort is the ranking, plus the column map for odd masks.

    Keys are ``-score``; padding and NaN scores get +inf. Rows whose real documents do not come
    first are reordered (real documents first, order kept) and ``perm`` maps back; with real
    documents first, a stable sort keeps real -inf scores ahead of the padding.
    """
    mask = mask.to(torch.bool)
    scores = scores.detach()  # metrics are not differentiable; NumPy needs a plain tensor
    if scores.dtype not in (torch.float32, torch.float64):  # ints, half, bfloat16: exact upcast
        scores = scores.to(_float_dtype(scores.device))
    perm = None
    if not _is_prefix(mask):
        perm = torch.sort(mask.to(torch.uint8), dim=1, descending=True, stable=True).indices
        scores, mask = scores.gather(1, perm), mask.gather(1, perm)
    return (-scores).masked_fill_(~mask | scores.isnan(), math.inf), perm


def sort_order(scores: Tensor, mask: Tensor, k: int | None = None) -> Tensor:
    """``[Q, L]`` column indices of each row's documents by descending score (``[Q, k]``: only
    the top ``k`` ranks, found without a full sort).

    Ties are broken by document order (column order); NaN scores rank like -inf; padded
    positions always come last.
    """
    keys, perm = _ranking_keys(scores, mask)
    return _order_of_keys(keys, perm, k)


def _order_of_keys(keys: Tensor, perm: Tensor | None, k: int | None) -> Tensor:
    order = _stable_argsort(keys) if k is None else _stable_top_k(keys, k)
    return order if perm is None else perm.gather(1, order)


def ranks_padded(scores: Tensor, mask: Tensor) -> Tensor:
    """``[Q, L]`` 1-based rank of every document in its query (ties by document order).

    Padded positions get the ranks after the query's last document.
    """
    order = sort_order(scores, mask)
    positions = torch.arange(1, order.shape[1] + 1, device=order.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, positions)


def _position_discounts(width: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    return discounts(torch.arange(1, width + 1, device=device, dtype=dtype))


def ideal_dcg(labels: Tensor, mask: Tensor, k: int | None = None) -> Tensor:
    """``[Q]`` IDCG@k: the DCG@k of each query's labels sorted in descending order.

    Integer labels take a sort-free path: per-grade counts place each grade on a run of ideal
    ranks, whose discounts are a difference of discount prefix sums.
    """
    mask = mask.to(torch.bool)
    width = labels.shape[1]
    kk = width if k is None else min(k, width)
    if not labels.is_floating_point() and labels.numel():
        lab = labels.masked_fill(~mask, 0)
        n_grades = int(lab.max()) + 1
        if int(lab.min()) >= 0 and n_grades <= 64:
            dtype = _float_dtype(labels.device)
            counts = torch.zeros(lab.shape[0], n_grades, dtype=torch.long, device=lab.device)
            counts = counts.scatter_add_(1, lab.long(), mask.long()).flip(1)  # grades high to low
            end = counts.cumsum(1)
            disc = _position_discounts(kk, lab.device, dtype)
            prefix = torch.cat([disc.new_zeros(1), disc.cumsum(0)])
            run = prefix[end.clamp(max=kk)] - prefix[(end - counts).clamp(max=kk)]
            grade_gain = gains(torch.arange(n_grades - 1, -1, -1, device=lab.device, dtype=dtype))
            return (run * grade_gain).sum(1)
    g = gains(labels.to(_float_dtype(labels.device))).masked_fill(~mask, 0.0)
    g = torch.sort(g, dim=1, descending=True).values[:, :kk]
    return (g * _position_discounts(g.shape[1], g.device, g.dtype)).sum(dim=1)


def has_relevant(labels: Tensor, mask: Tensor, threshold: float = 1) -> Tensor:
    """``[Q]`` True for queries with at least one document with ``label >= threshold``."""
    return ((labels >= threshold) & mask.to(torch.bool)).any(dim=1)


# ====================================================================== ranked view
class _Ranked:
    """A padded batch in ranked order, shared by all metrics of one evaluation.

    Sorts once; ranked labels are gathered lazily (only the top k for @k metrics). Real documents
    always precede padding in ranked order, so "valid at rank i" is ``i < n_docs``. With
    ``depth``, only the top ``depth`` ranks are ordered (enough for metrics cut off at or above
    it, see :func:`_ranking_depth`).
    """

    def __init__(
        self, scores: Tensor, labels: Tensor, mask: Tensor, depth: int | None = None
    ) -> None:
        if scores.shape != labels.shape or scores.shape != mask.shape or scores.dim() != 2:
            raise ValueError(
                f"scores {tuple(scores.shape)}, labels {tuple(labels.shape)} and mask "
                f"{tuple(mask.shape)} must be the same [Q, L] shape"
            )
        mask = mask.to(torch.bool)
        if scores.shape[1] == 0:  # no documents at all: one padded column keeps shapes valid
            scores, labels, mask = (F.pad(t, (0, 1)) for t in (scores, labels, mask))
        keys, perm = _ranking_keys(scores, mask)
        self._setup(keys, perm, labels, mask, depth)

    @classmethod
    def from_keys(
        cls, keys: Tensor, labels: Tensor, mask: Tensor, depth: int | None = None
    ) -> _Ranked:
        """From ranking keys (``-score``, ``+inf`` at padding) of rows whose real documents come
        first, as the flat evaluation pads them: no score copy, no key pass."""
        ranked = cls.__new__(cls)
        ranked._setup(keys, None, labels, mask, depth)
        return ranked

    def _setup(
        self, keys: Tensor, perm: Tensor | None, labels: Tensor, mask: Tensor, depth: int | None
    ) -> None:
        self.input_labels = labels  # as given: integer labels allow a sort-free IDCG
        self.mask = mask
        self.dtype = _float_dtype(keys.device)
        self.width = mask.shape[1]
        self.n_docs = mask.sum(dim=1)
        self.depth = None if depth is None or depth >= self.width else int(depth)
        self.order = _order_of_keys(keys, perm, self.depth)  # [Q, L or depth] ranked columns
        self._full: Tensor | None = None

    @functools.cached_property
    def raw_labels(self) -> Tensor:
        """``[Q, L]`` float labels in input order, 0 at padding."""
        return self.input_labels.to(self.dtype).masked_fill(~self.mask, 0.0)

    def valid(self, k: int | None = None) -> Tensor:
        """``[Q, min(k, L)]`` True where the rank holds a real document."""
        k = self.width if k is None else min(k, self.width)
        return torch.arange(k, device=self.mask.device) < self.n_docs.unsqueeze(1)

    def labels(self, k: int | None = None) -> Tensor:
        """``[Q, min(k, L)]`` float labels of the top-k ranks, 0 at padding."""
        if self.depth is not None and (k is None or k > self.depth):
            raise ValueError(
                f"ranked to depth {self.depth} only, but ranks up to {k or self.width} were asked"
            )
        if self._full is None and k is not None and k < self.width:
            top = self.input_labels.gather(1, self.order[:, :k]).to(self.dtype)
            return top.masked_fill(~self.valid(k), 0.0)
        if self._full is None:
            self._full = self.raw_labels.gather(1, self.order)
        return self._full[:, :k]

    def relevant(self, threshold: float, k: int | None = None) -> Tensor:
        return (self.labels(k) >= threshold) & self.valid(k)

    def has_relevant(self, threshold: float) -> Tensor:
        return ((self.input_labels >= threshold) & self.mask).any(dim=1)


# Each raw metric returns (values[Q], defined[Q]); policies are applied afterwards.
_Raw = tuple[Tensor, Tensor]


def _ndcg(r: _Ranked, k: int | None) -> _Raw:
    g = gains(r.labels(k))  # padding has label 0, gain 0
    dcg = (g * _position_discounts(g.shape[1], g.device, g.dtype)).sum(dim=1)
    idcg = ideal_dcg(r.input_labels, r.mask, k)
    defined = idcg > 0
    # clamp: the two sums are accumulated in different orders (last-bit rounding only)
    return (dcg / torch.where(defined, idcg, 1.0)).clamp(max=1.0), defined


def _average_precision(r: _Ranked, threshold: float) -> _Raw:
    rel = r.relevant(threshold).to(r.dtype)
    pos = torch.arange(1, rel.shape[1] + 1, device=rel.device, dtype=rel.dtype)
    prec_at = rel.cumsum(dim=1) / pos
    n_rel = rel.sum(dim=1)
    defined = n_rel > 0
    return (prec_at * rel).sum(dim=1) / n_rel.clamp(min=1), defined


def _precision(r: _Ranked, k: int, threshold: float) -> _Raw:
    hits = r.relevant(threshold, k).sum(dim=1).to(r.dtype)
    return hits / k, r.has_relevant(threshold)


def _reciprocal_rank(r: _Ranked, threshold: float) -> _Raw:
    rel = r.relevant(threshold)
    defined = rel.any(dim=1)
    first = rel.to(torch.uint8).argmax(dim=1)  # index of the first maximum
    rr = 1.0 / (first.to(r.dtype) + 1.0)
    return torch.where(defined, rr, 0.0), defined


def _wta(r: _Ranked, threshold: float) -> _Raw:
    return r.relevant(threshold, 1)[:, 0].to(r.dtype), r.has_relevant(threshold)


def _err(r: _Ranked, k: int | None, max_grade: float | None) -> _Raw:
    if max_grade is None:
        max_grade = float(r.raw_labels.max()) if r.raw_labels.numel() else 0.0
    stop = gains(r.labels(k)) / (2.0**max_grade)
    # P(user reaches rank i) = prod_{j < i} (1 - R_j): an exclusive cumulative product.
    reach = torch.cumprod(1.0 - stop, dim=1)
    reach = torch.cat([torch.ones_like(reach[:, :1]), reach[:, :-1]], dim=1)
    pos = torch.arange(1, stop.shape[1] + 1, device=stop.device, dtype=stop.dtype)
    defined = ((r.input_labels > 0) & r.mask).any(dim=1)
    return (stop * reach / pos).sum(dim=1), defined


def _pair_accuracy(r: _Ranked, max_elements: int = _CHUNK_ELEMENTS // 4) -> _Raw:
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


# ====================================================================== metric names
@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name: ``kind`` ("ndcg", "map", "p", "mrr", "wta", "err", "pair_acc")
    and the cut-off ``k`` (None = whole query)."""

    name: str
    kind: str
    k: int | None = None


_WITH_K = ("ndcg", "p", "err")  # "ndcg" and "err" without @k use the whole query
_WITHOUT_K = ("map", "mrr", "wta", "pair_acc")
_VALID_NAMES = (
    "ndcg@k, map, p@k, mrr, wta, err@k, pair_acc (k a positive integer; plain ndcg and err use "
    "the whole query)"
)
_NAME_RE = re.compile(r"^([a-z_]+)(?:@(\d+))?$")


def parse_metric(name: str) -> MetricSpec:
    """Parse a metric name such as ``"ndcg@10"``; raise :class:`UserError` for unknown names."""
    text = str(name).strip().lower()
    match = _NAME_RE.match(text)
    kind, k = (match.group(1), match.group(2)) if match else (None, None)
    ok = match is not None and (
        (kind in _WITH_K and (k is not None or kind != "p")) or (kind in _WITHOUT_K and k is None)
    )
    if not ok or (k is not None and int(k) < 1):
        raise UserError(f"unknown metric {name!r}; valid metrics are {_VALID_NAMES}")
    return MetricSpec(name=text, kind=kind, k=int(k) if k is not None else None)


def _ranking_depth(specs: Sequence[MetricSpec]) -> int | None:
    """How many top ranks the metrics need: the largest cut-off when every metric has one
    (ndcg@k, p@k, err@k; wta looks at rank 1), else None (a full ranking)."""
    depths = [1 if s.kind == "wta" else s.k if s.kind in _WITH_K else None for s in specs]
    return None if not depths or None in depths else max(depths)  # type: ignore[type-var]


def _raw_metric(spec: MetricSpec, r: _Ranked, threshold: float, max_grade: float | None) -> _Raw:
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


def _policy_value(no_relevant: str) -> float:
    if no_relevant not in NO_RELEVANT_POLICIES:
        raise UserError(
            f"no_relevant={no_relevant!r} is not a valid policy; use one of {NO_RELEVANT_POLICIES}"
        )
    return {"drop": math.nan, "zero": 0.0, "one": 1.0}[no_relevant]


def _apply_policy(values: Tensor, defined: Tensor, no_relevant: str) -> Tensor:
    return torch.where(defined, values, _policy_value(no_relevant))


# ====================================================================== padded torch API
def ndcg_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int | None = None,
    *,
    no_relevant: NoRelevantPolicy = "drop",
) -> Tensor:
    """``[Q]`` NDCG@k per query (``k=None``: whole query). Queries with IDCG = 0 (no label > 0)
    get the ``no_relevant`` value (NaN for "drop")."""
    return _apply_policy(*_ndcg(_Ranked(scores, labels, mask), k), no_relevant)


def average_precision_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
) -> Tensor:
    """``[Q]`` average precision per query (relevant: ``label >= threshold``)."""
    r = _Ranked(scores, labels, mask)
    return _apply_policy(*_average_precision(r, threshold), no_relevant)


def precision_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int,
    *,
    threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
) -> Tensor:
    """``[Q]`` P@k per query: relevant documents among the top k, divided by k."""
    r = _Ranked(scores, labels, mask)
    return _apply_policy(*_precision(r, k, threshold), no_relevant)


def reciprocal_rank_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
) -> Tensor:
    """``[Q]`` reciprocal rank of the first relevant document per query (MRR before the mean)."""
    r = _Ranked(scores, labels, mask)
    return _apply_policy(*_reciprocal_rank(r, threshold), no_relevant)


def wta_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
) -> Tensor:
    """``[Q]`` winner takes all: 1 if the top-ranked document is relevant, else 0."""
    r = _Ranked(scores, labels, mask)
    return _apply_policy(*_wta(r, threshold), no_relevant)


def err_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    k: int | None = None,
    *,
    max_grade: float | None = None,
    no_relevant: NoRelevantPolicy = "drop",
) -> Tensor:
    """``[Q]`` expected reciprocal rank @k; ``max_grade`` defaults to the largest label given.
    Queries whose labels are all 0 get the ``no_relevant`` value."""
    r = _Ranked(scores, labels, mask)
    return _apply_policy(*_err(r, k, max_grade), no_relevant)


def pair_accuracy_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    no_relevant: NoRelevantPolicy = "drop",
) -> Tensor:
    """``[Q]`` fraction of pairs with different labels in the right order. Queries without such a
    pair get the ``no_relevant`` value."""
    r = _Ranked(scores, labels, mask)
    return _apply_policy(*_pair_accuracy(r), no_relevant)


def evaluate_padded(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    names: Sequence[str] = DEFAULT_METRICS,
    *,
    relevance_threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
    max_grade: float | None = None,
) -> dict[str, Tensor]:
    """Several metrics by name on one padded batch (sorted once): ``{name: [Q] tensor}``.

    Queries without a document with ``label >= relevance_threshold``, and queries where a metric
    is undefined, get the ``no_relevant`` value (NaN for "drop"; average with
    :func:`mean_over_queries`).
    """
    specs = [parse_metric(n) for n in names]
    fill = _policy_value(no_relevant)
    r = _Ranked(scores, labels, mask)
    keep = r.has_relevant(relevance_threshold)
    out = {}
    for spec in specs:
        values, defined = _raw_metric(spec, r, relevance_threshold, max_grade)
        out[spec.name] = torch.where(defined & keep, values, fill)
    return out


def metric_padded(
    name: str,
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    relevance_threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
    max_grade: float | None = None,
) -> Tensor:
    """One metric by name (e.g. a ranker's validation metric "ndcg@10"): ``[Q]`` values."""
    return evaluate_padded(
        scores,
        labels,
        mask,
        (name,),
        relevance_threshold=relevance_threshold,
        no_relevant=no_relevant,
        max_grade=max_grade,
    )[parse_metric(name).name]


def mean_over_queries(values: Tensor) -> Tensor:
    """Mean over the kept queries (NaN entries are dropped queries); NaN if none is kept."""
    return torch.nanmean(values)


# ====================================================================== flat NumPy API
@dataclass
class EvalResult:
    """Metric means and per-query values of one evaluation.

    ``per_query[name][i]`` belongs to query ``qids[i]``; only kept queries are listed (all
    queries unless ``no_relevant="drop"``). A value can still be NaN where the metric is undefined
    for a kept query (pair_acc when all labels are equal); means skip NaN.
    """

    means: dict[str, float]
    per_query: dict[str, np.ndarray]
    qids: np.ndarray
    policy: dict[str, Any] = field(default_factory=dict)
    n_dropped: int = 0

    def to_frame(self) -> pd.DataFrame:
        """Per-query values as a pandas DataFrame indexed by qid, one column per metric."""
        import pandas as pd

        return pd.DataFrame(self.per_query, index=pd.Index(self.qids, name="qid"))


def _as_numpy(values: Any) -> np.ndarray:
    if isinstance(values, Tensor):
        values = values.detach().cpu().numpy()
    return np.asarray(values)


def _check_inputs(scores: np.ndarray, labels: np.ndarray) -> None:
    if scores.ndim != 1 or scores.shape != labels.shape:
        raise UserError(
            f"scores {scores.shape} must be a flat array with one score per document "
            f"(labels {labels.shape})"
        )
    if scores.dtype.kind not in "biuf":
        raise UserError(f"scores must be numeric, got dtype {scores.dtype}")
    if np.isnan(scores).any():
        raise UserError(f"scores contain {int(np.isnan(scores).sum())} NaN value(s)")
    if labels.size and labels.min() < 0:
        raise UserError("labels must be non-negative relevance grades")


def _compact_labels(labels: np.ndarray) -> np.ndarray:
    """Integer-valued labels as the narrowest integer type that holds them (fewer bytes in every
    padded pass; integers also allow the sort-free IDCG), other labels as float64."""
    if labels.dtype.kind in "biu" or np.array_equal(labels, np.round(labels)):
        top = int(labels.max()) if labels.size else 0
        return labels.astype(
            np.int8 if top < 128 else np.int16 if top < 2**15 else np.int64, copy=False
        )
    return labels.astype(np.float64, copy=False)


def _evaluate_blocks(
    scores: np.ndarray,
    labels: np.ndarray,
    offsets: np.ndarray,
    specs: list[MetricSpec],
    threshold: float,
    max_grade: float | None,
    max_elements: int = _CHUNK_ELEMENTS,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Raw per-query values, defined-masks and has-relevant flags for contiguous query blocks."""
    n_q = len(offsets) - 1
    if max_grade is None:  # one g_max for all chunks
        max_grade = float(labels.max()) if labels.size else 0.0
    values = {s.name: np.zeros(n_q) for s in specs}
    defined = {s.name: np.zeros(n_q, dtype=bool) for s in specs}
    n_relevant = np.r_[0, np.cumsum(labels >= threshold)]
    keep = n_relevant[offsets[1:]] > n_relevant[offsets[:-1]]  # query has a relevant document
    # Ranking keys -score (float32 scores, what neural rankers give, stay float32: exact, and a
    # faster sort); scores were checked free of NaN. Padding gets +inf, so it ranks last.
    keys = -(scores if scores.dtype == np.float32 else scores.astype(np.float64, copy=False))
    labels = _compact_labels(labels)
    depth = _ranking_depth(specs)
    for queries in evaluation_chunks(np.diff(offsets), max_elements):
        (k_pad, l_pad), mask = pad_values([keys, labels], offsets, queries, fills=(np.inf, 0))
        k_t, l_t, m_t = torch.from_numpy(k_pad), torch.from_numpy(l_pad), torch.from_numpy(mask)
        r = _Ranked.from_keys(k_t, l_t, m_t, depth=depth)
        for spec in specs:
            v, d = _raw_metric(spec, r, threshold, max_grade)
            values[spec.name][queries] = v.numpy()
            defined[spec.name][queries] = d.numpy()
    return values, defined, keep


class QueryBlocks(Protocol):
    """What :func:`evaluate` reads of the scored data: flat labels in query blocks.

    ``labels[N]``; ``offsets[Q + 1]`` delimiting the blocks (rows ``offsets[q]:offsets[q + 1]``
    are query ``q``); ``query_ids[Q]`` naming them. The data layer's ``QuerySet`` has these.
    """

    @property
    def labels(self) -> np.ndarray: ...

    @property
    def offsets(self) -> np.ndarray: ...

    @property
    def query_ids(self) -> np.ndarray: ...


def evaluate(
    scores: np.ndarray,
    data: QueryBlocks,
    names: Sequence[str] = DEFAULT_METRICS,
    relevance_threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
    max_grade: float | None = None,
) -> EvalResult:
    """Evaluate one score per document of ``data`` with the named metrics.

    Args:
        scores: ``[N]`` scores in the document order of ``data`` (higher = more relevant).
        data: the scored queries: labels, query blocks (offsets) and query ids, e.g. a QuerySet.
        names: metric names, e.g. ``("ndcg@10", "map", "p@5", "mrr", "wta", "err@10", "pair_acc")``.
        relevance_threshold: a document is relevant when ``label >= relevance_threshold``
            (MAP, P@k, MRR, WTA, and which queries count as "without relevant documents").
        no_relevant: queries without a relevant document are dropped ("drop", the papers' choice)
            or scored 0 ("zero") or 1 ("one") by every metric.
        max_grade: ERR's largest grade; default the largest label in ``data``.

    Returns:
        An :class:`EvalResult`; its ``policy`` dict is meant to be logged with the run.
    """
    specs = [parse_metric(n) for n in names]
    fill = _policy_value(no_relevant)
    scores = _as_numpy(scores).reshape(-1)
    labels = np.asarray(data.labels)
    _check_inputs(scores, labels)
    data_max = float(labels.max()) if labels.size else 0.0
    if max_grade is None:
        max_grade = data_max
    elif max_grade < data_max:
        raise UserError(f"max_grade={max_grade} is below the largest label {data_max:g}")
    values, defined, keep = _evaluate_blocks(
        scores, labels, np.asarray(data.offsets), specs, relevance_threshold, max_grade
    )
    rows = keep if no_relevant == "drop" else np.ones_like(keep)
    per_query = {name: np.where(defined[name] & keep, values[name], fill)[rows] for name in values}
    means = {name: _nanmean(v) for name, v in per_query.items()}
    policy = {
        "no_relevant": no_relevant,
        "tie_break": TIE_BREAK,
        "relevance_threshold": relevance_threshold,
        "err_max_grade": max_grade,
    }
    return EvalResult(
        means=means,
        per_query=per_query,
        qids=np.asarray(data.query_ids)[rows],
        policy=policy,
        n_dropped=int((~rows).sum()),
    )


def _nanmean(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else math.nan


def _group_by_qid(scores: Any, labels: Any, qid: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat arrays regrouped into contiguous query blocks (stable: document order is kept)."""
    scores = _as_numpy(scores).reshape(-1)
    labels = _as_numpy(labels).reshape(-1)
    qid = _as_numpy(qid).reshape(-1)
    if len(qid) != len(labels):
        raise UserError(f"qid has {len(qid)} entries but labels have {len(labels)}")
    _check_inputs(scores, labels)
    if not np.all(qid[1:] >= qid[:-1]):  # not sorted by qid: regroup, keeping document order
        order = np.argsort(qid, kind="stable")
        scores, labels, qid = scores[order], labels[order], qid[order]
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]]) if len(qid) else []
    offsets = np.r_[starts, len(qid)].astype(np.int64)
    return scores, labels, offsets


def _flat_mean(name: str, scores: Any, labels: Any, qid: Any, threshold: float) -> float:
    s, l, offsets = _group_by_qid(scores, labels, qid)
    spec = parse_metric(name)
    values, defined, keep = _evaluate_blocks(s, l, offsets, [spec], threshold, None)
    v = values[spec.name][keep & defined[spec.name]]
    return float(v.mean()) if v.size else math.nan


def ndcg_at_k(scores: Any, labels: Any, qid: Any, k: int = 10) -> float:
    """Mean NDCG@k over the queries with at least one relevant document (label >= 1).

    Flat arrays, one entry per document; documents of a query need not be contiguous. Ties are
    broken by document order. NaN if no query has a relevant document.
    """
    if int(k) < 1:
        raise UserError(f"k must be a positive integer, got {k}")
    return _flat_mean(f"ndcg@{int(k)}", scores, labels, qid, threshold=1)


def average_precision(scores: Any, labels: Any, qid: Any, threshold: float = 1) -> float:
    """MAP: mean average precision over the queries with a document with label >= threshold."""
    return _flat_mean("map", scores, labels, qid, threshold=threshold)
