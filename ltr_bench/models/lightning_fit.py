"""What :meth:`NeuralRanker.fit <ltr_bench.models.neural.NeuralRanker.fit>` puts around
Lightning's ``Trainer``: a callback that keeps the best epoch's weights, quiet start-up, and the
check of ``trainer.precision`` against the values Lightning takes."""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Iterator
from typing import Any

import lightning as L
from torch import Tensor, nn

from ltr_bench.errors import UserError
from ltr_bench.models.lightning_private import precisions


def check_precision(value: Any) -> None:
    """A :class:`UserError` naming the allowed values unless Lightning takes ``value`` (None:
    Lightning's default), before any data is read rather than inside ``fit``."""
    allowed = precisions()
    if value is not None and value not in allowed:
        names = ", ".join(dict.fromkeys(str(v) for v in allowed))
        raise UserError(f"trainer.precision={value} is not a precision; choose one of [{names}]")


class BestState(L.Callback):
    """Keeps the scorer's weights of the best validation epoch in memory; restores them at the end.

    An in-memory copy (a few MB at most) instead of a checkpoint file: nothing is written to disk.
    """

    def __init__(self, monitor: str, restore: bool = True) -> None:
        self.monitor, self.restore = monitor, restore
        self.best = -math.inf
        self.best_epoch: int | None = None
        self.state: dict[str, Tensor] | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None or not math.isfinite(float(value)) or float(value) <= self.best:
            return
        self.best, self.best_epoch = float(value), trainer.current_epoch
        self.state = {k: v.detach().clone() for k, v in _scorer(pl_module).state_dict().items()}

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.restore and self.state is not None:
            _scorer(pl_module).load_state_dict(self.state)


def _scorer(pl_module: L.LightningModule) -> nn.Module:
    """The network whose weights :class:`BestState` keeps (every RankingModule has a scorer)."""
    scorer = pl_module.scorer
    assert isinstance(scorer, nn.Module)
    return scorer


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Silence Lightning's start-up chatter and warnings that do not apply to index batches."""
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.level, logging.WARNING))
    with warnings.catch_warnings():
        for pattern in (
            ".*smaller than the logging interval.*",
            ".*does not have many workers.*",
            ".*TensorBoard.*",
            ".*LeafSpec.*",
        ):
            warnings.filterwarnings("ignore", message=pattern)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
