"""Pairwise losses of the neural rankers: pure tensor functions of ``r``, the ranker's output for
pairs whose first document is the more relevant one (DirectRanker property (i): the target is
always "first wins"), each a (weighted) mean; and the NDCG swap weights of lambda-weighted pairs.
Weighted means divide by the sum of the weights, so a weighting changes the balance between
pairs, not the overall scale the learning rate was tuned for."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr_bench.losses.registry import pair_loss
from ltr_bench.metrics import discounts, gains

__all__ = [
    "weighted_mean",
    "l2_pair_loss",
    "logistic_pair_loss",
    "hinge_pair_loss",
    "ndcg_swap_delta",
    "ranks_in_queries",
    "ideal_dcg_per_query",
]


def weighted_mean(values: Tensor, weight: Tensor | None = None) -> Tensor:
    """``sum(w * v) / sum(w)`` (plain mean without weights; 0 for an empty or zero-weight batch)."""
    if weight is None:
        return values.mean() if values.numel() else values.sum()
    weight = weight.to(values.dtype)
    return (weight * values).sum() / weight.sum().clamp_min(torch.finfo(values.dtype).tiny)


@pair_loss(name="l2")
def l2_pair_loss(
    r: Tensor,
    label_hi: Tensor | None = None,
    weight: Tensor | None = None,
    *,
    label_weighted: bool = False,
) -> Tensor:
    """The papers' L2 cost ``(1 - r(d_i, d_j))^2`` with target 1 on ordered pairs.

    With ``label_weighted`` each pair is weighted by the label of its more relevant document,
    ``r(d_i) (1 - o1(d_i, d_j))^2`` (DirectRanker ECML Sect. 4.5 (iv)).
    """
    if label_weighted:
        if label_hi is None:
            raise ValueError("label_weighted needs the labels of the more relevant documents")
        lw = label_hi.to(r.dtype)
        weight = lw if weight is None else weight.to(r.dtype) * lw
    return weighted_mean((1.0 - r) ** 2, weight)


@pair_loss(name="logistic")
def logistic_pair_loss(
    r: Tensor,
    label_hi: Tensor | None = None,
    weight: Tensor | None = None,
    *,
    target_probability: float = 1.0,
) -> Tensor:
    """RankNet's cross-entropy cost (Burges et al. eq. 7-9) on the pair output ``o_ij = r``.

    ``C_ij = -P_ij o_ij + log(1 + exp(o_ij))`` with target probability ``P_ij`` (1 for ordered
    pairs, giving ``log(1 + exp(-o_ij))``), computed with a stable softplus.
    """
    return weighted_mean(F.softplus(r) - target_probability * r, weight)


@pair_loss(name="hinge")
def hinge_pair_loss(
    r: Tensor,
    label_hi: Tensor | None = None,
    weight: Tensor | None = None,
    *,
    margin: float = 1.0,
) -> Tensor:
    """Pairwise hinge ``max(0, margin - r)``: the slack of RankSVM's constraint (Burges eq. 5),
    ``z_i w . (x_i1 - x_i2) >= 1 - xi_i``; with an L2 weight penalty this is the QP of eq. 4."""
    return weighted_mean(torch.clamp_min(margin - r, 0.0), weight)


def ndcg_swap_delta(
    gain_i: Tensor,
    gain_j: Tensor,
    rank_i: Tensor,
    rank_j: Tensor,
    idcg: Tensor,
    k: int | None = None,
) -> Tensor:
    """``|delta NDCG|`` of swapping documents i and j in the current ranking (LambdaRank).

    ``|g_i - g_j| * |D(rank_i) - D(rank_j)| / IDCG`` with gain ``2^r - 1`` and discount
    ``1 / log2(1 + rank)`` (1-based ranks, ``D = 0`` below rank ``k`` for NDCG@k). This is the
    ``|Delta M|`` factor of the lambda-gradient in the journal's Sect. 2 and of Burges et al.'s
    LambdaRank (Sect. 6).
    """
    d_i, d_j = discounts(rank_i), discounts(rank_j)
    if k is not None:
        d_i = torch.where(rank_i <= k, d_i, 0.0)
        d_j = torch.where(rank_j <= k, d_j, 0.0)
    return (gain_i - gain_j).abs() * (d_i - d_j).abs() / idcg


def ranks_in_queries(scores: Tensor, query_index: Tensor, query_start: Tensor) -> Tensor:
    """1-based rank of every document in its query by descending score (ties: document order).

    ``query_index[N]`` is the query block of each document and ``query_start[Q]`` the first row of
    each block (documents of a query contiguous). Two stable sorts, no loop over queries.
    """
    by_score = torch.sort(scores, descending=True, stable=True).indices
    by_query = torch.sort(query_index[by_score], stable=True).indices
    perm = by_score[by_query]
    position = torch.arange(len(perm), device=scores.device)
    ranks = torch.empty_like(position)
    ranks[perm] = position - query_start[query_index[perm]] + 1
    return ranks


def ideal_dcg_per_query(
    labels: Tensor, query_index: Tensor, n_queries: int, k: int | None = None
) -> Tensor:
    """``[Q]`` IDCG@k of every query from flat labels (documents of a query contiguous)."""
    labels = labels.to(torch.float64)
    order = torch.sort(labels, descending=True, stable=True).indices
    order = order[torch.sort(query_index[order], stable=True).indices]
    q = query_index[order]
    counts = torch.bincount(query_index, minlength=n_queries)
    start = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(order), device=labels.device) - start[q] + 1
    contrib = gains(labels[order]) * discounts(rank)
    if k is not None:
        contrib = torch.where(rank <= k, contrib, 0.0)
    out = torch.zeros(n_queries, dtype=contrib.dtype, device=labels.device)
    return out.index_add_(0, q, contrib)
