"""The one padding and chunking of queries (ltr_bench.data.padding) that metrics, list batches,
AdaRank and SortNet share."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.data.padding import (
    bucket_chunks,
    evaluation_chunks,
    pad_all,
    pad_index,
    pad_values,
    sorted_chunks,
)

lengths_st = st.lists(st.integers(0, 40), min_size=1, max_size=30).map(np.array)


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    return np.r_[0, np.cumsum(lengths)].astype(np.int64)


def covers_each_query_once(chunks: list[np.ndarray], n: int) -> bool:
    seen = np.sort(np.concatenate(chunks)) if chunks else np.zeros(0, np.int64)
    return np.array_equal(seen, np.arange(n))


def test_evaluation_chunks_cover_queries_and_bound_memory() -> None:
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.integers(0, 300, 500), [5000]])
    budget = 4096
    chunks = evaluation_chunks(lengths, budget)
    assert covers_each_query_once(chunks, len(lengths))
    for c in chunks:
        cells = len(c) * max(int(lengths[c].max()), 1)
        assert cells <= budget or len(c) == 1
        assert lengths[c].max() <= 2 * max(lengths[c].min(), 1)  # bucketed by length


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.integers(1, 200))
def test_every_chunking_covers_each_query_once(lengths: np.ndarray, budget: int) -> None:
    n = len(lengths)
    assert covers_each_query_once(evaluation_chunks(lengths, budget), n)
    assert covers_each_query_once(list(sorted_chunks(lengths, budget)), n)
    chunks = bucket_chunks(lengths, lambda w: max(1, budget // w), rng=np.random.default_rng(1))
    assert covers_each_query_once(chunks, n)
    for c in sorted_chunks(lengths, budget):  # shortest first, count * longest within budget
        assert len(c) == 1 or len(c) * lengths[c].max() <= budget


@settings(max_examples=60, deadline=None)
@given(lengths_st, st.data())
def test_pad_index_and_pad_values_agree_with_a_loop(
    lengths: np.ndarray, data: st.DataObject
) -> None:
    offsets = offsets_of(lengths)
    queries = np.array(data.draw(st.lists(st.integers(0, len(lengths) - 1), max_size=8)), np.int64)
    values = np.arange(int(offsets[-1]), dtype=np.float64) * 1.5
    rows, mask = pad_index(offsets, queries)
    (padded,), mask2 = pad_values([values], offsets, queries, fills=(-7.0,))
    np.testing.assert_array_equal(mask, mask2)
    for i, q in enumerate(queries):
        real = values[offsets[q] : offsets[q + 1]]
        np.testing.assert_array_equal(values[rows[i][mask[i]]], real)
        np.testing.assert_array_equal(padded[i][mask[i]], real)
        assert np.all(padded[i][~mask[i]] == -7.0)
        assert np.all(rows[i][~mask[i]] == offsets[q])  # padding stays inside the query
    zero_rows, _ = pad_index(offsets, queries, fill=0)
    assert np.all(zero_rows[~mask] == 0)


def test_pad_all_keeps_trailing_dimensions() -> None:
    lengths = np.array([2, 0, 3])
    offsets = offsets_of(lengths)
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    out, mask = pad_all(x, offsets, fill=-1)
    assert out.shape == (3, 3, 2) and mask.tolist() == [[1, 1, 0], [0, 0, 0], [1, 1, 1]]
    np.testing.assert_array_equal(out[2], x[2:5])
    assert np.all(out[1] == -1)
