"""Rankers. Each has ``fit(train, vali)`` and ``score(data)``; see :mod:`ltr_bench.models.base`."""

from ltr_bench.models.base import Ranker

__all__ = ["Ranker"]
