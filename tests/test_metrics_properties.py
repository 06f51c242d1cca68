"""Hypothesis property tests of ltr_bench.metrics: ranges, perfect rankings, invariance to
monotone score transforms, query order, padding width and (without ties) document order."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench import metrics as M
from ltr_bench.metrics.names import ranking_depth
from ltr_bench.metrics.order import stable_argsort, stable_top_k
from ltr_bench.metrics.per_query import raw_metric
from ltr_bench.metrics.ranked import Ranked

NAMES = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg", "map", "p@3", "mrr", "wta", "err@5", "pair_acc"]
SETTINGS = settings(max_examples=60, deadline=None)

# A batch: 1-6 queries of 1-12 documents, integer scores in a small range (many ties).
doc = st.tuples(st.integers(-3, 3), st.integers(0, 4))
batches = st.lists(st.lists(doc, min_size=1, max_size=12), min_size=1, max_size=6)


def pad(batch, width=None):
    width = width or max(len(q) for q in batch)
    scores = torch.zeros(len(batch), width, dtype=torch.float64)
    labels = torch.zeros(len(batch), width, dtype=torch.int64)
    mask = torch.zeros(len(batch), width, dtype=torch.bool)
    for i, q in enumerate(batch):
        scores[i, : len(q)] = torch.tensor([s for s, _ in q], dtype=torch.float64)
        labels[i, : len(q)] = torch.tensor([l for _, l in q])
        mask[i, : len(q)] = True
    return scores, labels, mask


def run(scores, labels, mask, names=NAMES):
    return M.evaluate_padded(scores, labels, mask, names, max_grade=4)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@SETTINGS
@given(batches)
def test_all_metrics_in_unit_interval(batch):
    for name, values in run(*pad(batch)).items():
        v = values[~values.isnan()]
        assert bool(((v >= 0) & (v <= 1 + 1e-12)).all()), name


@SETTINGS
@given(batches)
def test_scores_sorted_by_label_are_perfect(batch):
    scores, labels, mask = pad(batch)
    out = run(
        labels.to(torch.float64),
        labels,
        mask,
        ["ndcg@1", "ndcg@3", "ndcg", "map", "mrr", "wta", "pair_acc"],
    )
    for name, values in out.items():
        v = values[~values.isnan()]
        assert torch.allclose(v, torch.ones_like(v), atol=1e-12), name
    # NDCG is defined (and 1) for every query with a label > 0
    defined = ((labels > 0) & mask).any(1)
    assert not out["ndcg"][defined].isnan().any()


@SETTINGS
@given(batches, st.sampled_from(["cubic", "exp", "affine"]))
def test_invariant_to_strictly_monotone_score_transforms(batch, kind):
    scores, labels, mask = pad(batch)
    f = {
        "cubic": lambda x: 2 * x**3 + x - 7,  # exact on small integers
        "exp": lambda x: torch.exp(x / 3),
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
    p = torch.tensor(perm)
    before, after = run(scores, labels, mask), run(scores[p], labels[p], mask[p])
    for name in NAMES:
        assert same(before[name][p], after[name]), name


@SETTINGS
@given(batches, st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_independent_of_padding_width_and_padded_values(batch, extra, seed):
    scores, labels, mask = pad(batch)
    wide_s, wide_l, wide_m = pad(batch, width=scores.shape[1] + extra)
    gen = torch.Generator().manual_seed(seed)
    # Garbage in the padding: huge scores and high labels must not leak into any metric.
    wide_s = torch.where(wide_m, wide_s, torch.randn(wide_s.shape, generator=gen) * 1e6)
    wide_l = torch.where(wide_m, wide_l, torch.randint(0, 5, wide_l.shape, generator=gen))
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
    ndcg = M.ndcg_padded(scores, labels, mask, 10)
    ap = M.metric_padded("map", scores, labels, mask)
    flat_ndcg = M.ndcg_at_k(flat_s, flat_l, qid, k=10)
    flat_ap = M.average_precision(flat_s, flat_l, qid)
    assert np.isclose(flat_ndcg, M.mean_over_queries(ndcg).item(), equal_nan=True)
    assert np.isclose(flat_ap, M.mean_over_queries(ap).item(), equal_nan=True)


@SETTINGS
@given(batches)
def test_integer_and_float_labels_give_the_same_metrics(batch):
    scores, labels, mask = pad(batch)
    ints, floats = run(scores, labels, mask), run(scores, labels.to(torch.float32), mask)
    for name in NAMES:
        assert same(ints[name], floats[name]), name


@SETTINGS
@given(
    st.lists(
        st.lists(st.floats(allow_nan=False, width=32), min_size=8, max_size=8),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_fast_cpu_argsort_equals_torch_stable_sort(rows, dtype):
    keys = torch.tensor(rows, dtype=dtype)
    assert torch.equal(stable_argsort(keys), torch.sort(keys, dim=1, stable=True).indices)


@SETTINGS
@given(
    st.lists(
        st.lists(
            st.sampled_from([-2.0, -0.5, 0.0, 0.5, 1.0, 3.0, float("inf"), float("-inf")]),
            min_size=12,
            max_size=12,
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 12),
    st.sampled_from([torch.float32, torch.float64]),
)
def test_partial_top_k_equals_the_head_of_the_full_stable_sort(rows, k, dtype):
    """Few distinct values force ties across the k-th rank; infinities stand in for padding."""
    keys = torch.tensor(rows, dtype=dtype)
    full = torch.sort(keys, dim=1, stable=True).indices[:, :k]
    assert torch.equal(stable_top_k(keys, k), full)


@SETTINGS
@given(batches, st.integers(1, 12))
def test_cut_off_metrics_ranked_to_depth_equal_a_full_ranking(batch, k):
    scores, labels, mask = pad(batch)
    names = [f"ndcg@{k}", f"p@{k}", f"err@{k}", "wta"]
    full = Ranked(scores, labels, mask)
    partial = Ranked(scores, labels, mask, depth=ranking_depth([M.parse_metric(n) for n in names]))
    for name in names:
        spec = M.parse_metric(name)
        a, da = raw_metric(spec, full, 1, 4.0)
        b, db = raw_metric(spec, partial, 1, 4.0)
        assert torch.equal(da, db) and torch.allclose(a, b, atol=1e-12), name
