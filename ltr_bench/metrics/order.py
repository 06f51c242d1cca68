"""Ranking order of padded score tensors, for the losses: a stable descending sort on any device.

Score ties are broken by document order (a stable sort); NaN scores rank like -inf; padded
positions always come last.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def float_dtype(device: torch.device) -> torch.dtype:
    """float64 for exact evaluation; float32 only where the device has no float64 (MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _is_prefix(mask: Tensor) -> bool:
    """True if every row's real documents come before its padding (as :mod:`ltr_bench.data.padding`
    pads). Off the CPU (or inside a compiled step) the answer would cost a wait for the device,
    so it is False there: the reordering it spares is then an identity, and the result the same."""
    if mask.device.type != "cpu" or torch.compiler.is_compiling():
        return mask.shape[1] < 2
    return mask.shape[1] < 2 or not bool((mask[:, 1:] & ~mask[:, :-1]).any())


def sort_order(scores: Tensor, mask: Tensor) -> Tensor:
    """``[Q, L]`` column indices of each row's documents by descending score.

    Keys are ``-score``; padding and NaN scores get +inf. Rows whose real documents do not come
    first are reordered (real documents first, order kept) and mapped back afterwards; with real
    documents first, the stable sort keeps real -inf scores ahead of the padding.
    """
    mask = mask.to(torch.bool)
    scores = scores.detach()  # the order is not differentiable
    if scores.dtype not in (torch.float32, torch.float64):  # ints, half, bfloat16: exact upcast
        scores = scores.to(float_dtype(scores.device))
    perm = None
    if not _is_prefix(mask):
        perm = torch.sort(mask.to(torch.uint8), dim=1, descending=True, stable=True).indices
        scores, mask = scores.gather(1, perm), mask.gather(1, perm)
    keys = (-scores).masked_fill_(~mask | scores.isnan(), math.inf)
    order = torch.sort(keys, dim=1, stable=True).indices
    return order if perm is None else perm.gather(1, order)


def ranks_padded(scores: Tensor, mask: Tensor) -> Tensor:
    """``[Q, L]`` 1-based rank of every document in its query (ties by document order).

    Padded positions get the ranks after the query's last document.
    """
    order = sort_order(scores, mask)
    positions = torch.arange(1, order.shape[1] + 1, device=order.device).expand_as(order)
    return torch.empty_like(order).scatter_(1, order, positions)
