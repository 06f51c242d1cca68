"""DirectRanker (Koeppel et al., ECML 2019; "RankNet revisited", MLJ 2025) -- and, as configs of the
same class, RankNet and RankSVM.

The network (ECML Fig. 1, Theorem 1): a feature part ``nn`` applied to both documents (one module,
so the two subnets share every parameter), and one output neuron without bias and with an
antisymmetric, sign-conserving activation ``tau`` on the difference:

    r(x, y) = tau(w . (nn(x) - nn(y))) = tau(g(x) - g(y)),   g(x) = w . nn(x).

So ``r(x, y) = -r(y, x)``, ``r(x, x) = 0`` and ``r`` is transitive, and sorting by ``g`` (one
forward pass per document, :meth:`DirectRanker.score`) equals sorting with ``r``.

Training pairs are drawn inside queries, the more relevant document first (property (i)), from
all pairs of different labels or only from neighbouring label classes (property (ii)); see
:class:`~ltr_bench.data.batching.PairSampler`. RankNet is this class with a linear ``tau``, the
logistic cost and SGD (journal Sect. 2-3); RankSVM is it with no hidden layers, a linear ``tau``,
the hinge cost and an L2 penalty (Burges Sect. 3). Both are configs (``conf/model/``).

Beyond the papers (both name it as future work): ``pair_weighting="ndcg_swap"`` weights every pair
by LambdaRank's ``|delta NDCG|`` of swapping its two documents in the current ranking of their
query. Only the weights of the loss change, not the architecture, so Theorem 1 still holds.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np
import torch
from torch import Tensor

from ltr_bench.data.batching import (
    PAIR_DISTRIBUTIONS,
    PAIR_MODES,
    PairBatch,
    PairBatches,
    PairDistribution,
    PairDrawBatches,
    PairDraws,
    PairMode,
    PairSampler,
    auto_pair_batch_size,
)
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.losses import (
    ideal_dcg_per_query,
    ndcg_swap_delta,
    ranks_in_queries,
)
from ltr_bench.metrics import gains
from ltr_bench.models.networks import Scorer, check_antisymmetric, make_activation
from ltr_bench.models.neural import NeuralRanker, RankingModule

PairWeighting = Literal["none", "ndcg_swap"]
PAIR_WEIGHTINGS = ("none", "ndcg_swap")


class PairwiseModule(RankingModule):
    """Trains ``r(x, y) = tau(g(x) - g(y))`` on sampled pairs (higher label first, target 1)."""

    def __init__(
        self,
        scorer: Scorer,
        train: QuerySet,
        vali: QuerySet | None,
        *,
        tau: torch.nn.Module,
        loss_fn: Any,
        pairs: str,
        pair_distribution: str,
        pairs_per_epoch: int | str | None,
        batch_size: int | str,
        pair_weighting: str,
        swap_ndcg_k: int | None,
        rank_refresh_steps: int | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scorer, train, vali, **kwargs)
        self.tau, self.loss_fn = tau, loss_fn
        self.sampler = PairSampler(  # PairSampler checks both names
            train,
            pairs=cast(PairMode, pairs),
            distribution=cast(PairDistribution, pair_distribution),
        )
        if self.sampler.n_anchors == 0:
            raise UserError(
                "the training data has no query with two different labels, so no pairs can be "
                "formed (check the labels or the relevance binarisation)"
            )
        if pairs_per_epoch is None:
            pairs_per_epoch = train.n_docs
        elif pairs_per_epoch == "all":
            pairs_per_epoch = self.sampler.n_pairs
        self.pairs_per_epoch = int(pairs_per_epoch)
        self.batch_size = (
            auto_pair_batch_size(self.pairs_per_epoch) if batch_size == "auto" else int(batch_size)
        )
        self.pair_weighting, self.swap_ndcg_k = pair_weighting, swap_ndcg_k
        self.rank_refresh_steps = rank_refresh_steps
        self._ranks: Tensor | None = None

    def train_batches(self, rank: int, world_size: int) -> PairBatches:
        self.sampler.to(self.device)
        return PairBatches(
            self.sampler, self.batch_size, self.pairs_per_epoch, self.seed, rank, world_size
        )

    def step_batches(self, rank: int, world_size: int) -> PairDrawBatches:
        """The epoch's random numbers: the captured step draws its pairs from them."""
        self.sampler.to(self.device)
        return PairDrawBatches(
            self.sampler, self.batch_size, self.pairs_per_epoch, self.seed, rank, world_size
        )

    def step_loss(self, inputs: PairDraws) -> Tensor:
        """The pairs of the step's random numbers and their loss, in one graph."""
        return self.batch_loss(self.sampler.pairs_of(inputs))

    def batch_loss(self, batch: PairBatch) -> Tensor:
        x = self.data("train_x").index_select(0, torch.cat([batch.hi, batch.lo]))
        g = self.scorer(x)
        n = batch.hi.shape[0]
        r = self.tau(g[:n] - g[n:])
        weight = self._swap_weights(batch) if self.pair_weighting == "ndcg_swap" else None
        return self.loss_fn(r, batch.label_hi, weight)

    # ------------------------------------------------------------------ |delta NDCG| weights
    def on_train_epoch_start(self) -> None:
        super().on_train_epoch_start()
        if self.pair_weighting == "ndcg_swap":
            self._refresh_ranks()

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        every = self.rank_refresh_steps
        if (
            self.pair_weighting == "ndcg_swap"
            and every
            and batch_idx > 0
            and batch_idx % every == 0
        ):
            self._refresh_ranks()

    def _refresh_ranks(self) -> None:
        """Current rank of every training document in its query (one batched forward pass)."""
        qs = self.train_set
        if "train_q" not in self._tensors or self._tensors["train_q"].device != self.device:
            qidx = torch.as_tensor(qs.query_index(), device=self.device)
            labels = self.data("train_y")
            self._tensors["train_q"] = qidx
            self._tensors["train_qstart"] = torch.as_tensor(
                np.array(qs.offsets[:-1]), device=self.device
            )
            self._tensors["train_gain"] = gains(labels)
            self._tensors["train_idcg"] = ideal_dcg_per_query(
                labels, qidx, qs.n_queries, self.swap_ndcg_k
            ).clamp_min(1e-12)
        scores = self.score_features(self.data("train_x"))
        self._ranks = ranks_in_queries(
            scores, self._tensors["train_q"], self._tensors["train_qstart"]
        )

    def _swap_weights(self, batch: PairBatch) -> Tensor:
        t = self._tensors
        assert self._ranks is not None
        idcg = t["train_idcg"][t["train_q"][batch.hi]]
        delta = ndcg_swap_delta(
            t["train_gain"][batch.hi],
            t["train_gain"][batch.lo],
            self._ranks[batch.hi],
            self._ranks[batch.lo],
            idcg,
            self.swap_ndcg_k,
        )
        return delta.to(torch.float32)


