"""The data side of an evaluation protocol: :class:`Preprocessing` composes the query filters,
a feature transform fitted on the training split, and label binarisation from the explicit
options of ``eval.preprocessing`` (``conf/eval/*.yaml``); :meth:`Preprocessing.fit_apply` is the
one fit-on-train, apply-to-every-part of a split."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.transforms.features import (
    FeatureTransform,
    Identity,
    PerQueryNormalize,
    StandardScale,
)
from ltr_bench.data.transforms.labels import (
    binarize_labels,
    drop_queries_without_relevant,
    min_docs_per_query,
)
from ltr_bench.data.transforms.quantile import QuantileNormal
from ltr_bench.errors import UserError

SPLITS = ("train", "vali", "test")
FEATURE_TRANSFORMS = ("quantile_normal", "standard", "per_query", "none")


class Preprocessing:
    """The data side of an evaluation protocol, built from ``eval.preprocessing`` in the config.

    ``apply(data, split)`` does, in order: drop queries with fewer than ``min_docs`` documents
    (every split); drop queries without a document labelled ``>= relevance_threshold`` (the
    splits in ``drop_no_relevant_splits``, on the original graded labels); the feature transform
    (fitted by :meth:`fit` on the training split, after its own query filters); labels
    binarised at ``binarize_at`` (the splits in ``binarize_splits``).

    Args:
        feature_transform: ``quantile_normal`` | ``standard`` | ``per_query`` | ``none``.
        normal_scale: output scale of ``quantile_normal`` (1/3 in the papers).
        binarize_at: label threshold for binarisation; None keeps graded labels.
        binarize_splits: the splits whose labels are binarised.
        drop_no_relevant_splits: the splits whose queries without relevant documents are dropped.
        relevance_threshold: a document is relevant when its label is ``>=`` this; None means
            ``binarize_at`` if set, else 1.
        min_docs: minimum documents per query (1 keeps all).
        n_quantiles, subsample, seed: options of :class:`QuantileNormal`.
        threads: threads of the quantile transform (the run's ``threads``; None = 1).
    """

    def __init__(
        self,
        feature_transform: str = "quantile_normal",
        normal_scale: float = 1.0 / 3.0,
        binarize_at: int | None = None,
        binarize_splits: Iterable[str] = ("test",),
        drop_no_relevant_splits: Iterable[str] = ("vali", "test"),
        relevance_threshold: int | None = None,
        min_docs: int = 1,
        n_quantiles: int = 1000,
        subsample: int = 100_000,
        seed: int = 0,
        threads: int | None = 1,
    ) -> None:
        self.feature_transform = str(feature_transform)
        self.normal_scale = float(normal_scale)
        self.binarize_at = None if binarize_at is None else int(binarize_at)
        self.binarize_splits = _split_list(binarize_splits, "binarize_splits")
        self.drop_no_relevant_splits = _split_list(
            drop_no_relevant_splits, "drop_no_relevant_splits"
        )
        if relevance_threshold is None:
            relevance_threshold = self.binarize_at if self.binarize_at is not None else 1
        self.relevance_threshold = int(relevance_threshold)
        self.min_docs = int(min_docs)
        if self.min_docs < 1:
            raise UserError(f"eval.preprocessing.min_docs must be >= 1, got {min_docs}")
        self.transform = _make_feature_transform(
            self.feature_transform, self.normal_scale, n_quantiles, subsample, seed, threads
        )
        self.fitted_on: dict[str, int] | None = None

    def filter_queries(self, data: QuerySet, split: str) -> QuerySet:
        """The query filters of ``split`` (min_docs, then no-relevant) without other steps."""
        _check_split(split)
        out = min_docs_per_query(data, self.min_docs) if self.min_docs > 1 else data
        if split in self.drop_no_relevant_splits:
            out = drop_queries_without_relevant(out, self.relevance_threshold)
        if out.n_queries == 0:
            raise UserError(
                f"no {split} queries are left after dropping queries with fewer than "
                f"{self.min_docs} documents or without a label >= {self.relevance_threshold} "
                "(eval.preprocessing.min_docs / relevance_threshold)"
            )
        return out

    def fit(self, train: QuerySet) -> Preprocessing:
        """Fit the feature transform on the (filtered) training split only."""
        train = self.filter_queries(train, "train")
        self.transform.fit(train)
        self.fitted_on = {"n_queries": train.n_queries, "n_docs": train.n_docs}
        return self

    def apply(self, data: QuerySet, split: str) -> QuerySet:
        """The preprocessed ``split`` (one of train, vali, test)."""
        if self.fitted_on is None and self.feature_transform in ("quantile_normal", "standard"):
            raise RuntimeError("Preprocessing.apply called before fit(train)")
        return self.binarize(self.transform.transform(self.filter_queries(data, split)), split)

    def binarize(self, data: QuerySet, split: str) -> QuerySet:
        """``data`` with its labels binarised at ``binarize_at`` if ``split`` is one of
        ``binarize_splits``, else unchanged (the label step of :meth:`apply`)."""
        if self.binarize_at is not None and split in self.binarize_splits:
            return binarize_labels(data, self.binarize_at)
        return data

    def fit_apply(
        self, train: QuerySet, *others: tuple[QuerySet | None, str]
    ) -> list[QuerySet | None]:
        """Fit on ``train`` and return ``[train', *others']`` (each other as (data, split); a
        missing part, None, stays None): the one fit-then-apply of a split's parts."""
        self.fit(train)
        out: list[QuerySet | None] = [self.apply(train, "train")]
        out += [None if d is None else self.apply(d, s) for d, s in others]
        return out

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(options, arrays)``: the constructor options and ``fitted_on`` as JSON data, and the
        fitted arrays (``quantiles`` [n_q, F] float64, or ``mean`` / ``std``); with
        :meth:`from_state` the same transform, bit for bit, without pickling anything."""
        options = self._options()
        arrays: dict[str, np.ndarray] = {}
        t = self.transform
        if isinstance(t, QuantileNormal):
            options.update(n_quantiles=t.n_quantiles, subsample=t.subsample, seed=t.seed)
            if t.quantiles_ is not None:
                arrays["quantiles"] = np.asarray(t.quantiles_, dtype=np.float64)
            if t.order_stats_ is not None:
                arrays["order_rows"] = np.asarray([t.order_stats_[0]], dtype=np.int64)
                arrays["order_values"] = np.asarray(t.order_stats_[1])
        elif isinstance(t, StandardScale) and t.mean_ is not None:
            arrays["mean"] = np.asarray(t.mean_, dtype=np.float64)
            arrays["std"] = np.asarray(t.std_, dtype=np.float64)
        return options, arrays

    @classmethod
    def from_state(
        cls, options: Mapping[str, Any], arrays: Mapping[str, np.ndarray], threads: int | None = 1
    ) -> Preprocessing:
        """The preprocessing that :meth:`state` described (fitted when its arrays are given)."""
        opts = dict(options)
        fitted_on = opts.pop("fitted_on", None)
        pre = cls(**opts, threads=threads)
        t = pre.transform
        if isinstance(t, QuantileNormal) and "quantiles" in arrays:
            stats = None
            if "order_values" in arrays:
                rows = int(np.asarray(arrays["order_rows"]).reshape(-1)[0])
                stats = (rows, np.array(arrays["order_values"]))
            t.load_knots(np.asarray(arrays["quantiles"], dtype=np.float64), stats)
        elif isinstance(t, StandardScale) and "mean" in arrays:
            t.mean_ = np.asarray(arrays["mean"], dtype=np.float64)
            t.std_ = np.asarray(arrays["std"], dtype=np.float64)
        pre.fitted_on = dict(fitted_on) if fitted_on else ({} if arrays else None)
        return pre

    def _options(self) -> dict[str, Any]:
        """The constructor options (bar the transform's own) and ``fitted_on``."""
        return {
            "feature_transform": self.feature_transform,
            "normal_scale": self.normal_scale,
            "binarize_at": self.binarize_at,
            "binarize_splits": list(self.binarize_splits),
            "drop_no_relevant_splits": list(self.drop_no_relevant_splits),
            "relevance_threshold": self.relevance_threshold,
            "min_docs": self.min_docs,
            "fitted_on": self.fitted_on,
        }

    def describe(self) -> dict[str, Any]:
        return {**self._options(), "transform": self.transform.describe()}


def _make_feature_transform(
    name: str, scale: float, n_quantiles: int, subsample: int, seed: int, threads: int | None = 1
) -> FeatureTransform:
    if name == "quantile_normal":
        return QuantileNormal(
            scale, n_quantiles=n_quantiles, subsample=subsample, seed=seed, threads=threads
        )
    if name == "standard":
        return StandardScale()
    if name == "per_query":
        return PerQueryNormalize()
    if name == "none":
        return Identity()
    raise UserError(
        f"eval.preprocessing.feature_transform must be one of {', '.join(FEATURE_TRANSFORMS)}, "
        f"got {name!r}"
    )


def _split_list(value: Iterable[str] | str | None, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    out = tuple(str(v) for v in value)
    bad = [v for v in out if v not in SPLITS]
    if bad:
        raise UserError(
            f"eval.preprocessing.{key} may only name {', '.join(SPLITS)}, got {', '.join(bad)}"
        )
    return out


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
