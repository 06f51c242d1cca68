"""Synthetic data (Sect. 4.5): determinism, shared class parameters, statistics, noise, queries."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_bench.data.synthetic import SyntheticSpec, make_synthetic, make_synthetic_splits
from ltr_bench.errors import UserError


def test_deterministic_given_seed():
    a = make_synthetic(500, n_features=7, sigma=0.5, docs_per_query=50, seed=3)
    b = make_synthetic(500, n_features=7, sigma=0.5, docs_per_query=50, seed=3)
    c = make_synthetic(500, n_features=7, sigma=0.5, docs_per_query=50, seed=4)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert a.features.dtype == np.float32 and a.labels.dtype == np.int32


def test_spec_parameters_in_papers_ranges():
    spec = SyntheticSpec.draw(n_features=70, n_classes=5, seed=0)
    assert spec.means.shape == spec.stds.shape == (5, 70)
    assert spec.means.min() >= 0 and spec.means.max() <= 100
    assert spec.stds.min() >= 50 and spec.stds.max() <= 100
    assert spec.means.std() > 20  # spread over the range, not constant


def test_class_statistics_match_spec():
    means = np.array([[0.0, 50.0, 100.0], [80.0, 10.0, 30.0]])
    stds = np.array([[50.0, 60.0, 70.0], [80.0, 90.0, 100.0]])
    qs = make_synthetic(40_000, n_classes=2, means=means, stds=stds, seed=1)
    for c in range(2):
        x = qs.features[qs.labels == c].astype(np.float64)
        n = len(x)
        assert abs(n - 20_000) < 4 * np.sqrt(40_000 * 0.25)
        np.testing.assert_array_less(np.abs(x.mean(0) - means[c]), 5 * stds[c] / np.sqrt(n))
        np.testing.assert_allclose(x.std(0), stds[c], rtol=0.03)


def test_splits_share_parameters_but_not_samples():
    tr, va, te = make_synthetic_splits(20_000, 20_000, 1000, n_features=4, n_classes=3, seed=5)
    assert not np.array_equal(tr.features[:100], te.features[:100])
    for c in range(3):  # same class means in train and test
        np.testing.assert_allclose(
            tr.features[tr.labels == c].mean(0), te.features[te.labels == c].mean(0), atol=6
        )
    other = make_synthetic_splits(20_000, 20_000, 0, n_features=4, n_classes=3, seed=6)[0]
    gap = tr.features[tr.labels == 0].mean(0) - other.features[other.labels == 0].mean(0)
    assert np.abs(gap).max() > 6  # another seed: other class parameters
    ids = [set(q.query_ids) for q in (tr, va, te)]
    assert ids[0].isdisjoint(ids[1]) and ids[1].isdisjoint(ids[2]) and ids[0].isdisjoint(ids[2])


def test_label_noise_rounds_and_clips_but_keeps_features():
    clean = make_synthetic(20_000, n_features=3, n_classes=5, sigma=0.0, seed=2)
    noisy = make_synthetic(20_000, n_features=3, n_classes=5, sigma=0.5, seed=2)
    np.testing.assert_array_equal(clean.features, noisy.features)  # features from the true class
    assert noisy.labels.min() >= 0 and noisy.labels.max() <= 4
    flips = noisy.labels != clean.labels
    # P(|N(0, 0.5)| > 0.5) = 0.317 before clipping; clipping at the ends lowers it to
    # (3 * 0.317 + 2 * 0.159) / 5 = 0.254
    assert abs(flips.mean() - 0.254) < 0.015
    assert np.all(np.abs(noisy.labels - clean.labels) <= 3)


def test_queries_of_given_size_and_one_big_query():
    qs = make_synthetic(250, n_features=2, docs_per_query=100, seed=0)
    np.testing.assert_array_equal(qs.query_lengths, [100, 100, 50])
    one = make_synthetic(250, n_features=2, docs_per_query=None, seed=0)
    assert one.n_queries == 1 and one.n_docs == 250
    np.testing.assert_array_equal(one.features, qs.features)  # grouping changes nothing else


def test_class_probs():
    qs = make_synthetic(20_000, n_features=1, n_classes=3, class_probs=[0.7, 0.2, 0.1], seed=0)
    np.testing.assert_allclose(np.bincount(qs.labels) / 20_000, [0.7, 0.2, 0.1], atol=0.015)
    with pytest.raises(UserError, match="class_probs"):
        make_synthetic(10, n_classes=3, class_probs=[0.5, 0.5])


def test_bad_arguments():
    with pytest.raises(UserError):
        make_synthetic(10, n_classes=1)
    with pytest.raises(UserError):
        make_synthetic(10, sigma=-1)
    with pytest.raises(UserError):
        make_synthetic(10, docs_per_query=0)
