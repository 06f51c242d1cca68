"""The papers' quantile transform: features to a normal distribution with standard deviation
``scale`` (1/3 in the papers), fitted on the training split only.

:class:`QuantileNormal` is scikit-learn's ``QuantileTransformer(output_distribution="normal")``
times ``scale`` (the direct-ranker code divides its output by 3), re-implemented in NumPy with the
same numbers (same quantile knots, tie handling and bounds) but ~10x faster: a per-column lookup
table on the float bit pattern replaces the binary searches of ``np.interp``. A saved model keeps
the knots' order statistics (:func:`knot_order_stats`), from which :func:`knots_from_order_stats`
rebuilds the same knots.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import ndtri

from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.transforms.features import features_of
from ltr_bench.errors import UserError

_BOUNDS_THRESHOLD = 1e-7  # scikit-learn's QuantileTransformer constant
_CLIP = float(ndtri(1 - (_BOUNDS_THRESHOLD - np.spacing(1))))  # ~5.1993, sklearn's output clip
# Below this many values a column is searched without its lookup table, which costs more to
# build than it saves on them.
TABLE_MIN_ROWS = 4096


class QuantileNormal:
    """Quantile transform of every feature to a standard normal, multiplied by ``scale``.

    Matches ``sklearn.preprocessing.QuantileTransformer(n_quantiles, output_distribution=
    "normal")`` fitted on the same rows, times ``scale``, to float32 precision (tested):
    quantile knots by linear interpolation, tied knots
    mapped to the middle of their quantile range, values within 1e-7 of the smallest / largest
    knot mapped to the ends (output +-5.199 * scale). Note this last rule comes from sklearn: on
    a feature whose minimum is a frequent value (e.g. many zeros) all those documents get
    -5.199 * scale. The reference is sklearn on float64 input (what the papers' code had:
    load_svmlight_file's default dtype); on float32 input sklearn's own 1e-7 bound tests round
    away (``x + 1e-7 == x`` for ``|x| >= 2``), so its largest values differ from ours. Inputs
    must be finite (load_letor guarantees it).

    Args:
        scale: multiplies the standard-normal output (1/3 in the papers).
        n_quantiles: number of quantile knots (sklearn's default 1000).
        subsample: at most this many training rows are used to compute the knots.
        seed: seeds the row subsample.
    """

    def __init__(
        self,
        scale: float = 1.0 / 3.0,
        n_quantiles: int = 1000,
        subsample: int = 100_000,
        seed: int = 0,
        block_rows: int = 32_768,
        threads: int | None = 1,
    ) -> None:
        self.scale = float(scale)
        self.n_quantiles = int(n_quantiles)
        self.subsample = int(subsample)
        self.seed = int(seed)
        self.block_rows = int(block_rows)
        self.threads = max(1, int(threads or 1))
        self.quantiles_: np.ndarray | None = None  # [n_quantiles, F] knots
        # (rows, [m, F] values): the training values the knots interpolate, see knot_order_stats
        self.order_stats_: tuple[int, np.ndarray] | None = None
        self.references_: np.ndarray | None = None
        self._columns: list[_ColumnMap] = []

    def fit(self, data: QuerySet | np.ndarray) -> QuantileNormal:
        X = features_of(data)
        n = X.shape[0]
        if n == 0:
            raise UserError("cannot fit the quantile transform on an empty training set")
        n_q = max(1, min(self.n_quantiles, n))
        if n > self.subsample:
            rng = np.random.default_rng(self.seed)
            X = X[np.sort(rng.choice(n, self.subsample, replace=False))]
        self.references_ = np.linspace(0.0, 1.0, n_q)
        # percentiles of references * 100, as sklearn computes them (same rounding), read off
        # the sorted columns, which also give the knots' order statistics
        ordered = np.sort(X, axis=0)
        q = percentiles_of_sorted(ordered.astype(np.float64), self.references_)
        self.quantiles_ = np.maximum.accumulate(q.reshape(n_q, -1) + 0.0, axis=0)
        self.order_stats_ = _order_stats_of_sorted(ordered, n_q)
        self._columns = []
        return self

    def load_knots(
        self, quantiles: np.ndarray, order_stats: tuple[int, np.ndarray] | None = None
    ) -> QuantileNormal:
        """The transform :meth:`fit` would have produced with these knots ``[n_quantiles, F]``
        (``quantiles_``): restores a saved model's preprocessing without its training data.
        ``order_stats``: :attr:`order_stats_` of the fit, kept for a later save."""
        self.quantiles_ = np.asarray(quantiles, dtype=np.float64)
        self.order_stats_ = order_stats
        self.references_ = np.linspace(0.0, 1.0, self.quantiles_.shape[0])
        self._columns = []
        return self

    def _column_maps(self) -> list[_ColumnMap]:
        """One map per feature, built on first use: a transform restored from a cache whose
        preprocessed data is cached too is often never applied, and building the maps costs time."""
        if not self._columns and self.quantiles_ is not None and self.references_ is not None:
            self._columns = [
                _ColumnMap(self.quantiles_[:, j], self.references_)
                for j in range(self.quantiles_.shape[1])
            ]
        return self._columns

    def transform_array(self, X: np.ndarray) -> np.ndarray:
        """``[N, F]`` -> float32 ``[N, F]``, processed in row blocks (column-contiguous inside)."""
        columns = self._column_maps()
        if not columns:
            raise RuntimeError("QuantileNormal.transform called before fit")
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != len(columns):
            raise UserError(
                f"quantile transform fitted on {len(columns)} features got shape {X.shape}"
            )
        out = np.empty(X.shape, dtype=np.float32)

        def transform_block(b0: int) -> None:
            block = np.ascontiguousarray(X[b0 : b0 + self.block_rows].T, dtype=np.float32)
            block += np.float32(0.0)  # -0.0 -> +0.0, so bit-pattern keys order like values
            res = np.empty_like(block)
            for j, col in enumerate(columns):
                res[j] = col.apply(block[j], self.scale)
            out[b0 : b0 + self.block_rows] = res.T

        starts = range(0, X.shape[0], self.block_rows)
        if self.threads > 1 and len(starts) > 1:
            # NumPy's and SciPy's ufuncs release the GIL: row blocks run in parallel (1.8x on 2
            # cores), each writing its own rows of ``out``, so the result is the same bits.
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(self.threads, len(starts))) as pool:
                list(pool.map(transform_block, starts))
        else:
            for b0 in starts:
                transform_block(b0)
        return out

    def transform(self, data: QuerySet) -> QuerySet:
        return data.with_features(self.transform_array(data.features))

    def describe(self) -> dict[str, Any]:
        n_fallback = sum(not c.has_table() for c in self._column_maps())
        return {
            "name": "quantile_normal",
            "scale": self.scale,
            "n_quantiles": self.n_quantiles,
            "subsample": self.subsample,
            "seed": self.seed,
            "columns_without_lookup_table": n_fallback,
        }


def _knot_rows(n_rows: int, n_quantiles: int) -> np.ndarray:
    """The sorted-row positions NumPy's linear percentile reads for ``n_quantiles`` evenly
    spaced references over ``n_rows`` rows: ``floor(i)`` and ``floor(i) + 1`` of each virtual
    index ``i``, and both neighbours of an ``i`` within rounding of an integer (NumPy computes
    ``i`` through ``q * 100 / 100``, so 23.0 here may be 22.999... there); a superset is harmless."""
    virtual = np.linspace(0.0, 1.0, n_quantiles) * (n_rows - 1)
    lo = np.floor(virtual).astype(np.int64)
    near = np.round(virtual).astype(np.int64)[np.abs(virtual - np.round(virtual)) < 1e-6]
    rows = np.concatenate([lo, lo + 1, near - 1, near, near + 1])
    return np.unique(np.clip(rows, 0, n_rows - 1))


def percentiles_of_sorted(ordered: np.ndarray, references: np.ndarray) -> np.ndarray:
    """``np.percentile(X, references * 100, axis=0)`` from ``ordered``, the columns of ``X``
    sorted (``np.sort(X, axis=0)``), with the same bits up to the sign of a zero (the two may
    interpolate between tied -0.0 and 0.0 in another order; the knots add 0.0). NumPy's own
    steps for its default ``linear`` method (virtual index ``(n - 1) * q``, its two neighbours,
    its interpolation) without its partition of each column, which costs about 100x a sort when
    a column has about as many rows as there are knots (a fold of a small data set). Where this
    NumPy computes otherwise (checked once per process), ``np.percentile`` itself."""
    if not _same_as_numpy():
        return np.asarray(np.percentile(ordered, references * 100, axis=0))
    return _linear_percentiles(ordered, references)


def _linear_percentiles(ordered: np.ndarray, references: np.ndarray) -> np.ndarray:
    """:func:`percentiles_of_sorted`'s arithmetic, step by step as NumPy's ``_quantile`` and
    ``_lerp`` (NumPy 1.24 to 2.x) take them for sorted input."""
    n = ordered.shape[0]
    virtual = (n - 1) * np.true_divide(references * 100, 100)
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    previous[above] = -1  # the last row
    following[above] = -1
    previous[virtual < 0] = 0
    following[virtual < 0] = 0
    lower_rows, upper_rows = previous.astype(np.intp), following.astype(np.intp)
    gamma = np.asarray(virtual - lower_rows, dtype=virtual.dtype)
    gamma = gamma.reshape(gamma.shape + (1,) * (ordered.ndim - 1))
    lower, upper = ordered[lower_rows], ordered[upper_rows]
    difference = upper - lower
    out = np.add(lower, difference * gamma)
    np.subtract(upper, difference * (1 - gamma), out=out, where=gamma >= 0.5, casting="unsafe")
    return out


_checked: list[bool] = []


def _same_as_numpy() -> bool:
    """Whether :func:`_linear_percentiles` gives ``np.percentile``'s bits here (tried once on
    small columns with ties and on the edge cases of the virtual index)."""
    if not _checked:
        rng = np.random.default_rng(0)
        same = True
        for n, n_q in ((1, 1), (2, 2), (3, 2), (7, 5), (40, 40), (97, 31), (500, 1000)):
            X = np.round(rng.normal(size=(n, 3)) * 3, 1)
            refs = np.linspace(0.0, 1.0, n_q)
            mine = _linear_percentiles(np.sort(X, axis=0), refs) + 0.0  # +0.0: -0.0 ties
            theirs = np.percentile(X, refs * 100, axis=0) + 0.0
            same = same and np.array_equal(mine.view(np.uint64), theirs.view(np.uint64))
        _checked.append(same)
    return _checked[0]


def knot_order_stats(X: np.ndarray, n_quantiles: int) -> tuple[int, np.ndarray]:
    """``(rows, values)``: the order statistics of each column of ``X`` that the quantile knots
    interpolate (``values[k, j]`` = the ``_knot_rows(rows, n_quantiles)[k]``-th smallest value of
    column ``j``, in ``X``'s dtype). The knots are a function of them alone
    (:func:`knots_from_order_stats`), and unlike the interpolated float64 knots they are values of
    the data, with many ties: a saved model stores them in ~30 % fewer bytes."""
    return _order_stats_of_sorted(np.sort(np.asarray(X), axis=0), n_quantiles)


def _order_stats_of_sorted(ordered: np.ndarray, n_quantiles: int) -> tuple[int, np.ndarray]:
    """:func:`knot_order_stats` of the data whose columns sorted are ``ordered``."""
    n = ordered.shape[0]
    return n, np.ascontiguousarray(ordered[_knot_rows(n, n_quantiles)])


def knots_from_order_stats(n_rows: int, values: np.ndarray, n_quantiles: int) -> np.ndarray:
    """The knots ``[n_quantiles, F]`` that :meth:`QuantileNormal.fit` computes from data whose
    order statistics are ``values`` (:func:`knot_order_stats`): the same ``np.percentile`` call on
    a sorted stand-in column that holds those values at those rows (each other row repeats the
    row before it, so the column stays sorted), hence the same bits."""
    rows = _knot_rows(n_rows, n_quantiles)
    fill = np.zeros(n_rows, dtype=np.int64)
    fill[rows] = np.arange(len(rows))
    fill = np.maximum.accumulate(fill)  # row r -> the last kept row <= r
    values = np.asarray(values, dtype=np.float64)
    references = np.linspace(0.0, 1.0, n_quantiles)
    q = np.empty((n_quantiles, values.shape[1]), dtype=np.float64)
    step = max(1, (1 << 24) // max(1, n_rows))  # at most 2**24 values of stand-in columns at a time
    for j in range(0, values.shape[1], step):
        # the stand-in columns are sorted
        q[:, j : j + step] = percentiles_of_sorted(values[fill, j : j + step], references)
    return np.maximum.accumulate(q + 0.0, axis=0)


def _float_key(x32: np.ndarray) -> np.ndarray:
    """uint32 keys ordered like the float32 values (sign flipped / negatives complemented)."""
    b = x32.view(np.uint32)
    return b ^ (np.negative(b >> np.uint32(31)) | np.uint32(0x80000000))


class _ColumnMap:
    """The fitted map of one feature: unique knots, interpolation segments, lookup table.

    For ``x``, ``i = #knots < x``; ``x == v[i]`` is "segment" ``2i+1`` (value: middle of the tied
    knots' references, as sklearn's two-sided ``np.interp`` gives), otherwise segment ``2i`` is
    the line between ``v[i-1]`` (its last reference) and ``v[i]`` (its first reference).
    ``i`` is found with a table indexed by the top bits of a monotone key of
    ``float32(x - center)``: each table cell bounds ``i`` to a range of at most ``width`` knots,
    closed with ``width`` vectorised compare-and-step passes.
    """

    MAX_WIDTH = 6

    def __init__(self, knots: np.ndarray, refs: np.ndarray) -> None:
        v, first, counts = np.unique(knots, return_index=True, return_counts=True)
        r_lo, r_hi = refs[first], refs[first + counts - 1]
        m = len(v)
        self.v = v
        self.vpad = np.append(v, np.inf)
        self.lo_bound, self.hi_bound = float(knots[0]), float(knots[-1])
        y0 = np.zeros(2 * m + 2)
        x0 = np.zeros(2 * m + 2)
        slope = np.zeros(2 * m + 2)
        y0[1 : 2 * m : 2] = 0.5 * (r_lo + r_hi)  # exactly on a knot
        if m > 1:  # strictly between knots i-1 and i, i = 1..m-1
            y0[2 : 2 * m : 2] = r_hi[:-1]
            x0[2 : 2 * m : 2] = v[:-1]
            slope[2 : 2 * m : 2] = (r_lo[1:] - r_hi[:-1]) / np.diff(v)
        y0[2 * m] = 1.0  # above the largest knot (segment 0, below the smallest, stays 0)
        self.y0, self.x0, self.slope = y0, x0, slope
        self.table: np.ndarray | None = None
        self._table_tried = False

    def has_table(self) -> bool:
        """Whether this column searches through a lookup table (built on first ask)."""
        if not self._table_tried:
            self._table_tried = True
            self._build_table()
        return self.table is not None

    def _build_table(self) -> None:
        m = len(self.v)
        if m <= 8:
            return
        self.center = np.float32(self.v[m // 2])
        kk = _float_key((self.v.astype(np.float32) + np.float32(0.0)) - self.center).astype(
            np.int64
        )
        span = int(kk[-1] - kk[0])
        for bits in (12, 16, 18):
            shift = max(0, span.bit_length() - bits)
            c0, c1 = int(kk[0]) >> shift, int(kk[-1]) >> shift
            starts = np.arange(c0, c1 + 2, dtype=np.int64) << shift
            lo = np.searchsorted(kk, starts, side="left")
            width = int(np.max(np.diff(lo)))
            if width <= self.MAX_WIDTH:
                self.table = lo[:-1].astype(np.intp)
                self.shift, self.c0, self.c1, self.width = np.uint32(shift), c0, c1, width
                return

    def search(self, x32: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``#knots < x`` for every element: the same count either way, by binary search for
        a few rows (a CV fold of a small data set), else through the lookup table."""
        table = self.table if len(x) >= TABLE_MIN_ROWS and self.has_table() else None
        if table is None:
            return np.searchsorted(self.v, x, side="left")
        cell = _float_key(x32 - self.center) >> self.shift
        np.clip(cell, self.c0, self.c1, out=cell)
        idx = table[cell.astype(np.intp) - self.c0]
        for _ in range(self.width):
            idx += self.vpad[idx] < x
        return idx

    def apply(self, x32: np.ndarray, scale: float) -> np.ndarray:
        x = x32.astype(np.float64)
        idx = self.search(x32, x)
        seg = idx + idx
        seg += self.vpad[idx] == x
        u = x - self.x0[seg]
        u *= self.slope[seg]
        u += self.y0[seg]
        np.putmask(u, (x + _BOUNDS_THRESHOLD) > self.hi_bound, 1.0)
        np.putmask(u, (x - _BOUNDS_THRESHOLD) < self.lo_bound, 0.0)
        z = ndtri(u, out=u)
        np.clip(z, -_CLIP, _CLIP, out=z)
        z *= scale
        return z
