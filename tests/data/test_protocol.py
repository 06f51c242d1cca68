"""Both dataset sources implement the typed dataset protocol that protocols and the runner use."""

from __future__ import annotations

from pathlib import Path

from ltr_bench.data.datasets import LetorFolds, SyntheticDataset
from ltr_bench.data.protocol import Dataset
from ltr_bench.protocols import LetorFolds as AllFolds
from ltr_bench.protocols import SingleSplit

from .letor_files import random_letor


def letor_folder(root: Path) -> Path:
    for k in range(1, 6):
        for i, split in enumerate(("train", "vali", "test")):
            random_letor(
                root / f"Fold{k}" / f"{split}.txt", seed=10 * k + i, qid_start=100 * k + 10 * i
            )
    return root


def test_letor_folds_and_synthetic_data_are_datasets(tmp_path: Path) -> None:
    sources: list[Dataset] = [
        LetorFolds(path=letor_folder(tmp_path), fold=[2, 4], name="tiny"),
        SyntheticDataset(
            n_train=40, n_vali=20, n_test=20, n_features=4, docs_per_query=10, n_folds=2
        ),
    ]
    for ds in sources:
        assert isinstance(ds, Dataset)
        assert ds.n_folds == 2 and ds.describe()["name"] == ds.name
        fold = ds.load_fold(1)
        assert fold.train.n_queries and fold.test.n_queries
        assert ds.load_all().n_docs >= fold.test.n_docs
        # what the protocols do with a dataset works through the protocol alone
        assert AllFolds().positions(ds) == [0, 1]
        assert SingleSplit().load(ds, 0).train.fingerprint() == ds.load_fold(0).train.fingerprint()


def test_an_object_without_load_fold_is_no_dataset() -> None:
    class NotData:
        name, relevance_threshold, n_folds = "x", 1, 1

        def describe(self) -> dict:
            return {}

    assert not isinstance(NotData(), Dataset)
