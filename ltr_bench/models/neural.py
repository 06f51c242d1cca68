"""Shared Lightning plumbing of the neural rankers.

:class:`NeuralRanker` is the :class:`~ltr_bench.models.base.Ranker` side (config handling, the
Lightning ``Trainer``, early stopping with the best weights restored, scoring); :class:`RankingModule`
is the ``LightningModule`` side (optimiser with L2 weight decay and a staircase learning-rate decay,
validation NDCG@10 on padded query batches, per-epoch history). Subclasses add how a training batch
is drawn and what its loss is (pairs for DirectRanker, whole queries for ListNet/LambdaRank).

Training data live on the module's device as one tensor; batches are index tensors drawn there (no
DataLoader, no worker processes, no host round trip per step). Under DDP each rank draws its own
share of every step's batch (seeded with its rank; ``batch_size`` counts a step over all ranks, so
a config trains the same on any number of devices) and evaluates the whole validation set in full
precision, so every rank sees the same, complete validation metric (Lightning does not shard
iterables that are not DataLoaders).
"""

from __future__ import annotations

import contextlib
import logging
import math
import tempfile
import time
import warnings
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import Tensor

from ltr_bench.confutil import plain
from ltr_bench.data.batching import QueryBatches
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.losses import LossInfo, LossKind, resolve_loss
from ltr_bench.metrics import metric_padded, parse_metric
from ltr_bench.models.base import Ranker
from ltr_bench.models.networks import (
    DEFAULT_OPTIMIZER,
    FeatureMLP,
    Scorer,
    build_optimizer,
    make_activation,
)

# Keys of a group option that describe it rather than parametrise the callable.
_META_KEYS = ("name", "_target_", "_partial_", "_recursive_", "_convert_")


# ====================================================================== config helpers
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
        self._vali_values: list[Tensor] = []
        self._last_vali = math.nan

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

    # ------------------------------------------------------------------ training
    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        return batch  # batches are drawn on the module's device already

    def train_dataloader(self) -> Iterable[Any]:
        return self.train_batches(*self._rank_world())

    def on_train_epoch_start(self) -> None:
        self._loss_sum = torch.zeros((), device=self.device)
        self._n_steps = 0
        # The rate of this epoch (Lightning steps epoch schedulers before on_train_epoch_end).
        self._epoch_lr = float(self.optimizers().param_groups[0]["lr"])  # type: ignore[union-attr]
        self._epoch_start = time.perf_counter()
        self._train_seconds = math.nan

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = self.batch_loss(batch)
        self._loss_sum = loss.detach() + (self._loss_sum if self._loss_sum is not None else 0.0)
        self._n_steps += 1
        return loss

    def on_train_epoch_end(self) -> None:
        mean = (self._loss_sum / max(self._n_steps, 1)) if self._loss_sum is not None else None
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
        if self.vali_set is None:
            return []
        return QueryBatches(
            self.vali_set,
            batch_queries=1 << 30,
            max_cells=self.vali_batch_cells,
            shuffle=False,
            device=self.device,
        )

    def on_validation_epoch_start(self) -> None:
        self._vali_values = []
        if math.isnan(self._train_seconds):  # validation ends the epoch's training part
            self._train_seconds = time.perf_counter() - self._epoch_start

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x = self.data("vali_x")[batch.rows]
        # Full precision under mixed-precision training: half-precision scores tie often, and
        # early stopping should see the metric that score() will later produce.
        with torch.autocast(self.device.type, enabled=False):
            scores = self.scorer(x.reshape(-1, x.shape[-1])).reshape(batch.rows.shape)
        labels = self.data("vali_y")[batch.rows]
        self._vali_values.append(metric_padded(self.vali_metric, scores, labels, batch.mask))

    def on_validation_epoch_end(self) -> None:
        if not self._vali_values:
            return
        values = torch.cat(self._vali_values)
        kept = values[~torch.isnan(values)]
        mean = float(kept.mean()) if kept.numel() else math.nan
        self._last_vali = mean
        # Every rank evaluated the whole validation set, so the sync averages equal values.
        self.log(self.vali_key, mean, on_epoch=True, sync_dist=True, batch_size=1)

    # ------------------------------------------------------------------ optimisation
    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]
        weights = [p for p in params if p.ndim > 1]
        others = [p for p in params if p.ndim <= 1]
        groups = [{"params": weights}]
        if others:
            groups.append({"params": others, "weight_decay": 0.0})
        opt = build_optimizer(self.optimizer_spec, groups)
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


