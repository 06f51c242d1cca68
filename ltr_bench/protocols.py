"""Evaluation protocols: how a dataset is split into outer folds, and how a config is scored.

Three protocols (``conf/protocol/*.yaml``), each built with ``hydra.utils.instantiate``:

- :class:`SingleSplit` — the dataset's own train/vali/test (the first selected fold);
- :class:`LetorFolds` — every selected predefined LETOR fold (the papers' first experiment);
- :class:`HoldOut` — ``n_splits`` random hold-out splits by query of all queries (the papers'
  second and third experiments, binary or graded training labels).

Two ways to score a config (``protocol.objective``):

- ``final``: fit on each outer split's training part (its vali, if any, for early stopping) and
  evaluate once on vali and test — what tables report;
- ``inner_cv``: the sweep objective. Inner k-fold cross-validation **by query** on the training
  part of the outer split(s) (5 folds for LETOR folds, 3 for hold-out, as in the papers' Sect.
  4.4); the mean inner-validation metric is returned. Test data is never loaded or scored.
  ``auto`` (the default) means ``inner_cv`` for sweep trials (``sweep.trial_number`` set) and
  ``final`` otherwise.

After a sweep, the best config is refit with ``ltr-bench refit_best=<sweep dir>``
(:func:`ltr_bench.refit_plan.plan_refits`): each study's best parameters become overrides of an ordinary ``final``
run on the whole training part, evaluated once on test.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ltr_bench.data.protocol import Dataset
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.splits import apply_split, holdout_splits, kfold_by_query
from ltr_bench.errors import UserError
from ltr_bench.seeding import derive_seed

OBJECTIVES = ("auto", "final", "inner_cv")
TRAIN_LABELS = ("graded", "binary")


@dataclass(frozen=True)
class OuterSplit:
    """One outer fold / hold-out split, raw (before preprocessing).

    ``fold`` is the 0-based id logged as ``ltr.fold`` (for LETOR data the file fold number - 1,
    so ``dataset.fold=3`` is fold 2 in every run and the report can pair runs by it).
    """

    fold: int
    name: str
    train: QuerySet
    vali: QuerySet | None
    test: QuerySet | None


class Protocol:
    """Base class: outer splits of a dataset plus the inner CV used by sweeps.

    Args:
        name: the protocol's name (logged as ``ltr.protocol``).
        objective: ``auto`` | ``final`` | ``inner_cv`` (see the module docstring).
        inner_cv: number of inner folds by query for ``inner_cv``.
        inner_repeats: repetitions of the inner k-fold CV, each with its own fold assignment (and
            model seed, see :func:`ltr_bench.runner.seed_for_repeat`); 1 = the papers' plain
            k-fold. More repeats lower the noise of the sweep objective, at proportional cost.
        reevaluation_repeats: inner-CV repeats a sweep's *re-evaluation* of a top trial runs
            (``sweep.reevaluation=true``): the repeats after the search's own ones, i.e. fold
            assignments and model seeds that played no part in making the trial look best.
        split_seed: seeds inner folds (and hold-out splits); fixed across models and trials.
        train_labels: ``graded`` or ``binary`` (training labels >= the relevance threshold -> 1).
    """

    def __init__(
        self,
        name: str,
        objective: str = "auto",
        inner_cv: int = 5,
        inner_repeats: int = 1,
        reevaluation_repeats: int = 2,
        split_seed: int = 0,
        train_labels: str = "graded",
    ) -> None:
        self.name = str(name)
        if objective not in OBJECTIVES:
            raise UserError(
                f"protocol.objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}"
            )
        self.objective = objective
        if not _is_int(inner_cv) or int(inner_cv) < 2:
            raise UserError(f"protocol.inner_cv must be an integer >= 2, got {inner_cv!r}")
        self.inner_cv = int(inner_cv)
        if not _is_int(inner_repeats) or int(inner_repeats) < 1:
            raise UserError(
                f"protocol.inner_repeats must be an integer >= 1, got {inner_repeats!r}"
            )
        self.inner_repeats = int(inner_repeats)
        if not _is_int(reevaluation_repeats) or int(reevaluation_repeats) < 1:
            raise UserError(
                f"protocol.reevaluation_repeats must be an integer >= 1, got {reevaluation_repeats!r}"
            )
        self.reevaluation_repeats = int(reevaluation_repeats)
        if not _is_int(split_seed):
            raise UserError(f"protocol.split_seed must be an integer, got {split_seed!r}")
        self.split_seed = int(split_seed)
        if train_labels not in TRAIN_LABELS:
            raise UserError(
                f"protocol.train_labels must be one of {', '.join(TRAIN_LABELS)}, "
                f"got {train_labels!r}"
            )
        self.train_labels = train_labels

    # ------------------------------------------------------------------ what to run
    def mode(self, is_trial: bool) -> str:
        """``final`` or ``inner_cv`` for this job."""
        if self.objective == "auto":
            return "inner_cv" if is_trial else "final"
        return self.objective

    def positions(self, dataset: Dataset) -> list[int]:
        """The outer splits this run covers (positions passed to :meth:`load`)."""
        raise NotImplementedError

    def load(self, dataset: Dataset, position: int, *, with_test: bool = True) -> OuterSplit:
        """Read outer split ``position``; ``with_test=False`` (inner CV) leaves test unread
        where the protocol can (predefined folds) and always returns ``test=None``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ inner CV
    def repeats(self, reevaluation: bool = False) -> range:
        """The inner-CV repeats a job runs: ``0 .. inner_repeats-1`` for a search trial; for a
        re-evaluation the next ``reevaluation_repeats`` ones, fresh for the trial being confirmed."""
        if reevaluation:
            return range(self.inner_repeats, self.inner_repeats + self.reevaluation_repeats)
        return range(self.inner_repeats)

    def inner_folds(
        self, train: QuerySet, reevaluation: bool = False
    ) -> Iterator[tuple[int, int, QuerySet, QuerySet]]:
        """``(repeat, k, inner_train, inner_vali)`` for the ``inner_cv`` folds by query of
        ``train``, once per repeat of :meth:`repeats`; repeat 0 is the papers' split
        (``split_seed``), later repeats re-assign the queries with a seed derived from
        ``(split_seed, repeat)``."""
        if train.n_queries < self.inner_cv:
            raise UserError(
                f"protocol.inner_cv={self.inner_cv} needs at least that many training queries, "
                f"got {train.n_queries}; lower protocol.inner_cv"
            )
        for repeat in self.repeats(reevaluation):
            seed = self.split_seed if repeat == 0 else derive_seed(self.split_seed, repeat)
            for k, split in enumerate(kfold_by_query(train, self.inner_cv, seed=seed)):
                inner_train, inner_vali = apply_split(train, split)
                yield repeat, k, inner_train, inner_vali

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class SingleSplit(Protocol):
    """The dataset's own train/vali/test: its first selected fold."""

    def __init__(self, name: str = "single", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def positions(self, dataset: Dataset) -> list[int]:
        return [0]

    def load(self, dataset: Dataset, position: int, *, with_test: bool = True) -> OuterSplit:
        fold = dataset.load_fold(position)
        return OuterSplit(
            _fold_id(dataset, position),
            fold.name,
            fold.train,
            fold.vali,
            fold.test if with_test else None,
        )


class LetorFolds(SingleSplit):
    """Every fold the dataset selects (``dataset.fold``; all five by default) as an outer loop."""

    def __init__(self, name: str = "letor_folds", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def positions(self, dataset: Dataset) -> list[int]:
        return list(range(int(dataset.n_folds)))


class HoldOut(Protocol):
    """``n_splits`` random (train, test) splits by query of every query of the dataset.

    Args:
        n_splits: number of hold-out splits (15 in the papers).
        train_fraction: share of queries in each training part.
        vali_fraction: share of each training part held back as vali (0 = no vali).
        split: run only this split (0-based), or None for all.
    """

    def __init__(
        self,
        name: str = "holdout",
        n_splits: int = 15,
        train_fraction: float = 0.8,
        vali_fraction: float = 0.0,
        split: int | None = None,
        inner_cv: int = 3,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, inner_cv=inner_cv, **kwargs)
        if not _is_int(n_splits) or int(n_splits) < 1:
            raise UserError(f"protocol.n_splits must be an integer >= 1, got {n_splits!r}")
        self.n_splits = int(n_splits)
        if not _is_number(train_fraction) or not 0.0 < float(train_fraction) < 1.0:
            raise UserError(
                f"protocol.train_fraction must be strictly between 0 and 1, got {train_fraction!r}"
            )
        self.train_fraction = float(train_fraction)
        if not _is_number(vali_fraction) or not 0.0 <= float(vali_fraction) < 1.0:
            raise UserError(f"protocol.vali_fraction must be in [0, 1), got {vali_fraction!r}")
        self.vali_fraction = float(vali_fraction)
        if split is not None and (not _is_int(split) or not 0 <= int(split) < self.n_splits):
            raise UserError(
                f"protocol.split must be null or an index 0..{self.n_splits - 1}, got {split!r}"
            )
        self.split = None if split is None else int(split)
        self._pool: QuerySet | None = None

    def positions(self, dataset: Dataset) -> list[int]:
        return list(range(self.n_splits)) if self.split is None else [self.split]

    def load(self, dataset: Dataset, position: int, *, with_test: bool = True) -> OuterSplit:
        if self._pool is None:
            self._pool = dataset.load_all()
        pool = self._pool
        split = holdout_splits(pool, self.n_splits, self.train_fraction, self.split_seed)[position]
        train, test = apply_split(pool, split)
        vali = None
        if self.vali_fraction > 0:
            seed = derive_seed(self.split_seed, position, 1)
            inner = holdout_splits(train, 1, 1.0 - self.vali_fraction, seed)[0]
            train, vali = apply_split(train, inner)
        name = f"{getattr(dataset, 'name', 'data')}/holdout{position}"
        return OuterSplit(position, name, train, vali, test if with_test else None)


def _fold_id(dataset: Dataset, position: int) -> int:
    """0-based id of a dataset fold: the file fold number - 1 for LETOR folders."""
    numbers = getattr(dataset, "fold_numbers", None)
    return int(numbers[position]) - 1 if numbers is not None else int(position)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool) and math.isfinite(x)
