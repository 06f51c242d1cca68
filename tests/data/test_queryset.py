"""QuerySet helpers on hand-made data: grouping, selection, padding, concatenation, hashing."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError


def _qs():
    f = np.arange(12, dtype=np.float32).reshape(6, 2)
    return QuerySet.from_arrays(f, [0, 1, 2, 0, 1, 0], [7, 7, 3, 3, 3, 9])


def test_offsets_and_shape():
    qs = _qs()
    np.testing.assert_array_equal(qs.offsets, [0, 2, 5, 6])
    np.testing.assert_array_equal(qs.query_ids, [7, 3, 9])
    np.testing.assert_array_equal(qs.query_lengths, [2, 3, 1])
    np.testing.assert_array_equal(qs.query_index(), [0, 0, 1, 1, 1, 2])
    assert (qs.n_docs, qs.n_queries, qs.n_features) == (6, 3, 2)


def test_from_arrays_regroups_or_rejects_non_contiguous():
    f = np.arange(4, dtype=np.float32)[:, None]
    qs = QuerySet.from_arrays(f, [0, 1, 2, 3], [5, 6, 5, 6])
    np.testing.assert_array_equal(qs.qid, [5, 5, 6, 6])
    np.testing.assert_array_equal(qs.features.ravel(), [0, 2, 1, 3])  # order inside kept
    with pytest.raises(UserError):
        QuerySet.from_arrays(f, [0, 1, 2, 3], [5, 6, 5, 6], require_contiguous=True)


def test_select_queries_and_pad():
    qs = _qs().select_queries([2, 0])
    np.testing.assert_array_equal(qs.query_ids, [9, 7])
    np.testing.assert_array_equal(qs.labels, [0, 0, 1])
    padded, mask = qs.pad()
    np.testing.assert_array_equal(padded, [[0, 0], [0, 1]])
    np.testing.assert_array_equal(mask, [[True, False], [True, True]])
    feats, _ = qs.pad(qs.features)
    assert feats.shape == (2, 2, 2)
    np.testing.assert_array_equal(feats[0, 0], [10, 11])


def test_concat_and_fingerprint():
    qs = _qs()
    a, b = qs.select_queries([0]), qs.select_queries([1, 2])
    joined = QuerySet.concat([a, b])
    np.testing.assert_array_equal(joined.offsets, qs.offsets)
    assert joined.fingerprint() == qs.fingerprint()
    assert qs.with_labels(qs.labels + 1).fingerprint() != qs.fingerprint()
