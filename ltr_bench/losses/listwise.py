"""Today's listwise losses: ListMLE, ApproxNDCG, NeuralNDCG and the LambdaLoss framework.

Each is a pure tensor function marked with :func:`ltr_bench.losses.list_loss` (kind and cost),
used through ``conf/loss/<name>.yaml`` like the losses of :mod:`ltr_bench.losses.pairwise`. Each takes
padded ``scores[Q, L]``, ``labels[Q, L]`` (relevance grades) and ``mask[Q, L]``, and follows the
conventions of :mod:`ltr_bench.metrics`:

* gain ``2^l - 1``, discount ``1 / log2(1 + rank)`` (1-based), IDCG of the query's own labels
  (:func:`~ltr_bench.metrics.gains`, :func:`~ltr_bench.metrics.discounts`,
  :func:`~ltr_bench.metrics.ideal_dcg`);
* padded positions (``mask`` False) play no role, whatever their scores and labels;
* a query without a relevant document (no label > 0, so IDCG = 0 and NDCG is undefined) is
  dropped, as the metrics' ``no_relevant="drop"`` policy and the lambda loss do. ListMLE,
  ApproxNDCG and NeuralNDCG average over the kept queries; LambdaLoss, like the lambda loss, is a
  weighted mean over the batch's pairs, where such a query has weight 0. A batch without a kept
  query gives 0 (attached to the graph, so a training step stays valid);
* a one-document query has nothing to order: its loss is 0 (ListMLE: ``-log 1``; NDCG-based:
  ``1 - NDCG = 0``) and it counts in the mean like any kept query;
* the current ranking (LambdaLoss' hard assignment) breaks score ties by document order
  (:func:`~ltr_bench.metrics.ranks_padded`).

Parameters are checked at every call (cheap scalar checks): a bad value is a one-sentence
:class:`~ltr_bench.errors.UserError` naming its ``loss.<key>``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr_bench.errors import UserError
from ltr_bench.losses.pairwise import ndcg_swap_delta, weighted_mean
from ltr_bench.losses.registry import list_loss
from ltr_bench.metrics import discounts, gains, ideal_dcg, ranks_padded

__all__ = [
    "listnet_loss",
    "lambdarank_loss",
    "LAMBDALOSS_SCHEMES",
    "LISTMLE_TIES",
    "listmle_loss",
    "approx_ndcg_loss",
    "neural_sort",
    "sinkhorn",
    "neural_ndcg_loss",
    "lambdaloss",
]

LISTMLE_TIES = ("random", "document_order")
LAMBDALOSS_SCHEMES = ("ndcg_loss1", "ndcg_loss2", "ndcg_loss2pp", "lambda_rank")
_LN2 = math.log(2.0)


# ------------------------------------------------------------------------------ shared helpers
def _positive(key: str, value: Any, *, zero: bool = False) -> float:
    """``value`` as a float > 0 (>= 0 if ``zero``), else a UserError naming ``loss.<key>``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise UserError(f"loss.{key}={value!r} must be a number {'>=' if zero else '>'} 0")
    return float(value)


def _choice(key: str, value: Any, options: tuple[str, ...]) -> str:
    if value not in options:
        raise UserError(f"loss.{key}={value!r} is not one of [{', '.join(options)}]")
    return str(value)


