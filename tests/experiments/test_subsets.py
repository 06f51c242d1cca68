"""The Sect. 4.5 subset evaluation: sizes, no repeated documents, same values as a plain loop."""

from __future__ import annotations

import numpy as np

from ltr_bench.experiments.subsets import draw_subsets, subset_ndcg
from ltr_bench.metrics import ndcg_at_k


def test_subsets_have_sizes_in_range_and_no_repeated_document() -> None:
    rng = np.random.default_rng(0)
    index, mask = draw_subsets(1000, 50, 50, 150, rng)
    sizes = mask.sum(axis=1)
    assert index.shape == (50, 150) and sizes.min() >= 50 and sizes.max() <= 150
    assert len(set(sizes.tolist())) > 10  # sizes vary
    for row, m in zip(index, mask):
        chosen = row[m]
        assert len(np.unique(chosen)) == len(chosen) and chosen.max() < 1000


def test_subsets_are_uniform_over_documents() -> None:
    index, mask = draw_subsets(200, 2000, 50, 50, np.random.default_rng(1))
    counts = np.bincount(index[mask], minlength=200)
    expected = 2000 * 50 / 200
    assert abs(counts.mean() - expected) < 1e-9 and counts.std() < 0.2 * expected


def test_subset_ndcg_matches_a_loop_over_subsets() -> None:
    rng = np.random.default_rng(2)
    scores, labels = rng.normal(size=600), rng.integers(0, 5, size=600)
    values = subset_ndcg(scores, labels, k=20, n_subsets=30, rng=np.random.default_rng(3))
    index, mask = draw_subsets(600, 30, 50, 150, np.random.default_rng(3))
    loop = [
        ndcg_at_k(scores[i[m]], labels[i[m]], np.zeros(m.sum()), k=20) for i, m in zip(index, mask)
    ]
    np.testing.assert_allclose(values, loop, rtol=1e-12)


def test_perfect_scores_give_ndcg_one_and_reversed_less() -> None:
    labels = np.repeat(np.arange(5), 200)
    best = subset_ndcg(labels.astype(float), labels, rng=np.random.default_rng(0))
    worst = subset_ndcg(-labels.astype(float), labels, rng=np.random.default_rng(0))
    np.testing.assert_allclose(best, 1.0)
    assert worst.max() < 0.5
