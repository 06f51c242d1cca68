"""Hypothesis property tests of ltr_bench.metrics: ranges, perfect rankings, invariance to
monotone score transforms, query order, padding width and (without ties) document order."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench import metrics as M
from ltr_bench.metrics.ranked import Ranked, ranking_keys

NAMES = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg", "map", "p@3", "mrr", "wta", "err@5", "pair_acc"]
SETTINGS = settings(max_examples=60, deadline=None)

# A batch: 1-6 queries of 1-12 documents, integer scores in a small range (many ties).
doc = st.tuples(st.integers(-3, 3), st.integers(0, 4))
batches = st.lists(st.lists(doc, min_size=1, max_size=12), min_size=1, max_size=6)


def pad(batch, width=None):
    width = width or max(len(q) for q in batch)
    scores = np.zeros((len(batch), width))
    labels = np.zeros((len(batch), width), dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=bool)
    for i, q in enumerate(batch):
        scores[i, : len(q)] = [s for s, _ in q]
        labels[i, : len(q)] = [l for _, l in q]
        mask[i, : len(q)] = True
    return scores, labels, mask


def run(scores, labels, mask, names=NAMES):
    return {name: M.metric_padded(name, scores, labels, mask, max_grade=4) for name in names}


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return np.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@SETTINGS
@given(batches)
def test_all_metrics_in_unit_interval(batch):
    for name, values in run(*pad(batch)).items():
        v = values[~np.isnan(values)]
        assert bool(((v >= 0) & (v <= 1 + 1e-12)).all()), name


@SETTINGS
@given(batches)
def test_scores_sorted_by_label_are_perfect(batch):
    scores, labels, mask = pad(batch)
    out = run(
        labels.astype(np.float64),
        labels,
        mask,
        ["ndcg@1", "ndcg@3", "ndcg", "map", "mrr", "wta", "pair_acc"],
    )
    for name, values in out.items():
        v = values[~np.isnan(values)]
        assert np.allclose(v, 1.0, atol=1e-12), name
    # NDCG is defined (and 1) for every query with a label > 0
    defined = ((labels > 0) & mask).any(1)
    assert not np.isnan(out["ndcg"][defined]).any()


@SETTINGS
@given(batches, st.sampled_from(["cubic", "exp", "affine"]))
def test_invariant_to_strictly_monotone_score_transforms(batch, kind):
    scores, labels, mask = pad(batch)
    f = {
        "cubic": lambda x: 2 * x**3 + x - 7,  # exact on small integers
        "exp": lambda x: np.exp(x / 3),
        "affine": lambda x: 0.5 * x + 100,
    }[kind]
    before, after = run(scores, labels, mask), run(f(scores), labels, mask)
    for name in NAMES:
        assert same(before[name], after[name]), name


@SETTINGS
@given(batches, st.randoms(use_true_random=False))
def test_invariant_to_permuting_queries(batch, rnd):
    scores, labels, mask = pad(batch)
    perm = list(range(len(batch)))
    rnd.shuffle(perm)
    p = np.array(perm)
    before, after = run(scores, labels, mask), run(scores[p], labels[p], mask[p])
    for name in NAMES:
        assert same(before[name][p], after[name]), name


@SETTINGS
@given(batches, st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_independent_of_padding_width_and_padded_values(batch, extra, seed):
    scores, labels, mask = pad(batch)
    wide_s, wide_l, wide_m = pad(batch, width=scores.shape[1] + extra)
    gen = np.random.default_rng(seed)
    # Garbage in the padding: huge scores and high labels must not leak into any metric.
    wide_s = np.where(wide_m, wide_s, gen.standard_normal(wide_s.shape) * 1e6)
    wide_l = np.where(wide_m, wide_l, gen.integers(0, 5, wide_l.shape))
    before, after = run(scores, labels, mask), run(wide_s, wide_l, wide_m)
    for name in NAMES:
        assert same(before[name], after[name]), name


@SETTINGS
@given(
    st.lists(
        st.lists(
            st.tuples(st.floats(-1e3, 1e3), st.integers(0, 4)),
            min_size=1,
            max_size=12,
            unique_by=lambda d: d[0],
        ),
        min_size=1,
        max_size=4,
    ),
    st.randoms(use_true_random=False),
)
def test_without_ties_document_order_does_not_matter(batch, rnd):
    shuffled = [rnd.sample(q, len(q)) for q in batch]
    before, after = run(*pad(batch)), run(*pad(shuffled))
    for name in NAMES:
        assert same(before[name], after[name]), name


@SETTINGS
@given(batches)
def test_flat_api_agrees_with_padded(batch):
    scores, labels, mask = pad(batch)
    flat_s = np.concatenate([[s for s, _ in q] for q in batch]).astype(float)
    flat_l = np.concatenate([[l for _, l in q] for q in batch])
    qid = np.repeat(np.arange(len(batch)), [len(q) for q in batch])
    ndcg = M.metric_padded("ndcg@10", scores, labels, mask)
    ap = M.metric_padded("map", scores, labels, mask)
    flat_ndcg = M.ndcg_at_k(flat_s, flat_l, qid, k=10)
    flat_ap = M.average_precision(flat_s, flat_l, qid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of all-NaN values: NaN
        assert np.isclose(flat_ndcg, np.nanmean(ndcg), equal_nan=True)
        assert np.isclose(flat_ap, np.nanmean(ap), equal_nan=True)


@SETTINGS
@given(batches)
def test_integer_and_float_labels_give_the_same_metrics(batch):
    scores, labels, mask = pad(batch)
    ints, floats = run(scores, labels, mask), run(scores, labels.astype(np.float32), mask)
    for name in NAMES:
        assert same(ints[name], floats[name]), name


@SETTINGS
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from([-2.0, -0.5, -0.0, 0.0, 1.0, float("inf"), float("-inf"), np.nan]),
                st.booleans(),
            ),
            min_size=8,
            max_size=8,
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([np.float32, np.float64]),
)
def test_metrics_rank_as_the_losses_sort_order(rows, dtype):
    """Few distinct values force ties; infinities, NaN and padding anywhere in a row."""
    scores = np.array([[s for s, _ in row] for row in rows], dtype=dtype)
    mask = np.array([[m for _, m in row] for row in rows])
    ranked = Ranked(ranking_keys(scores, mask), np.zeros(scores.shape, int), mask)
    want = M.sort_order(torch.from_numpy(scores), torch.from_numpy(mask)).numpy()
    assert np.array_equal(ranked.order, want)
