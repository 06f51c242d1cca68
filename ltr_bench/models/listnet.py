"""ListNet (Cao et al. 2007) and the listwise training shared with LambdaRank.

A neural scorer ``g(x) = w . nn(x) + b`` (the same feature MLP as DirectRanker) trained on whole
queries: each batch holds several queries padded to ``[B, L]`` (grouped by length, see
:class:`~ltr_bench.data.batching.QueryBatches`), and a list loss compares the query's scores with
its labels. ListNet uses the top-one softmax cross entropy; ListNet* (journal Table 4) is the same
class with dropout, L2 and Adam, a config. LambdaRank (:mod:`ltr_bench.models.lambdarank`) is this
class with the lambda loss.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ltr_bench.data.batching import ListBatch, QueryBatches
from ltr_bench.data.queryset import QuerySet
from ltr_bench.models.networks import Scorer, make_activation
from ltr_bench.models.neural import NeuralRanker, RankingModule


class ListwiseModule(RankingModule):
    """Trains the scorer on padded query batches with a list loss ``loss(scores, labels, mask)``."""

    def __init__(
        self,
        scorer: Scorer,
        train: QuerySet,
        vali: QuerySet | None,
        *,
        tau: torch.nn.Module,
        loss_fn: Any,
        cost_power: int,
        batch_size: int,
        max_batch_cells: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(scorer, train, vali, **kwargs)
        self.tau, self.loss_fn = tau, loss_fn
        self.cost_power, self.batch_size = int(cost_power), int(batch_size)
        self.max_batch_cells = int(max_batch_cells)

    def train_batches(self, rank: int, world_size: int) -> QueryBatches:
        return self.query_batches(rank, world_size, fixed_shapes=False)

    def step_batches(self, rank: int, world_size: int) -> QueryBatches:
        """The training batches at a few fixed shapes (one per length bucket), for the captured
        step."""
        return self.query_batches(rank, world_size, fixed_shapes=True)

    def query_batches(self, rank: int, world_size: int, fixed_shapes: bool) -> QueryBatches:
        """This epoch's shuffled query batches for ``rank`` of ``world_size``."""
        batches = QueryBatches(
            self.train_set,
            batch_queries=self.batch_size,
            max_cells=self.max_batch_cells,
            cost_power=self.cost_power,
            shuffle=True,
            seed=self.seed,
            rank=rank,
            world_size=world_size,
            device=self.device,
            fixed_shapes=fixed_shapes,
        )
        batches.epoch = self.current_epoch
        return batches

    def batch_loss(self, batch: ListBatch) -> Tensor:
        x = self.data("train_x")[batch.rows]
        scores = self.tau(self.scorer(x.reshape(-1, x.shape[-1])).reshape(batch.rows.shape))
        labels = self.data("train_y")[batch.rows]
        return self.loss_fn(scores, labels, batch.mask)


class ListNet(NeuralRanker):
    """ListNet: a neural scorer trained with a list loss on whole queries.

    Args (besides those of :class:`~ltr_bench.models.neural.NeuralRanker`):
        loss: a list loss (see :mod:`ltr_bench.losses.pairwise`): ``listnet`` (top-one softmax cross
            entropy, default), ``lambda``, or any function marked with ``list_loss``; its cost
            power sizes the query batches.
        output_activation: applied to ``g`` inside the loss (journal Table 4: sigmoid for ListNet*,
            linear for ListNet); any monotone activation.
        output_bias: bias of the output neuron (list losses are shift-invariant, so it is inert).
        batch_size: queries per batch.
        max_batch_cells: bound on ``B x L`` (ListNet) or ``B x L^2`` (lambda) per batch; long
            queries get smaller batches (at least one query).
    """

    loss_kind = "list"
    default_loss = "listnet"

    def __init__(
        self,
        *,
        output_activation: str = "linear",
        output_bias: bool = False,
        batch_size: int = 16,
        max_batch_cells: int = 1 << 20,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            output_activation=output_activation,
            output_bias=output_bias,
            batch_size=batch_size,
            **kwargs,
        )
        self.max_batch_cells = int(max_batch_cells)

    def build_module(
        self, scorer: Scorer, train: QuerySet, vali: QuerySet | None
    ) -> ListwiseModule:
        loss_fn, info = self.resolve_loss()
        return ListwiseModule(
            scorer,
            train,
            vali,
            tau=make_activation(self.output_activation),
            loss_fn=loss_fn,
            cost_power=info.cost_power,
            batch_size=self.batch_size,
            max_batch_cells=self.max_batch_cells,
            **self.module_kwargs(),
        )
