"""Padding and chunking of queries: the one place that turns query blocks into ``[B, L]`` arrays.

Documents are stored by query (``offsets[q]:offsets[q + 1]`` are the rows of query ``q``, see
:class:`~ltr_bench.data.queryset.QuerySet`). Anything that works on whole queries at once --
metrics, list batches, AdaRank's weak-ranker table, SortNet's all-pairs scoring -- pads a chunk of
queries into a ``[B, L]`` matrix plus a boolean mask (real documents first in every row) and
bounds the memory of one chunk. This module holds those two mechanisms:

* **Padding** -- :func:`pad_index` (row indices of the documents, to gather any per-document
  tensor), :func:`pad_values` (per-document arrays padded directly) and :func:`pad_all` (every
  query at once).
* **Chunking** -- which queries share a chunk: :func:`bucket_chunks` (queries grouped by the power
  of two above their length, padding wastes < 2x), :func:`sorted_chunks` (queries shortest first,
  cut at a cost budget) and :func:`evaluation_chunks` (runs of consecutive queries when lengths
  are alike, else buckets).

Plain NumPy; no knowledge of metrics, models or the dataset type (it takes offsets and lengths).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "pad_index",
    "pad_values",
    "pad_all",
    "length_buckets",
    "bucket_chunks",
    "two_widths",
    "sorted_chunks",
    "evaluation_chunks",
]


# ====================================================================== padding
def pad_index(
    offsets: np.ndarray, queries: np.ndarray, fill: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(rows [B, L], mask [B, L])``: the document rows of ``queries`` (positions into
    ``offsets``), each row padded at its end to the longest of them.

    Padded cells hold ``fill``, or (``fill=None``) the query's own first row, so that a gather
    with ``rows`` never leaves the query; ``mask`` is True at real documents.
    """
    queries = np.asarray(queries, dtype=np.int64)
    starts = np.asarray(offsets)[queries]
    lengths = np.asarray(offsets)[queries + 1] - starts
    width = int(lengths.max()) if len(lengths) else 0
    col = np.arange(width)
    mask = col[None, :] < lengths[:, None]
    rows = np.where(mask, starts[:, None] + col[None, :], starts[:, None] if fill is None else fill)
    return rows.astype(np.int64, copy=False), mask


def pad_values(
    values: Sequence[np.ndarray],
    offsets: np.ndarray,
    queries: np.ndarray,
    fills: Sequence[float] = (),
) -> tuple[list[np.ndarray], np.ndarray]:
    """Per-document arrays of ``queries`` padded into ``[B, L, ...]`` arrays, plus the ``[B, L]``
    mask; padding holds ``fills[i]`` (default 0).

    A run of consecutive queries is one slice of the documents, padded without a gather.
    """
    queries = np.asarray(queries, dtype=np.int64)
    lengths = offsets[queries + 1] - offsets[queries]
    width = int(lengths.max()) if len(lengths) else 0
    mask = np.arange(width) < lengths[:, None]
    if len(queries) and np.all(np.diff(queries) == 1):  # consecutive queries: one slice
        docs: Any = slice(offsets[queries[0]], offsets[queries[-1] + 1])
    else:
        start = np.repeat(np.cumsum(lengths) - lengths, lengths)
        docs = np.repeat(offsets[queries], lengths) + (np.arange(int(lengths.sum())) - start)
    out = []
    for i, v in enumerate(values):
        fill = fills[i] if i < len(fills) else 0
        padded = np.full((len(queries), width) + v.shape[1:], fill, dtype=v.dtype)
        padded[mask] = v[docs]  # boolean assignment fills row by row, in document order
        out.append(padded)
    return out, mask


