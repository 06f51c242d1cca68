"""QuerySet: the one in-memory dataset type of ltr_bench.

Documents are stored sorted by query: the documents of query ``i`` are rows
``offsets[i]:offsets[i+1]``. Every consumer (metrics, pair sampling, protocols, rankers) works on
this type; nothing re-parses files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ltr_bench.data.padding import pad_all
from ltr_bench.errors import UserError


@dataclass(frozen=True, eq=False)
class QuerySet:
    """Features, labels and query structure of a set of query-document pairs.

    Attributes:
        features: ``[N, F]`` float32 feature matrix.
        labels: ``[N]`` int32 relevance labels.
        qid: ``[N]`` int64 query id per document (constant inside a query's block).
        offsets: ``[Q + 1]`` int64 start offsets of the query blocks; ``offsets[-1] == N``.
        docids: optional ``[N]`` array of document ids (strings) for joining scores back.
        source: provenance (file paths and hashes, or generator parameters), used by
            :meth:`fingerprint` and logged with every run.
    """

    features: np.ndarray
    labels: np.ndarray
    qid: np.ndarray
    offsets: np.ndarray
    docids: np.ndarray | None = None
    source: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        features: np.ndarray,
        labels: np.ndarray,
        qid: np.ndarray,
        docids: np.ndarray | None = None,
        source: dict[str, Any] | None = None,
        require_contiguous: bool = False,
    ) -> QuerySet:
        """Build a QuerySet from flat arrays, grouping documents by query.

        Documents of a query need not be contiguous unless ``require_contiguous`` is set; they are
        stably sorted by first appearance of their qid so the order inside a query is kept.
        """
        features = np.ascontiguousarray(features, dtype=np.float32)
        labels = np.asarray(labels)
        if labels.dtype.kind == "f":
            if not np.all(np.isfinite(labels)) or np.any(labels != np.round(labels)):
                raise UserError("labels must be whole numbers (relevance grades)")
        labels = labels.astype(np.int32)
        qid = np.asarray(qid).astype(np.int64)
        n = len(labels)
        if features.ndim != 2 or features.shape[0] != n or len(qid) != n:
            raise UserError(
                f"features {features.shape}, labels ({n},) and qid ({len(qid)},) do not line up"
            )
        if n == 0:
            offsets = np.zeros(1, dtype=np.int64)
            return cls(features, labels, qid, offsets, docids, dict(source or {}))
        change = np.flatnonzero(qid[1:] != qid[:-1]) + 1
        starts = np.concatenate([[0], change])
        block_qids = qid[starts]
        if len(np.unique(block_qids)) != len(block_qids):
            if require_contiguous:
                raise UserError("the documents of a query are not contiguous")
            # Stable regrouping by order of first appearance.
            _, first = np.unique(qid, return_index=True)
            rank_of_qid = np.empty(len(first), dtype=np.int64)
            rank_of_qid[np.argsort(first, kind="stable")] = np.arange(len(first))
            _, inverse = np.unique(qid, return_inverse=True)
            order = np.argsort(rank_of_qid[inverse], kind="stable")
            features, labels, qid = features[order], labels[order], qid[order]
            docids = docids[order] if docids is not None else None
            change = np.flatnonzero(qid[1:] != qid[:-1]) + 1
            starts = np.concatenate([[0], change])
        offsets = np.concatenate([starts, [n]]).astype(np.int64)
        return cls(features, labels, qid, offsets, docids, dict(source or {}))

    # ------------------------------------------------------------------ shape
    @property
    def n_docs(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_queries(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def query_lengths(self) -> np.ndarray:
        """``[Q]`` number of documents per query."""
        return np.diff(self.offsets)

    @property
    def query_ids(self) -> np.ndarray:
        """``[Q]`` the qid of each query block, in storage order."""
        return self.qid[self.offsets[:-1]]

    def query_index(self) -> np.ndarray:
        """``[N]`` the 0-based query block index of each document."""
        return np.repeat(np.arange(self.n_queries, dtype=np.int64), self.query_lengths)

    def __len__(self) -> int:
        return self.n_docs

    def __repr__(self) -> str:
        return (
            f"QuerySet(n_queries={self.n_queries}, n_docs={self.n_docs}, "
            f"n_features={self.n_features})"
        )

    # ------------------------------------------------------------------ selection
    def select_queries(self, index: Sequence[int] | np.ndarray) -> QuerySet:
        """A new QuerySet with the query blocks at ``index`` (positions, or a boolean mask)."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        index = index.astype(np.int64)
        lengths = self.query_lengths[index]
        new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        # Vectorised gather of the document rows of the chosen blocks.
        starts = self.offsets[:-1][index]
        rows = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
        return replace(
            self,
            features=self.features[rows],
            labels=self.labels[rows],
            qid=self.qid[rows],
            offsets=new_offsets,
            docids=self.docids[rows] if self.docids is not None else None,
            source={**self.source, "selected_queries": _hash_array(index)},
        )

    def with_features(self, features: np.ndarray) -> QuerySet:
        """The same queries with transformed features (same row order)."""
        features = np.ascontiguousarray(features, dtype=np.float32)
        if features.shape[0] != self.n_docs:
            raise ValueError("feature rows must match the number of documents")
        return replace(self, features=features)

    def with_labels(self, labels: np.ndarray) -> QuerySet:
        """The same queries with new labels (e.g. binarised)."""
        labels = np.asarray(labels).astype(np.int32)
        if labels.shape != self.labels.shape:
            raise ValueError("labels must match the number of documents")
        return replace(self, labels=labels)

    @staticmethod
    def concat(parts: Iterable[QuerySet]) -> QuerySet:
        """Concatenate query sets (their query ids should be disjoint)."""
        parts = list(parts)
        if not parts:
            raise ValueError("nothing to concatenate")
        shift = np.cumsum([0] + [p.n_docs for p in parts[:-1]])
        offsets = np.concatenate(
            [parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, shift)]
        ).astype(np.int64)
        docids = (
            np.concatenate([p.docids for p in parts])
            if all(p.docids is not None for p in parts)
            else None
        )
        return QuerySet(
            features=np.concatenate([p.features for p in parts]),
            labels=np.concatenate([p.labels for p in parts]),
            qid=np.concatenate([p.qid for p in parts]),
            offsets=offsets,
            docids=docids,
            source={"concat": [p.source for p in parts]},
        )

    # ------------------------------------------------------------------ padding
    def pad(
        self, values: np.ndarray | None = None, fill: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Pad a per-document array into ``[Q, L]`` (L = longest query) plus a boolean mask.

        ``values`` defaults to the labels; a ``[N, F]`` array gives ``[Q, L, F]``. See
        :mod:`ltr_bench.data.padding` for padding chunks of queries.
        """
        return pad_all(self.labels if values is None else values, self.offsets, fill)

    # ------------------------------------------------------------------ provenance
    def fingerprint(self) -> str:
        """A short content hash (sha256 over features, labels, qid) for tracking."""
        h = hashlib.sha256()
        for arr in (self.features, self.labels, self.qid, self.offsets):
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()[:16]


def _hash_array(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()[:12]
