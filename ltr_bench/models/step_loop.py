"""Who runs a neural fit's optimisation steps: Lightning, one step per Lightning batch, or the
module, an epoch's steps in one Lightning batch.

Lightning's per-step machinery (the batch hooks, the automatic-optimisation closure, the
strategy's and the precision plugin's wrappers around backward and the optimiser's step) costs
about a millisecond a step on a CPU: much of a fit whose steps are small, as on MQ2008
(``docs/results/step-loop.md``). When nothing in the trainer acts per step, :class:`~ltr_bench.models.ranking_module.RankingModule` runs
an epoch's steps itself: the operations Lightning's automatic optimisation runs, in its order
(forward, zero_grad, backward, the optimiser's step; the epoch's learning-rate step after the
last batch, before validation), so a fit ends with the same weights, bit for bit. Lightning still
runs the epochs, validation, early stopping, callbacks and loggers; its progress bar, which only
shows, then moves once an epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

# Hooks Lightning calls at every step: a callback or module overriding one needs Lightning's steps.
PER_STEP_CALLBACK_HOOKS = (
    "on_train_batch_start",
    "on_train_batch_end",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
)
# The module's own on_train_batch_start is called by run_epoch_steps, as Lightning calls it.
PER_STEP_MODULE_HOOKS = (
    *(hook for hook in PER_STEP_CALLBACK_HOOKS if hook != "on_train_batch_start"),
    "backward",
    "optimizer_step",
    "optimizer_zero_grad",
    "configure_gradient_clipping",
)


def lightning_steps_reason(trainer: Any, module: Any) -> str | None:
    """Why Lightning must run this fit's steps one by one (what acts per step), or None when the
    module may run an epoch's steps itself."""
    import lightning as L
    from lightning.pytorch.plugins.precision import Precision
    from lightning.pytorch.profilers import PassThroughProfiler
    from lightning.pytorch.strategies import SingleDeviceStrategy
    from lightning.pytorch.utilities.model_helpers import is_overridden

    checks = (
        (type(trainer.strategy) is not SingleDeviceStrategy, "a distributed strategy"),
        (type(trainer.precision_plugin) is not Precision, f"precision {trainer.precision}"),
        (bool(trainer.gradient_clip_val), "gradient clipping"),
        (trainer.accumulate_grad_batches != 1, "gradient accumulation"),
        (trainer.max_steps != -1, "max_steps"),
        (trainer.limit_train_batches != 1.0, "limit_train_batches"),
        (trainer.val_check_interval != 1.0, "val_check_interval"),
        (not isinstance(trainer.profiler, PassThroughProfiler), "a profiler"),
    )
    for failed, reason in checks:
        if failed:
            return reason
    for config in trainer.lr_scheduler_configs:
        if config.interval != "epoch" or config.frequency != 1 or config.reduce_on_plateau:
            return "a learning-rate scheduler that is not stepped every epoch"
    for callback in trainer.callbacks:
        if callback is trainer.progress_bar_callback:  # it only shows: its bar moves by epochs
            continue
        for hook in PER_STEP_CALLBACK_HOOKS:
            if is_overridden(hook, callback, L.Callback):
                return f"{type(callback).__name__}.{hook}"
    for hook in PER_STEP_MODULE_HOOKS:
        if is_overridden(hook, module, L.LightningModule):
            return f"{type(module).__name__}.{hook}"
    return None


class EpochAsOneBatch:
    """A training "dataloader" of one batch per epoch: the epoch's batches, for
    :func:`run_epoch_steps` (not a list: Lightning reads a list as several dataloaders)."""

    def __init__(self, batches: Iterable[Any]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[Iterable[Any]]:
        yield self.batches

    def __len__(self) -> int:
        return 1


def run_epoch_steps(module: Any, batches: Any) -> None:
    """One epoch's optimisation steps over ``batches``, as Lightning's automatic optimisation
    runs them (the module's ``on_train_batch_start`` first; -1 ends the epoch), then, after the
    epoch's last batch, the epoch's learning-rate step, as Lightning takes it. With
    ``model.compile=step`` each step is the module's captured step instead."""
    optimizer = module.optimizers().optimizer  # the torch optimiser inside Lightning's wrapper
    captured = module.train_step()
    for batch_idx, batch in enumerate(batches):
        if module.on_train_batch_start(batch, batch_idx) == -1:
            return  # Lightning ends the epoch without its learning-rate step
        if captured is not None:
            module.add_training_loss(captured(batch))
            continue
        loss = module.batch_loss(batch)
        module.add_training_loss(loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for config in module.trainer.lr_scheduler_configs:
        module.lr_scheduler_step(config.scheduler, None)
