"""The LightningModule side of the neural rankers: training batches drawn on the device,
validation on padded query batches, the optimiser and its staircase learning-rate schedule.

A fold's tensors (features, labels, pair tables, query offsets) go to the module's device once per
fit, when the fit starts; batches are index tensors drawn and padded there (no DataLoader, no
worker processes, no host-to-device copy per step), and the step loop never waits for the device:
the training loss is summed on the device and read once per epoch.

Under DDP each rank draws its own share of every step's batch (seeded with its rank;
``batch_size`` counts a step over all ranks, so a config trains the same on any number of
devices) and evaluates the whole validation set in full precision, so every rank sees the same,
complete validation metric (Lightning does not shard iterables that are not DataLoaders).
"""

from __future__ import annotations

import math
import time
from abc import abstractmethod
from collections.abc import Iterable
from functools import partial
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import Tensor

from ltr_bench.data.batching import QueryBatches
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.metrics import metric_padded, parse_metric
from ltr_bench.models.device import apply_memory_share
from ltr_bench.models.networks import Scorer, build_optimizer, parse_optimizer
from ltr_bench.models.step_loop import (
    EpochAsOneBatch,
    lightning_steps_reason,
    run_epoch_steps,
)
from ltr_bench.models.train_step import TrainStep, step_options, tensor_lr


