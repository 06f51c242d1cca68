"""Splits of a QuerySet by **query** (never by document), vectorised and seeded.

Every function returns *query positions* (0-based indices into ``qs.query_ids``, sorted, so
storage order is kept); :func:`apply_split` turns a pair of index arrays into two QuerySets.
The predefined LETOR folds are files on disk and live in :mod:`ltr_bench.data.datasets`.
"""

from __future__ import annotations

import numpy as np

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError

Split = tuple[np.ndarray, np.ndarray]


def _n_queries(data: QuerySet | int) -> int:
    return data.n_queries if isinstance(data, QuerySet) else int(data)


def kfold_by_query(data: QuerySet | int, k: int, seed: int = 0) -> list[Split]:
    """``k`` (train, vali) pairs of query positions; the vali parts partition the queries.

    Queries are shuffled with ``seed`` and dealt round-robin, so part sizes differ by at most 1.
    """
    n = _n_queries(data)
    if not 2 <= int(k) <= n:
        raise UserError(f"k-fold by query needs 2 <= k <= number of queries ({n}), got k={k}")
    k = int(k)
    part = np.empty(n, dtype=np.int64)
    part[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    return [(np.flatnonzero(part != f), np.flatnonzero(part == f)) for f in range(k)]


def holdout_splits(
    data: QuerySet | int, n_splits: int = 15, train_fraction: float = 0.8, seed: int = 0
) -> list[Split]:
    """``n_splits`` independent random (train, test) partitions of the queries.

    Split ``i`` depends only on ``(seed, i)``, so asking for more splits keeps the first ones.
    The train part has ``round(train_fraction * Q)`` queries (at least 1, at most Q - 1).
    """
    n = _n_queries(data)
    if not 0.0 < float(train_fraction) < 1.0:
        raise UserError(f"train_fraction must be strictly between 0 and 1, got {train_fraction}")
    if n < 2:
        raise UserError(f"a hold-out split needs at least 2 queries, got {n}")
    if int(n_splits) < 1:
        raise UserError(f"n_splits must be >= 1, got {n_splits}")
    n_train = min(max(int(round(float(train_fraction) * n)), 1), n - 1)
    out = []
    for i in range(int(n_splits)):
        perm = np.random.default_rng([int(seed), i]).permutation(n)
        out.append((np.sort(perm[:n_train]), np.sort(perm[n_train:])))
    return out


def apply_split(data: QuerySet, split: Split) -> tuple[QuerySet, QuerySet]:
    """The two QuerySets of a (first, second) pair of query-position arrays."""
    first, second = split
    return data.select_queries(first), data.select_queries(second)


def check_partition(n_queries: int, parts: list[np.ndarray]) -> bool:
    """True if ``parts`` together hold every query position exactly once."""
    allq = (
        np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])
        if parts
        else np.zeros(0, np.int64)
    )
    return len(allq) == n_queries and np.array_equal(np.sort(allq), np.arange(n_queries))
