"""Row sums of a float64 ``[Q, L]`` array in the order torch's CPU kernel adds them.

Why: the flat evaluation (:mod:`ltr_bench.metrics.flat`) computes its metrics with NumPy, so a
LambdaMART or AdaRank run never imports torch, while the padded torch functions
(:mod:`ltr_bench.metrics.padded`) score neural rankers during training. Float addition is not
associative: for the two to give the same bits (a ranker's validation metric in training equals
the one its evaluation reports, and results stay what they were when torch computed both), a
row's terms must be added in the same order. NumPy's pairwise sum uses another order, so this
module adds them in ATen's (``aten/src/ATen/native/cpu/SumKernel.cpp``, ``cascade_sum``):

* rows of at least ``lanes`` values (:data:`LANES`, the kernel's vector width in float64 values)
  are read as vectors of ``lanes`` values; the vectors go through ``row_sum`` (four interleaved streams, each a
  cascade of partial sums in blocks of 16 or more); the leftover values are added one by one,
  then the ``lanes`` partial sums;
* shorter rows go through ``row_sum`` value by value.

Every row of an array has the same length, so the order is the same for all rows: each step is
one NumPy operation over all rows, no loop over queries.
The tests compare the result with ``torch.sum`` bit for bit on many lengths.
"""

from __future__ import annotations

import platform

import numpy as np

#: Float64 values per vector in torch's CPU sum kernel: 4 on x86-64 (its AVX2 and default builds
#: of the kernel both use 32-byte vectors, and AVX-512 CPUs run the AVX2 build: measured), 2 on
#: ARM (128-bit NEON vectors; not measured here). The tests check :func:`row_sums` against
#: ``torch.sum`` on the machine they run on.
LANES = 2 if platform.machine().lower() in ("arm64", "aarch64") else 4
_ILP = 4  # row_sum's interleaved streams
_LEVELS = 4  # multi_row_sum's cascade levels


def _ceil_log2(x: int) -> int:
    return 1 if x <= 2 else (x - 1).bit_length()


def _add_in_order(acc: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``acc + terms[:, 0] + terms[:, 1] + ...``, left to right, each step over all rows."""
    for j in range(terms.shape[1]):
        acc = acc + terms[:, j]
    return acc


def _cascade(terms: np.ndarray) -> np.ndarray:
    """ATen's ``multi_row_sum`` over axis 1 of ``terms[Q, n, streams, ...]``: each stream's
    terms summed in blocks, block sums carried up through the levels; ``[Q, streams, ...]``."""
    n = terms.shape[1]
    power = max(4, _ceil_log2(n) // _LEVELS)
    step = 1 << power
    mask = step - 1
    shape = (terms.shape[0],) + terms.shape[2:]
    acc = [np.zeros(shape) for _ in range(_LEVELS)]
    i = 0
    while i + step <= n:
        acc[0] = _add_in_order(acc[0], terms[:, i : i + step])
        i += step
        for level in range(1, _LEVELS):
            acc[level] = acc[level] + acc[level - 1]
            acc[level - 1] = np.zeros(shape)
            if i & (mask << (level * power)):
                break
    acc[0] = _add_in_order(acc[0], terms[:, i:n])
    for level in range(1, _LEVELS):
        acc[0] = acc[0] + acc[level]
    return acc[0]


def _row_sum(terms: np.ndarray) -> np.ndarray:
    """ATen's ``row_sum`` over axis 1 of ``terms[Q, n, ...]``: ``[Q, ...]``."""
    q, n = terms.shape[:2]
    full = n // _ILP
    streams = _cascade(terms[:, : full * _ILP].reshape((q, full, _ILP) + terms.shape[2:]))
    total = _add_in_order(streams[:, 0], terms[:, full * _ILP :])
    for k in range(1, _ILP):
        total = total + streams[:, k]
    return total


def row_sums(x: np.ndarray, lanes: int = LANES) -> np.ndarray:
    """``x.sum(axis=1)`` of a float64 ``[Q, L]`` array, added as ``torch.sum(dim=1)`` adds on the
    CPU with ``lanes`` float64 values per vector, each row in one thread."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    q, width = x.shape
    if width >= lanes:
        n_vec = width // lanes
        vectors = _row_sum(x[:, : n_vec * lanes].reshape(q, n_vec, lanes))  # [Q, lanes]
        total = _add_in_order(np.zeros(q), x[:, n_vec * lanes :])
        total = _add_in_order(total, vectors)
    else:
        total = _row_sum(x)
    return np.zeros(q) + total  # the kernel adds the row's sum to a zeroed output
