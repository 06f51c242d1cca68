"""A padded batch of queries in ranked order, in NumPy: the twin of
:class:`ltr_bench.metrics.ranked.Ranked` for the flat evaluation."""

from __future__ import annotations

import functools

import numpy as np

from ltr_bench.metrics.dcg_np import grade_counts
from ltr_bench.metrics.row_order import argsort_rows, top_k_rows


class RankedRows:
    """Padded ``[Q, L]`` rows in ranked order, sorted once; shared by an evaluation's metrics.

    Built from ranking keys (``-score``, ``+inf`` at padding) of rows whose real documents come
    first, as the flat evaluation pads them; ``perm`` maps those columns back to the input's
    where the rows were reordered to put real documents first (``labels`` and ``mask`` stay in
    input order). With ``depth``, only the top ``depth`` ranks are ordered (enough for metrics
    cut off at or above it).
    """

    def __init__(
        self,
        keys: np.ndarray,
        labels: np.ndarray,
        mask: np.ndarray,
        depth: int | None = None,
        perm: np.ndarray | None = None,
    ) -> None:
        self.input_labels = labels  # as given: integer labels allow a sort-free IDCG
        self.mask = mask.astype(bool, copy=False)
        self.width = mask.shape[1]
        self.n_docs = self.mask.sum(axis=1)
        self.depth = None if depth is None or depth >= self.width else int(depth)
        order = argsort_rows(keys) if self.depth is None else top_k_rows(keys, self.depth)
        self.order = order if perm is None else np.take_along_axis(perm, order, axis=1)
        self._full: np.ndarray | None = None

    @functools.cached_property
    def raw_labels(self) -> np.ndarray:
        """``[Q, L]`` float64 labels in input order, 0 at padding."""
        return np.where(self.mask, self.input_labels.astype(np.float64), 0.0)

    @functools.cached_property
    def grade_counts(self) -> np.ndarray | None:
        """Each query's documents per grade (:func:`~ltr_bench.metrics.dcg_np.grade_counts`),
        counted once for every IDCG cut-off."""
        return grade_counts(self.input_labels, self.mask)

    def valid(self, k: int | None = None) -> np.ndarray:
        """``[Q, min(k, L)]`` True where the rank holds a real document."""
        k = self.width if k is None else min(k, self.width)
        return np.arange(k) < self.n_docs[:, None]

    def labels(self, k: int | None = None) -> np.ndarray:
        """``[Q, min(k, L)]`` float64 labels of the top-k ranks, 0 at padding."""
        if self.depth is not None and (k is None or k > self.depth):
            raise ValueError(
                f"ranked to depth {self.depth} only, but ranks up to {k or self.width} were asked"
            )
        if self._full is None and k is not None and k < self.width:
            top = np.take_along_axis(self.input_labels, self.order[:, :k], axis=1)
            return np.where(self.valid(k), top.astype(np.float64), 0.0)
        if self._full is None:
            self._full = np.take_along_axis(self.raw_labels, self.order, axis=1)
        return self._full[:, :k]

    def relevant(self, threshold: float, k: int | None = None) -> np.ndarray:
        return (self.labels(k) >= threshold) & self.valid(k)

    def has_relevant(self, threshold: float) -> np.ndarray:
        return ((self.input_labels >= threshold) & self.mask).any(axis=1)
