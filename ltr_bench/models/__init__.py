"""Rankers. Each has ``fit(train, vali)`` and ``score(data)``; see :mod:`ltr_bench.models.base`.

A ranker's module is imported when its class is first asked for (``ltr_bench.models.LambdaMART``,
as a config's ``_target_`` names it), so a run pays only for its own ranker's libraries: a
LambdaMART run never imports Lightning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltr_bench.lazy_exports import lazy_dir, lazy_getattr

if TYPE_CHECKING:
    from ltr_bench.models.adarank import AdaRank
    from ltr_bench.models.attention_ranker import AttentionRanker
    from ltr_bench.models.base import Ranker
    from ltr_bench.models.catboost_ranker import CatBoostRanker
    from ltr_bench.models.dasalc import DASALC
    from ltr_bench.models.direct_ranker import DirectRanker
    from ltr_bench.models.lambdamart import LambdaMART
    from ltr_bench.models.lambdarank import LambdaRank
    from ltr_bench.models.listnet import ListNet
    from ltr_bench.models.sortnet import SortNet
    from ltr_bench.models.xgboost_ranker import XGBoostRanker

#: Public class name -> the module that defines it.
_MODULES = {
    "Ranker": "base",
    "AdaRank": "adarank",
    "AttentionRanker": "attention_ranker",
    "CatBoostRanker": "catboost_ranker",
    "DASALC": "dasalc",
    "DirectRanker": "direct_ranker",
    "LambdaMART": "lambdamart",
    "LambdaRank": "lambdarank",
    "ListNet": "listnet",
    "SortNet": "sortnet",
    "XGBoostRanker": "xgboost_ranker",
}

__all__ = [
    "Ranker",
    "AdaRank",
    "AttentionRanker",
    "CatBoostRanker",
    "DASALC",
    "DirectRanker",
    "LambdaMART",
    "LambdaRank",
    "ListNet",
    "SortNet",
    "XGBoostRanker",
]


__getattr__ = lazy_getattr(__name__, globals(), _MODULES)
__dir__ = lazy_dir(globals(), _MODULES)