def pad_all(
    values: np.ndarray, offsets: np.ndarray, fill: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Every query padded: ``[N, ...]`` values -> ``[Q, L, ...]`` (L = longest query) and mask."""
    offsets = np.asarray(offsets)
    (out,), mask = pad_values([np.asarray(values)], offsets, np.arange(len(offsets) - 1), (fill,))
    return out, mask


# ====================================================================== chunking
def length_buckets(lengths: np.ndarray) -> np.ndarray:
    """Bucket ``b`` of each query: ``2^b`` is the power of two at or above its length (0 for
    lengths 0 and 1); a bucket padded to ``2^b`` wastes less than half of its cells."""
    return np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64)


def bucket_chunks(
    lengths: np.ndarray,
    rows_for_width: Callable[[int], int],
    queries: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
    buckets: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Chunks of query positions, each from one length bucket (see :func:`length_buckets`).

    A bucket of width ``w = 2^b`` is cut into chunks of ``rows_for_width(w)`` queries (in order,
    or shuffled inside the bucket with ``rng``); buckets come in ascending width. ``queries``
    restricts the chunks to these positions (default: all); ``buckets`` gives every query's
    bucket ``b`` (default: :func:`length_buckets` of its length).
    """
    queries = np.arange(len(lengths)) if queries is None else np.asarray(queries)
    every = length_buckets(np.asarray(lengths)) if buckets is None else np.asarray(buckets)
    bucket = every[queries]
    chunks: list[np.ndarray] = []
    for b in np.unique(bucket):
        group = queries[bucket == b]
        if rng is not None:
            group = rng.permutation(group)
        rows = max(1, int(rows_for_width(1 << int(b))))
        chunks.extend(np.split(group, np.arange(rows, len(group), rows)))
    return chunks


def two_widths(lengths: np.ndarray, cost_power: int = 1) -> np.ndarray:
    """Per query, the width its batch is padded to when batches may take two shapes only (a
    compiled step compiles once per shape): the power of two at or above the longest query, and
    the smaller power of two that, given to the queries it holds, pads to the fewest cells
    (``sum width^cost_power``). Widths are at least 2."""
    lengths = np.maximum(np.asarray(lengths, dtype=np.int64), 2)
    if not len(lengths):
        return lengths
    top = 1 << int(np.ceil(np.log2(lengths.max())))
    shorts = 1 << np.arange(1, top.bit_length())  # 2, 4, ..., top
    fits = lengths[None, :] <= shorts[:, None]
    cost = np.where(fits, shorts[:, None], top).astype(np.float64) ** cost_power
    short = int(shorts[np.argmin(cost.sum(axis=1))])
    return np.where(lengths <= short, short, top)


def sorted_chunks(
    lengths: np.ndarray, budget: int, cost: np.ndarray | None = None
) -> Iterator[np.ndarray]:
    """Chunks of query positions, shortest queries first, each as large as
    ``count * cost(its longest query) <= budget`` allows (at least one query).

    ``cost`` (per query, rising with the length; default the length itself) is what one query of
    the chunk costs once padded to the chunk's longest: e.g. ``L * min(L, M) * h`` for all-pairs
    comparisons. Each chunk pads only to its own longest query.
    """
    lengths = np.asarray(lengths)
    order = np.argsort(lengths, kind="stable")
    sorted_cost = (lengths if cost is None else np.asarray(cost))[order]
    begin = 0
    while begin < len(order):
        # Costs rise along `order`, so a chunk's padded cost count * (its last query's cost)
        # rises with the count: the largest count within budget is a binary search.
        total = np.arange(1, len(order) - begin + 1) * sorted_cost[begin:]
        end = begin + max(1, int(np.searchsorted(total, budget, side="right")))
        yield order[begin:end]
        begin = end


def evaluation_chunks(lengths: np.ndarray, max_elements: int) -> list[np.ndarray]:
    """Query positions grouped so that each padded chunk has at most ``max_elements`` cells.

    When padding every query to the longest wastes less than half the cells (query lengths of
    one order, as in LETOR data), the queries stay in their order and are cut into runs of
    consecutive queries: each chunk is then one slice of the documents, padded without a gather
    (see :func:`pad_values`). Otherwise queries are bucketed (:func:`bucket_chunks`) and each
    bucket of width ``w`` is cut into chunks of ``max_elements // w`` queries (at least one).
    """
    lengths = np.asarray(lengths)
    n_q, width = len(lengths), int(lengths.max()) if len(lengths) else 0
    if n_q and n_q * width <= 2 * int(lengths.sum()):
        rows = max(1, max_elements // max(width, 1))
        return np.split(np.arange(n_q), np.arange(rows, n_q, rows))
    return bucket_chunks(lengths, lambda w: max_elements // w)
