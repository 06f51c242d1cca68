"""Metrics of padded ``scores[Q, L]``, ``labels[Q, L]`` and ``mask[Q, L]``: one value per query.

NumPy arrays or torch tensors on any device (copied to the host once per call, without this module
importing torch). Rankers use :func:`metric_padded` for training-time validation and AdaRank for
its weak rankers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr_bench.metrics.names import parse_metric
from ltr_bench.metrics.per_query import raw_metric
from ltr_bench.metrics.policy import NoRelevantPolicy, policy_value
from ltr_bench.metrics.ranked import Ranked, ranking_keys


def as_numpy(values: Any) -> np.ndarray:
    """An array of ``values``; a torch tensor (on any device) is detached and copied to the host
    (half-precision floats, bfloat16 among them, widened to float32, exactly)."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        values = values.detach().cpu()
        if values.is_floating_point() and values.element_size() < 4:
            values = values.float()
        values = values.numpy()
    return np.asarray(values)


def metric_padded(
    name: str,
    scores: Any,
    labels: Any,
    mask: Any,
    *,
    relevance_threshold: float = 1,
    no_relevant: NoRelevantPolicy = "drop",
    max_grade: float | None = None,
) -> np.ndarray:
    """One metric by name (e.g. a ranker's validation metric "ndcg@10"): ``[Q]`` float64 values.

    ``scores``, ``labels`` and the boolean ``mask`` are ``[Q, L]``; NaN scores rank like -inf.
    Queries without a document with ``label >= relevance_threshold``, and queries where the
    metric is undefined, get the ``no_relevant`` value (NaN for "drop").
    """
    spec = parse_metric(name)
    fill = policy_value(no_relevant)
    scores, labels = as_numpy(scores), as_numpy(labels)
    mask = as_numpy(mask).astype(bool)
    if scores.shape != labels.shape or scores.shape != mask.shape or scores.ndim != 2:
        raise ValueError(
            f"scores {scores.shape}, labels {labels.shape} and mask {mask.shape} must be the "
            "same [Q, L] shape"
        )
    if mask.shape[1] == 0:  # no documents at all: one padded column keeps shapes valid
        scores, labels, mask = (np.pad(a, ((0, 0), (0, 1))) for a in (scores, labels, mask))
    r = Ranked(ranking_keys(scores, mask), labels, mask)
    values, defined = raw_metric(spec, r, relevance_threshold, max_grade)
    return np.where(defined & r.has_relevant(relevance_threshold), values, fill)