def _count(key: str, value: Any, minimum: int, *, optional: bool = False) -> int | None:
    """``value`` as an int >= ``minimum`` (None allowed if ``optional``), else a UserError."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        null = " or null" if optional else ""
        raise UserError(f"loss.{key}={value!r} must be an integer >= {minimum}{null}")
    return int(value)


def _neg(dtype: torch.dtype) -> float:
    """A finite stand-in for -inf: exp() of it is 0 and its gradients stay finite."""
    return torch.finfo(dtype).min


def _gains(labels: Tensor, mask: Tensor, dtype: torch.dtype) -> Tensor:
    """``[Q, L]`` gains ``2^l - 1`` in ``dtype``, 0 on padding."""
    return torch.where(mask, gains(labels).to(dtype), 0.0)


def _mean_over_kept(per_query: Tensor, keep: Tensor) -> Tensor:
    """Mean of ``per_query`` over the ``keep`` queries; 0 (attached to the graph) if none."""
    return torch.where(keep, per_query, 0.0).sum() / keep.sum().clamp_min(1)


# --------------------------------------------------------------------------------- ListMLE
def _label_order(labels: Tensor, mask: Tensor, ties: str) -> Tensor:
    """``[Q, L]`` columns by descending label, padding last; label ties at random or by
    document order."""
    key = labels.to(torch.float64).masked_fill(~mask, -math.inf)
    if ties == "document_order":
        return torch.sort(key, dim=1, descending=True, stable=True).indices
    shuffle = torch.argsort(torch.rand(key.shape, device=key.device), dim=1)
    by_label = torch.sort(key.gather(1, shuffle), dim=1, descending=True, stable=True).indices
    return shuffle.gather(1, by_label)


@list_loss(cost_power=1, name="listmle")
def listmle_loss(scores: Tensor, labels: Tensor, mask: Tensor, *, ties: str = "random") -> Tensor:
    """ListMLE (Xia, Liu, Wang, Zhang & Li, ICML 2008): the likelihood loss, the negative log
    Plackett-Luce likelihood of the ground-truth permutation ``y``,

    ``phi(s, y) = -log prod_{i=1..n} exp(s_{y(i)}) / sum_{k=i..n} exp(s_{y(k)})``,

    where ``y`` lists the query's documents by descending label. Labels that tie leave ``y``
    open; ``ties`` fixes it: ``"random"`` draws a uniformly random order within each tie group at
    every call (from torch's global generator, which the run's seed seeds; as allRank does), and
    ``"document_order"`` keeps the documents' input order (deterministic; the tie rule of the
    metrics). Padded positions are neither ranked nor in any denominator. Mean over the queries
    with a relevant document.
    """
    ties = _choice("ties", ties, LISTMLE_TIES)
    order = _label_order(labels, mask, ties)
    s = scores.gather(1, order)
    real = mask.gather(1, order)  # real documents first, padding last
    s_real = s.masked_fill(~real, _neg(s.dtype))
    # log sum_{k >= i} exp(s_k): a cumulative logsumexp from the end of the list
    suffix = torch.logcumsumexp(s_real.flip(1), dim=1).flip(1)
    per_query = torch.where(real, suffix - s, 0.0).sum(dim=1)
    return _mean_over_kept(per_query, ideal_dcg(labels, mask) > 0)


# ------------------------------------------------------------------------------ ApproxNDCG
@list_loss(cost_power=2, name="approx_ndcg")
def approx_ndcg_loss(
    scores: Tensor, labels: Tensor, mask: Tensor, *, temperature: float = 1.0
) -> Tensor:
    """ApproxNDCG (Qin, Liu & Li, Information Retrieval 13(4), 2010): ``1 - AppNDCG``.

    The position of document ``x`` is approximated with a logistic function of the score
    differences (the paper's position-function approximation, scaling constant
    ``alpha = 1 / temperature``):

    ``pi(x) ~ 1 + sum_{y != x} exp(-alpha s_xy) / (1 + exp(-alpha s_xy))``, ``s_xy = s_x - s_y``,

    and NDCG over the whole list with it: ``AppNDCG = (1 / IDCG) sum_x (2^{l_x} - 1) /
    log2(1 + pi(x))``. Lower temperatures approximate the true positions more closely (and give
    steeper gradients). No truncation (the whole list, as allRank). Mean over the queries with a
    relevant document.
    """
    tau = _positive("temperature", temperature)
    s = scores.masked_fill(~mask, 0.0)
    eye = torch.eye(s.shape[1], dtype=torch.bool, device=s.device)
    others = mask.unsqueeze(2) & mask.unsqueeze(1) & ~eye  # [q, x, y]: y != x, both real
    beaten_by = torch.sigmoid((s.unsqueeze(1) - s.unsqueeze(2)) / tau)  # [q, x, y]: s_y - s_x
    position = 1.0 + torch.where(others, beaten_by, 0.0).sum(dim=2)
    dcg = (_gains(labels, mask, s.dtype) / torch.log2(1.0 + position)).sum(dim=1)
    idcg = ideal_dcg(labels, mask).to(s.dtype)
    keep = idcg > 0
    return _mean_over_kept(1.0 - dcg / idcg.clamp_min(torch.finfo(s.dtype).tiny), keep)


# ------------------------------------------------------------------------------ NeuralNDCG
def neural_sort(scores: Tensor, mask: Tensor, temperature: float) -> Tensor:
    """NeuralSort's relaxed sorting matrix (Grover et al., ICLR 2019), ``[Q, L, L]`` (rank,
    document).

    Row ``i`` (rank ``i``, 1-based) of a query with ``n`` real documents is
    ``softmax_j(((n + 1 - 2i) s_j - sum_k |s_j - s_k|) / temperature)`` over its real documents
    ``j``; rows ``i > n`` and padded columns are 0.
    """
    s = scores.masked_fill(~mask, 0.0)
    n = mask.sum(dim=1, keepdim=True).to(s.dtype)  # [Q, 1]
    spread = torch.where(mask.unsqueeze(1), (s.unsqueeze(2) - s.unsqueeze(1)).abs(), 0.0).sum(2)
    rank = torch.arange(1, s.shape[1] + 1, device=s.device, dtype=s.dtype)
    coef = n + 1.0 - 2.0 * rank  # [Q, L] per rank
    logits = (coef.unsqueeze(2) * s.unsqueeze(1) - spread.unsqueeze(1)) / temperature
    valid = (rank <= n).unsqueeze(2) & mask.unsqueeze(1)
    p = torch.softmax(logits.masked_fill(~valid, _neg(s.dtype)), dim=2)
    return torch.where(valid, p, 0.0)


def sinkhorn(p: Tensor, iterations: int) -> Tensor:
    """Sinkhorn scaling (Sinkhorn 1964) of non-negative ``[Q, L, L]`` matrices: ``iterations``
    rounds of dividing the columns, then the rows, by their sums.

    Kept as the scaling vectors of ``diag(u) p diag(v)``. Zero rows and columns (padding) stay zero; NeuralSort's real
    columns never sum to 0 (each real document tops some row).
    """
    rows, cols = p.sum(dim=2) > 0, p.sum(dim=1) > 0  # [Q, L] each
    u = rows.to(p.dtype)
    v = cols.to(p.dtype)
    for _ in range(iterations):
        col_sum = (u.unsqueeze(2) * p).sum(dim=1)  # sum_i u_i p_ij
        v = torch.where(cols, 1.0 / torch.where(cols, col_sum, 1.0), 0.0)
        row_sum = (p * v.unsqueeze(1)).sum(dim=2)  # sum_j p_ij v_j
        u = torch.where(rows, 1.0 / torch.where(rows, row_sum, 1.0), 0.0)
    return u.unsqueeze(2) * p * v.unsqueeze(1)


@list_loss(cost_power=2, name="neural_ndcg")
def neural_ndcg_loss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    temperature: float = 1.0,
    sinkhorn_iterations: int = 50,
    k: int | None = None,
) -> Tensor:
    """NeuralNDCG (Pobrotyn & Bialobrzeski, 2021, arXiv:2102.07831): ``1 - NeuralNDCG@k``,

    ``NeuralNDCG@k = (1 / IDCG@k) sum_{i=1..k} (scale(P) g)_i d(i)``,

    with ``P`` NeuralSort's relaxed permutation matrix of the scores (temperature
    ``temperature``, :func:`neural_sort`), ``scale`` Sinkhorn scaling to a doubly stochastic
    matrix (``sinkhorn_iterations`` rounds, :func:`sinkhorn`; allRank stops at 50 or at a
    tolerance of 1e-6, here always the full count so the loss is one fixed function), ``g`` the
    gains ``2^l - 1`` and ``d(i) = 1 / log2(1 + i)``. ``(scale(P) g)_i`` is the relaxed gain at
    rank ``i``. ``k=None``: the whole list. Mean over the queries with a relevant document.
    """
    tau = _positive("temperature", temperature)
    iterations = _count("sinkhorn_iterations", sinkhorn_iterations, 0) or 0
    k = _count("k", k, 1, optional=True)
    p = sinkhorn(neural_sort(scores, mask, tau), iterations)
    g = _gains(labels, mask, scores.dtype)
    gain_at_rank = torch.bmm(p, g.unsqueeze(2)).squeeze(2)  # [Q, L] by rank
    rank = torch.arange(1, scores.shape[1] + 1, device=scores.device, dtype=scores.dtype)
    d = discounts(rank)
    if k is not None:
        d = torch.where(rank <= k, d, 0.0)
    idcg = ideal_dcg(labels, mask, k).to(scores.dtype)
    ndcg = (gain_at_rank * d).sum(dim=1) / idcg.clamp_min(torch.finfo(scores.dtype).tiny)
    return _mean_over_kept(1.0 - ndcg, idcg > 0)


# ------------------------------------------------------------------------------ LambdaLoss
def _pair_discount(scheme: str, rank: Tensor, mu: float, dtype: torch.dtype) -> Tensor:
    """``[Q, L, L]`` rank part of the pair weight of ``scheme``.

    ``rho_ij = |1/D_i - 1/D_j|`` (LambdaRank's ``|delta NDCG|`` factor) and
    ``delta_ij = |1/D(|i - j|) - 1/D(|i - j| + 1)|`` (NDCG-Loss2; 0 for ``i = j``),
    ``D(r) = log2(1 + r)``.
    """
    disc = discounts(rank.to(dtype))
    rho = (disc.unsqueeze(2) - disc.unsqueeze(1)).abs()
    if scheme == "lambda_rank":
        return rho
    steps = discounts(torch.arange(0, rank.shape[1] + 1, device=rank.device, dtype=dtype))
    by_gap = (steps[:-1] - steps[1:]).abs()
    by_gap[0] = 0.0  # a document and itself
    delta = by_gap[(rank.unsqueeze(2) - rank.unsqueeze(1)).abs()]
    return delta if scheme == "ndcg_loss2" else rho + mu * delta


@list_loss(cost_power=2, name="lambdaloss")
def lambdaloss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    scheme: str = "ndcg_loss2pp",
    mu: float = 10.0,
    sigma: float = 1.0,
) -> Tensor:
    """The LambdaLoss framework (Wang, Li, Golbandi, Bendersky & Najork, CIKM 2018) with the
    hard assignment of the paper's experiments: the permutation is the current ranking by score
    (held fixed, as in its EM step), so each loss is a weighted log-likelihood.

    With ``G_i = (2^{l_i} - 1) / IDCG`` and ``D_i = log2(1 + rank_i)``:

    * ``lambda_rank``: ``-sum_{l_i > l_j} log2 sigma(s_i - s_j)^{rho_ij |G_i - G_j|}``, LambdaRank
      as a LambdaLoss (the lambda loss divided by ln 2);
    * ``ndcg_loss2``: the same with ``delta_ij |G_i - G_j|`` (the bound on the NDCG cost);
    * ``ndcg_loss2pp``: NDCG-Loss2++, weight ``(rho_ij + mu delta_ij) |G_i - G_j|``;
    * ``ndcg_loss1``: ``-sum_i log2 (e^{s_i} / sum_j e^{s_j})^{G_i / D_i}``, a softmax likelihood
      per document (allRank writes it with pairwise sigmoids over all pairs instead);

    where ``sigma(o) = 1 / (1 + e^{-sigma o})`` (``rho``, ``delta``: :func:`_pair_discount`). The
    paper sums; here the sum is divided by the sum of the exponents (weights) over the batch, as
    the lambda loss does, so the scheme sets the balance between pairs, not the scale the
    learning rate was tuned for.
    """
    scheme = _choice("scheme", scheme, LAMBDALOSS_SCHEMES)
    mu = _positive("mu", mu, zero=True)
    sigma = _positive("sigma", sigma)
    with torch.no_grad():
        rank = ranks_padded(scores.detach(), mask)
        idcg = ideal_dcg(labels, mask).to(scores.dtype).clamp_min(torch.finfo(scores.dtype).tiny)
        g = _gains(labels, mask, scores.dtype) / idcg.unsqueeze(1)  # G_i
    if scheme == "ndcg_loss1":
        weight = torch.where(mask, g * discounts(rank.to(g.dtype)), 0.0)
        log_p = torch.log_softmax(scores.masked_fill(~mask, _neg(scores.dtype)), dim=1)
        return weighted_mean(-torch.where(mask, log_p, 0.0) / _LN2, weight)
    with torch.no_grad():
        ordered = (
            (labels.unsqueeze(2) > labels.unsqueeze(1)) & mask.unsqueeze(2) & mask.unsqueeze(1)
        )
        w = (g.unsqueeze(2) - g.unsqueeze(1)).abs() * _pair_discount(scheme, rank, mu, g.dtype)
        weight = torch.where(ordered, w, 0.0)
    s = scores.masked_fill(~mask, 0.0)
    o = sigma * (s.unsqueeze(2) - s.unsqueeze(1))
    return weighted_mean(F.softplus(-o) / _LN2, weight)


@list_loss(cost_power=1, name="listnet")
def listnet_loss(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """ListNet's top-one cross entropy (Cao et al. 2007): ``-sum_j P_y(j) log P_s(j)``.

    ``P_s(j) = exp(s_j) / sum_k exp(s_k)`` over the query's documents and ``P_y`` the same softmax
    of the labels; padded positions (``mask`` False) are excluded. Mean over the queries.
    """
    neg_inf = torch.finfo(scores.dtype).min
    log_p = torch.log_softmax(scores.masked_fill(~mask, neg_inf), dim=1)
    target = torch.softmax(labels.to(scores.dtype).masked_fill(~mask, neg_inf), dim=1)
    per_query = -(target * torch.where(mask, log_p, 0.0)).sum(dim=1)
    if scores.device.type != "cpu" or torch.compiler.is_compiling():
        # a boolean index would wait for the GPU, and its shape depends on the data
        return weighted_mean(per_query, mask.any(dim=1))
    return per_query[mask.any(dim=1)].mean()


@list_loss(cost_power=2, name="lambda")
def lambdarank_loss(
    scores: Tensor,
    labels: Tensor,
    mask: Tensor,
    *,
    k: int | None = None,
    sigma: float = 1.0,
) -> Tensor:
    """LambdaRank: a loss whose gradient is the lambda-gradient of every ordered pair of a query.

    ``lambda_ij = |delta NDCG_ij| * dC_ij/do_ij`` (journal Sect. 2; Burges et al. Sect. 6) with
    ``C_ij`` RankNet's cost (Burges eq. 9) on ``o_ij = sigma (s_i - s_j)`` for ``label_i >
    label_j``, and ``|delta NDCG_ij|`` the NDCG@k change of swapping i and j in the current
    ranking (held constant). All ``L^2`` pairs of each query are formed, as in LambdaRank; the
    batching keeps ``queries x L^2`` bounded.
    """
    with torch.no_grad():
        ranks = ranks_padded(scores.detach(), mask)
        g = torch.where(mask, gains(labels), 0.0)
        idcg = ideal_dcg(labels, mask, k).clamp_min(1e-12)
        delta = ndcg_swap_delta(
            g.unsqueeze(2),
            g.unsqueeze(1),
            ranks.unsqueeze(2),
            ranks.unsqueeze(1),
            idcg[:, None, None],
            k,
        )
        ordered = (
            (labels.unsqueeze(2) > labels.unsqueeze(1)) & mask.unsqueeze(2) & mask.unsqueeze(1)
        )
        weight = torch.where(ordered, delta, 0.0).to(scores.dtype)
    o = sigma * (scores.unsqueeze(2) - scores.unsqueeze(1))
    return weighted_mean(F.softplus(-o), weight)
