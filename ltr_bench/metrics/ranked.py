"""A padded batch of queries in ranked order, shared by all metrics of one evaluation."""

from __future__ import annotations

import functools

import numpy as np


def ranking_keys(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``[Q, L]`` keys whose stable ascending sort is the ranking: ``-score`` for real documents
    (a NaN score ranks like -inf), NaN at padding (NumPy sorts NaN last, after real -inf scores,
    wherever the padding sits in the row)."""
    if scores.dtype not in (np.float32, np.float64):  # integers, float16: an exact upcast
        scores = scores.astype(np.float64)
    keys = -scores
    keys[np.isnan(keys)] = np.inf
    keys[~mask] = np.nan
    return keys


def gains(labels: np.ndarray) -> np.ndarray:
    """NDCG gain ``2^r - 1`` of relevance labels (any shape), as float64."""
    return np.exp2(labels.astype(np.float64, copy=False)) - 1.0


def position_discounts(width: int) -> np.ndarray:
    """``[width]`` discounts ``1 / log2(rank + 1)`` of ranks ``1..width``."""
    return 1.0 / np.log2(np.arange(1, width + 1, dtype=np.float64) + 1.0)


class Ranked:
    """Padded ``[Q, L]`` rows in ranked order, sorted once; shared by an evaluation's metrics.

    Built from :func:`ranking_keys` (or keys padded with NaN, as the flat evaluation pads them).
    Score ties are broken by column order (a stable sort); real documents always precede padding
    in ranked order, so "valid at rank i" is ``i < n_docs``.
    """

    def __init__(self, keys: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> None:
        self.input_labels = labels
        self.mask = mask.astype(bool, copy=False)
        self.width = mask.shape[1]
        self.n_docs = self.mask.sum(axis=1)
        self.order = np.argsort(keys, axis=1, kind="stable")  # [Q, L] ranked columns

    @functools.cached_property
    def raw_labels(self) -> np.ndarray:
        """``[Q, L]`` float64 labels in input order, 0 at padding."""
        return np.where(self.mask, self.input_labels.astype(np.float64), 0.0)

    @functools.cached_property
    def _ranked_labels(self) -> np.ndarray:
        return np.take_along_axis(self.raw_labels, self.order, axis=1)

    def valid(self, k: int | None = None) -> np.ndarray:
        """``[Q, min(k, L)]`` True where the rank holds a real document."""
        k = self.width if k is None else min(k, self.width)
        return np.arange(k) < self.n_docs[:, None]

    def labels(self, k: int | None = None) -> np.ndarray:
        """``[Q, min(k, L)]`` float64 labels of the top-k ranks, 0 at padding."""
        return self._ranked_labels[:, :k]

    @functools.cached_property
    def ideal_gains(self) -> np.ndarray:
        """``[Q, L]`` each query's gains in descending order (the ideal ranking), 0 at padding."""
        return -np.sort(-gains(self.raw_labels), axis=1)

    def relevant(self, threshold: float, k: int | None = None) -> np.ndarray:
        return (self.labels(k) >= threshold) & self.valid(k)

    def has_relevant(self, threshold: float) -> np.ndarray:
        return ((self.input_labels >= threshold) & self.mask).any(axis=1)