def staircase_factor(epoch: int, max_epochs: int, decay_to: float | None, every: int = 1) -> float:
    """Learning-rate multiplier in (0-based) ``epoch``: geometric stairs from 1 to ``decay_to``.

    Table 4 of the journal: "learning rate stepwise decay 1 to 0.001 / 0.0001". The rate is
    constant for ``every`` epochs, then drops by a constant factor, reaching ``decay_to`` times the
    start rate on the last stair of the run. ``decay_to=None`` keeps the rate constant.
    """
    if decay_to is None:
        return 1.0
    n_stairs = (int(max_epochs) - 1) // int(every)
    if n_stairs <= 0:
        return 1.0
    return float(decay_to) ** (min(int(epoch) // int(every), n_stairs) / n_stairs)


# ====================================================================== Lightning module
class RankingModule(L.LightningModule):
    """A scorer ``g`` trained by Lightning; subclasses define the batches and the batch loss.

    Args:
        scorer: the network ``g(x)``.
        train: training queries; their features are kept as one tensor on the module's device.
        vali: validation queries (or None: no validation, no early stopping).
        optimizer: optimiser name or config node (``lr``, ``weight_decay``, ...); weight decay
            (L2 regularisation) applies to weight matrices, not to biases.
        lr_decay_to, lr_decay_every, max_epochs: the staircase schedule, see
            :func:`staircase_factor`.
        vali_metric: metric name for validation (default ``ndcg@10``).
        seed: base seed of the batch generators.
        compile_step: run each step as the captured :class:`~ltr_bench.models.train_step.TrainStep`
            (``model.compile=step``) with inductor options ``compile_options`` (per device type).
    """

    def __init__(
        self,
        scorer: Scorer,
        train: QuerySet,
        vali: QuerySet | None,
        *,
        optimizer: Any,
        lr_decay_to: float | None,
        lr_decay_every: int,
        max_epochs: int,
        vali_metric: str = "ndcg@10",
        vali_batch_cells: int = 1 << 20,
        seed: int = 0,
        compile_step: bool = False,
        compile_options: Any = None,
    ) -> None:
        super().__init__()
        self.scorer = scorer
        self.train_set, self.vali_set = train, vali
        self.optimizer_spec = optimizer
        self.lr_decay_to, self.lr_decay_every = lr_decay_to, int(lr_decay_every)
        self.max_epochs, self.seed = int(max_epochs), int(seed)
        self.vali_metric = parse_metric(vali_metric).name
        # One name per value, the same in ``history`` and in what Lightning's logger receives
        # (the runner's tracker maps these names to its own keys).
        self.vali_key = f"vali_{self.vali_metric}"
        self.vali_batch_cells = int(vali_batch_cells)
        self.history: list[dict[str, float]] = []
        self._tensors: dict[str, Tensor] = {}
        self._loss_sum: Tensor | None = None
        self._n_steps = 0
        self._epoch_lr = math.nan
        self._epoch_start = time.perf_counter()
        self._train_seconds = math.nan
        self._vali_values: list[tuple[Tensor, Tensor, Tensor]] = []  # (scores, labels, mask)
        self._vali_batches: QueryBatches | None = None
        self._last_vali = math.nan
        self._epoch_steps = False  # True: one Lightning batch is an epoch's steps (step_loop)
        self.compile_step, self.compile_options = bool(compile_step), compile_options
        self._train_step: TrainStep | None = None

    # ------------------------------------------------------------------ data on the device
    def data(self, name: str) -> Tensor:
        """``train_x``, ``train_y``, ``vali_x``, ``vali_y`` as tensors on the module's device."""
        t = self._tensors.get(name)
        if t is None or t.device != self.device:
            split, what = name.split("_")
            qs = self.train_set if split == "train" else self.vali_set
            assert qs is not None
            array = qs.features if what == "x" else qs.labels.astype(np.int64)
            t = torch.as_tensor(
                np.array(array), device=self.device
            )  # a copy: data may be read-only
            self._tensors[name] = t
        return t

    def on_fit_start(self) -> None:
        """The fold's features and labels go to the device once, before the first step; the
        module runs an epoch's steps itself unless something in the trainer acts per step."""
        for name in ("train_x", "train_y", "vali_x", "vali_y"):
            if name.startswith("train") or self.vali_set is not None:
                self.data(name)
        apply_memory_share(self.device)
        reason = lightning_steps_reason(self.trainer, self)
        self._epoch_steps = reason is None
        self.automatic_optimization = not self._epoch_steps
        if self.compile_step:
            if reason is not None:
                raise UserError(
                    f"model.compile=step runs each training step whole, which {reason} in the "
                    "trainer's settings prevents; remove it or set model.compile=false"
                )
            torch.compiler.reset()  # a fresh cache per fit: the recompile limit is per process
            self._train_step = None

    def release_fit_tensors(self) -> None:
        """Free what the fit kept on the device (data, validation batches, pair tables)."""
        self._tensors.clear()
        self._vali_batches = None
        sampler = getattr(self, "sampler", None)
        if sampler is not None and hasattr(sampler, "to"):
            sampler.to("cpu")

    def _rank_world(self) -> tuple[int, int]:
        trainer = self._trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    # ------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def train_batches(self, rank: int, world_size: int) -> Iterable[Any]:
        """One epoch of training batches for this rank (an iterable with ``len``)."""

    @abstractmethod
    def batch_loss(self, batch: Any) -> Tensor:
        """The scalar training loss of one batch."""

    def step_batches(self, rank: int, world_size: int) -> Iterable[Any]:
        """One epoch of the captured step's inputs (:meth:`step_loss` takes each): batches of
        fixed shapes, or the random numbers they are drawn from. Default: the training batches."""
        return self.train_batches(rank, world_size)

    def step_loss(self, inputs: Any) -> Tensor:
        """The loss of one captured step from its inputs, traced as one graph with the forward
        pass. Default: :meth:`batch_loss`."""
        return self.batch_loss(inputs)

    def train_step(self) -> TrainStep | None:
        """The captured step of this fit (built at its first call), or None without
        ``model.compile=step``."""
        if not self.compile_step:
            return None
        if self._train_step is None:
            optimizer = self.optimizers().optimizer  # type: ignore[union-attr]
            options = step_options(self.compile_options, self.device.type)
            self._train_step = TrainStep(self.step_loss, optimizer, options)
        return self._train_step

    # ------------------------------------------------------------------ training
    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        return batch  # batches are drawn on the module's device already

    def train_dataloader(self) -> Iterable[Any]:
        make = self.step_batches if self.compile_step else self.train_batches
        batches = make(*self._rank_world())
        return EpochAsOneBatch(batches) if self._epoch_steps else batches

    def on_train_epoch_start(self) -> None:
        self._loss_sum = torch.zeros((), device=self.device)
        self._n_steps = 0
        # The rate of this epoch (Lightning steps epoch schedulers before on_train_epoch_end).
        self._epoch_lr = float(self.optimizers().param_groups[0]["lr"])  # type: ignore[union-attr]
        self._epoch_start = time.perf_counter()
        self._train_seconds = math.nan

    def training_step(self, batch: Any, batch_idx: int) -> Tensor | None:
        if self._epoch_steps:  # the batch is the epoch's batches
            run_epoch_steps(self, batch)
            return None
        loss = self.batch_loss(batch)
        self.add_training_loss(loss)
        return loss

    def add_training_loss(self, loss: Tensor) -> None:
        """Count a step's loss into the epoch's mean (summed on the device, read once an epoch)."""
        self._loss_sum = loss.detach() + (self._loss_sum if self._loss_sum is not None else 0.0)
        self._n_steps += 1

    def _wait_for_device(self) -> None:
        """Let a GPU finish the epoch's queued work before the clock is read (once per epoch),
        so epoch times are the device's, not the time it took to queue the steps."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def on_train_epoch_end(self) -> None:
        mean = (self._loss_sum / max(self._n_steps, 1)) if self._loss_sum is not None else None
        self._wait_for_device()
        seconds = time.perf_counter() - self._epoch_start
        if math.isnan(self._train_seconds):
            self._train_seconds = seconds
        record: dict[str, float] = {
            "epoch": float(self.current_epoch),
            "time_train_s": self._train_seconds,  # the epoch's optimisation steps
            "time_epoch_s": seconds,  # plus validation
        }
        if mean is not None:
            self.log("train_loss", mean, on_epoch=True, sync_dist=True, batch_size=1)
            record["train_loss"] = float(mean)
        self.log("lr", self._epoch_lr, on_epoch=True, sync_dist=True, batch_size=1)
        record["lr"] = self._epoch_lr
        if self.vali_set is not None:
            record[f"vali_{self.vali_metric}"] = self._last_vali
        self.history.append(record)

    # ------------------------------------------------------------------ validation
    def val_dataloader(self) -> Iterable[Any]:
        """The validation queries in padded batches, made on the device once per fit."""
        if self.vali_set is None:
            return []
        if self._vali_batches is None or self._vali_batches.device != self.device:
            self._vali_batches = QueryBatches(
                self.vali_set,
                batch_queries=1 << 30,
                max_cells=self.vali_batch_cells,
                shuffle=False,
                device=self.device,
            )
        return self._vali_batches

    def on_validation_epoch_start(self) -> None:
        self._vali_values = []
        if math.isnan(self._train_seconds):  # validation ends the epoch's training part
            self._wait_for_device()
            self._train_seconds = time.perf_counter() - self._epoch_start

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x = self.data("vali_x")[batch.rows]
        # Full precision under mixed-precision training: half-precision scores tie often, and
        # early stopping should see the metric that score() will later produce.
        with torch.autocast(self.device.type, enabled=False):
            scores = self.scorer(x.reshape(-1, x.shape[-1])).reshape(batch.rows.shape)
        labels = self.data("vali_y")[batch.rows]
        self._vali_values.append((scores.detach(), labels, batch.mask))

    def on_validation_epoch_end(self) -> None:
        if not self._vali_values:
            return
        # the metric is NumPy's: the epoch's batches go to the host here, not at every batch
        values = np.concatenate([metric_padded(self.vali_metric, *b) for b in self._vali_values])
        self._vali_values = []
        kept = values[~np.isnan(values)]
        mean = float(kept.mean()) if kept.size else math.nan
        self._last_vali = mean
        # Every rank evaluated the whole validation set, so the sync averages equal values.
        self.log(self.vali_key, mean, on_epoch=True, sync_dist=True, batch_size=1)

    # ------------------------------------------------------------------ optimisation
    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]
        weights = [p for p in params if p.ndim > 1]
        others = [p for p in params if p.ndim <= 1]
        groups: list[dict[str, Any]] = [{"params": weights}]
        if others:
            groups.append({"params": others, "weight_decay": 0.0})
        spec = self.optimizer_spec
        if self.compile_step:
            spec = tensor_lr(parse_optimizer(spec), self.device)
        opt = build_optimizer(spec, groups)
        factor = partial(
            staircase_factor,
            max_epochs=self.max_epochs,
            decay_to=self.lr_decay_to,
            every=self.lr_decay_every,
        )
        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

    @torch.no_grad()
    def score_features(self, x: Tensor, batch_size: int = 1 << 16) -> Tensor:
        """``g`` of many documents in eval mode (dropout off), batched; returns ``[N]``."""
        was_training = self.scorer.training
        self.scorer.eval()
        try:
            out = [self.scorer(chunk) for chunk in x.split(batch_size)]
        finally:
            self.scorer.train(was_training)
        return torch.cat(out) if out else x.new_zeros(0)
