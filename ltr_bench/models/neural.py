"""The ranker side of the neural rankers (:class:`NeuralRanker`): config handling, the
Lightning ``Trainer``, early stopping with the best weights restored, scoring, saved weights.

The ``LightningModule`` side (:class:`~ltr_bench.models.ranking_module.RankingModule`: optimiser
with L2 weight decay and a staircase learning-rate decay, validation NDCG@10 on padded query
batches, per-epoch history) lives in :mod:`ltr_bench.models.ranking_module`. Subclasses add how a
training batch is drawn and what its loss is (pairs for DirectRanker, whole queries for
ListNet/LambdaRank).
"""

from __future__ import annotations

import tempfile
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import Tensor

from ltr_bench.config.util import META_KEYS, plain
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.losses import LossInfo, LossKind, resolve_loss
from ltr_bench.metrics import parse_metric
from ltr_bench.models.base import Ranker
from ltr_bench.models.device import (
    check_compile,
    compile_in_place,
    fit_device,
    out_of_memory_error,
    place,
    scoring_device,
)
from ltr_bench.models.lightning_fit import (
    BestState,
    check_precision,
    quiet_lightning,
)
from ltr_bench.models.networks import FeatureMLP, Scorer, make_activation, parse_optimizer
from ltr_bench.models.ranking_module import RankingModule, staircase_factor
from ltr_bench.models.train_step import parse_compile, step_options

__all__ = ["NeuralRanker", "RankingModule", "ScoringOnly", "SCORER_FILE", "staircase_factor"]


class NeuralRanker(Ranker):
    """Base of the neural rankers: builds the scorer, trains it with Lightning, scores documents.

    Args (the keys of ``conf/model/*.yaml``):
        hidden_sizes: widths of the feature MLP's hidden layers (``[]``: a linear scorer).
        activation: feature activation (registry name such as ``tanh``, or a config node).
        dropout: dropout after every hidden layer.
        bias: biases in the feature MLP.
        output_activation: activation of the output neuron (``tau``).
        output_bias: bias of the output neuron.
        loss: the loss (name or config node, see :mod:`ltr_bench.losses.pairwise`).
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
        score_batch_size: documents per forward pass in :meth:`score`, which runs on the device
            the ranker was trained on (see :mod:`ltr_bench.models.device`).
        compile: ``false`` (eager), ``true`` (``torch.compile`` the scorer: the ranking is the
            eager one's up to float rounding) or ``step`` (each training step captured whole,
            :mod:`ltr_bench.models.train_step`: weights within about 1e-5 of eager). Opt-in; the
            first steps pay the compilation; needs a C++ compiler on ``PATH``.
        compile_options: inductor options of ``compile=step`` per device type (``cpu``,
            ``cuda``), nested mappings of inductor's dotted names.
        seed: seeds weights, dropout and batch sampling (Lightning ``seed_everything``).
        name: the model config's name (kept, not used for training).
    """

    #: what the class trains on: a loss of this kind (see :mod:`ltr_bench.losses.pairwise`)
    loss_kind: LossKind = "pair"
    #: default loss of the class (the short name of a built-in loss)
    default_loss: str = "l2"
    takes_lightning_logger = True  # its Trainer writes the per-epoch metrics into the run

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
        batch_size: int | str = 1024,
        early_stopping_patience: int | None = 5,
        restore_best: bool = True,
        vali_metric: str = "ndcg@10",
        trainer: Mapping[str, Any] | None = None,
        enable_progress_bar: bool | None = None,
        score_batch_size: int = 1 << 16,
        compile: bool | str = False,
        compile_options: Mapping[str, Any] | None = None,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        super().__init__(seed=seed, name=name)
        self.hidden_sizes = [int(h) for h in plain(hidden_sizes or [])]
        self.activation = plain(activation)
        self.dropout, self.bias = float(dropout), bool(bias)
        self.output_activation = str(plain(output_activation)).strip().lower()
        self.output_bias = bool(output_bias)
        self.loss = plain(loss) if loss is not None else self.default_loss
        self.optimizer = parse_optimizer(optimizer)  # checked here, once
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
        self.compile = parse_compile(compile)
        self.compile_options = plain(compile_options) or {}
        self.module_: RankingModule | None = None
        #: the device of the last fit (Lightning returns the module on the CPU; scoring goes back)
        self.fit_device_: torch.device | None = None
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
        check_precision(self.trainer_kwargs.get("precision"))
        check_compile(self.compile)
        step_options(self.compile_options, "cpu")
        make_activation(self.output_activation, key="model.output_activation")
        self._loss = resolve_loss(self.loss, self.loss_kind)
        FeatureMLP(1, self.hidden_sizes, self.activation, self.dropout, self.bias)

    def resolve_loss(self) -> tuple[Any, LossInfo]:
        """This ranker's loss function (parameters bound) and its kind and cost; a loss of
        another kind than :attr:`loss_kind` was a one-sentence :class:`UserError` at construction."""
        return self._loss

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
            compile_step=self.compile == "step",
            compile_options=self.compile_options,
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
        if self.compile == "scorer":
            compile_in_place(module.scorer)
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
        with tempfile.TemporaryDirectory(prefix="ltr_bench_") as root, quiet_lightning():
            trainer = L.Trainer(**self._trainer_kwargs(callbacks, logger, vali is not None, root))
            try:
                trainer.fit(module)
            except torch.cuda.OutOfMemoryError:
                raise out_of_memory_error(fit_device(trainer)) from None
        module.release_fit_tensors()
        self.fit_device_ = fit_device(trainer)
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
        kwargs.update({k: v for k, v in self.trainer_kwargs.items() if k not in META_KEYS})
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
        place(self.scorer_, scoring_device(self.fit_device_))
        device = next(self.scorer_.parameters()).device
        return torch.as_tensor(np.ascontiguousarray(x, dtype=np.float32), device=device)

    def score(self, data: QuerySet | np.ndarray) -> np.ndarray:
        """``g(x) = w . nn(x)`` per document, in eval mode, in batches of ``score_batch_size``
        documents on the device of the fit (the features go there in one copy).

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
