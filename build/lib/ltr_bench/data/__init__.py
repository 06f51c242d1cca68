"""Data layer: LETOR files, caching, synthetic data, splits by query, transforms, batching."""

from ltr_bench.data.datasets import FoldData, LetorFolds, SyntheticDataset
from ltr_bench.data.letor import check_same_n_features, load_letor, parse_letor
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.splits import apply_split, holdout_splits, kfold_by_query
from ltr_bench.data.synthetic import SyntheticSpec, make_synthetic, make_synthetic_splits
from ltr_bench.data.transforms import (
    PerQueryNormalize,
    Preprocessing,
    QuantileNormal,
    StandardScale,
    binarize_labels,
    drop_queries_without_relevant,
    min_docs_per_query,
)

__all__ = [
    "QuerySet",
    "load_letor",
    "parse_letor",
    "check_same_n_features",
    "make_synthetic",
    "make_synthetic_splits",
    "SyntheticSpec",
    "kfold_by_query",
    "holdout_splits",
    "apply_split",
    "QuantileNormal",
    "PerQueryNormalize",
    "StandardScale",
    "Preprocessing",
    "binarize_labels",
    "drop_queries_without_relevant",
    "min_docs_per_query",
    "FoldData",
    "LetorFolds",
    "SyntheticDataset",
]
