"""Ranking metrics: NDCG@k, MAP, P@k, MRR, WTA, ERR@k and pair accuracy, in NumPy.

One implementation per metric (:mod:`~ltr_bench.metrics.per_query`, on a batch ranked once by
:mod:`~ltr_bench.metrics.ranked`), vectorised over queries, importing no torch (a LambdaMART or
AdaRank run needs none). Two ways in, each a module of this package (import them from here):

* **Flat API** (:mod:`~ltr_bench.metrics.flat`: ``ndcg_at_k``, ``average_precision``,
  ``evaluate``) for flat arrays: labels in query blocks delimited by ``offsets`` (anything shaped
  like :class:`QueryBlocks`, such as the data layer's ``QuerySet``), or a ``qid`` per document.
  Queries are padded in chunks of bounded size by :mod:`ltr_bench.data.padding`, so memory stays
  bounded for any number of queries.
* **Padded API** (:mod:`~ltr_bench.metrics.padded`: ``metric_padded``) for ``scores[Q, L]``,
  ``labels[Q, L]`` and a boolean ``mask[Q, L]``, NumPy arrays or torch tensors on any device:
  one value per query. Neural rankers validate with it, AdaRank scores its weak rankers with it.

The losses' torch building blocks live here too, imported on first use: :func:`gains`,
:func:`discounts` and :func:`ideal_dcg` (:mod:`~ltr_bench.metrics.dcg`), :func:`sort_order` and
:func:`ranks_padded` (:mod:`~ltr_bench.metrics.order`), on tensors on the loss's device. They
compute no metric. Below all: :mod:`~ltr_bench.metrics.names` (metric names)
and :mod:`~ltr_bench.metrics.policy` (the ``no_relevant`` policy).

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
  :func:`metric_padded` returns NaN for them), ``"zero"`` or ``"one"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltr_bench.lazy_exports import lazy_dir, lazy_getattr
from ltr_bench.metrics.flat import (
    TIE_BREAK,
    EvalResult,
    QueryBlocks,
    average_precision,
    evaluate,
    ndcg_at_k,
)
from ltr_bench.metrics.names import DEFAULT_METRICS, MetricSpec, parse_metric
from ltr_bench.metrics.padded import metric_padded
from ltr_bench.metrics.policy import NO_RELEVANT_POLICIES, NoRelevantPolicy

if TYPE_CHECKING:
    from ltr_bench.metrics.dcg import discounts, gains, ideal_dcg
    from ltr_bench.metrics.order import ranks_padded, sort_order

#: The losses' torch building blocks, imported on first use (the metrics need no torch).
_TORCH_MODULES = {
    "discounts": "dcg",
    "gains": "dcg",
    "ideal_dcg": "dcg",
    "ranks_padded": "order",
    "sort_order": "order",
}

__all__ = [
    "NoRelevantPolicy",
    "NO_RELEVANT_POLICIES",
    "TIE_BREAK",
    "DEFAULT_METRICS",
    "EvalResult",
    "QueryBlocks",
    "MetricSpec",
    "parse_metric",
    "ndcg_at_k",
    "average_precision",
    "evaluate",
    "metric_padded",
    "gains",
    "discounts",
    "ideal_dcg",
    "sort_order",
    "ranks_padded",
]

__getattr__ = lazy_getattr(__name__, globals(), _TORCH_MODULES)
__dir__ = lazy_dir(globals(), _TORCH_MODULES)
