"""Splits by query: exact partitions, determinism, sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.data.splits import apply_split, check_partition, holdout_splits, kfold_by_query
from ltr_bench.data.synthetic import make_synthetic
from ltr_bench.errors import UserError


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 300), k=st.integers(2, 10), seed=st.integers(0, 2**31))
def test_kfold_partitions_queries(n, k, seed):
    if k > n:
        with pytest.raises(UserError):
            kfold_by_query(n, k, seed)
        return
    folds = kfold_by_query(n, k, seed)
    assert len(folds) == k
    assert check_partition(n, [v for _, v in folds])
    sizes = [len(v) for _, v in folds]
    assert max(sizes) - min(sizes) <= 1
    for tr, va in folds:
        assert check_partition(n, [tr, va])
        assert np.all(np.diff(tr) > 0) and np.all(np.diff(va) > 0)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 300), frac=st.floats(0.05, 0.95), seed=st.integers(0, 2**31))
def test_holdout_partitions_queries(n, frac, seed):
    splits = holdout_splits(n, n_splits=3, train_fraction=frac, seed=seed)
    for tr, te in splits:
        assert check_partition(n, [tr, te])
        assert len(tr) == min(max(round(frac * n), 1), n - 1)


def test_deterministic_and_seed_dependent():
    a = kfold_by_query(50, 5, seed=1)
    b = kfold_by_query(50, 5, seed=1)
    c = kfold_by_query(50, 5, seed=2)
    assert all(np.array_equal(x[1], y[1]) for x, y in zip(a, b))
    assert not all(np.array_equal(x[1], y[1]) for x, y in zip(a, c))
    h15 = holdout_splits(50, 15, 0.8, seed=0)
    h3 = holdout_splits(50, 3, 0.8, seed=0)
    assert all(np.array_equal(x[0], y[0]) for x, y in zip(h3, h15))  # prefix-stable
    assert len({tuple(t) for t, _ in h15}) == 15


def test_apply_split_keeps_whole_queries():
    qs = make_synthetic(600, n_features=3, docs_per_query=37, seed=0)
    tr_idx, va_idx = kfold_by_query(qs, 4, seed=0)[2]
    tr, va = apply_split(qs, (tr_idx, va_idx))
    assert tr.n_docs + va.n_docs == qs.n_docs
    assert set(tr.query_ids).isdisjoint(va.query_ids)
    assert set(tr.query_ids) | set(va.query_ids) == set(qs.query_ids)
    np.testing.assert_array_equal(va.query_lengths, qs.query_lengths[va_idx])
    # documents unchanged, in storage order
    rows = np.concatenate([np.arange(qs.offsets[i], qs.offsets[i + 1]) for i in va_idx])
    np.testing.assert_array_equal(va.features, qs.features[rows])


def test_bad_arguments():
    with pytest.raises(UserError):
        holdout_splits(10, 3, train_fraction=1.0)
    with pytest.raises(UserError):
        holdout_splits(1, 3, 0.5)
    with pytest.raises(UserError):
        kfold_by_query(10, 1)
