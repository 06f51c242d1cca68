"""Dataset objects built from ``conf/dataset/*.yaml`` (``hydra.utils.instantiate``).

All share one interface: ``n_folds``, ``load_fold(i) -> FoldData(train, vali, test)`` for
``i in range(n_folds)``, ``load_all() -> QuerySet`` (every query once, for hold-out splits),
``relevance_threshold`` and ``describe() -> dict`` for tracking.

Fold numbering: ``dataset.fold`` in configs speaks the **1-based** numbers of the files
(``fold: 3`` is ``Fold3/``); in code ``load_fold(i)`` takes a **0-based position** in the
selected folds and ``fold_numbers[i]`` is its file number. With ``fold: null`` all five folds are
selected, so ``load_fold(0)`` is Fold1.

Data root: ``dataset.root`` (configs: ``${oc.env:LTR_DATA,null}``); when null, the repository's
sibling ``<repo>/../shared/data/letor`` in a source checkout (``<repo>`` holds the ``ltr_bench``
package and pyproject.toml); an installed wheel has no default: set ``LTR_DATA``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.data.letor import check_same_n_features, load_letor
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.synthetic import make_synthetic_splits
from ltr_bench.errors import UserError
from ltr_bench.seeding import derive_seed

DATA_ENV = "LTR_DATA"
SPLIT_FILES = ("train", "vali", "test")
N_LETOR_FOLDS = 5


def default_data_root() -> Path | None:
    """``<repo>/../shared/data/letor`` in a source checkout (the repo = the folder holding the
    package and pyproject.toml); None for an installed wheel, which has no such sibling."""
    repo = Path(__file__).resolve().parents[2]
    if not (repo / "pyproject.toml").is_file():
        return None
    return repo.parent / "shared" / "data" / "letor"


def resolve_data_root(root: str | os.PathLike | None = None) -> Path:
    """``root``, else ``$LTR_DATA``, else :func:`default_data_root` (a one-sentence
    :class:`UserError` when there is none)."""
    if root is None or str(root).strip() in ("", "None", "null"):
        root = os.environ.get(DATA_ENV) or default_data_root()
    if root is None:
        raise UserError(
            f"no data root is set; set the environment variable {DATA_ENV} (or dataset.root=...) "
            "to the folder holding the dataset folders (e.g. MQ2008/), or give dataset.path"
        )
    return Path(root).expanduser()


@dataclass(frozen=True)
class FoldData:
    """One train/vali/test split, split by query."""

    train: QuerySet
    vali: QuerySet
    test: QuerySet
    name: str = ""

    def describe(self) -> dict[str, Any]:
        """Sizes and provenance (file hash or generator) of the three parts."""
        out: dict[str, Any] = {"name": self.name}
        for split in SPLIT_FILES:
            qs: QuerySet = getattr(self, split)
            out[split] = {
                "n_queries": qs.n_queries,
                "n_docs": qs.n_docs,
                "fingerprint": qs.fingerprint(),
                **{k: qs.source[k] for k in ("path", "sha256") if k in qs.source},
            }
        return out


class LetorFolds:
    """A folder in the LETOR layout ``Fold{k}/{train,vali,test}.txt`` (k = 1..5).

    Args:
        root: data root holding ``folder`` (null: ``$LTR_DATA`` or the repo's sibling data).
        folder: sub-folder name, e.g. ``MQ2008``, ``MSLR-WEB10K``.
        path: the dataset folder itself (overrides root/folder; ``dataset=letor``).
        n_features: feature count (46 for MQ2007/8, 136 for MSLR); null infers it.
        relevance_threshold: labels ``>=`` this are relevant (MQ: 1, MSLR: 2).
        fold: 1-based fold number(s) to run; null = all five.
        cache_dir: parse cache root (null: ``$LTR_CACHE`` or ``~/.cache/ltr_bench``).
        with_docids: keep the ``#docid`` comments.
        name: dataset name for logs.
    """

    def __init__(
        self,
        root: str | os.PathLike | None = None,
        folder: str | None = None,
        path: str | os.PathLike | None = None,
        n_features: int | None = None,
        relevance_threshold: int = 1,
        fold: int | Iterable[int] | None = None,
        cache_dir: str | os.PathLike | None = None,
        with_docids: bool = False,
        name: str = "letor",
    ) -> None:
        self.name = str(name)
        self.n_features = _int_or_none(n_features, "dataset.n_features", minimum=1)
        self.relevance_threshold = _int(relevance_threshold, "dataset.relevance_threshold")
        self.cache_dir = cache_dir
        self.with_docids = _bool(with_docids, "dataset.with_docids")
        self.fold_numbers = _fold_numbers(fold)
        if path is not None and str(path).strip():
            self.path = Path(str(path)).expanduser()
            key = "dataset.path"
        elif folder is None:
            raise UserError(
                "dataset.path is not set: give the folder holding Fold1..Fold5, "
                "e.g. dataset.path=/data/MQ2007"
            )
        else:
            self.path = resolve_data_root(root) / str(folder)
            key = "dataset.root"
        if self.path.exists() and not self.path.is_dir():
            raise UserError(
                f"dataset folder {self.path} is a file, not a folder; set {key} to the folder "
                "holding Fold1..Fold5"
            )
        if not self.path.is_dir():
            raise UserError(
                f"dataset folder {self.path} does not exist; set {key} (or the environment "
                f"variable {DATA_ENV} for the data root) to where the data lives"
            )
        expected = [p for k in self.fold_numbers for p in self._files(k).values()]
        dirs = [str(p) for p in expected if p.is_dir()]
        if dirs:
            raise UserError(
                f"dataset file {dirs[0]} is a directory, not a file; the LETOR layout is "
                "Fold1..Fold5/{train,vali,test}.txt"
            )
        missing = [str(p) for p in expected if not p.is_file()]
        if missing:
            raise UserError(
                f"dataset file {missing[0]} does not exist"
                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                + f"; set {key} (or {DATA_ENV}) to a folder with Fold1..Fold5/"
                "{train,vali,test}.txt, or dataset.fold to the folds present"
            )

    @property
    def n_folds(self) -> int:
        return len(self.fold_numbers)

    def _files(self, number: int) -> dict[str, Path]:
        return {s: self.path / f"Fold{number}" / f"{s}.txt" for s in SPLIT_FILES}

    def _load(self, p: Path) -> QuerySet:
        return load_letor(p, self.n_features, self.with_docids, self.cache_dir)

    def load_fold(self, i: int) -> FoldData:
        """The ``i``-th selected fold (0-based position; file number ``fold_numbers[i]``)."""
        if not 0 <= int(i) < self.n_folds:
            raise IndexError(f"fold position {i} out of range(0, {self.n_folds})")
        number = self.fold_numbers[int(i)]
        parts = {s: self._load(p) for s, p in self._files(number).items()}
        check_same_n_features(parts["train"], parts["vali"], parts["test"])
        _check_labels_vary(parts["train"])
        return FoldData(**parts, name=f"{self.name}/Fold{number}")

    def load_all(self) -> QuerySet:
        """Every query once: the five ``test.txt`` files (LETOR folds rotate their test part)."""
        parts = [
            self._load(self.path / f"Fold{k}" / "test.txt") for k in range(1, N_LETOR_FOLDS + 1)
        ]
        check_same_n_features(*parts)
        out = QuerySet.concat(parts)
        if len(np.unique(out.query_ids)) != out.n_queries:
            raise UserError(
                f"the test.txt files under {self.path} share query ids, so they are not the "
                "five parts of one dataset"
            )
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "letor_folds",
            "path": str(self.path),
            "folds": list(self.fold_numbers),
            "n_features": self.n_features,
            "relevance_threshold": self.relevance_threshold,
        }


class SyntheticDataset:
    """The papers' synthetic data (Sect. 4.5) behind the dataset interface.

    Fold ``i`` is an independent repetition of the experiment (step (4) of Sect. 4.5): class
    parameters from ``(seed, i)`` and train/vali/test sampled independently from them.

    Args:
        n_train, n_vali, n_test: documents per split.
        n_features, n_classes, sigma, docs_per_query, class_probs: see ``make_synthetic``.
        relevance_threshold: labels ``>=`` this are relevant (must be in 1..n_classes-1).
        n_folds: number of repetitions.
        seed: data seed (separate from the run's model seed, so models see the same data).
    """

    def __init__(
        self,
        n_train: int = 2000,
        n_vali: int = 500,
        n_test: int = 1000,
        n_features: int = 70,
        n_classes: int = 5,
        sigma: float = 0.0,
        docs_per_query: int | None = 100,
        class_probs: Iterable[float] | None = None,
        relevance_threshold: int = 2,
        n_folds: int = 1,
        seed: int = 0,
        name: str = "synthetic",
    ) -> None:
        self.name = str(name)
        self.n_train = _int(n_train, "dataset.n_train", minimum=1)
        self.n_vali = _int(n_vali, "dataset.n_vali", minimum=1)
        self.n_test = _int(n_test, "dataset.n_test", minimum=1)
        self.n_features = _int(n_features, "dataset.n_features", minimum=1)
        self.n_classes = _int(n_classes, "dataset.n_classes", minimum=2)
        self.sigma = _float(sigma, "dataset.sigma")
        self.docs_per_query = _int_or_none(docs_per_query, "dataset.docs_per_query", minimum=1)
        if class_probs is None:
            self.class_probs = None
        elif isinstance(class_probs, (str, bytes)) or not isinstance(class_probs, Iterable):
            raise UserError(
                f"dataset.class_probs must be null or a list of numbers, got {class_probs!r}"
            )
        else:
            self.class_probs = [_float(p, "dataset.class_probs") for p in class_probs]
        self.relevance_threshold = _int(relevance_threshold, "dataset.relevance_threshold")
        if not 1 <= self.relevance_threshold <= self.n_classes - 1:
            raise UserError(
                f"dataset.relevance_threshold must be between 1 and n_classes - 1 = "
                f"{self.n_classes - 1}, got {relevance_threshold}"
            )
        self._n_folds = _int(n_folds, "dataset.n_folds", minimum=1)
        self.seed = _int(seed, "dataset.seed")

    @property
    def n_folds(self) -> int:
        return self._n_folds

    def load_fold(self, i: int) -> FoldData:
        if not 0 <= int(i) < self.n_folds:
            raise IndexError(f"fold position {i} out of range(0, {self.n_folds})")
        train, vali, test = make_synthetic_splits(
            self.n_train,
            self.n_test,
            self.n_vali,
            n_features=self.n_features,
            n_classes=self.n_classes,
            sigma=self.sigma,
            docs_per_query=self.docs_per_query,
            class_probs=self.class_probs,
            seed=_fold_seed(self.seed, int(i)),
        )
        assert vali is not None
        return FoldData(train, vali, test, name=f"{self.name}/{i}")

    def load_all(self) -> QuerySet:
        """Train, vali and test of fold 0 together (disjoint query ids)."""
        f = self.load_fold(0)
        return QuerySet.concat([f.train, f.vali, f.test])

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "synthetic",
            "n_train": self.n_train,
            "n_vali": self.n_vali,
            "n_test": self.n_test,
            "n_features": self.n_features,
            "n_classes": self.n_classes,
            "sigma": self.sigma,
            "docs_per_query": self.docs_per_query,
            "class_probs": self.class_probs,
            "relevance_threshold": self.relevance_threshold,
            "n_folds": self.n_folds,
            "seed": self.seed,
        }


def _check_labels_vary(qs: QuerySet) -> None:
    """A training file whose labels are all equal (e.g. all 0) is an error naming the file."""
    labels = np.asarray(qs.labels)
    if len(labels) and np.all(labels == labels[0]):
        raise UserError(
            f"{qs.source.get('path', 'the training data')}: every label is {int(labels[0])}, so "
            "a ranker has nothing to learn from; check the file (the label is the first field "
            "of each line)"
        )


def _int(value: Any, key: str, minimum: int | None = None) -> int:
    """``value`` as an int, else a UserError naming the config ``key`` (no bools, no 1.5)."""
    number: int | None = None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        number = int(value)
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None:
        raise UserError(f"{key} must be an integer, got {value!r}; e.g. {key}=10")
    if minimum is not None and number < minimum:
        raise UserError(f"{key} must be >= {minimum}, got {value!r}")
    return number


def _int_or_none(value: Any, key: str, minimum: int | None = None) -> int | None:
    """Like :func:`_int`, with null (None) passed through."""
    return None if value is None else _int(value, key, minimum)


def _float(value: Any, key: str) -> float:
    """``value`` as a finite float, else a UserError naming the config ``key``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not np.isfinite(number):
        raise UserError(f"{key} must be a number, got {value!r}")
    return number


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise UserError(f"{key} must be true or false, got {value!r}")


def _fold_seed(seed: int, i: int) -> int:
    return seed if i == 0 else derive_seed(seed, i)


def _fold_numbers(fold: int | Iterable[int] | None) -> tuple[int, ...]:
    if fold is None:
        return tuple(range(1, N_LETOR_FOLDS + 1))
    items = [fold] if isinstance(fold, (int, str, np.integer)) else list(fold)
    try:
        numbers = tuple(int(k) for k in items)
    except (TypeError, ValueError):
        numbers = ()
    if not numbers or any(not 1 <= k <= N_LETOR_FOLDS for k in numbers):
        raise UserError(
            f"dataset.fold must be null (all folds) or fold numbers 1..{N_LETOR_FOLDS} "
            f"(like the Fold1..Fold5 folders), got {fold!r}"
        )
    return numbers
