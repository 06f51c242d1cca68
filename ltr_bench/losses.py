"""Training losses of the neural rankers: pure tensor functions, one per paper equation.

Pairwise losses take ``r`` -- the ranker's output for pairs whose first document is the more
relevant one (DirectRanker property (i): the target is always "first wins") -- and return a
(weighted) mean. List losses take padded ``[Q, L]`` scores, labels and a mask. Weighted means
divide by the sum of the weights, so a weighting changes the balance between pairs, not the
overall scale the learning rate was tuned for.

**Adding a loss** is one function here (or in any importable module) plus one config file:
decorate it with :func:`pair_loss` or :func:`list_loss` -- that marks its kind (which models can
train with it) and, for list losses, its cost (how its work grows with the query length, which
sizes the query batches) -- and write ``conf/loss/<name>.yaml`` with ``name`` and ``_target_``
(the function's import path) plus its parameters. A model checks the kind, never a list of names;
``_target_`` is what a config resolves to. Example::

    @list_loss(cost_power=1)
    def my_loss(scores, labels, mask, *, temperature=1.0): ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr_bench.confutil import parse_option
from ltr_bench.errors import UserError
from ltr_bench.metrics import discounts, gains, ideal_dcg, ranks_padded

__all__ = [
    "LossKind",
    "LossInfo",
    "pair_loss",
    "list_loss",
    "loss_info",
    "builtin_losses",
    "resolve_loss",
    "weighted_mean",
    "l2_pair_loss",
    "logistic_pair_loss",
    "hinge_pair_loss",
    "ndcg_swap_delta",
    "listnet_loss",
    "lambdarank_loss",
]

LossKind = Literal["pair", "list"]
F_ = TypeVar("F_", bound=Callable[..., Tensor])


@dataclass(frozen=True)
class LossInfo:
    """What a model needs to know of a loss besides calling it.

    Attributes:
        kind: ``"pair"`` -- ``loss(r, label_hi, weight)`` on the ranker's outputs for sampled
            pairs, more relevant document first; ``"list"`` -- ``loss(scores, labels, mask)`` on
            padded ``[Q, L]`` query batches.
        cost_power: list losses: how one query's work grows with its length L (1: O(L) like
            ListNet, 2: all L^2 pairs like LambdaRank); batches bound ``queries x L^cost_power``.
            Pair losses: 0 (a pair costs the same whatever its query).
        name: the short name of a built-in loss (its ``conf/loss`` option), for use from Python.
    """

    kind: LossKind
    cost_power: int = 0
    name: str | None = None


def pair_loss(fn: F_ | None = None, *, name: str | None = None) -> Any:
    """Mark ``fn(r, label_hi=None, weight=None, **params)`` as a pairwise loss (a decorator,
    with or without arguments)."""

    def mark(f: F_) -> F_:
        f.ltr_loss = LossInfo("pair", 0, name)  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


def list_loss(cost_power: int = 2, *, name: str | None = None) -> Callable[[F_], F_]:
    """Mark ``fn(scores, labels, mask, **params)`` as a list loss whose work per query grows as
    ``L^cost_power`` (a decorator)."""
    if int(cost_power) < 1:
        raise ValueError(f"cost_power of a list loss must be >= 1, got {cost_power}")

    def mark(f: F_) -> F_:
        f.ltr_loss = LossInfo("list", int(cost_power), name)  # type: ignore[attr-defined]
        return f

    return mark


def loss_info(fn: Any) -> LossInfo | None:
    """The :class:`LossInfo` a loss was marked with (None: not marked as a loss)."""
    info = getattr(fn, "ltr_loss", None)
    return info if isinstance(info, LossInfo) else None


#: modules whose named losses are the built-in options (imported on first use: the others import
#: this module for its decorators)
BUILTIN_MODULES = ("ltr_bench.losses", "ltr_bench.listwise_losses")


def builtin_losses(kind: LossKind | None = None) -> dict[str, Callable[..., Tensor]]:
    """The losses of :data:`BUILTIN_MODULES` by short name (``{"l2": l2_pair_loss, ...}``), of
    one kind."""
    import importlib

    out = {}
    for module in BUILTIN_MODULES:
        for value in vars(importlib.import_module(module)).values():
            info = loss_info(value)
            if info is not None and info.name and (kind is None or info.kind == kind):
                out[info.name] = value
    return dict(sorted(out.items()))


def resolve_loss(
    value: Any,
    kind: LossKind,
    key: str = "loss",
) -> tuple[Callable[..., Tensor], LossInfo]:
    """The loss function (config parameters bound) and its :class:`LossInfo`.

    ``value`` is a config node ``{name, _target_, **params}`` -- ``_target_`` is what resolves --
    or, from Python, the short name of a built-in loss (a string or a node without
    ``_target_``), parsed by :func:`ltr_bench.confutil.parse_option`. A loss of another kind than
    ``kind`` (what the model trains on) or a function not marked as a loss is a
    :class:`UserError` of one sentence.
    """
    fits = builtin_losses(kind)
    choose = f"choose a {kind} loss, one of [{', '.join(fits)}], or drop the override"
    option = parse_option(value, key, builtin_losses(), "loss", fix=choose)
    info = loss_info(option.target)
    if info is None:
        raise UserError(
            f"{key}._target_={_path(option.target)} is not marked as a loss; decorate it with "
            "ltr_bench.losses.pair_loss or ltr_bench.losses.list_loss"
        )
    if info.kind != kind:
        raise UserError(
            f"{key}={option.name} is a {info.kind} loss, but this model trains with {kind} "
            f"losses; {choose}"
        )
    return option.bound(), info


def _path(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"


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
    if scores.device.type != "cpu":  # a boolean index would wait for the GPU
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
