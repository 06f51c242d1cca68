"""Feature and label transforms, fitted on the training split only and applied to vali/test.

- :class:`QuantileNormal` - the papers' "features following a normal distribution with standard
  deviation 1/3": scikit-learn's ``QuantileTransformer(output_distribution="normal")`` times
  ``scale`` (the direct-ranker code divides its output by 3). Re-implemented in NumPy with the same
  numbers (same quantile knots, tie handling and bounds) but ~10x faster: a per-column lookup
  table on the float bit pattern replaces the binary searches of ``np.interp``.
- :class:`PerQueryNormalize` - SortNet eq. 4, per query and feature
  ``(x - mean_q) / max_q |x|`` (no fitting).
- :class:`StandardScale` - zero mean, unit variance with train statistics.
- label/query operations :func:`binarize_labels`, :func:`drop_queries_without_relevant`,
  :func:`min_docs_per_query`.
- :class:`Preprocessing` composes them from explicit config options (``conf/eval/*.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np
from scipy.special import ndtri

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError

SPLITS = ("train", "vali", "test")
_BOUNDS_THRESHOLD = 1e-7  # scikit-learn's QuantileTransformer constant
_CLIP = float(ndtri(1 - (_BOUNDS_THRESHOLD - np.spacing(1))))  # ~5.1993, sklearn's output clip


class FeatureTransform(Protocol):
    def fit(self, data: QuerySet) -> FeatureTransform: ...
    def transform(self, data: QuerySet) -> QuerySet: ...
    def describe(self) -> dict[str, Any]: ...


# ------------------------------------------------------------------------- quantile normal
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
        X = _features(data)
        n = X.shape[0]
        if n == 0:
            raise UserError("cannot fit the quantile transform on an empty training set")
        n_q = max(1, min(self.n_quantiles, n))
        if n > self.subsample:
            rng = np.random.default_rng(self.seed)
            X = X[np.sort(rng.choice(n, self.subsample, replace=False))]
        self.references_ = np.linspace(0.0, 1.0, n_q)
        # percentiles of references * 100, as sklearn computes them (same rounding)
        q = np.percentile(np.asarray(X, dtype=np.float64), self.references_ * 100, axis=0)
        self.quantiles_ = np.maximum.accumulate(q.reshape(n_q, -1) + 0.0, axis=0)
        self.order_stats_ = knot_order_stats(X, n_q)
        self._columns = [
            _ColumnMap(self.quantiles_[:, j], self.references_)
            for j in range(self.quantiles_.shape[1])
        ]
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
        self._columns = [
            _ColumnMap(self.quantiles_[:, j], self.references_)
            for j in range(self.quantiles_.shape[1])
        ]
        return self

    def transform_array(self, X: np.ndarray) -> np.ndarray:
        """``[N, F]`` -> float32 ``[N, F]``, processed in row blocks (column-contiguous inside)."""
        if not self._columns:
            raise RuntimeError("QuantileNormal.transform called before fit")
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != len(self._columns):
            raise UserError(
                f"quantile transform fitted on {len(self._columns)} features got shape {X.shape}"
            )
        out = np.empty(X.shape, dtype=np.float32)

        def transform_block(b0: int) -> None:
            block = np.ascontiguousarray(X[b0 : b0 + self.block_rows].T, dtype=np.float32)
            block += np.float32(0.0)  # -0.0 -> +0.0, so bit-pattern keys order like values
            res = np.empty_like(block)
            for j, col in enumerate(self._columns):
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
        n_fallback = sum(c.table is None for c in self._columns)
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


def knot_order_stats(X: np.ndarray, n_quantiles: int) -> tuple[int, np.ndarray]:
    """``(rows, values)``: the order statistics of each column of ``X`` that the quantile knots
    interpolate (``values[k, j]`` = the ``_knot_rows(rows, n_quantiles)[k]``-th smallest value of
    column ``j``, in ``X``'s dtype). The knots are a function of them alone
    (:func:`knots_from_order_stats`), and unlike the interpolated float64 knots they are values of
    the data, with many ties: a saved model stores them in ~30 % fewer bytes."""
    X = np.asarray(X)
    n = X.shape[0]
    rows = _knot_rows(n, n_quantiles)
    return n, np.ascontiguousarray(np.partition(X, rows, axis=0)[rows])


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
    step = max(1, (1 << 24) // max(1, n_rows))  # stand-in columns of at most ~128 MB at a time
    for j in range(0, values.shape[1], step):
        q[:, j : j + step] = np.percentile(values[fill, j : j + step], references * 100, axis=0)
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
        self._build_table()

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
        """``#knots < x`` for every element."""
        if self.table is None:
            return np.searchsorted(self.v, x, side="left")
        cell = _float_key(x32 - self.center) >> self.shift
        np.clip(cell, self.c0, self.c1, out=cell)
        idx = self.table[cell.astype(np.intp) - self.c0]
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


# ----------------------------------------------------------------------- other transforms
class PerQueryNormalize:
    """SortNet eq. 4: per query and feature, ``(x - mean_q(x)) / max_q |x|`` (0 if that is 0).

    Needs no fitting (each query is normalised by its own documents).
    """

    def fit(self, data: QuerySet) -> PerQueryNormalize:
        return self

    def transform(self, data: QuerySet) -> QuerySet:
        if data.n_docs == 0:
            return data
        X = data.features
        lengths = data.query_lengths
        starts = data.offsets[:-1][lengths > 0]
        lengths = lengths[lengths > 0]
        mean = np.add.reduceat(X, starts, axis=0, dtype=np.float64) / lengths[:, None]
        maxabs = np.maximum.reduceat(np.abs(X), starts, axis=0).astype(np.float64)
        inv = np.divide(1.0, maxabs, out=np.zeros_like(maxabs), where=maxabs > 0)
        out = (X - np.repeat(mean, lengths, axis=0)) * np.repeat(inv, lengths, axis=0)
        return data.with_features(out.astype(np.float32))

    def describe(self) -> dict[str, Any]:
        return {"name": "per_query"}


class StandardScale:
    """Zero mean, unit variance per feature, with the training set's statistics."""

    def __init__(self) -> None:
        self.mean_: np.ndarray | None = None
        self.std_: np.ndarray | None = None

    def fit(self, data: QuerySet | np.ndarray) -> StandardScale:
        X = np.asarray(_features(data), dtype=np.float64)
        self.mean_ = X.mean(axis=0)
        std = X.std(axis=0)
        self.std_ = np.where(std > 0, std, 1.0)
        return self

    def transform(self, data: QuerySet) -> QuerySet:
        if self.mean_ is None:
            raise RuntimeError("StandardScale.transform called before fit")
        return data.with_features((data.features - self.mean_) / self.std_)

    def describe(self) -> dict[str, Any]:
        return {"name": "standard"}


class Identity:
    """Features unchanged."""

    def fit(self, data: QuerySet) -> Identity:
        return self

    def transform(self, data: QuerySet) -> QuerySet:
        return data

    def describe(self) -> dict[str, Any]:
        return {"name": "none"}


# -------------------------------------------------------------------------- label ops
def binarize_labels(data: QuerySet, threshold: int) -> QuerySet:
    """Labels ``>= threshold`` become 1, the rest 0 (the papers: MSLR 2, MQ2007/8 1)."""
    return data.with_labels((data.labels >= threshold).astype(np.int32))


def relevant_query_mask(data: QuerySet, threshold: int) -> np.ndarray:
    """``[Q]`` True for queries with at least one document labelled ``>= threshold``."""
    if data.n_docs == 0:
        return np.zeros(data.n_queries, dtype=bool)
    hit = (data.labels >= threshold).astype(np.int8)
    return np.maximum.reduceat(hit, data.offsets[:-1]).astype(bool) & (data.query_lengths > 0)


def drop_queries_without_relevant(data: QuerySet, threshold: int) -> QuerySet:
    """Only the queries with a document labelled ``>= threshold`` (metrics undefined otherwise)."""
    mask = relevant_query_mask(data, threshold)
    return data if mask.all() else data.select_queries(mask)


def min_docs_per_query(data: QuerySet, n: int) -> QuerySet:
    """Only the queries with at least ``n`` documents."""
    mask = data.query_lengths >= n
    return data if mask.all() else data.select_queries(mask)


# ------------------------------------------------------------------------ preprocessing
FEATURE_TRANSFORMS = ("quantile_normal", "standard", "per_query", "none")


class Preprocessing:
    """The data side of an evaluation protocol, built from ``eval.preprocessing`` in the config.

    ``apply(data, split)`` does, in order: drop queries with fewer than ``min_docs`` documents
    (every split); drop queries without a document labelled ``>= relevance_threshold`` (the
    splits in ``drop_no_relevant_splits``, on the original graded labels); the feature transform
    (fitted by :meth:`fit` on the training split, after its own query filters); labels
    binarised at ``binarize_at`` (the splits in ``binarize_splits``).

    Args:
        feature_transform: ``quantile_normal`` | ``standard`` | ``per_query`` | ``none``.
        normal_scale: output scale of ``quantile_normal`` (1/3 in the papers).
        binarize_at: label threshold for binarisation; None keeps graded labels.
        binarize_splits: the splits whose labels are binarised.
        drop_no_relevant_splits: the splits whose queries without relevant documents are dropped.
        relevance_threshold: a document is relevant when its label is ``>=`` this; None means
            ``binarize_at`` if set, else 1.
        min_docs: minimum documents per query (1 keeps all).
        n_quantiles, subsample, seed: options of :class:`QuantileNormal`.
        threads: threads of the quantile transform (the run's ``threads``; None = 1).
    """

    def __init__(
        self,
        feature_transform: str = "quantile_normal",
        normal_scale: float = 1.0 / 3.0,
        binarize_at: int | None = None,
        binarize_splits: Iterable[str] = ("test",),
        drop_no_relevant_splits: Iterable[str] = ("vali", "test"),
        relevance_threshold: int | None = None,
        min_docs: int = 1,
        n_quantiles: int = 1000,
        subsample: int = 100_000,
        seed: int = 0,
        threads: int | None = 1,
    ) -> None:
        self.feature_transform = str(feature_transform)
        self.normal_scale = float(normal_scale)
        self.binarize_at = None if binarize_at is None else int(binarize_at)
        self.binarize_splits = _split_list(binarize_splits, "binarize_splits")
        self.drop_no_relevant_splits = _split_list(
            drop_no_relevant_splits, "drop_no_relevant_splits"
        )
        if relevance_threshold is None:
            relevance_threshold = self.binarize_at if self.binarize_at is not None else 1
        self.relevance_threshold = int(relevance_threshold)
        self.min_docs = int(min_docs)
        if self.min_docs < 1:
            raise UserError(f"eval.preprocessing.min_docs must be >= 1, got {min_docs}")
        self.transform = _make_feature_transform(
            self.feature_transform, self.normal_scale, n_quantiles, subsample, seed, threads
        )
        self.fitted_on: dict[str, int] | None = None

    def filter_queries(self, data: QuerySet, split: str) -> QuerySet:
        """The query filters of ``split`` (min_docs, then no-relevant) without other steps."""
        _check_split(split)
        out = min_docs_per_query(data, self.min_docs) if self.min_docs > 1 else data
        if split in self.drop_no_relevant_splits:
            out = drop_queries_without_relevant(out, self.relevance_threshold)
        if out.n_queries == 0:
            raise UserError(
                f"no {split} queries are left after dropping queries with fewer than "
                f"{self.min_docs} documents or without a label >= {self.relevance_threshold} "
                "(eval.preprocessing.min_docs / relevance_threshold)"
            )
        return out

    def fit(self, train: QuerySet) -> Preprocessing:
        """Fit the feature transform on the (filtered) training split only."""
        train = self.filter_queries(train, "train")
        self.transform.fit(train)
        self.fitted_on = {"n_queries": train.n_queries, "n_docs": train.n_docs}
        return self

    def apply(self, data: QuerySet, split: str) -> QuerySet:
        """The preprocessed ``split`` (one of train, vali, test)."""
        if self.fitted_on is None and self.feature_transform in ("quantile_normal", "standard"):
            raise RuntimeError("Preprocessing.apply called before fit(train)")
        out = self.transform.transform(self.filter_queries(data, split))
        if self.binarize_at is not None and split in self.binarize_splits:
            out = binarize_labels(out, self.binarize_at)
        return out

    def fit_apply(self, train: QuerySet, *others: tuple[QuerySet, str]) -> list[QuerySet]:
        """Fit on ``train`` and return ``[train', *others']`` (each other as (data, split))."""
        self.fit(train)
        return [self.apply(train, "train")] + [self.apply(d, s) for d, s in others]

    def state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(options, arrays)``: the constructor options and ``fitted_on`` as JSON data, and the
        fitted arrays (``quantiles`` [n_q, F] float64, or ``mean`` / ``std``); with
        :meth:`from_state` the same transform, bit for bit, without pickling anything."""
        options = self._options()
        arrays: dict[str, np.ndarray] = {}
        t = self.transform
        if isinstance(t, QuantileNormal):
            options.update(n_quantiles=t.n_quantiles, subsample=t.subsample, seed=t.seed)
            if t.quantiles_ is not None:
                arrays["quantiles"] = np.asarray(t.quantiles_, dtype=np.float64)
            if t.order_stats_ is not None:
                arrays["order_rows"] = np.asarray([t.order_stats_[0]], dtype=np.int64)
                arrays["order_values"] = np.asarray(t.order_stats_[1])
        elif isinstance(t, StandardScale) and t.mean_ is not None:
            arrays["mean"] = np.asarray(t.mean_, dtype=np.float64)
            arrays["std"] = np.asarray(t.std_, dtype=np.float64)
        return options, arrays

    @classmethod
    def from_state(
        cls, options: Mapping[str, Any], arrays: Mapping[str, np.ndarray], threads: int | None = 1
    ) -> Preprocessing:
        """The preprocessing that :meth:`state` described (fitted when its arrays are given)."""
        opts = dict(options)
        fitted_on = opts.pop("fitted_on", None)
        pre = cls(**opts, threads=threads)
        t = pre.transform
        if isinstance(t, QuantileNormal) and "quantiles" in arrays:
            stats = None
            if "order_values" in arrays:
                rows = int(np.asarray(arrays["order_rows"]).reshape(-1)[0])
                stats = (rows, np.array(arrays["order_values"]))
            t.load_knots(np.asarray(arrays["quantiles"], dtype=np.float64), stats)
        elif isinstance(t, StandardScale) and "mean" in arrays:
            t.mean_ = np.asarray(arrays["mean"], dtype=np.float64)
            t.std_ = np.asarray(arrays["std"], dtype=np.float64)
        pre.fitted_on = dict(fitted_on) if fitted_on else ({} if arrays else None)
        return pre

    def _options(self) -> dict[str, Any]:
        """The constructor options (bar the transform's own) and ``fitted_on``."""
        return {
            "feature_transform": self.feature_transform,
            "normal_scale": self.normal_scale,
            "binarize_at": self.binarize_at,
            "binarize_splits": list(self.binarize_splits),
            "drop_no_relevant_splits": list(self.drop_no_relevant_splits),
            "relevance_threshold": self.relevance_threshold,
            "min_docs": self.min_docs,
            "fitted_on": self.fitted_on,
        }

    def describe(self) -> dict[str, Any]:
        return {**self._options(), "transform": self.transform.describe()}


def _make_feature_transform(
    name: str, scale: float, n_quantiles: int, subsample: int, seed: int, threads: int | None = 1
) -> FeatureTransform:
    if name == "quantile_normal":
        return QuantileNormal(
            scale, n_quantiles=n_quantiles, subsample=subsample, seed=seed, threads=threads
        )
    if name == "standard":
        return StandardScale()
    if name == "per_query":
        return PerQueryNormalize()
    if name == "none":
        return Identity()
    raise UserError(
        f"eval.preprocessing.feature_transform must be one of {', '.join(FEATURE_TRANSFORMS)}, "
        f"got {name!r}"
    )


def _split_list(value: Iterable[str] | str | None, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    out = tuple(str(v) for v in value)
    bad = [v for v in out if v not in SPLITS]
    if bad:
        raise UserError(
            f"eval.preprocessing.{key} may only name {', '.join(SPLITS)}, got {', '.join(bad)}"
        )
    return out


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


def _features(data: QuerySet | np.ndarray) -> np.ndarray:
    return data.features if isinstance(data, QuerySet) else np.asarray(data)
