"""What the context-aware rankers share: scorers of whole queries, their training and scoring.

A context-aware scorer gives a document a score that depends on the other documents of its
query (self-attention over the query's documents), so it takes a padded query batch
``x [B, L, F]`` with its mask ``[B, L]`` (True at real documents) and returns ``[B, L]`` scores;
padded cells never change the scores of real documents. Such a scorer is trained on ListNet's
padded query batches with any list loss (:class:`ContextListModule`) and scores queries of one
length at a time on the device of the fit (:meth:`ContextRanker.score`), never padded, so a
document's score is a function of its own query's documents only: a saved model
(:mod:`ltr_bench.saved_model`) scores a LETOR file as the run scored its test split.

Users: :mod:`ltr_bench.models.attention_ranker` (allRank's self-attention ranker) and
:mod:`ltr_bench.models.dasalc` (DASALC).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor, nn

from ltr_bench.data.batching import ListBatch, QueryBatches
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models.device import place, scoring_device
from ltr_bench.models.listnet import ListNet, ListwiseModule
from ltr_bench.models.networks import make_activation


class ContextScorer(nn.Module):
    """Base of the scorers of whole queries: ``forward(x [B, L, F], mask [B, L]) -> [B, L]``.

    ``member_scores`` gives the training loss one ``[B, L]`` score tensor per member of an
    ensemble (``[M, B, L]``); a single network has one member.
    """

    n_features: int
    #: the forward pass without data-dependent shapes (``model.compile=step``): padded cells
    #: are computed and masked out rather than left out
    static_shapes: bool = False

    def use_static_shapes(self, on: bool = True) -> None:
        """Switch this scorer and every context scorer inside it (ensemble members)."""
        for module in self.modules():
            if isinstance(module, ContextScorer):
                module.static_shapes = on

    def member_scores(self, x: Tensor, mask: Tensor) -> Tensor:
        """``[M, B, L]`` scores of each of the ``M`` members (here one: the network itself)."""
        return self(x, mask).unsqueeze(0)


def self_attention_encoder(
    d_model: int,
    n_blocks: int,
    n_heads: int,
    dim_feedforward: int,
    dropout: float,
    norm_first: bool = True,
) -> nn.TransformerEncoder:
    """``n_blocks`` Transformer encoder blocks (multi-head self-attention plus a ReLU feed-forward
    layer, each with a residual connection and layer normalisation), torch's own layers.

    ``norm_first`` normalises before each sub-layer and once more after the last block, as
    allRank's encoder does ("norm first for code simplicity", ``allrank/models/transformer.py``);
    ``False`` is the post-norm of Vaswani et al. Padding is masked through
    ``src_key_padding_mask`` by the caller.
    """
    layer = nn.TransformerEncoderLayer(
        d_model,
        n_heads,
        dim_feedforward=dim_feedforward,
        dropout=dropout,
        activation="relu",
        batch_first=True,
        norm_first=norm_first,
    )
    final = nn.LayerNorm(d_model) if norm_first else None
    # The nested-tensor fast path would change the numbers with the padding of a batch.
    return nn.TransformerEncoder(layer, n_blocks, norm=final, enable_nested_tensor=False)


def attention_padding_mask(mask: Tensor) -> Tensor:
    """The key padding mask of a padded batch (True at padding), but for a row without any
    document -- an empty query filling a fixed-shape batch -- which attends to all of its cells:
    its softmax then stays finite (all keys masked would give NaN and NaN gradients), and its
    scores are masked out of every loss anyway. Rows with documents are unchanged."""
    return ~mask & mask.any(dim=-1, keepdim=True)


def check_heads(width: int, n_heads: int, key: str) -> None:
    """Raise :class:`UserError` unless ``n_heads`` attention heads split ``width`` evenly."""
    if n_heads < 1 or width % n_heads:
        raise UserError(
            f"model.n_heads={n_heads} must divide the attention width {width} ({key}); "
            "pick a number of heads that divides it"
        )


# ====================================================================== training
class ContextListModule(ListwiseModule):
    """ListNet's padded query batches and list loss, scored by a :class:`ContextScorer` that sees
    the whole padded batch; an ensemble's members each add their own loss (independent weights).

    Attention costs ``B x L^2`` per batch, so batches are bounded with a cost power of at least 2
    (``max_batch_cells`` bounds ``queries x docs^2``), validation batches too.
    """

    _context_vali: QueryBatches | None = None

    def on_fit_start(self) -> None:
        super().on_fit_start()
        cast(ContextScorer, self.scorer).use_static_shapes(self.compile_step)

    def batch_loss(self, batch: ListBatch) -> Tensor:
        x = self.data("train_x")[batch.rows]
        labels = self.data("train_y")[batch.rows]
        members = cast(ContextScorer, self.scorer).member_scores(x, batch.mask)
        losses = [self.loss_fn(self.tau(s), labels, batch.mask) for s in members]
        return torch.stack(losses).sum()

    def val_dataloader(self) -> Any:
        """The validation queries in padded batches bounded by ``queries x docs^2``, made on the
        device once per fit."""
        if self.vali_set is None:
            return []
        kept = self._context_vali
        if kept is None or kept.device != self.device:
            kept = QueryBatches(
                self.vali_set,
                batch_queries=1 << 30,
                max_cells=self.vali_batch_cells,
                cost_power=2,
                shuffle=False,
                device=self.device,
            )
            self._context_vali = kept
        return kept

    def release_fit_tensors(self) -> None:
        super().release_fit_tensors()
        self._context_vali = None

    def validation_step(self, batch: ListBatch, batch_idx: int) -> None:
        x = self.data("vali_x")[batch.rows]
        # Full precision under mixed precision, as RankingModule validates.
        with torch.autocast(self.device.type, enabled=False):
            scores = self.scorer(x.float(), batch.mask)
        labels = self.data("vali_y")[batch.rows]
        self._vali_values.append((scores.detach(), labels, batch.mask))


# ====================================================================== the ranker
class ContextRanker(ListNet):
    """ListNet's config, batches and training loop with a :class:`ContextScorer`.

    Subclasses build the scorer (:meth:`build_scorer`) and check their own keys. Scoring runs in
    eval mode on groups of queries of one length (no padding at all), at most
    ``score_batch_size`` documents and ``max_batch_cells`` query x docs^2 per forward pass, one
    query at least.
    """

    def build_module(
        self, scorer: Any, train: QuerySet, vali: QuerySet | None
    ) -> ContextListModule:
        loss_fn, info = self.resolve_loss()
        return ContextListModule(
            scorer,
            train,
            vali,
            tau=make_activation(self.output_activation),
            loss_fn=loss_fn,
            cost_power=max(info.cost_power, 2),
            batch_size=self.batch_size,
            max_batch_cells=self.max_batch_cells,
            **self.module_kwargs(),
        )

    def score(self, data: QuerySet | np.ndarray) -> np.ndarray:
        """``[N]`` scores, each computed from its own query's documents only (eval mode).

        A bare ``[N, F]`` array is one query. Only queries of equal length share a forward pass,
        unpadded: a document's score does not depend on padding, nor on the other queries scored
        beside it (up to float rounding; bit for bit when the same queries are scored again).
        """
        if not isinstance(data, QuerySet):
            x = np.asarray(data, dtype=np.float32).reshape(-1, np.shape(data)[-1])
            data = QuerySet.from_arrays(x, np.zeros(len(x), np.int32), np.zeros(len(x), np.int64))
        scorer: ContextScorer = self.scorer_  # type: ignore[assignment]
        place(scorer, scoring_device(self.fit_device_))
        if data.n_features != scorer.n_features:
            raise UserError(
                f"the data has {data.n_features} features but the model was trained on "
                f"{scorer.n_features}"
            )
        device = next(scorer.parameters()).device
        features = torch.as_tensor(np.ascontiguousarray(data.features, np.float32), device=device)
        out = torch.zeros(data.n_docs, dtype=torch.float64, device=device)
        was_training = scorer.training
        scorer.eval()
        try:
            with torch.no_grad():
                for rows in length_groups(data, self.score_batch_size, self.max_batch_cells):
                    r = torch.as_tensor(rows, device=device)
                    mask = torch.ones(r.shape, dtype=torch.bool, device=device)
                    out[r.reshape(-1)] = scorer(features[r], mask).reshape(-1).double()
        finally:
            scorer.train(was_training)
        return out.cpu().numpy()


def length_groups(data: QuerySet, max_docs: int, max_cells: int) -> Iterator[np.ndarray]:
    """``[B, L]`` document rows of queries of one length ``L`` (no padding), ``B x L`` at most
    ``max_docs`` and ``B x L^2`` at most ``max_cells`` (one query at least); empty queries are
    left out."""
    lengths = np.asarray(data.query_lengths, dtype=np.int64)
    starts = np.asarray(data.offsets[:-1], dtype=np.int64)
    for length in np.unique(lengths[lengths > 0]):
        queries = np.flatnonzero(lengths == length)
        per_batch = max(1, min(int(max_docs) // int(length), int(max_cells) // int(length) ** 2))
        for i in range(0, len(queries), per_batch):
            first = starts[queries[i : i + per_batch]]
            yield first[:, None] + np.arange(length)[None, :]
