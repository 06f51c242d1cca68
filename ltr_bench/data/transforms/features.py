"""Feature transforms without a learned distribution: per-query normalisation (SortNet eq. 4),
standard scaling with train statistics, and the identity; :class:`FeatureTransform` is what every
feature transform (these and :class:`~ltr_bench.data.transforms.quantile.QuantileNormal`) offers."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ltr_bench.data.queryset import QuerySet


class FeatureTransform(Protocol):
    def fit(self, data: QuerySet) -> FeatureTransform: ...
    def transform(self, data: QuerySet) -> QuerySet: ...
    def describe(self) -> dict[str, Any]: ...


class PerQueryNormalize:
    """SortNet eq. 4: per query and feature, ``(x - mean_q(x)) / max_q |x|`` (0 if that is 0).

    Needs no fitting (each query is normalised by its own documents).
    """

    def fit(self, data: QuerySet) -> PerQueryNormalize:
        return self

    def transform(self, data: QuerySet) -> QuerySet:
        if data.n_docs == 0:
            return data
        X = data.features
        lengths = data.query_lengths
        starts = data.offsets[:-1][lengths > 0]
        lengths = lengths[lengths > 0]
        mean = np.add.reduceat(X, starts, axis=0, dtype=np.float64) / lengths[:, None]
        maxabs = np.maximum.reduceat(np.abs(X), starts, axis=0).astype(np.float64)
        inv = np.divide(1.0, maxabs, out=np.zeros_like(maxabs), where=maxabs > 0)
        out = (X - np.repeat(mean, lengths, axis=0)) * np.repeat(inv, lengths, axis=0)
        return data.with_features(out.astype(np.float32))

    def describe(self) -> dict[str, Any]:
        return {"name": "per_query"}


class StandardScale:
    """Zero mean, unit variance per feature, with the training set's statistics."""

    def __init__(self) -> None:
        self.mean_: np.ndarray | None = None
        self.std_: np.ndarray | None = None

    def fit(self, data: QuerySet | np.ndarray) -> StandardScale:
        X = np.asarray(features_of(data), dtype=np.float64)
        self.mean_ = X.mean(axis=0)
        std = X.std(axis=0)
        self.std_ = np.where(std > 0, std, 1.0)
        return self

    def transform(self, data: QuerySet) -> QuerySet:
        if self.mean_ is None:
            raise RuntimeError("StandardScale.transform called before fit")
        return data.with_features((data.features - self.mean_) / self.std_)

    def describe(self) -> dict[str, Any]:
        return {"name": "standard"}


class Identity:
    """Features unchanged."""

    def fit(self, data: QuerySet) -> Identity:
        return self

    def transform(self, data: QuerySet) -> QuerySet:
        return data

    def describe(self) -> dict[str, Any]:
        return {"name": "none"}


def features_of(data: QuerySet | np.ndarray) -> np.ndarray:
    """The ``[N, F]`` feature matrix of a query set, or the array itself."""
    return data.features if isinstance(data, QuerySet) else np.asarray(data)
