"""Stable row-wise sorts of ranking keys in NumPy: the order every metric starts from.

``argsort_rows`` and ``top_k_rows`` take ``[Q, L]`` keys (``-score``, ``+inf`` at padding) and
give each row's columns in ascending key order, ties in column order. NumPy's SIMD sorts do the
work, several times faster than ``torch.sort(stable=True)``; the torch functions of
:mod:`ltr_bench.metrics.order` call these on the CPU, and the NumPy metrics
(:mod:`ltr_bench.metrics.ranked_np`) call them directly.
"""

from __future__ import annotations

import numpy as np


def argsort_rows(x: np.ndarray) -> np.ndarray:
    """Row-wise stable ascending argsort of float keys ``x[Q, L]`` (ties keep column order).

    Float32 keys become one integer per element, (order-preserving bits of the key, column),
    sorted once; float64 keys take an unstable argsort and then a sort of (tie group, column) to
    order ties.
    """
    width = x.shape[1]
    if width < 2:
        return np.zeros(x.shape, dtype=np.int64)
    if x.dtype == np.float32:
        bits = (x + np.float32(0.0)).view(np.uint32)  # + 0.0 turns -0.0 into +0.0 (they tie)
        bits = np.where(bits >> 31, ~bits, bits | np.uint32(1 << 31))  # float order -> uint order
        composite = (bits.astype(np.uint64) << np.uint64(32)) | np.arange(width, dtype=np.uint64)
        composite.sort(axis=1)
        return (composite & np.uint64(0xFFFFFFFF)).astype(np.int64)
    shift = (width - 1).bit_length()
    idx = np.argsort(x, axis=1)
    ranked = np.sort(x, axis=1)  # = x[idx] row by row, but faster than a gather
    composite = np.zeros(x.shape, dtype=np.int64)  # tie group number, then the column
    np.cumsum(ranked[:, 1:] != ranked[:, :-1], axis=1, out=composite[:, 1:])
    np.left_shift(composite, shift, out=composite)
    composite |= idx
    composite.sort(axis=1)
    composite &= (1 << shift) - 1
    return composite


def top_k_rows(x: np.ndarray, k: int) -> np.ndarray:
    """``[Q, k]``: the first ``k`` columns of :func:`argsort_rows` (the ``k`` smallest keys per
    row, ascending, ties by column), without sorting whole rows.

    A partition finds each row's k-th smallest key; every key up to it (the k smallest plus any
    ties with the k-th) is a candidate; the candidates, in column order, are few and get the stable
    sort. Costs O(L) per row instead of O(L log L).
    """
    if k >= x.shape[1]:
        return argsort_rows(x)[:, :k]
    kth = np.partition(x, k - 1, axis=1)[:, k - 1 : k]
    candidate = x <= kth
    rows, cols = np.nonzero(candidate)  # row-major: columns ascending within a row
    counts = np.bincount(rows, minlength=x.shape[0])
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    sub_keys = np.full((x.shape[0], int(counts.max())), np.inf, dtype=x.dtype)
    sub_keys[rows, slot] = x[rows, cols]  # the fill sorts after every candidate
    sub_cols = np.zeros(sub_keys.shape, dtype=np.int64)
    sub_cols[rows, slot] = cols
    order = argsort_rows(sub_keys)[:, :k]
    return np.take_along_axis(sub_cols, order, axis=1)
