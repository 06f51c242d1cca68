"""The NumPy metrics (the flat evaluation's, which import no torch) give the torch functions' bits.

Each NumPy step is compared with its torch twin on the CPU with ``np.array_equal``: the row sums
(torch's adding order), the DCG tables, and every metric's per-query values and defined-masks on
random padded batches (grades as integers or as whole floats, float32 and float64 scores with
ties, full and cut-off rankings). Fractional grades are the exception: ``2^g`` of a fractional
``g`` is rounded differently by NumPy and by torch's SLEEF (last bit), so there the two agree to
1e-12, not bit for bit; so are a few discounts of ranks beyond the longest LETOR query.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.metrics import dcg, dcg_np, metric_padded, metric_rows, per_query, per_query_np
from ltr_bench.metrics.names import parse_metric, ranking_depth
from ltr_bench.metrics.ranked import Ranked
from ltr_bench.metrics.ranked_np import RankedRows
from ltr_bench.metrics.row_order import argsort_rows
from ltr_bench.metrics.row_sums import row_sums

# Lengths around every boundary of the kernel's order: the vector width (4), its streams (4 x 4),
# the cascade's blocks (16 and more terms per stream) and their levels.
WIDTHS = [*range(0, 80), 127, 128, 129, 255, 256, 257, 511, 512, 513, 1000, 1024, 1251, 4100, 9000]

METRICS = [
    "ndcg@1",
    "ndcg@3",
    "ndcg@10",
    "ndcg",
    "map",
    "p@5",
    "mrr",
    "wta",
    "err@10",
    "err",
    "pair_acc",
]


def _terms(rng: np.random.Generator, q: int, width: int) -> np.ndarray:
    """Positive terms over many magnitudes, where the adding order shows in the last bits."""
    return rng.random((q, width)) * np.exp(rng.normal(0.0, 3.0, (q, width)))


@pytest.mark.parametrize("width", WIDTHS)
def test_row_sums_add_in_torchs_order(width: int) -> None:
    rng = np.random.default_rng(width)
    x = _terms(rng, 40, width)
    assert np.array_equal(row_sums(x), torch.from_numpy(x).sum(dim=1).numpy())


def test_row_sums_differ_from_numpys_own_order() -> None:
    """The check above has teeth: NumPy's pairwise sum disagrees in the last bits."""
    x = _terms(np.random.default_rng(0), 200, 10)
    assert not np.array_equal(x.sum(axis=1), torch.from_numpy(x).sum(dim=1).numpy())
    assert np.array_equal(row_sums(x), torch.from_numpy(x).sum(dim=1).numpy())


def test_row_sums_match_torch_with_several_threads_on_many_rows() -> None:
    """Above torch's grain size its threads split the rows, not a row: the same order."""
    x = _terms(np.random.default_rng(1), 5000, 13)  # 65,000 terms
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        expected = torch.from_numpy(x).sum(dim=1).numpy()
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(row_sums(x), expected)


LONGEST_LETOR_QUERY = 1251  # documents (MSLR-WEB30K); MQ2007/MQ2008 hold at most 147


def test_the_dcg_tables_are_torchs() -> None:
    """Discounts of ranks 1..1251 (the longest LETOR query) and gains of grades 0..63. Beyond,
    NumPy's ``log2`` and torch's SIMD one round a few ranks differently (last bit); the first
    such rank depends on the CPU (1621 on an AVX2 x86-64, 7956 on an AVX-512 one)."""
    width = LONGEST_LETOR_QUERY
    torchs = dcg.position_discounts(width, torch.device("cpu"), torch.float64)
    assert np.array_equal(dcg_np.position_discounts(width), torchs.numpy())
    grades = np.arange(64, dtype=np.float64)
    assert np.array_equal(dcg_np.gains(grades), dcg.gains(torch.from_numpy(grades)).numpy())
    assert np.array_equal(np.cumsum(dcg_np.position_discounts(width)), torchs.cumsum(0).numpy())


