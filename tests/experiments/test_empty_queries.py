"""benchmarks/table1_empty_queries.py: Table 1's means with test queries without a relevant
document counted as 0 (the authors' scripts), checked on a hand-worked example."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.data.letor_files import random_letor

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "table1_empty_queries", REPO / "benchmarks" / "table1_empty_queries.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(
    data: Path, tmp_path: Path, protocol: dict, fold: int | None, kept: int, ndcg: float, ap: float
) -> dict:
    dataset = {
        "_target_": "ltr_bench.data.datasets.LetorFolds",
        "name": "toy",
        "root": None,
        "folder": None,
        "path": str(data),
        "n_features": 5,
        "relevance_threshold": 1,
        "fold": fold,
        "cache_dir": str(tmp_path / "cache"),
        "with_docids": False,
    }
    return {
        "config": {"dataset": dataset, "protocol": protocol},
        "folds": [{"n_test_queries": kept, "metrics": {"test": {"ndcg@10": ndcg, "map": ap}}}],
    }


def test_means_over_all_test_queries_count_the_dropped_ones_as_zero(tmp_path: Path) -> None:
    data = tmp_path / "toy"
    for k in range(1, 6):  # 6 queries per file: 30 queries in the five test.txt files
        for i, split in enumerate(("train", "vali", "test")):
            random_letor(
                data / f"Fold{k}" / f"{split}.txt",
                n_queries=6,
                seed=10 * k + i,
                qid_start=100 * k + 10 * i,
            )
    script = _script()
    folds = {"_target_": "ltr_bench.protocols.LetorFolds"}
    # Fold2's test.txt has 6 queries; 4 were scored (NDCG 0.9, AP 0.6): over all 6, 0.6 and 0.4
    ours, zero, kept, total = script.rescaled(
        _result(data, tmp_path, folds, 2, 4, 0.9, 0.6), ["ndcg@10", "map"]
    )
    assert (kept, total) == (4, 6) and ours == {"ndcg@10": 0.9, "map": 0.6}
    assert zero == pytest.approx({"ndcg@10": 0.6, "map": 0.4})
    # a hold-out split of the 30 queries trains on round(0.8 * 30) = 24 and tests on 6; 3 scored
    holdout = {"_target_": "ltr_bench.protocols.HoldOut", "train_fraction": 0.8}
    _, zero, kept, total = script.rescaled(
        _result(data, tmp_path, holdout, None, 3, 0.5, 0.3), ["ndcg@10", "map"]
    )
    assert (kept, total) == (3, 6) and zero == pytest.approx({"ndcg@10": 0.25, "map": 0.15})
    assert script._mean_se([0.706, 0.728]) == "0.717(11)"  # the papers' notation
