"""Label and query operations: the one binarisation of labels at a relevance threshold, and the
query filters (queries without a relevant document, queries with too few documents)."""

from __future__ import annotations

import numpy as np

from ltr_bench.data.queryset import QuerySet


def binarize_labels(data: QuerySet, threshold: int) -> QuerySet:
    """Labels ``>= threshold`` become 1, the rest 0 (the papers: MSLR 2, MQ2007/8 1)."""
    return data.with_labels((data.labels >= threshold).astype(np.int32))


def relevant_query_mask(data: QuerySet, threshold: int) -> np.ndarray:
    """``[Q]`` True for queries with at least one document labelled ``>= threshold``."""
    if data.n_docs == 0:
        return np.zeros(data.n_queries, dtype=bool)
    hit = (data.labels >= threshold).astype(np.int8)
    return np.maximum.reduceat(hit, data.offsets[:-1]).astype(bool) & (data.query_lengths > 0)


def drop_queries_without_relevant(data: QuerySet, threshold: int) -> QuerySet:
    """Only the queries with a document labelled ``>= threshold`` (metrics undefined otherwise)."""
    mask = relevant_query_mask(data, threshold)
    return data if mask.all() else data.select_queries(mask)


def min_docs_per_query(data: QuerySet, n: int) -> QuerySet:
    """Only the queries with at least ``n`` documents."""
    mask = data.query_lengths >= n
    return data if mask.all() else data.select_queries(mask)
