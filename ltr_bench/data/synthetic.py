"""Synthetic ranking data of the DirectRanker papers, Sect. 4.5.

Each relevance class ``c`` has, per feature ``f``, a Gaussian with a mean drawn from U(0, 100)
and a standard deviation drawn from U(50, 100) (a :class:`SyntheticSpec`). A document draws its
true class (uniform, or ``class_probs``), then its features from that class's Gaussians. Label
noise: the observed label is ``round(c + N(0, sigma))`` clipped to ``[0, n_classes - 1]``
("a Gaussian for each label ... rounding to the next integer"); features always come from the
true class. Documents are grouped into queries of ``docs_per_query`` consecutive documents (the
last query may be shorter), or one query holding everything (``None``, the papers' setting).

Train and test sets "generated independently, but with the same parameters" share a spec and
use different sample seeds: :func:`make_synthetic_splits`. The noise draw is made even for
``sigma = 0``, so changing only ``sigma`` keeps the same documents and true classes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError

_SPEC_STREAM = 0x5EC
_SAMPLE_STREAM = 0x5A3


@dataclass(frozen=True, eq=False)
class SyntheticSpec:
    """Class-conditional Gaussian parameters: ``means`` and ``stds`` of shape ``[C, F]``."""

    means: np.ndarray
    stds: np.ndarray

    def __post_init__(self) -> None:
        if self.means.ndim != 2 or self.means.shape != self.stds.shape:
            raise UserError(
                f"means {self.means.shape} and stds {self.stds.shape} must both be [C, F]"
            )
        if np.any(self.stds < 0):
            raise UserError("synthetic class standard deviations must be >= 0")

    @classmethod
    def draw(
        cls,
        n_features: int = 70,
        n_classes: int = 5,
        seed: int = 0,
        mean_range: tuple[float, float] = (0.0, 100.0),
        std_range: tuple[float, float] = (50.0, 100.0),
    ) -> SyntheticSpec:
        """Random class parameters (Sect. 4.5 (ii)), determined by ``seed``."""
        if int(n_classes) < 2 or int(n_features) < 1:
            raise UserError(
                f"synthetic data needs n_classes >= 2 and n_features >= 1, "
                f"got {n_classes} and {n_features}"
            )
        rng = np.random.default_rng([int(seed), _SPEC_STREAM])
        shape = (int(n_classes), int(n_features))
        return cls(rng.uniform(*mean_range, size=shape), rng.uniform(*std_range, size=shape))

    @property
    def n_classes(self) -> int:
        return int(self.means.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.means.shape[1])

    def digest(self) -> str:
        h = hashlib.sha256(np.ascontiguousarray(self.means, dtype=np.float64).tobytes())
        h.update(np.ascontiguousarray(self.stds, dtype=np.float64).tobytes())
        return h.hexdigest()[:16]

    def sample(
        self,
        n_docs: int,
        sigma: float = 0.0,
        docs_per_query: int | None = None,
        class_probs: Sequence[float] | None = None,
        seed: int | Sequence[int] = 0,
        qid_start: int = 0,
    ) -> QuerySet:
        """``n_docs`` documents drawn from this spec (see the module docstring)."""
        n = int(n_docs)
        if n < 1:
            raise UserError(f"synthetic n_docs must be >= 1, got {n_docs}")
        if float(sigma) < 0:
            raise UserError(f"synthetic label noise sigma must be >= 0, got {sigma}")
        c_, f_ = self.means.shape
        probs = _class_probs(class_probs, c_)
        seq = [int(s) for s in np.atleast_1d(seed)]
        rng = np.random.default_rng([*seq, _SAMPLE_STREAM])
        true = rng.choice(c_, size=n, p=probs)
        noise = rng.standard_normal(n)
        z = rng.standard_normal((n, f_), dtype=np.float32)
        features = z * self.stds[true].astype(np.float32) + self.means[true].astype(np.float32)
        labels = np.clip(np.rint(true + float(sigma) * noise), 0, c_ - 1).astype(np.int32)
        dpq = n if docs_per_query is None else int(docs_per_query)
        if dpq < 1:
            raise UserError(f"docs_per_query must be >= 1 or null, got {docs_per_query}")
        qid = (np.arange(n, dtype=np.int64) // dpq) + int(qid_start)
        offsets = np.append(np.arange(0, n, dpq, dtype=np.int64), n)
        source = {
            "generator": "ltr_bench.data.synthetic",
            "spec": self.digest(),
            "n_classes": c_,
            "n_features": f_,
            "n_docs": n,
            "sigma": float(sigma),
            "docs_per_query": docs_per_query,
            "class_probs": None if class_probs is None else probs.tolist(),
            "sample_seed": seq,
        }
        return QuerySet(features, labels, qid, offsets, None, source)


def make_synthetic(
    n_docs: int,
    n_features: int = 70,
    n_classes: int = 5,
    sigma: float = 0.0,
    docs_per_query: int | None = None,
    class_probs: Sequence[float] | None = None,
    seed: int = 0,
    means: np.ndarray | None = None,
    stds: np.ndarray | None = None,
    sample_seed: int | None = None,
) -> QuerySet:
    """One synthetic set (the papers' Sect. 4.5).

    Class parameters come from ``seed`` (or are given as ``means``/``stds``, ``[C, F]``);
    documents are sampled with ``sample_seed`` (default: ``seed``). Two calls with the same
    ``seed`` and different ``sample_seed`` give independent sets with the same parameters.
    """
    if (means is None) != (stds is None):
        raise UserError("give both means and stds for synthetic data, or neither")
    if means is not None:
        spec = SyntheticSpec(np.asarray(means, dtype=np.float64), np.asarray(stds, np.float64))
    else:
        spec = SyntheticSpec.draw(n_features, n_classes, seed)
    qs = spec.sample(
        n_docs,
        sigma=sigma,
        docs_per_query=docs_per_query,
        class_probs=class_probs,
        seed=seed if sample_seed is None else sample_seed,
    )
    return _with_source(qs, seed=int(seed))


def make_synthetic_splits(
    n_train: int,
    n_test: int,
    n_vali: int = 0,
    n_features: int = 70,
    n_classes: int = 5,
    sigma: float = 0.0,
    docs_per_query: int | None = None,
    class_probs: Sequence[float] | None = None,
    seed: int = 0,
) -> tuple[QuerySet, QuerySet | None, QuerySet]:
    """(train, vali or None, test) drawn independently from one spec (Sect. 4.5 (i)).

    Query ids are disjoint across the three sets (vali's follow train's, test's follow vali's).
    """
    spec = SyntheticSpec.draw(n_features, n_classes, seed)
    common: dict[str, Any] = dict(
        sigma=sigma, docs_per_query=docs_per_query, class_probs=class_probs
    )
    train = spec.sample(n_train, seed=[seed, 1], qid_start=0, **common)
    next_q = int(train.qid[-1]) + 1
    vali = None
    if int(n_vali) > 0:
        vali = spec.sample(n_vali, seed=[seed, 2], qid_start=next_q, **common)
        next_q = int(vali.qid[-1]) + 1
    test = spec.sample(n_test, seed=[seed, 3], qid_start=next_q, **common)
    tag = {"seed": int(seed)}
    return (
        _with_source(train, split="train", **tag),
        None if vali is None else _with_source(vali, split="vali", **tag),
        _with_source(test, split="test", **tag),
    )


def _with_source(qs: QuerySet, **extra: Any) -> QuerySet:
    from dataclasses import replace

    return replace(qs, source={**qs.source, **extra})


def _class_probs(class_probs: Sequence[float] | None, n_classes: int) -> np.ndarray:
    if class_probs is None:
        return np.full(n_classes, 1.0 / n_classes)
    p = np.asarray(list(class_probs), dtype=np.float64)
    if p.shape != (n_classes,) or np.any(p < 0) or p.sum() <= 0:
        raise UserError(
            f"class_probs must be {n_classes} non-negative numbers (one per class), got "
            f"{list(class_probs)}"
        )
    return p / p.sum()
