"""ltr_bench.models.lightning_fit: what the neural rankers' fit puts around Lightning's Trainer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from ltr_bench.models.lightning_fit import BestState


def _trainer(epoch: int, value: float | None, sanity: bool = False) -> Any:
    metrics = {} if value is None else {"vali": torch.tensor(value)}
    return SimpleNamespace(sanity_checking=sanity, callback_metrics=metrics, current_epoch=epoch)


def test_best_state_keeps_the_best_epochs_weights_and_restores_them() -> None:
    module: Any = SimpleNamespace(scorer=nn.Linear(2, 1))
    best = BestState("vali")
    weights = []
    for epoch, value in enumerate([0.5, 0.75, float("nan"), 0.625]):
        with torch.no_grad():
            module.scorer.weight.fill_(float(epoch))
        weights.append(module.scorer.weight.clone())
        best.on_validation_end(_trainer(epoch, value), module)
    best.on_validation_end(_trainer(9, 0.99, sanity=True), module)  # a sanity check does not count
    assert (best.best, best.best_epoch) == (0.75, 1)
    best.on_fit_end(_trainer(3, None), module)
    assert torch.equal(module.scorer.weight, weights[1])


def test_best_state_without_restore_leaves_the_last_weights() -> None:
    module: Any = SimpleNamespace(scorer=nn.Linear(2, 1))
    best = BestState("vali", restore=False)
    best.on_validation_end(_trainer(0, 0.9), module)
    with torch.no_grad():
        module.scorer.weight.fill_(3.0)
    best.on_fit_end(_trainer(1, None), module)
    assert best.best_epoch == 0 and bool((module.scorer.weight == 3.0).all())
