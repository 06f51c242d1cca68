"""The context-aware self-attention ranker (Pobrotyn et al. 2020, "Context-Aware Learning to Rank
with Self-Attention"; allRank's ``LTRModel``).

Each document of a query is projected by a feed-forward layer (allRank's ``fc_model``), the
query's documents attend to each other through ``n_blocks`` Transformer encoder blocks (no
positional encoding: the documents are a set, so the scores are permutation-equivariant), and one
linear output neuron scores each document. Padding is masked in the attention
(``src_key_padding_mask``) and left out of every loss. It trains like ListNet on padded query
batches with any list loss (default ``listnet``, the softmax cross entropy); training, validation
and scoring all see a document in the context of its query.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ltr_bench.errors import UserError
from ltr_bench.models.attention_blocks import (
    ContextRanker,
    ContextScorer,
    attention_padding_mask,
    check_heads,
    self_attention_encoder,
)
from ltr_bench.models.networks import FeatureMLP


class AttentionScorer(ContextScorer):
    """``x [B, L, F] -> [B, L]``: input projection, self-attention encoder, output neuron.

    Args:
        n_features: input features.
        projection: the input projection (its ``out_features`` is the attention width).
        n_blocks, n_heads, dim_feedforward, attention_dropout, norm_first: the encoder, see
            :func:`~ltr_bench.models.attention_blocks.self_attention_encoder`.
        output_bias: bias of the output neuron.
    """

    def __init__(
        self,
        n_features: int,
        projection: FeatureMLP,
        *,
        n_blocks: int,
        n_heads: int,
        dim_feedforward: int,
        attention_dropout: float,
        norm_first: bool,
        output_bias: bool = True,
    ) -> None:
        super().__init__()
        self.n_features = int(n_features)
        self.projection = projection
        width = projection.out_features
        self.encoder = self_attention_encoder(
            width, n_blocks, n_heads, dim_feedforward, attention_dropout, norm_first
        )
        self.output = nn.Linear(width, 1, bias=output_bias)
        # Glorot-uniform weight matrices, as allRank's make_model initialises them.
        for p in self.encoder.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        nn.init.xavier_uniform_(self.output.weight)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.encoder(self.projection(x), src_key_padding_mask=attention_padding_mask(mask))
        return self.output(h).squeeze(-1)


class AttentionRanker(ContextRanker):
    """Self-attention ranker: allRank's context-aware scorer trained with a list loss.

    Args (besides those of :class:`~ltr_bench.models.listnet.ListNet`):
        hidden_sizes: widths of the input projection (allRank ``fc_model.sizes``); the last is
            the attention width ``d_model`` (``[]``: the raw features, then ``n_heads`` must
            divide the feature count).
        activation, dropout, bias: the input projection's activation (allRank: none, i.e.
            ``linear``), dropout and biases.
        n_blocks: Transformer encoder blocks (allRank ``transformer.N``).
        n_heads: attention heads per block (``transformer.h``); they split ``d_model``.
        dim_feedforward: width of each block's feed-forward layer (``transformer.d_ff``).
        attention_dropout: dropout inside the blocks (``transformer.dropout``).
        norm_first: layer normalisation before each sub-layer plus a final one (allRank's
            encoder), else after each (post-norm).
        output_activation: applied to the scores inside the loss only (allRank
            ``post_model.output_activation``); any monotone activation.
    """

    def __init__(
        self,
        *,
        n_blocks: int = 2,
        n_heads: int = 2,
        dim_feedforward: int = 128,
        attention_dropout: float = 0.1,
        norm_first: bool = True,
        **kwargs: Any,
    ) -> None:
        self.n_blocks, self.n_heads = int(n_blocks), int(n_heads)
        self.dim_feedforward = int(dim_feedforward)
        self.attention_dropout = float(attention_dropout)
        self.norm_first = bool(norm_first)
        super().__init__(**kwargs)

    def _check_config(self) -> None:
        super()._check_config()
        if self.n_blocks < 1:
            raise UserError(f"model.n_blocks={self.n_blocks} must be >= 1")
        if self.dim_feedforward < 1:
            raise UserError(f"model.dim_feedforward={self.dim_feedforward} must be >= 1")
        if not 0.0 <= self.attention_dropout < 1.0:
            raise UserError(f"model.attention_dropout={self.attention_dropout} must be in [0, 1)")
        if self.hidden_sizes:
            check_heads(self.hidden_sizes[-1], self.n_heads, "model.hidden_sizes[-1]")

    def build_scorer(self, n_features: int) -> AttentionScorer:  # type: ignore[override]
        """A freshly initialised attention scorer for ``n_features`` inputs."""
        if not self.hidden_sizes:
            check_heads(int(n_features), self.n_heads, "the feature count")
        projection = FeatureMLP(
            n_features, self.hidden_sizes, self.activation, self.dropout, self.bias
        )
        return AttentionScorer(
            n_features,
            projection,
            n_blocks=self.n_blocks,
            n_heads=self.n_heads,
            dim_feedforward=self.dim_feedforward,
            attention_dropout=self.attention_dropout,
            norm_first=self.norm_first,
            output_bias=self.output_bias,
        )
