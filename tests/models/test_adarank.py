"""AdaRank: learns; the precomputed fast path equals a slow per-round reference; degeneracies."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.metrics import evaluate
from ltr_bench.models import AdaRank
from tests.models.neural_toy import linear_queries as toy_queries


def mixed_queries(n_queries: int, seed: int, n_features: int = 8) -> QuerySet:
    """Queries whose relevance follows one of features 0-3 (plus a little of feature 4).

    No single feature serves all queries, so the query re-weighting makes AdaRank pick several
    features: a demanding case for the fast-path-equals-reference test.
    """
    rng = np.random.default_rng(seed)
    lengths = rng.integers(10, 31, size=n_queries)
    n = int(lengths.sum())
    x = rng.normal(size=(n, n_features))
    kind = np.repeat(rng.integers(0, 4, size=n_queries), lengths)
    latent = x[np.arange(n), kind] + 0.3 * x[:, 4] + 0.5 * rng.normal(size=n)
    labels = np.digitize(latent, np.quantile(latent, [0.6, 0.85]))
    return QuerySet.from_arrays(x, labels, np.repeat(np.arange(n_queries) + 1000 * seed, lengths))


# ---------------------------------------------------------------- independent slow reference
def ref_ndcg(scores: np.ndarray, labels: np.ndarray, k: int = 10) -> float:
    """NDCG@k of one query; ties by document order; gain 2^l - 1, discount 1/log2(1 + rank)."""
    order = np.argsort(-scores, kind="stable")
    disc = 1.0 / np.log2(np.arange(2, len(labels) + 2))
    dcg = ((2.0 ** labels[order] - 1.0)[:k] * disc[:k]).sum()
    idcg = ((2.0 ** np.sort(labels)[::-1] - 1.0)[:k] * disc[:k]).sum()
    return dcg / idcg


def ref_ap(scores: np.ndarray, labels: np.ndarray) -> float:
    rel = (labels[np.argsort(-scores, kind="stable")] >= 1).astype(float)
    precision = np.cumsum(rel) / np.arange(1, len(rel) + 1)
    return float((precision * rel).sum() / rel.sum())


def reference_adarank(data: QuerySet, rounds: int, measure, max_consecutive: int | None):
    """Xu & Li's AdaRank written plainly: every round re-ranks every query by every feature."""
    blocks = [
        (data.features[a:b].astype(np.float64), data.labels[a:b].astype(np.float64))
        for a, b in zip(data.offsets[:-1], data.offsets[1:])
        if (data.labels[a:b] >= 1).any()
    ]
    m, n_features = len(blocks), data.n_features
    p = np.full(m, 1.0 / m)
    weights, chosen, alphas = np.zeros(n_features), [], []
    for _ in range(rounds):
        banned = (
            chosen[-1]
            if max_consecutive
            and len(chosen) >= max_consecutive
            and len(set(chosen[-max_consecutive:])) == 1
            else None
        )
        best_k, best = None, -np.inf
        for k in range(n_features):
            if k == banned:
                continue
            perf = sum(p[i] * measure(x[:, k], y) for i, (x, y) in enumerate(blocks))
            if perf > best:
                best_k, best = k, perf
        e = np.array([measure(x[:, best_k], y) for x, y in blocks])
        alpha = 0.5 * np.log((p * (1 + e)).sum() / max((p * (1 - e)).sum(), 1e-12))
        weights[best_k] += alpha
        chosen.append(best_k)
        alphas.append(alpha)
        e_f = np.array([measure(x @ weights, y) for x, y in blocks])
        p = np.exp(-e_f) / np.exp(-e_f).sum()
        if (e_f >= 1).all():
            break
    return chosen, np.array(alphas), weights


