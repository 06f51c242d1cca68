"""Where the data of one point of a sensitivity experiment comes from, and how a trained model is
scored on it.

A source is built from the experiment's ``data`` node (``_target_`` + parameters; a series or
the varied ``x`` overrides parameters) and has

- ``overrides``: config overrides every run config of this source needs (dataset, eval);
- ``load(repetition) -> (train, test)``: the raw (untransformed) training and test sets;
- ``score(cfg, scores, test, rng) -> float``: the value of one trained model.

:class:`SyntheticSource` is the papers' Sect. 4.5 data and evaluation (NDCG@20 over random
subsets of test documents); :class:`LetorSource` the same experiment on a LETOR dataset's folds
(training set cut to ``n_train`` documents by whole queries, the eval config's metric on test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from omegaconf import DictConfig

from ltr_bench.data.protocol import Dataset
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.synthetic import make_synthetic_splits
from ltr_bench.errors import UserError


def keep_fraction_of_classes(
    data: QuerySet, classes: Sequence[int] | None, fraction: float, rng: np.random.Generator
) -> QuerySet:
    """``data`` with only ``fraction`` of the documents labelled in ``classes`` (drawn without
    replacement, at least one per class present); the journal's label-ratio test (Sect. 4.6)."""
    if not classes or fraction >= 1.0:
        return data
    if not 0.0 < fraction <= 1.0:
        raise UserError(f"experiment.data.keep_fraction must be in (0, 1], got {fraction}")
    keep = np.ones(data.n_docs, dtype=bool)
    for c in classes:
        idx = np.flatnonzero(data.labels == int(c))
        if idx.size == 0:
            continue
        n_keep = max(1, int(round(fraction * idx.size)))
        drop = rng.choice(idx, size=idx.size - n_keep, replace=False)
        keep[drop] = False
    return _select_docs(data, keep)


def _select_docs(data: QuerySet, keep: np.ndarray) -> QuerySet:
    """The documents where ``keep`` is True, queries kept in order (empty queries dropped)."""
    qid = data.qid[keep]
    change = np.flatnonzero(np.diff(qid) != 0) + 1 if qid.size else np.array([], dtype=np.int64)
    offsets = np.concatenate([[0], change, [qid.size]]).astype(np.int64)
    return replace(
        data,
        features=data.features[keep],
        labels=data.labels[keep],
        qid=qid,
        offsets=offsets,
        docids=None if data.docids is None else data.docids[keep],
    )


def relevant_ratio(labels: np.ndarray, classes: Sequence[int] | None, threshold: int) -> float:
    """Training documents in the relevant classes per document outside them (``classes``, or
    labels >= ``threshold`` when none are given)."""
    high = np.isin(labels, list(classes)) if classes else labels >= threshold
    low = int((~high).sum())
    return float(high.sum()) / low if low else float("nan")


class SyntheticSource:
    """The papers' generator (Sect. 4.5): train and test drawn independently from one class spec;
    repetition ``r`` draws new class parameters (data seed ``seed * 1000 + r``)."""

    def __init__(
        self,
        n_train: int = 100_000,
        n_test: int = 10_000,
        n_features: int = 70,
        n_classes: int = 5,
        sigma: float = 0.0,
        docs_per_query: int | None = None,
        keep_classes: Sequence[int] | None = None,
        keep_fraction: float = 1.0,
        relevance_threshold: int = 1,
        seed: int = 0,
        k: int = 20,
        n_subsets: int = 50,
        min_size: int = 50,
        max_size: int = 150,
        overrides: Sequence[str] = (),
    ) -> None:
        self.params: dict[str, Any] = dict(
            n_train=int(float(n_train)),
            n_test=int(float(n_test)),
            n_features=int(n_features),
            n_classes=int(n_classes),
            sigma=float(sigma),
            docs_per_query=docs_per_query,
        )
        self.keep_classes = list(keep_classes) if keep_classes else None
        self.keep_fraction = float(keep_fraction)
        self.relevance_threshold = int(relevance_threshold)
        self.seed = int(seed)
        self.k, self.n_subsets = int(k), int(n_subsets)
        self.min_size, self.max_size = int(min_size), int(max_size)
        self.overrides = list(overrides)
        self.metric = f"ndcg@{self.k}"

    def load(self, repetition: int) -> tuple[QuerySet, QuerySet]:
        seed = self.seed * 1000 + int(repetition)
        train, _, test = make_synthetic_splits(**self.params, seed=seed)
        rng = np.random.default_rng([seed, 7])
        train = keep_fraction_of_classes(train, self.keep_classes, self.keep_fraction, rng)
        return train, test

    def score(
        self, cfg: DictConfig, scores: np.ndarray, test: QuerySet, rng: np.random.Generator
    ) -> float:
        from ltr_bench.experiments.subsets import subset_ndcg

        values = subset_ndcg(
            scores,
            test.labels,
            k=self.k,
            n_subsets=self.n_subsets,
            min_size=self.min_size,
            max_size=self.max_size,
            rng=rng,
        )
        return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


class LetorSource:
    """A LETOR dataset (``overrides``, e.g. ``[dataset=mq2008]``): repetition ``r`` uses the
    ``r``-th selected fold; its training set is cut to ``n_train`` documents by whole random
    queries (all of it when larger), and a model scores the eval config's ``metric`` on test."""

    def __init__(
        self,
        overrides: Sequence[str],
        n_train: int | None = None,
        keep_classes: Sequence[int] | None = None,
        keep_fraction: float = 1.0,
        metric: str = "ndcg@10",
        seed: int = 0,
        **unused: Any,
    ) -> None:
        self.overrides = list(overrides)
        self.n_train = None if n_train is None else int(float(n_train))
        self.keep_classes = list(keep_classes) if keep_classes else None
        self.keep_fraction = float(keep_fraction)
        self.metric = str(metric)
        self.seed = int(seed)
        self.relevance_threshold = 1
        self._dataset: Dataset | None = None

    def _data(self) -> Dataset:
        if self._dataset is None:
            from hydra.utils import instantiate

            from ltr_bench.experiments.common import compose_run_config

            cfg = compose_run_config(self.overrides)
            self._dataset = instantiate(cfg.dataset, _convert_="all")
            self.relevance_threshold = int(self._dataset.relevance_threshold)
        return self._dataset

    def load(self, repetition: int) -> tuple[QuerySet, QuerySet]:
        ds = self._data()
        fold = ds.load_fold(int(repetition) % ds.n_folds)
        rng = np.random.default_rng([self.seed, int(repetition), 11])
        train = fold.train
        if self.n_train is not None and self.n_train < train.n_docs:
            order = rng.permutation(train.n_queries)
            sizes = np.diff(train.offsets)[order]
            n_q = int(np.searchsorted(np.cumsum(sizes), self.n_train) + 1)
            train = train.select_queries(np.sort(order[:n_q]))
        train = keep_fraction_of_classes(train, self.keep_classes, self.keep_fraction, rng)
        return train, fold.test

    def score(
        self, cfg: DictConfig, scores: np.ndarray, test: QuerySet, rng: np.random.Generator
    ) -> float:
        from ltr_bench.runner import evaluate_split

        return float(evaluate_split(cfg, scores, test, "test").means[self.metric])
