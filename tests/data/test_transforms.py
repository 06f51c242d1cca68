"""Transforms: agreement with scikit-learn, train-only fitting, hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.preprocessing import QuantileTransformer

from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.transforms import (
    PerQueryNormalize,
    Preprocessing,
    QuantileNormal,
    StandardScale,
    _ColumnMap,
    binarize_labels,
    drop_queries_without_relevant,
    min_docs_per_query,
)
from ltr_bench.errors import UserError


def _mixed_columns(n, seed):
    """Normal, integer counts, many zeros + heavy tail, tight cluster, constant, negatives."""
    rng = np.random.default_rng(seed)
    return np.stack(
        [
            rng.standard_normal(n),
            np.round(rng.exponential(3, n)),
            np.where(rng.random(n) < 0.5, 0, rng.lognormal(3, 2, n)),
            1000 + rng.standard_normal(n) * 1e-2,
            np.full(n, 7.0),
            -np.round(rng.uniform(0, 1, n), 3),
            rng.uniform(-1e6, 1e6, n),
        ],
        axis=1,
    ).astype(np.float32)


def _sklearn(train, other, n_quantiles=1000, scale=1 / 3):
    qt = QuantileTransformer(
        n_quantiles=min(n_quantiles, len(train)), output_distribution="normal", subsample=10**9
    ).fit(train.astype(np.float64))
    return qt.transform(other.astype(np.float64)) * scale


@pytest.mark.parametrize("table", [True, False], ids=["lookup-table", "searchsorted"])
def test_quantile_normal_matches_sklearn(table, monkeypatch):
    if not table:
        monkeypatch.setattr(_ColumnMap, "MAX_WIDTH", -1)
    train = _mixed_columns(5000, 0)
    other = _mixed_columns(4000, 1) * np.float32(1.3)  # includes values outside train's range
    qn = QuantileNormal(scale=1 / 3, n_quantiles=1000).fit(train)
    # the constant column (one knot) is always searched directly
    assert qn.describe()["columns_without_lookup_table"] == (1 if table else 7)
    for data in (train, other):
        ours = qn.transform_array(data)
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, _sklearn(train, data), atol=2e-6, rtol=0)


def test_quantile_normal_gives_the_same_bits_with_and_without_lookup_tables(monkeypatch):
    """A few rows are searched without the tables (they cost more to build than they save);
    both searches count the same knots, so the output is the same bits."""
    from ltr_bench.data.transforms import quantile

    train = _mixed_columns(3000, 0)
    other = np.concatenate(
        [_mixed_columns(900, 1) * np.float32(1.3), train[:100], -0.0 * train[:5]]
    )
    outputs = []
    for min_rows in (0, 10**9):  # always the table (where one builds), never
        monkeypatch.setattr(quantile, "TABLE_MIN_ROWS", min_rows)
        qn = QuantileNormal(scale=1 / 3, n_quantiles=1000).fit(train)
        outputs.append([qn.transform_array(data) for data in (train, other)])
        assert qn.describe()["columns_without_lookup_table"] == 1  # the constant column
    for with_table, without in zip(*outputs):
        np.testing.assert_array_equal(with_table, without)


@settings(max_examples=30, deadline=None)
@given(
    x=hnp.arrays(
        np.float32,
        st.tuples(st.integers(2, 60), st.integers(1, 3)),
        elements=st.sampled_from([0.0, 1.0, 2.0, 2.5, -3.0, 100.0, 1e-3, 1e5])
        | st.floats(-1e4, 1e4, width=32),
    ),
    nq=st.integers(2, 40),
)
def test_quantile_normal_matches_sklearn_property(x, nq):
    qn = QuantileNormal(n_quantiles=nq).fit(x)
    probe = np.concatenate([x, x[::-1] * np.float32(0.5) + np.float32(0.25)])
    np.testing.assert_allclose(
        qn.transform_array(probe), _sklearn(x, probe, n_quantiles=nq), atol=5e-6, rtol=0
    )


def _bits(a: np.ndarray) -> np.ndarray:
    return (np.asarray(a, dtype=np.float64) + 0.0).view(np.uint64)  # -0.0 and 0.0 alike


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 80), st.integers(1, 3)),
        elements=st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e-3, 1e5])
        | st.floats(-1e4, 1e4, width=32),
    ),
    nq=st.integers(1, 120),
)
def test_percentiles_of_sorted_columns_are_numpys_bits(x, nq):
    from ltr_bench.data.transforms.quantile import _linear_percentiles, percentiles_of_sorted

    refs = np.linspace(0.0, 1.0, nq)
    numpy_bits = _bits(np.percentile(x.astype(np.float64), refs * 100, axis=0))
    ordered = np.sort(x, axis=0).astype(np.float64)
    assert np.array_equal(_bits(_linear_percentiles(ordered, refs)), numpy_bits)
    assert np.array_equal(_bits(percentiles_of_sorted(ordered, refs)), numpy_bits)


def test_the_fit_keeps_numpys_knots_and_order_statistics() -> None:
    """The knots of np.percentile and the order statistics of np.partition, read off one sort."""
    from ltr_bench.data.transforms.quantile import _knot_rows, knots_from_order_stats

    rng = np.random.default_rng(5)
    x = rng.gamma(2.0, size=(1500, 6)).astype(np.float32)
    x[:, :3] = np.round(x[:, :3])  # ties
    x[:, 3] = 0.0  # a constant feature
    qn = QuantileNormal(n_quantiles=1000).fit(x)
    refs = np.linspace(0.0, 1.0, 1000)
    knots = np.maximum.accumulate(np.percentile(x.astype(np.float64), refs * 100, axis=0) + 0.0)
    assert np.array_equal(qn.quantiles_.view(np.uint64), knots.view(np.uint64))
    rows = _knot_rows(1500, 1000)
    assert qn.order_stats_ is not None and qn.order_stats_[0] == 1500
    assert np.array_equal(qn.order_stats_[1], np.partition(x, rows, axis=0)[rows])
    again = knots_from_order_stats(1500, qn.order_stats_[1], 1000)
    assert np.array_equal(again.view(np.uint64), knots.view(np.uint64))


def test_where_numpy_computes_otherwise_its_percentile_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ltr_bench.data.transforms import quantile

    monkeypatch.setattr(quantile, "_checked", [False])
    monkeypatch.setattr(quantile, "_linear_percentiles", lambda *a: pytest.fail("not numpy's"))
    x = np.sort(np.random.default_rng(0).normal(size=(50, 2)), axis=0)
    refs = np.linspace(0.0, 1.0, 20)
    got = quantile.percentiles_of_sorted(x, refs)
    assert np.array_equal(got, np.percentile(x, refs * 100, axis=0))


def test_quantile_normal_output_scale_and_order():
    rng = np.random.default_rng(0)
    x = rng.lognormal(size=(20_000, 2)).astype(np.float32)
    z = QuantileNormal(scale=1 / 3).fit(x).transform_array(x)
    assert abs(z.std(axis=0) - 1 / 3).max() < 0.01
    assert abs(np.median(z, axis=0)).max() < 0.01
    o = np.argsort(x[:, 0])
    assert np.all(np.diff(z[o, 0]) >= 0)  # monotone


def test_quantile_normal_threads_give_the_same_bits():
    rng = np.random.default_rng(3)
    x = rng.gamma(2.0, size=(5000, 7)).astype(np.float32)
    x[:, :3] = np.round(x[:, :3])  # ties on knots
    serial = QuantileNormal(block_rows=512).fit(x).transform_array(x)
    parallel = QuantileNormal(block_rows=512, threads=2).fit(x).transform_array(x)
    assert np.array_equal(serial, parallel)
    pre = Preprocessing(threads=2)
    assert pre.transform.threads == 2 and Preprocessing(threads=None).transform.threads == 1


def test_quantile_normal_subsample_is_seeded():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3000, 2)).astype(np.float32)
    a = QuantileNormal(subsample=500, seed=1).fit(x).quantiles_
    b = QuantileNormal(subsample=500, seed=1).fit(x).quantiles_
    c = QuantileNormal(subsample=500, seed=2).fit(x).quantiles_
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.shape == (1000, 2)  # like sklearn: knots capped by all rows, not the subsample


def _qs(features, labels, lengths, qid_start=0):
    lengths = np.asarray(lengths)
    qid = np.repeat(np.arange(qid_start, qid_start + len(lengths)), lengths)
    return QuerySet.from_arrays(np.asarray(features, np.float32), labels, qid)


def test_per_query_normalize_hand_computed():
    # query 0: feature 0 = [1, 3] -> mean 2, max|x| 3 -> [-1/3, 1/3]; feature 1 = [0, 0] -> 0
    # query 1: feature 0 = [-4, 2, 8] -> mean 2, max|x| 8 -> [-6/8, 0, 6/8]; feature 1 = [5,5,5]
    qs = _qs([[1, 0], [3, 0], [-4, 5], [2, 5], [8, 5]], [0, 1, 0, 1, 2], [2, 3])
    out = PerQueryNormalize().fit(qs).transform(qs).features
    expected = [[-1 / 3, 0], [1 / 3, 0], [-0.75, 0], [0, 0], [0.75, 0]]
    np.testing.assert_allclose(out, expected, atol=1e-7)


def test_standard_scale_uses_train_statistics():
    train = _qs([[0.0], [2.0], [4.0]], [0, 1, 0], [3])
    vali = _qs([[2.0], [6.0]], [0, 1], [2])
    s = StandardScale().fit(train)
    np.testing.assert_allclose(s.transform(vali).features.ravel(), [0, 4 / np.sqrt(8 / 3)])


def test_label_and_query_filters():
    qs = _qs(np.zeros((7, 1)), [0, 0, 2, 1, 0, 1, 0], [2, 3, 1, 1])
    np.testing.assert_array_equal(binarize_labels(qs, 2).labels, [0, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(binarize_labels(qs, 1).labels, [0, 0, 1, 1, 0, 1, 0])
    np.testing.assert_array_equal(drop_queries_without_relevant(qs, 1).query_ids, [1, 2])
    np.testing.assert_array_equal(drop_queries_without_relevant(qs, 2).query_ids, [1])
    np.testing.assert_array_equal(min_docs_per_query(qs, 2).query_ids, [0, 1])


def _random_split(n_queries, seed, qid_start=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 12, n_queries)
    n = int(lengths.sum())
    feats = rng.lognormal(size=(n, 4))
    labels = rng.integers(0, 5, n) * (rng.random(n) < 0.5)
    return _qs(feats, labels, lengths, qid_start)


def test_preprocessing_fits_on_train_only():
    train, vali = _random_split(40, 0), _random_split(20, 1, qid_start=100)
    other_vali = _random_split(20, 2, qid_start=100)
    p = Preprocessing("quantile_normal", binarize_at=2, binarize_splits=["vali", "test"])
    p.fit(train)
    reference = QuantileNormal(1 / 3).fit(train)
    v = p.apply(vali, "vali")
    kept = drop_queries_without_relevant(vali, 2)
    np.testing.assert_array_equal(v.features, reference.transform(kept).features)
    np.testing.assert_array_equal(v.labels, (kept.labels >= 2).astype(np.int32))
    # vali statistics do not leak: other vali data changes nothing for train or vali rows
    p2 = Preprocessing("quantile_normal", binarize_at=2).fit(train)
    p2.apply(other_vali, "vali")
    np.testing.assert_array_equal(p2.apply(vali, "vali").features, v.features)
    np.testing.assert_array_equal(
        p2.apply(train, "train").features, p.apply(train, "train").features
    )
    # one vali query alone is transformed exactly as inside its split
    one = kept.select_queries([0])
    np.testing.assert_array_equal(p.apply(one, "vali").features, v.select_queries([0]).features)


def test_preprocessing_split_options():
    train, test = _random_split(30, 3), _random_split(30, 4, qid_start=100)
    p = Preprocessing(
        "none",
        binarize_at=2,
        binarize_splits=["test"],
        drop_no_relevant_splits=["test"],
        min_docs=5,
    ).fit(train)
    tr = p.apply(train, "train")
    assert set(np.unique(tr.labels)) > {0, 1}  # graded labels kept on train
    assert np.all(tr.query_lengths >= 5)
    te = p.apply(test, "test")
    assert set(np.unique(te.labels)) == {0, 1}
    expected = drop_queries_without_relevant(min_docs_per_query(test, 5), 2)
    np.testing.assert_array_equal(te.query_ids, expected.query_ids)
    np.testing.assert_array_equal(te.features, expected.features)  # feature_transform none
    d = p.describe()
    assert d["binarize_splits"] == ["test"] and d["min_docs"] == 5
    assert d["fitted_on"]["n_queries"] == min_docs_per_query(train, 5).n_queries
    assert d["relevance_threshold"] == 2


def test_fit_apply_is_fit_then_apply_and_keeps_a_missing_part_missing():
    train, vali, test = (_random_split(30, s, qid_start=100 * s) for s in (5, 6, 7))
    p = Preprocessing("quantile_normal", binarize_at=2, binarize_splits=["test"])
    tr, va, te, missing = p.fit_apply(train, (vali, "vali"), (test, "test"), (None, "vali"))
    ref = Preprocessing("quantile_normal", binarize_at=2, binarize_splits=["test"]).fit(train)
    for got, (data, split) in zip((tr, va, te), ((train, "train"), (vali, "vali"), (test, "test"))):
        want = ref.apply(data, split)
        np.testing.assert_array_equal(got.features, want.features)
        np.testing.assert_array_equal(got.labels, want.labels)
    assert missing is None


def test_binarize_is_the_label_step_of_apply():
    data = _random_split(20, 8)
    p = Preprocessing("none", binarize_at=2, binarize_splits=["test"]).fit(data)
    np.testing.assert_array_equal(p.binarize(data, "test").labels, binarize_labels(data, 2).labels)
    assert p.binarize(data, "vali") is data  # not a binarised split
    assert Preprocessing("none").binarize(data, "test") is data  # graded labels kept


@pytest.mark.parametrize(
    "kwargs,key",
    [
        ({"feature_transform": "zscore"}, "feature_transform"),
        ({"binarize_splits": ["testing"]}, "binarize_splits"),
        ({"drop_no_relevant_splits": ["val"]}, "drop_no_relevant_splits"),
        ({"min_docs": 0}, "min_docs"),
    ],
)
def test_preprocessing_bad_options_name_the_key(kwargs, key):
    with pytest.raises(UserError, match=f"eval.preprocessing.{key}"):
        Preprocessing(**kwargs)


def test_preprocessing_all_queries_dropped_is_user_error():
    qs = _qs(np.zeros((3, 1)), [0, 0, 1], [3])
    p = Preprocessing("none", relevance_threshold=2).fit(qs)
    with pytest.raises(UserError, match="no test queries"):
        p.apply(qs, "test")