# ====================================================================== callbacks
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
        scorer = pl_module.scorer  # type: ignore[attr-defined]
        self.state = {k: v.detach().clone() for k, v in scorer.state_dict().items()}

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.restore and self.state is not None:
            pl_module.scorer.load_state_dict(self.state)  # type: ignore[attr-defined]


@contextlib.contextmanager
def _quiet_lightning() -> Iterator[None]:
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


# ====================================================================== the ranker side
class NeuralRanker(Ranker):
    """Base of the neural rankers: builds the scorer, trains it with Lightning, scores documents.

    Args (the keys of ``conf/model/*.yaml``):
        hidden_sizes: widths of the feature MLP's hidden layers (``[]``: a linear scorer).
        activation: feature activation (registry name such as ``tanh``, or a config node).
        dropout: dropout after every hidden layer.
        bias: biases in the feature MLP.
        output_activation: activation of the output neuron (``tau``).
        output_bias: bias of the output neuron.
        loss: the loss (name or config node, see :mod:`ltr_bench.losses`).
        optimizer: name or node ``{name, lr, weight_decay, ...}`` (weight decay = L2 penalty).
        lr_decay_to, lr_decay_every: staircase learning-rate decay (see :func:`staircase_factor`).
        epochs: maximum number of epochs.
        batch_size: training batch size (pairs or queries, see the subclass).
        early_stopping_patience: stop after this many epochs without a better validation metric
            (None: never stop early). Needs ``vali`` in :meth:`fit`.
        restore_best: with ``vali``, end with the weights of the best validation epoch.
        vali_metric: the validation metric for early stopping (default ``ndcg@10``).
        trainer: Lightning ``Trainer`` keyword arguments (accelerator, devices, strategy,
            precision, ...), e.g. ``conf/trainer/cpu.yaml``.
        enable_progress_bar: overrides the trainer's setting; default off unless the trainer
            config turns it on.
        score_batch_size: documents per forward pass in :meth:`score`.
        seed: seeds weights, dropout and batch sampling (Lightning ``seed_everything``).
        name, accepts: model-config metadata (kept, not used for training).
    """

    #: what the class trains on: a loss of this kind (see :mod:`ltr_bench.losses`)
    loss_kind: LossKind = "pair"
    #: default loss of the class (the short name of a built-in loss)
    default_loss: str = "l2"

    @classmethod
    def device_for(cls, accelerator: str) -> str:
        """Lightning places the module on whatever accelerator the run was granted."""
        return accelerator

    def __init__(
        self,
        *,
        hidden_sizes: Sequence[int] = (64, 32),
        activation: Any = "tanh",
        dropout: float = 0.0,
        bias: bool = True,
        output_activation: str = "linear",
        output_bias: bool = False,
        loss: Any = None,
        optimizer: Any = None,
        lr_decay_to: float | None = None,
        lr_decay_every: int = 1,
        epochs: int = 30,
        batch_size: int = 1024,
        early_stopping_patience: int | None = 5,
        restore_best: bool = True,
        vali_metric: str = "ndcg@10",
        trainer: Mapping[str, Any] | None = None,
        enable_progress_bar: bool | None = None,
        score_batch_size: int = 1 << 16,
        seed: int = 0,
        name: str | None = None,
        accepts: Any = None,
    ) -> None:
        super().__init__(seed=seed, name=name, accepts=accepts)
        self.hidden_sizes = [int(h) for h in plain(hidden_sizes or [])]
        self.activation = plain(activation)
        self.dropout, self.bias = float(dropout), bool(bias)
        self.output_activation = str(plain(output_activation)).strip().lower()
        self.output_bias = bool(output_bias)
        self.loss = plain(loss) if loss is not None else self.default_loss
        self.optimizer = plain(optimizer) if optimizer is not None else dict(DEFAULT_OPTIMIZER)
        self.lr_decay_to = None if lr_decay_to is None else float(lr_decay_to)
        self.lr_decay_every = int(lr_decay_every)
        self.epochs = int(epochs)
        try:
            self.batch_size = int(batch_size)
        except (TypeError, ValueError):
            raise UserError(f"model.batch_size={batch_size!r} must be a positive integer") from None
        self.early_stopping_patience = (
            None if early_stopping_patience is None else int(early_stopping_patience)
        )
        self.restore_best = bool(restore_best)
        self.vali_metric = parse_metric(vali_metric).name
        self.trainer_kwargs = dict(plain(trainer) or {})
        self.enable_progress_bar = enable_progress_bar
        self.score_batch_size = int(score_batch_size)
        self.module_: RankingModule | None = None
        self.best_epoch_: int | None = None
        self._check_config()

    # ------------------------------------------------------------------ configuration
    def _check_config(self) -> None:
        """Fail early, with one sentence naming the config key, on values that cannot work."""
        if self.epochs < 1:
            raise UserError(f"model.epochs={self.epochs} must be >= 1")
        if self.batch_size < 1:
            raise UserError(f"model.batch_size={self.batch_size} must be >= 1")
        if self.lr_decay_to is not None and not 0 < self.lr_decay_to <= 1:
            raise UserError(f"model.lr_decay_to={self.lr_decay_to} must be in (0, 1]")
        if self.lr_decay_every < 1:
            raise UserError(f"model.lr_decay_every={self.lr_decay_every} must be >= 1")
        if self.early_stopping_patience is not None and self.early_stopping_patience < 0:
            raise UserError(
                f"model.early_stopping_patience must be >= 0 or null, got {self.early_stopping_patience}"
            )
        make_activation(self.output_activation, key="model.output_activation")
        self.resolve_loss()
        FeatureMLP(1, self.hidden_sizes, self.activation, self.dropout, self.bias)

    def resolve_loss(self) -> tuple[Any, LossInfo]:
        """This ranker's loss function (parameters bound) and its kind and cost; a loss of
        another kind than :attr:`loss_kind` is a one-sentence :class:`UserError`."""
        return resolve_loss(self.loss, self.loss_kind)

    def build_scorer(self, n_features: int) -> Scorer:
        """A freshly initialised scorer ``g`` for ``n_features`` inputs."""
        features = FeatureMLP(
            n_features, self.hidden_sizes, self.activation, self.dropout, self.bias
        )
        return Scorer(features, output_bias=self.output_bias)

    @abstractmethod
    def build_module(self, scorer: Scorer, train: QuerySet, vali: QuerySet | None) -> RankingModule:
        """The LightningModule that trains ``scorer`` on ``train``."""

    def module_kwargs(self) -> dict[str, Any]:
        """Keyword arguments every :class:`RankingModule` takes, from this ranker's config."""
        return dict(
            optimizer=self.optimizer,
            lr_decay_to=self.lr_decay_to,
            lr_decay_every=self.lr_decay_every,
            max_epochs=self.epochs,
            vali_metric=self.vali_metric,
            seed=self.seed,
        )

    # ------------------------------------------------------------------ training
    def fit(
        self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None
    ) -> NeuralRanker:
        """Train on ``train``; with ``vali``, early-stop on the validation metric and keep the
        weights of the best validation epoch. ``logger``: a Lightning logger (e.g. MLFlowLogger)."""
        if train.n_docs == 0:
            raise UserError("the training data has no documents")
        if vali is not None and vali.n_features != train.n_features:
            raise UserError(
                f"validation data has {vali.n_features} features but training data has "
                f"{train.n_features}"
            )
        if vali is not None and vali.n_docs == 0:
            vali = None
        L.seed_everything(self.seed, workers=False, verbose=False)
        module = self.build_module(self.build_scorer(train.n_features), train, vali)
        best = BestState(module.vali_key, restore=self.restore_best)
        callbacks: list[L.Callback] = [best]
        if vali is not None and self.early_stopping_patience is not None:
            callbacks.append(
                L.pytorch.callbacks.EarlyStopping(
                    monitor=module.vali_key,
                    mode="max",
                    patience=self.early_stopping_patience,
                    check_finite=False,
                )
            )
        with tempfile.TemporaryDirectory(prefix="ltr_bench_") as root, _quiet_lightning():
            trainer = L.Trainer(**self._trainer_kwargs(callbacks, logger, vali is not None, root))
            trainer.fit(module)
        module._tensors.clear()
        self.module_ = module
        self.history = list(module.history)
        self.best_epoch_ = best.best_epoch
        return self

    def _trainer_kwargs(
        self, callbacks: list[L.Callback], logger: Any, has_vali: bool, root: str
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "accelerator": "cpu",
            "devices": 1,
            "enable_model_summary": False,
            "log_every_n_steps": 50,
        }
        kwargs.update({k: v for k, v in self.trainer_kwargs.items() if k not in _META_KEYS})
        progress = self.enable_progress_bar
        if progress is None:
            progress = bool(self.trainer_kwargs.get("enable_progress_bar", False))
        kwargs.update(
            max_epochs=self.epochs,
            callbacks=callbacks,
            logger=logger if logger is not None else False,
            enable_progress_bar=progress,
            enable_checkpointing=False,
            num_sanity_val_steps=0,
            default_root_dir=root,
            check_val_every_n_epoch=1,
        )
        kwargs.pop("max_steps", None)
        if not has_vali:
            kwargs["limit_val_batches"] = 0
        return kwargs

    # ------------------------------------------------------------------ inference
    @property
    def scorer_(self) -> Scorer:
        if self.module_ is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() first")
        return self.module_.scorer

    def _features(self, data: QuerySet | np.ndarray) -> Tensor:
        x = data.features if isinstance(data, QuerySet) else np.asarray(data, dtype=np.float32)
        if x.ndim == 1:
            x = x[None, :]
        n_in = self.scorer_.features.layers[0].in_features if self.hidden_sizes else None
        expected = n_in if n_in is not None else self.scorer_.output.in_features
        if x.shape[-1] != expected:
            raise UserError(
                f"the data has {x.shape[-1]} features but the model was trained on {expected}"
            )
        device = next(self.scorer_.parameters()).device
        return torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32), device=device)

    def score(self, data: QuerySet | np.ndarray) -> np.ndarray:
        """``g(x) = w . nn(x)`` per document: one batched forward pass per document, eval mode.

        Ranking by these scores is ranking by the trained ranking function (output activations are
        monotone, so they are left out; this also avoids ties from a saturated sigmoid).
        """
        assert self.module_ is not None
        g = self.module_.score_features(self._features(data), self.score_batch_size)
        return g.double().cpu().numpy()

    # ------------------------------------------------------------------ saved model
    def save_params(self, folder: Path) -> dict[str, Any]:
        """The scorer's state dict (``scorer.pt``), on the CPU; no training data."""
        state = {k: v.detach().cpu() for k, v in self.scorer_.state_dict().items()}
        torch.save(state, Path(folder) / SCORER_FILE)
        n = sum(int(v.numel()) for v in state.values())
        return {"weights": SCORER_FILE, "n_parameters": n, "best_epoch": self.best_epoch_}

    def load_params(self, folder: Path, n_features: int) -> None:
        """A scorer for ``n_features`` inputs with the saved weights (``weights_only=True``)."""
        scorer = self.build_scorer(int(n_features))
        state = torch.load(Path(folder) / SCORER_FILE, map_location="cpu", weights_only=True)
        scorer.load_state_dict(state)
        self.module_ = ScoringOnly(scorer)  # type: ignore[assignment]


SCORER_FILE = "scorer.pt"


class ScoringOnly(torch.nn.Module):
    """A loaded scorer in the place of a trained :class:`RankingModule`: scoring, no training."""

    def __init__(self, scorer: Scorer) -> None:
        super().__init__()
        self.scorer = scorer

    score_features = RankingModule.score_features
