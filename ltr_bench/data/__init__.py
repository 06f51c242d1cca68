"""Data layer: LETOR files, caching, synthetic data, splits by query, transforms, batching."""

from ltr_bench.data.queryset import QuerySet

__all__ = ["QuerySet"]
