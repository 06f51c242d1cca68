"""Rankers. Each has ``fit(train, vali)`` and ``score(data)``; see :mod:`ltr_bench.models.base`."""

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
