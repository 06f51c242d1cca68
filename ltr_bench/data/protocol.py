"""The dataset protocol: what protocols, the runner and experiment sources need of a dataset.

A dataset is built from ``conf/dataset/*.yaml`` by ``hydra.utils.instantiate`` and is anything
with these members (structural typing, no base class to inherit): :class:`~ltr_bench.data.datasets.
LetorFolds` (a LETOR folder) and :class:`~ltr_bench.data.datasets.SyntheticDataset` (the papers'
generator) implement it; a new source of data implements it too and gets every protocol for free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ltr_bench.data.datasets import FoldData
    from ltr_bench.data.queryset import QuerySet

__all__ = ["Dataset"]


@runtime_checkable
class Dataset(Protocol):
    """A source of train/vali/test splits by query.

    Attributes:
        name: the dataset's name in logs and run names.
        relevance_threshold: labels ``>=`` this are relevant (binary metrics, label binarisation).
        n_folds: how many folds ``load_fold`` serves (positions ``0 .. n_folds - 1``).

    A LETOR folder also has ``fold_numbers`` (the 1-based file fold of each position), which
    protocols use to name folds when present.
    """

    name: str
    relevance_threshold: int

    @property
    def n_folds(self) -> int: ...

    def load_fold(self, i: int) -> FoldData:
        """The ``i``-th fold (0-based position): its train, vali and test QuerySets."""
        ...

    def load_all(self) -> QuerySet:
        """Every query once (for hold-out splits of the whole dataset)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Parameters and provenance, logged with every run."""
        ...
