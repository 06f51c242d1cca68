"""ltr_bench.models.step_loop: a neural fit runs an epoch's steps in the module unless something
in the trainer acts per step, and ends with the same weights, bit for bit, as Lightning's loop."""

from __future__ import annotations

from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from ltr_bench.models import (
    DASALC,
    AttentionRanker,
    DirectRanker,
    LambdaRank,
    ListNet,
    ranking_module,
)
from ltr_bench.models.step_loop import lightning_steps_reason
from tests.models.neural_toy import TINY, toy_splits

# A decaying learning rate, weight decay, validation with early stopping, and random draws in the
# forward pass (dropout, DASALC's input noise) and state kept by it (DASALC's batch norm): every
# part of a step and of an epoch's edges that could tell the two loops apart.
COMMON = dict(
    epochs=5,
    lr_decay_to=0.01,
    early_stopping_patience=2,
    optimizer={"name": "adam", "lr": 0.01, "weight_decay": 1e-4},
    seed=3,
)
MLP = dict(hidden_sizes=[16, 8], dropout=0.2)
CASES = {
    "DirectRanker": (DirectRanker, {**MLP, "batch_size": 64}),
    # |delta NDCG| weights refreshed by the module's on_train_batch_start every 3 steps
    "DirectRanker-ndcg-swap": (
        DirectRanker,
        {**MLP, "batch_size": 64, "pair_weighting": "ndcg_swap", "rank_refresh_steps": 3},
    ),
    "ListNet": (ListNet, {**MLP, "batch_size": 8}),
    "LambdaRank": (LambdaRank, {**MLP, "batch_size": 8}),
    "AttentionRanker": (
        AttentionRanker,
        dict(hidden_sizes=[16], n_blocks=1, n_heads=2, dim_feedforward=32, batch_size=8),
    ),
    "DASALC": (
        DASALC,
        dict(
            hidden_sizes=[16, 16],
            activation="relu",
            dropout=0.1,
            input_noise_std=0.2,
            attention_width=8,
            n_attention_layers=1,
            n_heads=2,
            n_ensemble=2,
            batch_size=8,
        ),
    ),
}
TIMES = ("time_train_s", "time_epoch_s")


def _fit(cls: type, options: dict[str, Any], reason: str | None, monkeypatch: Any) -> Any:
    """A fit with the module's own loop (``reason`` None) or Lightning's (forced by ``reason``)."""
    if reason is not None:
        monkeypatch.setattr(ranking_module, "lightning_steps_reason", lambda *_: reason)
    train, vali, _ = toy_splits()
    ranker = cls(**COMMON, **options, enable_progress_bar=False).fit(train, vali)
    monkeypatch.undo()
    return ranker


@pytest.mark.parametrize("case", list(CASES))
def test_the_modules_loop_trains_the_same_bits_as_lightnings(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls, options = CASES[case]
    own = _fit(cls, options, None, monkeypatch)
    lightning = _fit(cls, options, "forced", monkeypatch)
    assert own.module_.automatic_optimization is False  # the module ran the steps
    assert lightning.module_.automatic_optimization is True
    strip = [{k: v for k, v in h.items() if k not in TIMES} for h in own.history]
    assert strip == [{k: v for k, v in h.items() if k not in TIMES} for h in lightning.history]
    assert len(own.history) >= 3 and own.best_epoch_ == lightning.best_epoch_
    assert len({h["lr"] for h in own.history}) > 1  # the rate decayed, epoch by epoch
    a, b = own.module_.scorer.state_dict(), lightning.module_.scorer.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    _, _, test = toy_splits()
    assert np.array_equal(own.score(test), lightning.score(test))


class _EveryStep(L.Callback):
    def on_train_batch_end(self, *args: Any) -> None:
        """A callback that acts per step."""


class _EveryBackward(L.LightningModule):
    def on_after_backward(self) -> None:
        """A module that acts per step."""


def _reason(module: L.LightningModule | None = None, **trainer: Any) -> str | None:
    kwargs: dict[str, Any] = dict(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
    )
    kwargs.update(trainer)
    return lightning_steps_reason(L.Trainer(**kwargs), module or L.LightningModule())


@pytest.mark.parametrize(
    ("trainer", "reason"),
    [
        ({}, None),
        ({"enable_progress_bar": True}, None),
        ({"gradient_clip_val": 0.5}, "gradient clipping"),
        ({"accumulate_grad_batches": 2}, "gradient accumulation"),
        ({"max_steps": 10}, "max_steps"),
        ({"limit_train_batches": 0.5}, "limit_train_batches"),
        ({"val_check_interval": 0.5}, "val_check_interval"),
        ({"precision": "bf16-mixed"}, "precision bf16-mixed"),
        ({"profiler": "simple"}, "a profiler"),
        ({"callbacks": [_EveryStep()]}, "_EveryStep.on_train_batch_end"),
        ({"max_time": "00:01:00:00"}, "Timer.on_train_batch_end"),
    ],
)
def test_what_acts_per_step_keeps_lightnings_loop(
    trainer: dict[str, Any], reason: str | None
) -> None:
    assert _reason(**trainer) == reason


def test_a_module_hook_that_acts_per_step_keeps_lightnings_loop() -> None:
    assert _reason(_EveryBackward()) == "_EveryBackward.on_after_backward"


def test_gradient_clipping_trains_through_lightnings_loop() -> None:
    train, vali, _ = toy_splits()
    options = dict(TINY, epochs=2, early_stopping_patience=None, seed=0)
    ranker = DirectRanker(**options, trainer={"gradient_clip_val": 1e-3}).fit(train, vali)
    assert ranker.module_.automatic_optimization is True and len(ranker.history) == 2


def test_a_progress_bar_moves_by_epochs_with_the_modules_loop(
    capfd: pytest.CaptureFixture[str],
) -> None:
    train, vali, _ = toy_splits()
    options = dict(TINY, epochs=3, early_stopping_patience=None, seed=0)
    ranker = DirectRanker(**options, enable_progress_bar=True).fit(train, vali)
    assert ranker.module_.automatic_optimization is False
    out, err = capfd.readouterr()
    bar = out + err
    assert "Epoch 2" in bar and "1/1" in bar  # the last epoch, its one (Lightning) batch done
