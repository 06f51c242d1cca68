"""Feature and label transforms, fitted on the training split only and applied to vali/test.

- :class:`QuantileNormal` (:mod:`.quantile`) - the papers' "features following a normal
  distribution with standard deviation 1/3": scikit-learn's
  ``QuantileTransformer(output_distribution="normal")`` times ``scale``, re-implemented in NumPy
  with the same numbers, vectorised over columns (``benchmarks/bench_letor.py`` times both).
- :class:`PerQueryNormalize`, :class:`StandardScale`, :class:`Identity` (:mod:`.features`).
- label/query operations (:mod:`.labels`): :func:`binarize_labels`,
  :func:`drop_queries_without_relevant`, :func:`min_docs_per_query`.
- :class:`Preprocessing` (:mod:`.preprocessing`) composes them from explicit config options
  (``conf/eval/*.yaml``).
"""

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
    relevant_query_mask,
)
from ltr_bench.data.transforms.preprocessing import FEATURE_TRANSFORMS, SPLITS, Preprocessing
from ltr_bench.data.transforms.quantile import (
    QuantileNormal,
    _ColumnMap,
    knot_order_stats,
    knots_from_order_stats,
)

__all__ = [
    "FEATURE_TRANSFORMS",
    "SPLITS",
    "FeatureTransform",
    "Identity",
    "PerQueryNormalize",
    "Preprocessing",
    "QuantileNormal",
    "StandardScale",
    "_ColumnMap",
    "binarize_labels",
    "drop_queries_without_relevant",
    "knot_order_stats",
    "knots_from_order_stats",
    "min_docs_per_query",
    "relevant_query_mask",
]

# The public path of these names stays ltr_bench.data.transforms: the transform cache records
# the preprocessing's class by it (meta.json), so entries written before the split stay valid.
for _obj in (
    Identity,
    PerQueryNormalize,
    Preprocessing,
    QuantileNormal,
    StandardScale,
    _ColumnMap,
    binarize_labels,
    drop_queries_without_relevant,
    knot_order_stats,
    knots_from_order_stats,
    min_docs_per_query,
    relevant_query_mask,
):
    _obj.__module__ = __name__
del _obj
