"""Ranking order of padded score tensors: the stable descending sort every metric starts from.

Score ties are broken by document order (a stable sort); NaN scores rank like -inf; padded
positions always come last. On the CPU NumPy's sorts do the work (see :func:`stable_argsort`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ltr_bench.metrics.row_order import argsort_rows, top_k_rows


def float_dtype(device: torch.device) -> torch.dtype:
    """float64 for exact evaluation; float32 only where the device has no float64 (MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _is_prefix(mask: Tensor) -> bool:
    """True if every row's real documents come before its padding (as :mod:`ltr_bench.data.padding`
    pads). Off the CPU the answer would cost a wait for the device, so it is False there: the
    reordering it spares is then an identity, and the result the same."""
    if mask.device.type != "cpu":
        return mask.shape[1] < 2
    return mask.shape[1] < 2 or not bool((mask[:, 1:] & ~mask[:, :-1]).any())


def stable_argsort(keys: Tensor) -> Tensor:
    """Row-wise stable ascending argsort of a float tensor (ties keep column order).

    On CPU NumPy's SIMD sorts do the work (:func:`~ltr_bench.metrics.row_order.argsort_rows`),
    several times faster than ``torch.sort(stable=True)``; other devices use the torch sort. Both
    give the same order.
    """
    if keys.device.type != "cpu" or keys.shape[1] < 2:
        return torch.sort(keys, dim=1, stable=True).indices
    return torch.from_numpy(argsort_rows(keys.numpy()))


def stable_top_k(keys: Tensor, k: int) -> Tensor:
    """``[Q, k]``: the first ``k`` columns of :func:`stable_argsort`, without sorting whole rows
    on the CPU (:func:`~ltr_bench.metrics.row_order.top_k_rows`)."""
    if keys.device.type != "cpu" or k >= keys.shape[1]:
        return stable_argsort(keys)[:, :k]
    return torch.from_numpy(top_k_rows(keys.numpy(), k))


def ranking_keys(scores: Tensor, mask: Tensor) -> tuple[Tensor, Tensor | None]:
    """Keys whose stable ascending sort is the ranking, plus the column map for odd masks.

    Keys are ``-score``; padding and NaN scores get +inf. Rows whose real documents do not come
    first are reordered (real documents first, order kept) and ``perm`` maps back; with real
    documents first, a stable sort keeps real -inf scores ahead of the padding.
    """
    mask = mask.to(torch.bool)
    scores = scores.detach()  # metrics are not differentiable; NumPy needs a plain tensor
    if scores.dtype not in (torch.float32, torch.float64):  # ints, half, bfloat16: exact upcast
        scores = scores.to(float_dtype(scores.device))
    perm = None
    if not _is_prefix(mask):
        perm = torch.sort(mask.to(torch.uint8), dim=1, descending=True, stable=True).indices
        scores, mask = scores.gather(1, perm), mask.gather(1, perm)
    return (-scores).masked_fill_(~mask | scores.isnan(), math.inf), perm


def sort_order(scores: Tensor, mask: Tensor, k: int | None = None) -> Tensor:
    """``[Q, L]`` column indices of each row's documents by descending score (``[Q, k]``: only
    the top ``k`` ranks, found without a full sort).

    Ties are broken by document order (column order); NaN scores rank like -inf; padded
    positions always come last.
    """
    keys, perm = ranking_keys(scores, mask)
    return order_of_keys(keys, perm, k)


def order_of_keys(keys: Tensor, perm: Tensor | None, k: int | None) -> Tensor:
    """The ranked columns for :func:`ranking_keys`' output (top ``k`` only unless None)."""
    order = stable_argsort(keys) if k is None else stable_top_k(keys, k)
    return order if perm is None else perm.gather(1, order)


def ranks_padded(scores: Tensor, mask: Tensor) -> Tensor:
    """``[Q, L]`` 1-based rank of every document in its query (ties by document order).

    Padded positions get the ranks after the query's last document.
    """
    order = sort_order(scores, mask)
    positions = torch.arange(1, order.shape[1] + 1, device=order.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, positions)
