"""What the optional GBDT rankers (XGBoost, CatBoost) share: the lazy import of their library
behind the ``gbdt`` extra, label checks and the GPU-request test.

Their libraries are imported only when such a model is built, so a run of another model never
pays for (or needs) them, and a missing one is a one-sentence :class:`UserError` saying which
extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError

EXTRA = "gbdt"  # the pyproject.toml extra that installs xgboost-cpu and catboost
GPU_REQUESTS = ("gpu", "cuda")  # trainer.accelerator values that ask for an NVIDIA GPU
MAX_GRADE = 30  # 2^l - 1 gains (the papers' NDCG) stay exact in float32 up to here


def require(package: str, model: str) -> ModuleType:
    """``import package``, or a :class:`UserError` naming the extra that installs it."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise UserError(
            f"model={model} needs the {package} package, which is not installed; "
            f"install the extra with pip install 'ltr_bench[{EXTRA}]' (make setup does)"
        ) from None


def asks_for_gpu(device: str) -> bool:
    """Whether a ``trainer.accelerator`` value (passed through the model config) names a GPU."""
    return str(device).lower() in GPU_REQUESTS


def check_labels(data: QuerySet, split: str, model: str) -> None:
    """Non-negative integer grades up to :data:`MAX_GRADE` (the 2^l - 1 gain of NDCG)."""
    if data.n_docs == 0:
        return
    lo, hi = int(data.labels.min()), int(data.labels.max())
    if lo < 0:
        raise UserError(f"{split} labels must be >= 0 for model={model}, found {lo}")
    if hi > MAX_GRADE:
        raise UserError(
            f"{split} labels go up to {hi}; model={model}'s 2^l - 1 gain supports <= {MAX_GRADE}"
        )
