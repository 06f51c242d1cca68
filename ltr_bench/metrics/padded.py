"""The padded torch API: metrics of ``scores[Q, L]``, ``labels[Q, L]`` and ``mask[Q, L]``.

One value per query, on any device, with no Python loop over queries. Rankers use it for
training-time validation (:func:`metric_padded`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ltr_bench.metrics.names import DEFAULT_METRICS, parse_metric
from ltr_bench.metrics.per_query import ndcg_values, raw_metric
from ltr_bench.metrics.policy import NoRelevantPolicy, policy_value
from ltr_bench.metrics.ranked import Ranked


def _apply_policy(values: Tensor, defined: Tensor, no_relevant: str) -> Tensor:
    """``values`` where ``defined``, else the ``no_relevant`` value."""
    return torch.where(defined, values, policy_value(no_relevant))


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
    return _apply_policy(*ndcg_values(Ranked(scores, labels, mask), k), no_relevant)


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
    fill = policy_value(no_relevant)
    r = Ranked(scores, labels, mask)
    keep = r.has_relevant(relevance_threshold)
    out = {}
    for spec in specs:
        values, defined = raw_metric(spec, r, relevance_threshold, max_grade)
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
