"""The flat NumPy API: metrics of one score per document, queries as blocks or ``qid`` arrays.

Queries are padded in chunks of bounded size by :mod:`ltr_bench.data.padding`, so memory stays
bounded for any number of queries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ltr_bench.data.padding import evaluation_chunks, pad_values
from ltr_bench.errors import UserError
from ltr_bench.metrics.names import DEFAULT_METRICS, MetricSpec, parse_metric
from ltr_bench.metrics.padded import as_numpy
from ltr_bench.metrics.per_query import raw_metric
from ltr_bench.metrics.policy import NoRelevantPolicy, policy_value
from ltr_bench.metrics.ranked import Ranked

if TYPE_CHECKING:
    import pandas as pd

TIE_BREAK = "document_order"

# Elements per padded chunk (4M x float64 = 32 MB per [C, L] array).
_CHUNK_ELEMENTS = 1 << 22


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
    padded pass), other labels as float64."""
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
    # faster sort); scores were checked free of NaN. Padding gets NaN, which sorts last.
    keys = -(scores if scores.dtype == np.float32 else scores.astype(np.float64, copy=False))
    labels = _compact_labels(labels)
    for queries in evaluation_chunks(np.diff(offsets), max_elements):
        (k_pad, l_pad), mask = pad_values([keys, labels], offsets, queries, fills=(np.nan, 0))
        r = Ranked(k_pad, l_pad, mask)
        for spec in specs:
            v, d = raw_metric(spec, r, threshold, max_grade)
            values[spec.name][queries] = v
            defined[spec.name][queries] = d
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
    fill = policy_value(no_relevant)
    scores = as_numpy(scores).reshape(-1)
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
    scores = as_numpy(scores).reshape(-1)
    labels = as_numpy(labels).reshape(-1)
    qid = as_numpy(qid).reshape(-1)
    if len(qid) != len(labels):
        raise UserError(f"qid has {len(qid)} entries but labels have {len(labels)}")
    _check_inputs(scores, labels)
    if not np.all(qid[1:] >= qid[:-1]):  # not sorted by qid: regroup, keeping document order
        order = np.argsort(qid, kind="stable")
        scores, labels, qid = scores[order], labels[order], qid[order]
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]]) if len(qid) else np.zeros(0, np.int64)
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