@pytest.mark.parametrize(
    ("metric", "measure", "max_consecutive"),
    [("ndcg@10", ref_ndcg, 2), ("map", ref_ap, 5), ("ndcg@10", ref_ndcg, None)],
)
def test_fast_path_equals_slow_reference(metric, measure, max_consecutive):
    data = mixed_queries(25, 3)
    fast = AdaRank(rounds=25, metric=metric, max_consecutive=max_consecutive).fit(data)
    chosen, alphas, weights = reference_adarank(data, 25, measure, max_consecutive)
    assert len(set(chosen)) >= 2  # the re-weighting really changes the choice
    assert fast.features_ == chosen
    np.testing.assert_allclose(fast.alphas_, alphas, rtol=1e-10)
    np.testing.assert_allclose(fast.weights_, weights, rtol=1e-10)
    np.testing.assert_allclose(fast.score(data), data.features.astype(float) @ weights, rtol=1e-10)


def test_weak_ranker_performance_matches_flat_evaluation():
    data = toy_queries(12, 4)
    perf = AdaRank().weak_ranker_performance(data)
    assert perf.shape == (data.n_features, data.n_queries)
    for k in range(data.n_features):
        expected = evaluate(data.features[:, k], data, names=("ndcg@10",)).per_query["ndcg@10"]
        np.testing.assert_allclose(perf[k], expected, rtol=1e-12)


def test_learns_well_above_random():
    train, vali, test = toy_queries(60, 0), toy_queries(30, 1), toy_queries(40, 2)
    model = AdaRank(rounds=100, early_stopping=10).fit(train, vali)
    random = evaluate(np.random.default_rng(0).random(test.n_docs), test, names=("ndcg@10",))
    learned = evaluate(model.score(test), test, names=("ndcg@10",))
    assert learned.means["ndcg@10"] > random.means["ndcg@10"] + 0.2, (learned.means, random.means)


def test_early_stopping_keeps_best_round():
    train, vali = toy_queries(40, 0), toy_queries(20, 1)
    model = AdaRank(rounds=200, early_stopping=3, max_consecutive=2).fit(train, vali)
    curve = [rec["vali_ndcg@10"] for rec in model.history]
    best = model.best_round_
    assert len(model.history) == best + 3 < 200
    assert curve[best - 1] == max(curve) and max(curve[best:]) <= curve[best - 1]
    assert model.features_ == [rec["feature"] for rec in model.history[:best]]
    # Without early stopping all rounds are kept.
    full = AdaRank(rounds=20, max_consecutive=2).fit(train, vali)
    assert full.best_round_ == len(full.features_) == 20


def test_max_consecutive_caps_repeated_feature():
    data = toy_queries(30, 6)
    runs = {}
    for cap in (2, None):
        chosen = AdaRank(rounds=40, max_consecutive=cap).fit(data).features_
        longest, current = 1, 1
        for a, b in zip(chosen, chosen[1:]):
            current = current + 1 if a == b else 1
            longest = max(longest, current)
        runs[cap] = longest
    assert runs[2] <= 2
    assert runs[None] > 2  # the plain algorithm does repeat itself on this data


def test_perfect_feature_gives_finite_alpha_and_stops():
    data = toy_queries(15, 7)
    features = data.features.copy()
    features[:, 3] = data.labels  # ranks every query perfectly (ties only among equal labels)
    data = data.with_features(features)
    model = AdaRank(rounds=50).fit(data)
    assert model.features_ == [3]
    assert np.isfinite(model.alphas_[0]) and model.alphas_[0] == pytest.approx(0.5 * np.log(2e12))
    assert evaluate(model.score(data), data, names=("ndcg@10",)).means["ndcg@10"] == 1.0


def test_bad_options_and_no_relevant_queries():
    with pytest.raises(UserError, match="metric"):
        AdaRank(metric="ndgc@10")
    with pytest.raises(UserError, match="early_stopping"):
        AdaRank(early_stopping=-1)
    assert AdaRank(early_stopping=0).early_stopping is None  # 0 = off, as in the papers' grid
    data = toy_queries(5, 8)
    with pytest.raises(UserError, match="relevant"):
        AdaRank().fit(data.with_labels(np.zeros_like(data.labels)))
