"""Mixed precision is a trainer option: training steps run in half precision, validation does not.

``trainer.precision=16-mixed`` needs a GPU; ``bf16-mixed`` runs the same Lightning code path on
a CPU, so it stands in for it here.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ltr_bench.models import DirectRanker
from tests.models.neural_toy import TINY, ndcg10, toy_splits


def _fit(precision: str) -> tuple[DirectRanker, dict[str, set[torch.dtype]]]:
    """Fit on the toy data; record the scorer's output dtypes in training and in validation."""
    seen: dict[str, set[torch.dtype]] = {"train": set(), "vali": set()}

    class Recording(DirectRanker):
        def build_module(self, scorer: Any, train: Any, vali: Any) -> Any:
            module = super().build_module(scorer, train, vali)

            def hook(mod: Any, args: Any, out: torch.Tensor) -> None:
                trainer = module._trainer
                if trainer is not None and (
                    trainer.training or trainer.validating or trainer.sanity_checking
                ):
                    seen["train" if trainer.training else "vali"].add(out.dtype)

            scorer.register_forward_hook(hook)
            return module

    train, vali, _ = toy_splits()
    ranker = Recording(**TINY, trainer={"precision": precision}, enable_progress_bar=False, seed=0)
    return ranker.fit(train, vali), seen


def test_bf16_mixed_trains_in_bf16_validates_in_float32_and_ranks_like_full_precision() -> None:
    torch.set_num_threads(1)
    mixed, seen = _fit("bf16-mixed")
    assert seen == {"train": {torch.bfloat16}, "vali": {torch.float32}}
    full, seen_full = _fit("32-true")
    assert seen_full == {"train": {torch.float32}, "vali": {torch.float32}}
    _, _, test = toy_splits()
    scores = mixed.score(test)
    assert scores.dtype == "float64" and bool((scores == scores).all())
    assert ndcg10(scores, test) == pytest.approx(ndcg10(full.score(test), test), abs=0.03)