class DirectRanker(NeuralRanker):
    """DirectRanker: ``r(x, y) = tau(w . (nn(x) - nn(y)))`` trained on pairs inside queries.

    Args (besides those of :class:`~ltr_bench.models.neural.NeuralRanker`):
        output_activation: ``tau``; must be antisymmetric and sign-conserving (tanh, linear,
            sigmoid2 = 2 sigmoid - 1, softsign, hardtanh). Default tanh (journal Table 4).
        output_bias: must be False (Theorem 1 needs an output neuron without bias).
        loss: a pairwise loss: ``l2`` (the papers' ``(1 - r)^2``, optionally label-weighted),
            ``logistic`` (RankNet), ``hinge`` (RankSVM), or any function marked with
            ``pair_loss`` (a config node with ``_target_``).
        pairs: ``all`` pairs of different labels or only ``neighbours`` (adjacent label classes
            present in the query).
        pair_distribution: ``pairs`` (every eligible pair equally likely) or ``documents``.
        pairs_per_epoch: pairs per epoch (None: as many as training documents; ``"all"``: the
            number of eligible pairs). Pairs are drawn with replacement, per batch.
        batch_size: pairs per optimisation step, or ``auto`` (default): the power of two at or
            below ``pairs_per_epoch / 16`` clipped to [256, 4096] (512 on MQ2008, 4096 on MSLR).
        pair_weighting: ``none`` or ``ndcg_swap`` (weight = LambdaRank's ``|delta NDCG|``).
        swap_ndcg_k: NDCG cut-off for ``ndcg_swap`` (None: whole query).
        rank_refresh_steps: with ``ndcg_swap``, recompute the current ranking every this many
            steps (None: once per epoch).
    """

    loss_kind = "pair"
    default_loss = "l2"
    #: a positive int, or "auto" until the training data fix it (NeuralRanker's is always an int)
    batch_size: int | str  # type: ignore[assignment]

    def __init__(
        self,
        *,
        output_activation: str = "tanh",
        output_bias: bool = False,
        dropout: float = 0.2,
        epochs: int = 10,
        early_stopping_patience: int | None = 3,
        pairs: str = "all",
        pair_distribution: str = "pairs",
        pairs_per_epoch: int | str | None = None,
        batch_size: int | str = "auto",
        pair_weighting: str = "none",
        swap_ndcg_k: int | None = None,
        rank_refresh_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            output_activation=output_activation,
            output_bias=output_bias,
            dropout=dropout,
            epochs=epochs,
            early_stopping_patience=early_stopping_patience,
            batch_size=1 if batch_size == "auto" else batch_size,
            **kwargs,
        )
        self.batch_size = batch_size if batch_size == "auto" else self.batch_size
        self.pairs, self.pair_distribution = str(pairs), str(pair_distribution)
        self.pairs_per_epoch = pairs_per_epoch
        self.pair_weighting = str(pair_weighting)
        self.swap_ndcg_k = None if swap_ndcg_k is None else int(swap_ndcg_k)
        self.rank_refresh_steps = None if rank_refresh_steps is None else int(rank_refresh_steps)
        self._check_pairwise_config()

    def _check_pairwise_config(self) -> None:
        check_antisymmetric(self.output_activation, key="model.output_activation")
        if self.output_bias:
            raise UserError(
                "model.output_bias must be false for DirectRanker: a bias in the output neuron "
                "breaks r(x, x) = 0 and antisymmetry (Theorem 1)"
            )
        if self.pairs not in PAIR_MODES:
            raise UserError(f"model.pairs={self.pairs!r} must be one of {PAIR_MODES}")
        if self.pair_distribution not in PAIR_DISTRIBUTIONS:
            raise UserError(
                f"model.pair_distribution={self.pair_distribution!r} must be one of "
                f"{PAIR_DISTRIBUTIONS}"
            )
        if self.pair_weighting not in PAIR_WEIGHTINGS:
            raise UserError(
                f"model.pair_weighting={self.pair_weighting!r} must be one of {PAIR_WEIGHTINGS}"
            )
        ppe = self.pairs_per_epoch
        if self.batch_size != "auto" and not (
            isinstance(self.batch_size, int) and self.batch_size >= 1
        ):
            raise UserError(
                f"model.batch_size={self.batch_size!r} must be a positive integer or 'auto'"
            )
        if ppe is not None and ppe != "all" and (not isinstance(ppe, (int, np.integer)) or ppe < 1):
            raise UserError(
                f"model.pairs_per_epoch={ppe!r} must be a positive integer, 'all' or null"
            )

    def build_module(
        self, scorer: Scorer, train: QuerySet, vali: QuerySet | None
    ) -> PairwiseModule:
        loss_fn, _ = self.resolve_loss()
        return PairwiseModule(
            scorer,
            train,
            vali,
            tau=make_activation(self.output_activation),
            loss_fn=loss_fn,
            pairs=self.pairs,
            pair_distribution=self.pair_distribution,
            pairs_per_epoch=self.pairs_per_epoch,
            batch_size=self.batch_size,
            pair_weighting=self.pair_weighting,
            swap_ndcg_k=self.swap_ndcg_k,
            rank_refresh_steps=self.rank_refresh_steps,
            **self.module_kwargs(),
        )

    def compare(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``r(x, y) = tau(g(x) - g(y))`` for feature rows ``x`` and ``y`` (``[N, F]`` or ``[F]``).

        Positive when the model ranks ``x`` above ``y``; ``r(x, y) = -r(y, x)``, ``r(x, x) = 0``.
        """
        assert self.module_ is not None
        gx = self.module_.score_features(self._features(x), self.score_batch_size)
        gy = self.module_.score_features(self._features(y), self.score_batch_size)
        with torch.no_grad():
            r = self.module_.tau(gx - gy)  # type: ignore[operator]
        out = r.double().cpu().numpy()
        return out if np.ndim(x) > 1 or np.ndim(y) > 1 else out.reshape(())

    def load_params(self, folder: Any, n_features: int) -> None:
        """The saved scorer, plus ``tau`` so that :meth:`compare` works on a loaded model."""
        super().load_params(folder, n_features)
        assert self.module_ is not None
        self.module_.tau = make_activation(self.output_activation)
