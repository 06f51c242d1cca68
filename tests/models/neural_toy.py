"""Small generated ranking data shared by the ranker tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ltr_bench.data.queryset import QuerySet
from ltr_bench.metrics import ndcg_at_k

TINY = dict(hidden_sizes=[16, 8], dropout=0.0, epochs=12, early_stopping_patience=4)


def toy_queries(n_queries: int, seed: int, n_features: int = 8) -> QuerySet:
    """Queries of 5-40 documents; labels 0/1/2 cut from a noisy non-linear latent score.

    The latent score is the same function for every ``seed`` (train, vali and test differ only in
    the drawn documents).
    """
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 41, size=n_queries)
    n = int(lengths.sum())
    x = rng.normal(size=(n, n_features)).astype(np.float32)
    w = np.random.default_rng(99).normal(size=n_features)
    latent = np.tanh(x @ w / 2) + 0.3 * x[:, 0] ** 2 + 0.2 * rng.normal(size=n)
    labels = np.digitize(latent, np.quantile(latent, [0.6, 0.85]))
    return QuerySet.from_arrays(x, labels, np.repeat(np.arange(n_queries) + 1000 * seed, lengths))


def linear_queries(
    n_queries: int,
    seed: int,
    *,
    min_len: int = 10,
    cuts: Sequence[float] = (0.6, 0.85),
    n_features: int = 8,
) -> QuerySet:
    """Queries of ``min_len``-30 documents; labels are cuts (quantiles ``cuts``) of a noisy linear
    latent score whose weights are the same for every ``seed``."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, 31, size=n_queries)
    n = int(lengths.sum())
    x = rng.normal(size=(n, n_features))
    w = np.random.default_rng(99).normal(size=n_features)
    latent = x @ w + 0.5 * rng.normal(size=n)
    labels = np.digitize(latent, np.quantile(latent, cuts))
    return QuerySet.from_arrays(x, labels, np.repeat(np.arange(n_queries) + 1000 * seed, lengths))


def toy_splits(n_train: int = 80) -> tuple[QuerySet, QuerySet, QuerySet]:
    return toy_queries(n_train, 1), toy_queries(30, 2), toy_queries(40, 3)


def ndcg10(scores: np.ndarray, data: QuerySet) -> float:
    return ndcg_at_k(scores, data.labels, data.qid, 10)


def random_ndcg10(data: QuerySet, n: int = 5) -> float:
    """NDCG@10 of random scores, averaged over ``n`` draws: the baseline a ranker must beat."""
    rng = np.random.default_rng(0)
    return float(np.mean([ndcg10(rng.normal(size=data.n_docs), data) for _ in range(n)]))
