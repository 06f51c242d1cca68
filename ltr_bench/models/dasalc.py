"""DASALC (Qin et al., ICLR 2021, "Are Neural Rankers still Outperformed by Gradient Boosted
Decision Trees?"): Data Augmentation, Self-Attention and Latent Cross.

Per member of the ensemble, following TF-Ranking's ``research/dasalc.py`` (the authors' code):

* the features go through ``sign(x) log(1 + |x|)`` (clipped to +-30) and batch normalisation,
  then Gaussian noise is added during training only (the data augmentation);
* a tower of ``Linear -> ReLU -> BatchNorm -> Dropout`` blocks and one linear layer gives each
  document its representation ``h``;
* the listwise context ``a``: a ReLU projection and layers of multi-head self-attention over the
  query's documents (residual connection and layer normalisation, padding masked), batch
  normalised and mapped to ``h``'s width;
* the latent cross combines them, ``relu(h * a + h)``, and after dropout one output neuron
  scores the document.

``n_ensemble`` members with their own initialisation seeds are trained side by side; the
ensemble's score is the mean of its members' scores. Batch normalisation and the loss see only
real documents, so padding never changes a score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ltr_bench.errors import UserError
from ltr_bench.models.attention_blocks import (
    ContextRanker,
    ContextScorer,
    attention_padding_mask,
    check_heads,
)
from ltr_bench.models.networks import FastDropout, make_activation
from ltr_bench.seeding import derive_seed

#: TF-Ranking's dasalc.py clips the log1p-transformed features to [-30, 30]
LOG1P_CLIP = 30.0


def log1p_signed(x: Tensor) -> Tensor:
    """``sign(x) * log(1 + |x|)``, clipped to ``[-LOG1P_CLIP, LOG1P_CLIP]`` (DASALC Sect. 4.1)."""
    return (torch.sign(x) * torch.log1p(x.abs())).clamp(-LOG1P_CLIP, LOG1P_CLIP)


class DocumentBatchNorm(nn.BatchNorm1d):
    """Batch normalisation of ``[N, C]`` documents; a training batch of one document is
    normalised with the running statistics (batch statistics need two). Momentum is torch's 0.1
    (TF-Ranking's 0.9 in TensorFlow's convention)."""

    def forward(self, x: Tensor) -> Tensor:
        if self.training and x.shape[0] < 2:
            return F.batch_norm(
                x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps
            )
        return super().forward(x)

    def masked(self, x: Tensor, mask: Tensor) -> Tensor:
        """:meth:`forward` of the real documents of a padded batch ``x [B, L, C]`` (``mask``
        True at them) without gathering them: batch statistics and running statistics over the
        real documents only, every cell normalised (padding's values are never read)."""
        if not self.training:
            return super().forward(x.reshape(-1, x.shape[-1])).reshape(x.shape)
        assert self.running_mean is not None and self.running_var is not None
        weight = mask.unsqueeze(-1).to(x.dtype)
        n = weight.sum()
        mean = (x * weight).sum(dim=(0, 1)) / n.clamp_min(1.0)
        var = ((x - mean).square() * weight).sum(dim=(0, 1)) / n.clamp_min(1.0)
        batch = n >= 2  # one document: the running statistics, as forward()
        use_mean = torch.where(batch, mean, self.running_mean)
        use_var = torch.where(batch, var, self.running_var)
        with torch.no_grad():
            unbiased = var * n / (n - 1.0).clamp_min(1.0)
            m = self.momentum if self.momentum is not None else 0.1
            new_mean = torch.lerp(self.running_mean, mean.detach(), m)
            new_var = torch.lerp(self.running_var, unbiased.detach(), m)
            self.running_mean.copy_(torch.where(batch, new_mean, self.running_mean))
            self.running_var.copy_(torch.where(batch, new_var, self.running_var))
            if self.num_batches_tracked is not None:
                self.num_batches_tracked.add_(batch.long())
        out = (x - use_mean) * torch.rsqrt(use_var + self.eps)
        return out * self.weight + self.bias if self.affine else out


class GaussianNoise(nn.Module):
    """Adds ``N(0, std^2)`` noise in training mode only; the identity in eval mode."""

    def __init__(self, std: float) -> None:
        super().__init__()
        self.std = float(std)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.std == 0.0:
            return x
        return x + self.std * torch.randn_like(x)

    def extra_repr(self) -> str:
        return f"std={self.std}"


class DocumentInteraction(nn.Module):
    """The listwise context (TF-Ranking's ``DocumentInteractionAttention``): a ReLU projection to
    ``width``, then ``n_layers`` of ``h = LayerNorm(h + Dropout(MHA(h, h, h)))`` over the
    documents of each query, padding masked. torch's ``nn.MultiheadAttention``: the ``n_heads``
    heads split ``width`` (TF-Ranking's heads are ``width`` wide each)."""

    def __init__(self, n_in: int, width: int, n_layers: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        self.projection = nn.Sequential(nn.Linear(n_in, width), nn.ReLU())
        self.attention = nn.ModuleList(
            nn.MultiheadAttention(width, n_heads, dropout=dropout, batch_first=True)
            for _ in range(n_layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(width, eps=1e-12) for _ in range(n_layers))
        self.dropout = FastDropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = self.projection(x)
        padding = attention_padding_mask(mask)
        for attention, norm in zip(self.attention, self.norms):
            out, _ = attention(h, h, h, key_padding_mask=padding, need_weights=False)
            h = norm(h + self.dropout(out))
        return h


class DASALCNet(ContextScorer):
    """One DASALC member: ``x [B, L, F] -> [B, L]`` (see the module docstring)."""

    def __init__(
        self,
        n_features: int,
        *,
        hidden_sizes: Sequence[int],
        activation: Any = "relu",
        dropout: float,
        input_noise_std: float,
        attention_width: int,
        n_attention_layers: int,
        n_heads: int,
    ) -> None:
        super().__init__()
        self.n_features = int(n_features)
        self.input_norm = DocumentBatchNorm(self.n_features)
        self.noise = GaussianNoise(input_noise_std)
        widths = [self.n_features, *[int(h) for h in hidden_sizes]]
        self.tower = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.tower_norms = nn.ModuleList(DocumentBatchNorm(w) for w in widths[1:])
        self.activation = make_activation(activation)
        self.dropout = FastDropout(dropout)
        self.latent = nn.Linear(widths[-1], widths[-1])
        self.context = DocumentInteraction(
            self.n_features, attention_width, n_attention_layers, n_heads, dropout
        )
        self.context_norm = DocumentBatchNorm(attention_width)
        self.context_out = nn.Linear(attention_width, widths[-1])
        self.output = nn.Linear(widths[-1], 1)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        if self.static_shapes:
            return self.forward_padded(x, mask)
        # Per-document parts run on the real documents only ([N, C]); the attention on the
        # padded batch. Padding thus enters no batch statistics and no score.
        z = self.noise(self.input_norm(log1p_signed(x[mask])))
        h = z
        for linear, norm in zip(self.tower, self.tower_norms):
            h = self.dropout(norm(self.activation(linear(h))))
        h = self.latent(h)
        padded = z.new_zeros(mask.shape + z.shape[-1:])
        padded[mask] = z
        a = self.context_out(self.context_norm(self.context(padded, mask)[mask]))
        cross = self.dropout(torch.relu(h * a + h))  # the latent cross
        scores = x.new_zeros(mask.shape)
        scores[mask] = self.output(cross).squeeze(-1).to(scores.dtype)
        return scores

    def forward_padded(self, x: Tensor, mask: Tensor) -> Tensor:
        """The scores of :meth:`forward` with no data-dependent shape (a captured step): the
        per-document parts run on every cell of the padded batch, the batch normalisations
        count the real documents only, and padding's scores are 0."""
        z = self.noise(self.input_norm.masked(log1p_signed(x), mask))
        h = z
        for linear, norm in zip(self.tower, self.tower_norms):
            assert isinstance(norm, DocumentBatchNorm)
            h = self.dropout(norm.masked(self.activation(linear(h)), mask))
        h = self.latent(h)
        a = self.context_out(self.context_norm.masked(self.context(z, mask), mask))
        cross = self.dropout(torch.relu(h * a + h))  # the latent cross
        return torch.where(mask, self.output(cross).squeeze(-1), 0.0).to(x.dtype)


class Ensemble(ContextScorer):
    """Members scored side by side: in training each member's scores feed its own loss
    (:meth:`member_scores`); the ensemble's score is their mean."""

    def __init__(self, members: Sequence[ContextScorer]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.n_features = int(members[0].n_features)

    def member_scores(self, x: Tensor, mask: Tensor) -> Tensor:
        return torch.stack([m(x, mask) for m in self.members])

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return self.member_scores(x, mask).mean(dim=0)


class DASALC(ContextRanker):
    """DASALC: an ensemble of log1p + batch-norm + noise + self-attention + latent-cross nets.

    Args (besides those of :class:`~ltr_bench.models.listnet.ListNet`):
        hidden_sizes: widths of the tower's ``Linear -> activation -> BatchNorm -> Dropout``
            blocks; the last is also the width of ``h``, the context and the latent cross.
        activation: the tower's activation (DASALC: ReLU).
        dropout: dropout in the tower, the attention and before the output neuron.
        input_noise_std: standard deviation of the training-time Gaussian noise added to the
            batch-normalised features (0 = no augmentation).
        attention_width: width of the self-attention context.
        n_attention_layers: self-attention layers of the context.
        n_heads: attention heads, dividing ``attention_width``.
        n_ensemble: members, each initialised from its own seed derived from ``seed``.
    """

    def __init__(
        self,
        *,
        input_noise_std: float = 1.5,
        attention_width: int = 64,
        n_attention_layers: int = 2,
        n_heads: int = 2,
        n_ensemble: int = 3,
        **kwargs: Any,
    ) -> None:
        self.input_noise_std = float(input_noise_std)
        self.attention_width, self.n_heads = int(attention_width), int(n_heads)
        self.n_attention_layers = int(n_attention_layers)
        self.n_ensemble = int(n_ensemble)
        super().__init__(**kwargs)

    def _check_config(self) -> None:
        super()._check_config()
        if not self.hidden_sizes:
            raise UserError("model.hidden_sizes must name at least one layer width for DASALC")
        if self.input_noise_std < 0:
            raise UserError(f"model.input_noise_std={self.input_noise_std} must be >= 0")
        if self.n_attention_layers < 1:
            raise UserError(f"model.n_attention_layers={self.n_attention_layers} must be >= 1")
        if self.n_ensemble < 1:
            raise UserError(f"model.n_ensemble={self.n_ensemble} must be >= 1")
        check_heads(self.attention_width, self.n_heads, "model.attention_width")

    def build_member(self, n_features: int) -> DASALCNet:
        """One freshly initialised member (torch's default initialisation)."""
        return DASALCNet(
            n_features,
            hidden_sizes=self.hidden_sizes,
            activation=self.activation,
            dropout=self.dropout,
            input_noise_std=self.input_noise_std,
            attention_width=self.attention_width,
            n_attention_layers=self.n_attention_layers,
            n_heads=self.n_heads,
        )

    def build_scorer(self, n_features: int) -> Ensemble:  # type: ignore[override]
        """``n_ensemble`` members, member ``i`` initialised from seed ``(seed, i)``."""
        members = []
        for i in range(self.n_ensemble):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(derive_seed(self.seed, i, bits=63))
                members.append(self.build_member(n_features))
        return Ensemble(members)
