"""One fit -> score step: build the ranker and the preprocessing from the config, preprocess a
split (fitted on its training part, shared through the transform cache), fit, score, evaluate."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ltr_bench.config.util import NAME_KEY
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.transforms import binarize_labels
from ltr_bench.errors import UserError
from ltr_bench.protocols import Protocol
from ltr_bench.runner.results import TrialFailed, metric_options


def model_spec(cfg: DictConfig) -> dict[str, Any]:
    """``cfg.model`` resolved, without its name: the ranker's constructor arguments (and
    Hydra's keys)."""
    spec = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(spec, dict)
    spec.pop(NAME_KEY, None)
    return cast(dict[str, Any], spec)


def build_ranker(cfg: DictConfig, seed: int | None = None) -> Any:
    """A fresh ranker from ``cfg.model`` via its ``_target_`` (metadata keys removed);
    ``seed`` replaces the model's own seed when given (inner-CV repeats)."""
    return RankerPrototype.of(cfg).fresh(seed)


@dataclass(frozen=True)
class RankerPrototype:
    """A job's ranker, built once by Hydra's ``instantiate`` (so each option is parsed and
    checked once per job); every fit gets an unfitted copy, with its inner-CV repeat's seed.
    A ranker reads its seed when it fits, never when it is built, so a copy with another seed
    is the ranker that seed builds."""

    ranker: Any
    takes_seed: bool  # the model config has a ``seed``: repeats replace it

    @classmethod
    def of(cls, cfg: DictConfig) -> RankerPrototype:
        from hydra.utils import instantiate

        spec = model_spec(cfg)
        if "_target_" not in spec:
            raise UserError("model._target_ is missing; every model config names its ranker class")
        return cls(instantiate(spec, _convert_="all"), "seed" in spec)

    def fresh(self, seed: int | None = None) -> Any:
        """An unfitted copy of the ranker; ``seed`` (when given) replaces the model's own."""
        ranker = copy.deepcopy(self.ranker)
        if seed is not None and self.takes_seed:
            ranker.seed = int(seed)
        return ranker


def build_preprocessing(cfg: DictConfig) -> Any:
    """The :class:`~ltr_bench.data.transforms.Preprocessing` of ``eval.preprocessing`` (unfitted)."""
    from hydra.utils import instantiate

    return instantiate(cfg.eval.preprocessing, _convert_="all")


@dataclass
class Prepared:
    """A split preprocessed by :func:`prepare`, and the preprocessing fitted on its train part."""

    train: QuerySet
    vali: QuerySet | None
    test: QuerySet | None
    preprocessing: Any


def preprocess(
    cfg: DictConfig,
    train: QuerySet,
    vali: QuerySet | None,
    test: QuerySet | None,
    test_role: str = "test",
    binarize_train_at: int | None = None,
) -> Prepared:
    """Fit ``eval.preprocessing`` on ``train`` and apply it to every part (``test`` in role
    ``test_role``); training labels binarised at ``binarize_train_at`` when given."""
    pre = build_preprocessing(cfg)
    tr, va, te = pre.fit_apply(train, (vali, "vali"), (test, test_role))
    assert tr is not None
    if binarize_train_at is not None:
        tr = binarize_labels(tr, binarize_train_at)
    return Prepared(tr, va, te, pre)


def prepare(
    cfg: DictConfig,
    protocol: Protocol,
    threshold: int,
    train: QuerySet,
    vali: QuerySet | None,
    test: QuerySet | None,
    test_role: str = "test",
    dataset: Any = None,
) -> Prepared:
    """Fit preprocessing on ``train``; apply to every part (``test`` in role ``test_role``; a
    ``vali`` without queries counts as none); binary training labels when the protocol asks.

    The result is shared through :mod:`ltr_bench.data.transform_cache`: every trial, refit and
    worker that preprocesses the same split with the same options reads it back instead of
    refitting; from disk for a file-backed ``dataset`` (one with a parse cache,
    ``dataset.cache_dir``), else from this process's last entries (generated data)."""
    from ltr_bench.data.transform_cache import cached_preprocessing, remembered_preprocessing

    binarize_at = threshold if protocol.train_labels == "binary" else None
    vali_part = vali if vali is not None and vali.n_queries else None

    def compute() -> tuple[list[QuerySet | None], Any]:
        data = preprocess(cfg, train, vali_part, test, test_role, binarize_at)
        return [data.train, data.vali, data.test], data.preprocessing

    options = OmegaConf.to_container(cfg.eval.preprocessing, resolve=True)
    assert isinstance(options, dict)
    options.pop("threads", None)  # how fast, not what: the same numbers with any thread count
    key = {
        "preprocessing": options,
        "train_labels": protocol.train_labels,
        "threshold": threshold,
        "test_role": test_role,
    }
    parts = [("train", train), ("vali", vali), ("test", test)]
    if dataset is not None and hasattr(dataset, "cache_dir"):
        (tr, va, te), pre, _ = cached_preprocessing(key, parts, compute, dataset.cache_dir)
    else:
        (tr, va, te), pre, _ = remembered_preprocessing(key, parts, compute)
    assert tr is not None
    return Prepared(tr, va, te, pre)


@dataclass
class Fitted:
    """A ranker fitted by :func:`fit_and_score`, the preprocessed data and its test scores."""

    ranker: Any
    train: QuerySet  # preprocessed
    test: QuerySet  # preprocessed
    scores: np.ndarray  # [N] float64 scores of ``test``
    time_fit_s: float


def fit_and_score(
    cfg: DictConfig,
    train: QuerySet,
    test: QuerySet,
    vali: QuerySet | None = None,
    cache: dict[str, Any] | None = None,
) -> Fitted:
    """Preprocess (fitted on ``train``), build ``cfg``'s ranker, fit it, score ``test``: one
    fit -> score step for drivers outside the protocol loop (experiments).

    ``cache`` (a dict the caller keeps per data split) shares the preprocessed data between models
    with the same ``eval.preprocessing`` config.
    """
    key = OmegaConf.to_yaml(cfg.eval.preprocessing, resolve=True)
    data = None if cache is None else cache.get(key)
    if data is None:
        data = preprocess(cfg, train, vali, test)
        if cache is not None:
            cache[key] = data
    tr, va, te = data.train, data.vali, data.test
    assert te is not None
    ranker = build_ranker(cfg)
    t0 = time.perf_counter()
    ranker.fit(tr, va)
    fit_s = time.perf_counter() - t0
    return Fitted(ranker, tr, te, np.asarray(ranker.score(te), dtype=np.float64), fit_s)


def evaluate_split(cfg: DictConfig, scores: np.ndarray, data: QuerySet, where: str) -> Any:
    """``metrics.evaluate`` with the eval config's options; NaN scores are a failed fit."""
    from ltr_bench.metrics import evaluate

    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if scores.shape[0] != data.n_docs:
        raise RuntimeError(
            f"the ranker returned {scores.shape[0]} scores for {data.n_docs} documents"
        )
    if not np.all(np.isfinite(scores)):
        raise TrialFailed(
            f"the ranker produced non-finite scores on {where} (training diverged?); "
            "try a lower learning rate"
        )
    return evaluate(scores, data, **metric_options(cfg))
