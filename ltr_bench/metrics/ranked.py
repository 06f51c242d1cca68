"""A padded batch of queries in ranked order, shared by all metrics of one evaluation."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr_bench.metrics.order import float_dtype, order_of_keys, ranking_keys


class Ranked:
    """A padded batch in ranked order, shared by all metrics of one evaluation.

    Sorts once; ranked labels are gathered lazily (only the top k for @k metrics). Real documents
    always precede padding in ranked order, so "valid at rank i" is ``i < n_docs``. With
    ``depth``, only the top ``depth`` ranks are ordered (enough for metrics cut off at or above
    it, see :func:`~ltr_bench.metrics.names.ranking_depth`).
    """

    def __init__(
        self, scores: Tensor, labels: Tensor, mask: Tensor, depth: int | None = None
    ) -> None:
        if scores.shape != labels.shape or scores.shape != mask.shape or scores.dim() != 2:
            raise ValueError(
                f"scores {tuple(scores.shape)}, labels {tuple(labels.shape)} and mask "
                f"{tuple(mask.shape)} must be the same [Q, L] shape"
            )
        mask = mask.to(torch.bool)
        if scores.shape[1] == 0:  # no documents at all: one padded column keeps shapes valid
            scores, labels, mask = (F.pad(t, (0, 1)) for t in (scores, labels, mask))
        keys, perm = ranking_keys(scores, mask)
        self._setup(keys, perm, labels, mask, depth)

    @classmethod
    def from_keys(
        cls, keys: Tensor, labels: Tensor, mask: Tensor, depth: int | None = None
    ) -> Ranked:
        """From ranking keys (``-score``, ``+inf`` at padding) of rows whose real documents come
        first, as the flat evaluation pads them: no score copy, no key pass."""
        ranked = cls.__new__(cls)
        ranked._setup(keys, None, labels, mask, depth)
        return ranked

    def _setup(
        self, keys: Tensor, perm: Tensor | None, labels: Tensor, mask: Tensor, depth: int | None
    ) -> None:
        self.input_labels = labels  # as given: integer labels allow a sort-free IDCG
        self.mask = mask
        self.dtype = float_dtype(keys.device)
        self.width = mask.shape[1]
        self.n_docs = mask.sum(dim=1)
        self.depth = None if depth is None or depth >= self.width else int(depth)
        self.order = order_of_keys(keys, perm, self.depth)  # [Q, L or depth] ranked columns
        self._full: Tensor | None = None

    @functools.cached_property
    def raw_labels(self) -> Tensor:
        """``[Q, L]`` float labels in input order, 0 at padding."""
        return self.input_labels.to(self.dtype).masked_fill(~self.mask, 0.0)

    def valid(self, k: int | None = None) -> Tensor:
        """``[Q, min(k, L)]`` True where the rank holds a real document."""
        k = self.width if k is None else min(k, self.width)
        return torch.arange(k, device=self.mask.device) < self.n_docs.unsqueeze(1)

    def labels(self, k: int | None = None) -> Tensor:
        """``[Q, min(k, L)]`` float labels of the top-k ranks, 0 at padding."""
        if self.depth is not None and (k is None or k > self.depth):
            raise ValueError(
                f"ranked to depth {self.depth} only, but ranks up to {k or self.width} were asked"
            )
        if self._full is None and k is not None and k < self.width:
            top = self.input_labels.gather(1, self.order[:, :k]).to(self.dtype)
            return top.masked_fill(~self.valid(k), 0.0)
        if self._full is None:
            self._full = self.raw_labels.gather(1, self.order)
        return self._full[:, :k]

    def relevant(self, threshold: float, k: int | None = None) -> Tensor:
        return (self.labels(k) >= threshold) & self.valid(k)

    def has_relevant(self, threshold: float) -> Tensor:
        return ((self.input_labels >= threshold) & self.mask).any(dim=1)
