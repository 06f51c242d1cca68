"""DCG building blocks in torch: gains ``2^r - 1``, discounts ``1 / log2(rank + 1)``, ideal DCG.

For the losses (LambdaRank's |delta NDCG| weights, the listwise NDCG surrogates, DirectRanker's
gain weights), with autograd on any device; the metrics themselves are NumPy's
(:mod:`ltr_bench.metrics.per_query`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ltr_bench.metrics.order import float_dtype


def gains(labels: Tensor) -> Tensor:
    """NDCG gain ``2^r - 1`` of relevance labels (any shape); float labels keep their dtype."""
    labels = labels if labels.is_floating_point() else labels.to(float_dtype(labels.device))
    return torch.exp2(labels) - 1.0


def discounts(ranks: Tensor) -> Tensor:
    """NDCG discount factor ``1 / log2(rank + 1)`` for 1-based ranks (any shape)."""
    ranks = ranks if ranks.is_floating_point() else ranks.to(float_dtype(ranks.device))
    return 1.0 / torch.log2(ranks + 1.0)


def position_discounts(width: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """``[width]`` discounts of ranks ``1..width``."""
    return discounts(torch.arange(1, width + 1, device=device, dtype=dtype))


def ideal_dcg(labels: Tensor, mask: Tensor, k: int | None = None) -> Tensor:
    """``[Q]`` IDCG@k: the DCG@k of each query's labels sorted in descending order.

    Integer labels on the CPU take a sort-free path: per-grade counts place each grade on a run
    of ideal ranks, whose discounts are a difference of discount prefix sums. Elsewhere (a GPU)
    the sort below needs no wait for the device, which reading the highest grade would; a
    compiled training step takes the sort too (the grade count would be a data-dependent shape).
    """
    mask = mask.to(torch.bool)
    width = labels.shape[1]
    kk = width if k is None else min(k, width)
    host_counts = labels.device.type == "cpu" and not torch.compiler.is_compiling()
    if not labels.is_floating_point() and labels.numel() and host_counts:
        lab = labels.masked_fill(~mask, 0)
        n_grades = int(lab.max()) + 1
        if int(lab.min()) >= 0 and n_grades <= 64:
            dtype = float_dtype(labels.device)
            counts = torch.zeros(lab.shape[0], n_grades, dtype=torch.long, device=lab.device)
            counts = counts.scatter_add_(1, lab.long(), mask.long()).flip(1)  # grades high to low
            end = counts.cumsum(1)
            disc = position_discounts(kk, lab.device, dtype)
            prefix = torch.cat([disc.new_zeros(1), disc.cumsum(0)])
            run = prefix[end.clamp(max=kk)] - prefix[(end - counts).clamp(max=kk)]
            grade_gain = gains(torch.arange(n_grades - 1, -1, -1, device=lab.device, dtype=dtype))
            return (run * grade_gain).sum(1)
    g = gains(labels.to(float_dtype(labels.device))).masked_fill(~mask, 0.0)
    g = torch.sort(g, dim=1, descending=True).values[:, :kk]
    return (g * position_discounts(g.shape[1], g.device, g.dtype)).sum(dim=1)