def _batch(
    rng: np.random.Generator, q: int, max_len: int, grades: int, kind: str, f32: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys (``-score``, ``+inf`` at padding), labels and mask of a padded batch, real
    documents first in each row (as the flat evaluation pads); scores tie often."""
    lengths = rng.integers(1, max_len + 1, q)
    width = int(lengths.max())
    mask = np.arange(width) < lengths[:, None]
    scores = rng.integers(0, 6, (q, width)).astype(np.float32 if f32 else np.float64)
    scores += rng.normal(0, 1, (q, width)).astype(scores.dtype) * (rng.random((q, width)) < 0.5)
    keys = np.where(mask, -scores, np.inf).astype(scores.dtype)
    grade = np.where(mask, rng.integers(0, grades, (q, width)), 0)
    labels = {
        "int8": grade.astype(np.int8),
        "whole floats": grade.astype(np.float64),
        "fractional": grade * 0.5,
    }[kind]
    return keys, labels, mask


def _cut_off_within(name: str, depth: int) -> bool:
    """True if ``name`` needs only the top ``depth`` ranks."""
    needed = ranking_depth([parse_metric(name)])
    return needed is not None and needed <= depth


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    q=st.integers(1, 30),
    max_len=st.integers(1, 300),
    grades=st.integers(1, 6),
    kind=st.sampled_from(["int8", "whole floats", "fractional"]),
    f32=st.booleans(),
    depth=st.sampled_from([None, 10]),
)
def test_every_metric_gives_torchs_bits(
    seed: int, q: int, max_len: int, grades: int, kind: str, f32: bool, depth: int | None
) -> None:
    keys, labels, mask = _batch(np.random.default_rng(seed), q, max_len, grades, kind, f32)
    names = [m for m in METRICS if depth is None or _cut_off_within(m, depth)]
    rt = Ranked.from_keys(
        torch.from_numpy(keys), torch.from_numpy(labels), torch.from_numpy(mask), depth=depth
    )
    rn = RankedRows(keys, labels, mask, depth=depth)
    for name in names:
        spec = parse_metric(name)
        vt, dt = per_query.raw_metric(spec, rt, 1.0, None)
        vn, dn = per_query_np.raw_metric(spec, rn, 1.0, None)
        assert np.array_equal(dn, dt.numpy()), name
        if kind == "fractional":
            np.testing.assert_allclose(vn, vt.numpy(), rtol=1e-12, atol=0, err_msg=name)
        else:
            assert np.array_equal(vn, vt.numpy(), equal_nan=True), name


@pytest.mark.parametrize("kind", ["int8", "whole floats"])
def test_ideal_dcg_gives_torchs_bits(kind: str) -> None:
    """Both IDCG paths: integer grades (sort-free, by grade counts) and float ones (sorted)."""
    _, labels, mask = _batch(np.random.default_rng(7), 300, 400, 5, kind, False)
    for k in (None, 1, 5, 10, 1000):
        expected = dcg.ideal_dcg(torch.from_numpy(labels), torch.from_numpy(mask), k).numpy()
        assert np.array_equal(dcg_np.ideal_dcg(labels, mask, k), expected)


def test_argsort_rows_is_a_stable_sort() -> None:
    keys = np.array([[1.0, 0.0, 1.0, -0.0, np.inf]], dtype=np.float32)
    assert argsort_rows(keys).tolist() == [[1, 3, 0, 2, 4]]
    assert argsort_rows(keys.astype(np.float64)).tolist() == [[1, 3, 0, 2, 4]]


@pytest.mark.parametrize("no_relevant", ["drop", "zero", "one"])
@pytest.mark.parametrize("name", ["ndcg@10", "map", "err", "mrr"])
def test_metric_rows_gives_metric_padded_bits(name: str, no_relevant: str) -> None:
    """AdaRank's calls: float64 or integer scores, NaN scores, masks with padding in the middle
    of a row, queries without a relevant document, each policy."""
    rng = np.random.default_rng(3)
    q, width = 200, 40
    scores = rng.integers(0, 5, (q, width)).astype(np.float64)
    scores[rng.random((q, width)) < 0.05] = np.nan
    labels = rng.integers(0, 3, (q, width)).astype(np.int32)
    labels[:20] = 0  # no relevant document
    mask = rng.random((q, width)) < 0.8  # real documents anywhere in a row
    for s in (scores, np.nan_to_num(scores).astype(np.int64)):
        expected = metric_padded(
            name,
            torch.from_numpy(s),
            torch.from_numpy(labels),
            torch.from_numpy(mask),
            no_relevant=no_relevant,  # type: ignore[arg-type]
        ).numpy()
        got = metric_rows(name, s, labels, mask, no_relevant=no_relevant)  # type: ignore[arg-type]
        assert np.array_equal(got, expected, equal_nan=True)


def test_metric_rows_of_rows_without_documents() -> None:
    empty = np.zeros((3, 0))
    got = metric_rows("ndcg@10", empty, empty.astype(np.int32), empty.astype(bool))
    assert got.shape == (3,) and np.isnan(got).all()
