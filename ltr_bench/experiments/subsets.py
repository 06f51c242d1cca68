"""The synthetic-data evaluation of the papers' Sect. 4.5 step (3), vectorised.

Draw ``n_subsets`` random subsets of ``min_size``..``max_size`` test documents (each without
repetition), rank each subset by the model's scores and compute NDCG@k (gain ``2^label - 1``);
the value of one trained model is the mean over the subsets. All subsets are evaluated at once
as one padded ``[n_subsets, max_size]`` batch through :func:`ltr_bench.metrics.metric_padded`.
"""

from __future__ import annotations

import numpy as np

from ltr_bench.metrics import metric_padded


def draw_subsets(
    n_docs: int, n_subsets: int, min_size: int, max_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(index [S, max_size], mask [S, max_size])``: subset ``s`` is ``index[s][mask[s]]``,
    a uniform sample without repetition of ``size_s ~ U{min_size..max_size}`` documents."""
    max_size = min(int(max_size), int(n_docs))
    min_size = min(int(min_size), max_size)
    sizes = rng.integers(min_size, max_size + 1, size=n_subsets)
    # per row the documents with the max_size smallest random keys, in key order: the first
    # size_s of them are a uniform sample without repetition
    keys = rng.random((n_subsets, n_docs))
    if max_size < n_docs:
        index = np.argpartition(keys, max_size - 1, axis=1)[:, :max_size]
        order = np.argsort(np.take_along_axis(keys, index, axis=1), axis=1)
        index = np.take_along_axis(index, order, axis=1)
    else:
        index = np.argsort(keys, axis=1)
    mask = np.arange(max_size)[None, :] < sizes[:, None]
    return index, mask


def subset_ndcg(
    scores: np.ndarray,
    labels: np.ndarray,
    *,
    k: int = 20,
    n_subsets: int = 50,
    min_size: int = 50,
    max_size: int = 150,
    rng: np.random.Generator,
) -> np.ndarray:
    """NDCG@k of each random subset (``[n_subsets]``; NaN for a subset without a relevant
    document, i.e. all labels 0)."""
    index, mask = draw_subsets(len(scores), n_subsets, min_size, max_size, rng)
    s = np.asarray(scores, dtype=np.float64)[index]
    y = np.asarray(labels, dtype=np.float64)[index]
    return metric_padded(f"ndcg@{k}", s, y, mask)
