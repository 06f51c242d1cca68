"""Tests of ltr_bench.metrics: hand-computed cases, an independent per-query reference written
here in plain Python, ranx (an independent IR-metrics package), edge cases and bad input.

Random data deliberately has many score ties (scores drawn from a few integers), so the
tie-breaking rule (document order) is exercised everywhere.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from ltr_bench import metrics as M
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.metrics.flat import _evaluate_blocks
from ltr_bench.metrics.ranked import Ranked, ranking_keys

ALL_METRICS = [
    "ndcg@1",
    "ndcg@3",
    "ndcg@10",
    "ndcg",
    "map",
    "p@1",
    "p@5",
    "mrr",
    "wta",
    "err@5",
    "err",
    "pair_acc",
]


# ====================================================================== independent reference
def ref_order(scores):
    """Ranking by descending score, ties by document position (pure Python)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def ref_metric(name, scores, labels, threshold=1, max_grade=None):
    """One query's metric value, or None where it is undefined. Written from the papers'
    definitions, one document at a time, sharing nothing with ltr_bench.metrics."""
    order = ref_order(scores)
    ranked = [labels[i] for i in order]
    kind, _, k = name.partition("@")
    k = int(k) if k else len(ranked)
    n_rel = sum(1 for x in labels if x >= threshold)
    if kind == "ndcg":
        dcg = sum((2**x - 1) / math.log2(i + 2) for i, x in enumerate(ranked[:k]))
        best = sorted(labels, reverse=True)
        idcg = sum((2**x - 1) / math.log2(i + 2) for i, x in enumerate(best[:k]))
        return dcg / idcg if idcg > 0 else None
    if n_rel == 0 and kind in ("map", "p", "mrr", "wta"):
        return None
    if kind == "map":
        hits, total = 0, 0.0
        for i, x in enumerate(ranked):
            if x >= threshold:
                hits += 1
                total += hits / (i + 1)
        return total / n_rel
    if kind == "p":
        return sum(1 for x in ranked[:k] if x >= threshold) / k
    if kind == "mrr":
        return next(1.0 / (i + 1) for i, x in enumerate(ranked) if x >= threshold)
    if kind == "wta":
        return 1.0 if ranked[0] >= threshold else 0.0
    if kind == "err":
        if max(labels) == 0:
            return None
        g_max = max(labels) if max_grade is None else max_grade
        err, p_reach = 0.0, 1.0
        for i, x in enumerate(ranked[:k]):
            stop = (2**x - 1) / 2**g_max
            err += p_reach * stop / (i + 1)
            p_reach *= 1 - stop
        return err
    if kind == "pair_acc":
        good = pairs = 0
        for a in range(len(ranked)):
            for b in range(a + 1, len(ranked)):
                if ranked[a] != ranked[b]:
                    pairs += 1
                    good += ranked[a] > ranked[b]
        return good / pairs if pairs else None
    raise AssertionError(name)


def random_queries(rng, n_queries=60, max_len=25, n_score_levels=4, max_label=4):
    """Lists of (scores, labels) with ties, empty-of-relevant queries and single-doc queries."""
    out = []
    for _ in range(n_queries):
        n = int(rng.integers(1, max_len + 1))
        scores = rng.integers(0, n_score_levels, n).astype(float)
        labels = rng.integers(0, max_label + 1, n) * (rng.random(n) < 0.6)
        if rng.random() < 0.15:
            labels[:] = 0
        out.append((scores.tolist(), labels.astype(int).tolist()))
    return out


def to_padded(queries, width=None, pad_score=0.0, pad_label=0):
    width = width or max(len(s) for s, _ in queries)
    q = len(queries)
    scores = torch.full((q, width), pad_score, dtype=torch.float64)
    labels = torch.full((q, width), pad_label, dtype=torch.int64)
    mask = torch.zeros((q, width), dtype=torch.bool)
    for i, (s, l) in enumerate(queries):
        scores[i, : len(s)] = torch.tensor(s, dtype=torch.float64)
        labels[i, : len(l)] = torch.tensor(l)
        mask[i, : len(s)] = True
    return scores, labels, mask


def to_queryset(queries, qids=None):
    lengths = [len(s) for s, _ in queries]
    qids = np.arange(len(queries)) * 10 + 3 if qids is None else np.asarray(qids)
    qs = QuerySet.from_arrays(
        np.zeros((sum(lengths), 1), np.float32),
        np.concatenate([l for _, l in queries]),
        np.repeat(qids, lengths),
    )
    return qs, np.concatenate([s for s, _ in queries])


@pytest.fixture(scope="module")
def queries():
    return random_queries(np.random.default_rng(7))


def _close(a, b):
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


# ====================================================================== hand-computed cases
# One query, scores [3, 2, 1, 0] and labels [0, 2, 1, 0]: ranked labels 0, 2, 1, 0.
HAND = dict(scores=[3.0, 2.0, 1.0, 0.0], labels=[0, 2, 1, 0])
LOG3 = math.log2(3)
HAND_EXPECTED = {
    # DCG@1 = 0, IDCG@1 = 3
    "ndcg@1": 0.0,
    # DCG@3 = 0/1 + 3/log2(3) + 1/log2(4) ; IDCG@3 = 3/1 + 1/log2(3) + 0
    "ndcg@3": (3 / LOG3 + 0.5) / (3 + 1 / LOG3),
    # k = 10 > 4 documents: the whole query, same as @3 here (the 4th doc has gain 0)
    "ndcg@10": (3 / LOG3 + 0.5) / (3 + 1 / LOG3),
    # relevant (label >= 1) at ranks 2 and 3: (P@2 + P@3) / 2 = (1/2 + 2/3) / 2
    "map": (0.5 + 2 / 3) / 2,
    "p@1": 0.0,
    "p@2": 0.5,
    "p@5": 2 / 5,  # divided by k = 5, not by the 4 documents
    "mrr": 0.5,  # first relevant document at rank 2
    "wta": 0.0,  # the top document is irrelevant
    # g_max = 2: R = 0, 3/4, 1/4, 0 -> ERR = 1/2 * 3/4 + 1/3 * 1/4 * (1 - 3/4)
    "err": 0.375 + 1 / 48,
    "err@2": 0.375,
    # pairs with different labels: (2,0),(2,1),(2,0'),(1,0),(1,0') = 5; wrong: 0 above 2 and
    # 0 above 1 -> 3 of 5 correct
    "pair_acc": 3 / 5,
}


@pytest.mark.parametrize("name", sorted(HAND_EXPECTED))
def test_hand_computed_single_query(name):
    s = torch.tensor([HAND["scores"]])
    l = torch.tensor([HAND["labels"]])
    got = M.metric_padded(name, s, l, torch.ones_like(s, dtype=torch.bool))
    assert got.shape == (1,)
    assert got.item() == pytest.approx(HAND_EXPECTED[name], abs=1e-12)


def test_hand_computed_perfect_two_document_query():
    # scores [2, 1], labels [1, 0]: the relevant document is on top.
    s, l = torch.tensor([[2.0, 1.0]]), torch.tensor([[1, 0]])
    m = torch.ones_like(s, dtype=torch.bool)
    names = ["ndcg", "map", "p@2", "mrr", "wta", "err", "pair_acc"]
    out = {name: M.metric_padded(name, s, l, m) for name in names}
    # ERR with g_max = 1: R = (2^1 - 1) / 2^1 = 1/2 at rank 1 -> 1/2
    want = {
        "ndcg": 1.0,
        "map": 1.0,
        "p@2": 0.5,
        "mrr": 1.0,
        "wta": 1.0,
        "err": 0.5,
        "pair_acc": 1.0,
    }
    assert {k: v.item() for k, v in out.items()} == pytest.approx(want)


def test_hand_computed_map_threshold_two():
    # Only the label-2 document is relevant; it is at rank 2 -> AP = P@2 / 1 = 1/2.
    s, l = torch.tensor([HAND["scores"]]), torch.tensor([HAND["labels"]])
    m = torch.ones_like(s, dtype=torch.bool)
    assert M.metric_padded("map", s, l, m, relevance_threshold=2).item() == pytest.approx(0.5)
    assert M.metric_padded("mrr", s, l, m, relevance_threshold=2).item() == pytest.approx(0.5)


def test_ties_broken_by_document_order():
    # All scores tie: the ranking is the input order. Labels [0, 1]: relevant doc at rank 2.
    s, m = torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool)
    assert M.metric_padded("ndcg", s, torch.tensor([[0, 1]]), m).item() == pytest.approx(1 / LOG3)
    assert M.metric_padded("ndcg", s, torch.tensor([[1, 0]]), m).item() == pytest.approx(1.0)
    assert M.metric_padded("mrr", s, torch.tensor([[0, 1]]), m).item() == 0.5
    assert M.metric_padded("pair_acc", s, torch.tensor([[0, 1]]), m).item() == 0.0
    # Flat API: the same pair of documents given in the opposite order.
    assert M.ndcg_at_k([5.0, 5.0], [0, 1], [1, 1], k=2) == pytest.approx(1 / LOG3)
    assert M.ndcg_at_k([5.0, 5.0], [1, 0], [1, 1], k=2) == pytest.approx(1.0)


def test_ranks_gains_discounts_ideal_dcg():
    s = torch.tensor([[0.5, 2.0, 0.5, 9.0, 0.0]])
    m = torch.tensor([[True, True, True, True, False]])
    # order: 9.0 (doc 3), 2.0 (doc 1), 0.5 (doc 0, earlier), 0.5 (doc 2), then the padding
    assert M.ranks_padded(s, m).tolist() == [[3, 2, 4, 1, 5]]
    assert M.gains(torch.tensor([0, 1, 2, 3])).tolist() == [0.0, 1.0, 3.0, 7.0]
    assert M.discounts(torch.tensor([1, 3, 7])).tolist() == pytest.approx([1.0, 0.5, 1 / 3])
    labels = torch.tensor([[1, 0, 3, 2, 4]])  # the 4 is padding and must not count
    # ideal order 3, 2, 1, 0: 7 + 3/log2(3) + 1/2
    assert M.ideal_dcg(labels, m).item() == pytest.approx(7 + 3 / LOG3 + 0.5)
    assert M.ideal_dcg(labels, m, k=1).item() == pytest.approx(7.0)


def test_building_blocks_give_ndcg_and_lambdarank_swap_delta(queries):
    s, l, m = to_padded(queries)
    ranks = M.ranks_padded(s, m)
    dcg = (torch.where(m, M.gains(l), 0.0) * M.discounts(ranks)).sum(1)
    idcg = M.ideal_dcg(l, m)
    ok = idcg > 0
    # the losses' torch building blocks give the NumPy metric's NDCG
    assert torch.allclose((dcg / idcg)[ok], torch.from_numpy(M.metric_padded("ndcg", s, l, m))[ok])
    # LambdaRank: |delta NDCG| of swapping docs i and j = |g_i - g_j| |d(r_i) - d(r_j)| / IDCG
    g, d = M.gains(l), M.discounts(ranks)
    for q in torch.nonzero(ok & (m.sum(1) >= 4)).flatten()[:10].tolist():
        for i, j in [(0, 1), (0, 3), (2, 3)]:
            delta = abs(g[q, i] - g[q, j]) * abs(d[q, i] - d[q, j]) / idcg[q]
            assert delta.item() == pytest.approx(_swap_delta(s[q], l[q], m[q], i, j), abs=1e-12)


def _swap_delta(scores, labels, mask, i, j):
    """NDCG change when docs i and j exchange their ranks (by exchanging their scores and
    positions, so that ties keep the same ranks), computed by the reference."""
    n = int(mask.sum())
    sc, lb = scores[:n].tolist(), labels[:n].tolist()
    order = ref_order(sc)
    new_order = [j if d == i else i if d == j else d for d in order]
    ranked_before = [lb[d] for d in order]
    ranked_after = [lb[d] for d in new_order]
    best = sorted(lb, reverse=True)
    idcg = sum((2**x - 1) / math.log2(r + 2) for r, x in enumerate(best))

    def dcg(xs: list) -> float:
        return sum((2**x - 1) / math.log2(r + 2) for r, x in enumerate(xs))

    return abs(dcg(ranked_after) - dcg(ranked_before)) / idcg


# ====================================================================== vs the reference
@pytest.mark.parametrize("name", ALL_METRICS)
def test_padded_matches_reference(queries, name):
    s, l, m = to_padded(queries)
    got = M.metric_padded(name, s, l, m, no_relevant="drop", relevance_threshold=0.5)
    assert got.shape == (len(queries),)
    for q, (sc, lb) in enumerate(queries):
        want = ref_metric(name, sc, lb, max_grade=int(l.max()))
        want = math.nan if want is None or max(lb) == 0 else want
        assert _close(got[q].item(), want), (name, q, sc, lb, got[q].item(), want)


@pytest.mark.parametrize("threshold", [1, 2, 3])
def test_binary_metrics_threshold_match_reference(queries, threshold):
    s, l, m = to_padded(queries)
    fns = {
        "map": lambda: M.metric_padded("map", s, l, m, relevance_threshold=threshold),
        "p@3": lambda: M.metric_padded("p@3", s, l, m, relevance_threshold=threshold),
        "mrr": lambda: M.metric_padded("mrr", s, l, m, relevance_threshold=threshold),
        "wta": lambda: M.metric_padded("wta", s, l, m, relevance_threshold=threshold),
    }
    for name, fn in fns.items():
        got = fn()
        for q, (sc, lb) in enumerate(queries):
            want = ref_metric(name, sc, lb, threshold=threshold)
            assert _close(got[q].item(), math.nan if want is None else want), (name, q)


@pytest.mark.parametrize("policy,fill", [("drop", math.nan), ("zero", 0.0), ("one", 1.0)])
def test_evaluate_matches_reference_and_policy(queries, policy, fill):
    qs, scores = to_queryset(queries)
    res = M.evaluate(scores, qs, ALL_METRICS, no_relevant=policy)
    has_rel = np.array([max(lb) >= 1 for _, lb in queries])
    kept = has_rel if policy == "drop" else np.ones_like(has_rel)
    assert res.n_dropped == int((~kept).sum())
    assert (~has_rel).sum() > 3  # the data does contain queries without relevant documents
    np.testing.assert_array_equal(res.qids, qs.query_ids[kept])
    g_max = max(max(lb) for _, lb in queries)
    for name in ALL_METRICS:
        want = []
        for (sc, lb), keep, rel in zip(queries, kept, has_rel):
            if keep:
                v = ref_metric(name, sc, lb, max_grade=g_max) if rel else None
                want.append(fill if v is None else v)
        np.testing.assert_allclose(res.per_query[name], want, rtol=1e-12, atol=1e-12)
        assert res.means[name] == pytest.approx(np.nanmean(want), abs=1e-12)
    assert res.policy == {
        "no_relevant": policy,
        "tie_break": "document_order",
        "relevance_threshold": 1,
        "err_max_grade": float(g_max),
    }
    frame = res.to_frame()
    assert list(frame.columns) == ALL_METRICS and frame.index.name == "qid"
    assert frame.shape == (int(kept.sum()), len(ALL_METRICS))


def test_evaluate_default_names_and_graded_threshold(queries):
    qs, scores = to_queryset(queries)
    res = M.evaluate(scores, qs)
    assert tuple(res.means) == M.DEFAULT_METRICS
    res2 = M.evaluate(scores, qs, ["map", "ndcg@5"], relevance_threshold=3)
    kept = [max(lb) >= 3 for _, lb in queries]
    assert len(res2.qids) == sum(kept)
    want = [ref_metric("map", sc, lb, threshold=3) for (sc, lb), k in zip(queries, kept) if k]
    np.testing.assert_allclose(res2.per_query["map"], want, rtol=1e-12)


def test_pair_accuracy_matches_sklearn_auc_for_binary_labels(queries):
    from sklearn.metrics import roc_auc_score

    s, l, m = to_padded(queries)
    binary = (l >= 2).long()
    got = M.metric_padded("pair_acc", s, binary, m)
    checked = 0
    for q, (sc, _) in enumerate(queries):
        y = binary[q, : len(sc)].numpy()
        if 0 < y.sum() < len(y):
            # AUC of the tie-broken ranking (-rank as score) is the fraction of correct pairs
            rank_score = -np.argsort(np.lexsort((np.arange(len(sc)), -np.asarray(sc))))
            assert got[q].item() == pytest.approx(roc_auc_score(y, rank_score), abs=1e-12)
            checked += 1
        else:
            assert math.isnan(got[q].item())
    assert checked > 20


# ====================================================================== vs ranx
# ranx's evaluate in a process of its own with numba's JIT off: the same ranx code, run as plain
# Python (80 queries take ~0.05 s), without the ~20-30 s compile a fresh environment pays
RANX_EVALUATE = """
import json, sys, warnings
import ranx
qrels, run, metrics = json.load(sys.stdin)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    out = ranx.evaluate(qrels, run, metrics, return_mean=False, threads=1)
json.dump({m: [float(v) for v in out[m]] for m in metrics}, sys.stdout)
"""


@pytest.fixture(scope="session")
def ranx_results():
    """One combined ranx call on random queries: ours name -> ranx's per-query values."""
    if importlib.util.find_spec("ranx") is None:
        pytest.skip("ranx is not installed")
    queries = random_queries(np.random.default_rng(11), n_queries=80)
    queries = [q for q in queries if max(q[1]) >= 1]  # ranx scores undefined queries as 0
    qrels, run = {}, {}
    for i, (sc, lb) in enumerate(queries):
        order = ref_order(sc)  # feed ranx scores already tie-broken by document order
        qrels[f"q{i:03d}"] = {f"d{j}": int(lb[j]) for j in range(len(sc))}
        run[f"q{i:03d}"] = {f"d{j}": float(len(sc) - order.index(j)) for j in range(len(sc))}
    names = {
        "ndcg@1": "ndcg_burges@1",
        "ndcg@3": "ndcg_burges@3",
        "ndcg@10": "ndcg_burges@10",
        "ndcg": "ndcg_burges",
        "map": "map",
        "map_l2": "map-l2",
        "p@1": "precision@1",
        "p@5": "precision@5",
        "mrr": "mrr",
        "mrr_l3": "mrr-l3",
        "wta": "precision@1",
    }
    done = subprocess.run(
        [sys.executable, "-c", RANX_EVALUATE],
        input=json.dumps([qrels, run, sorted(set(names.values()))]),
        env={**os.environ, "NUMBA_DISABLE_JIT": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    out = json.loads(done.stdout)
    return queries, {ours: np.asarray(out[theirs]) for ours, theirs in names.items()}


def test_matches_ranx(ranx_results):
    queries, theirs = ranx_results
    qs, scores = to_queryset(queries)
    for ours, want in theirs.items():
        name, _, level = ours.partition("_l")
        threshold = int(level) if level else 1
        res = M.evaluate(scores, qs, [name], relevance_threshold=threshold, no_relevant="zero")
        np.testing.assert_allclose(res.per_query[name], want, rtol=1e-10, atol=1e-12, err_msg=ours)


# ====================================================================== flat API
def test_flat_api_non_contiguous_qids_and_public_functions(queries):
    qs, scores = to_queryset(queries)
    labels, qid = qs.labels, qs.qid
    res = M.evaluate(scores, qs, ["ndcg@10", "map"])
    idx = _interleave(qid, np.random.default_rng(3))
    assert not np.all(np.diff(qid[idx]) == 0)  # really interleaved
    assert M.ndcg_at_k(scores[idx], labels[idx], qid[idx], k=10) == pytest.approx(
        res.means["ndcg@10"], abs=1e-12
    )
    assert M.average_precision(scores[idx], labels[idx], qid[idx]) == pytest.approx(
        res.means["map"], abs=1e-12
    )


def _interleave(qid, rng):
    """A document order that interleaves the queries but keeps each query's internal order."""
    key = rng.random(len(qid))
    idx = np.argsort(key, kind="stable")
    # within each query, re-assign positions so the query's documents keep their relative order
    out = idx.copy()
    for q in np.unique(qid):  # test helper only
        slots = np.flatnonzero(qid[idx] == q)
        out[slots] = np.flatnonzero(qid == q)
    return out


def test_flat_api_threshold_and_no_relevant_queries():
    scores = [1.0, 2.0, 3.0, 1.0, 2.0]
    labels = [0, 1, 2, 0, 0]  # query 8 has no relevant document and is left out of the mean
    qid = [7, 7, 7, 8, 8]
    # query 7 ranked labels 2, 1, 0 -> AP = 1 (threshold 1); threshold 2 -> AP = 1 too
    assert M.average_precision(scores, labels, qid) == pytest.approx(1.0)
    assert M.average_precision([3.0, 2.0, 1.0], [0, 1, 2], [1, 1, 1], threshold=2) == (
        pytest.approx(1 / 3)
    )
    assert M.ndcg_at_k(scores, labels, qid, k=3) == pytest.approx(1.0)
    assert math.isnan(M.ndcg_at_k([1.0, 2.0], [0, 0], [1, 1], k=3))


def test_evaluate_accepts_torch_scores_and_empty_queryset(queries):
    qs, scores = to_queryset(queries)
    a = M.evaluate(scores, qs, ["ndcg@5"])
    b = M.evaluate(torch.tensor(scores, dtype=torch.float32), qs, ["ndcg@5"])
    np.testing.assert_allclose(a.per_query["ndcg@5"], b.per_query["ndcg@5"])
    empty = QuerySet.from_arrays(np.zeros((0, 1)), np.zeros(0, int), np.zeros(0, int))
    res = M.evaluate(np.zeros(0), empty, ["ndcg@5", "pair_acc"])
    assert len(res.qids) == 0 and math.isnan(res.means["ndcg@5"])


# ====================================================================== memory bounds
def test_small_chunks_give_identical_results(queries):
    qs, scores = to_queryset(queries)
    specs = [M.parse_metric(n) for n in ALL_METRICS]
    args = (scores, qs.labels, qs.offsets, specs, 1, 4.0)
    big = _evaluate_blocks(*args)
    small = _evaluate_blocks(*args, max_elements=16)
    for name in ALL_METRICS:
        np.testing.assert_allclose(big[0][name], small[0][name], rtol=1e-12)
        np.testing.assert_array_equal(big[1][name], small[1][name])
    np.testing.assert_array_equal(big[2], small[2])


# ====================================================================== odd padding / scores
def test_interleaved_mask_and_infinite_scores():
    # Padding before real documents, and a real document scored -inf (ties with the padding).
    s = torch.tensor([[9.0, -math.inf, 0.0, 5.0, -math.inf]])
    l = torch.tensor([[3, 1, 0, 0, 2]])
    m = torch.tensor([[False, True, False, True, True]])
    # real docs in order: (-inf, 1), (5, 0), (-inf, 2) -> ranked labels 0, 1, 2
    want = ref_metric("ndcg", [-math.inf, 5.0, -math.inf], [1, 0, 2])
    assert M.metric_padded("ndcg", s, l, m).item() == pytest.approx(want, abs=1e-12)
    assert M.ranks_padded(s, m)[0, [1, 3, 4]].tolist() == [2, 1, 3]
    assert M.metric_padded("p@2", s, l, m).item() == pytest.approx(0.5)


def test_float32_and_integer_inputs():
    s = torch.tensor([[1, 3, 2]], dtype=torch.int32)
    l = torch.tensor([[0, 1, 2]], dtype=torch.int32)
    m = torch.ones(1, 3, dtype=torch.bool)
    a = M.metric_padded("ndcg@2", s, l, m)
    b = M.metric_padded("ndcg@2", s.float(), l.float(), m)
    c = M.metric_padded("ndcg@2", s.bfloat16(), l, m)  # bfloat16 has no NumPy type: widened
    assert a.dtype == np.float64 and a.item() == pytest.approx(b.item()) == c.item()


# ====================================================================== bad input
@pytest.mark.parametrize("bad", ["ndcg@0", "ndcg@x", "foo", "map@5", "p", "NDCG @3", "mrr@2"])
def test_unknown_metric_names_raise_user_error(bad, queries):
    qs, scores = to_queryset(queries)
    with pytest.raises(UserError, match="valid metrics are ndcg@k, map, p@k"):
        M.evaluate(scores, qs, ["ndcg@3", bad])


def test_metric_names_are_normalised():
    assert M.parse_metric(" NDCG@10 ") == M.MetricSpec("ndcg@10", "ndcg", 10)
    assert M.parse_metric("pair_acc") == M.MetricSpec("pair_acc", "pair_acc", None)
    assert M.parse_metric("err") == M.MetricSpec("err", "err", None)


def test_bad_inputs_raise_user_error(queries):
    qs, scores = to_queryset(queries)
    with pytest.raises(UserError, match="no_relevant='skip'"):
        M.evaluate(scores, qs, no_relevant="skip")
    with pytest.raises(UserError, match="one score per document"):
        M.evaluate(scores[:-1], qs)
    bad = scores.copy()
    bad[3] = np.nan
    with pytest.raises(UserError, match="1 NaN"):
        M.evaluate(bad, qs)
    with pytest.raises(UserError, match="max_grade=2"):
        M.evaluate(scores, qs, ["err@5"], max_grade=2)
    with pytest.raises(UserError, match="non-negative"):
        M.ndcg_at_k([1.0, 2.0], [-1, 1], [1, 1])
    with pytest.raises(UserError, match="qid has 1 entries"):
        M.ndcg_at_k([1.0, 2.0], [0, 1], [1])
    with pytest.raises(UserError, match="positive"):
        M.ndcg_at_k([1.0, 2.0], [0, 1], [1, 1], k=0)
    with pytest.raises(ValueError, match="same"):
        M.metric_padded("ndcg", np.zeros((2, 3)), np.zeros((2, 4)), np.ones((2, 3), dtype=bool))


# ====================================================================== sorting paths
def test_metrics_rank_as_the_losses_sort_order():
    """The NumPy ranking of the metrics and torch's :func:`sort_order` of the losses agree: ties
    by column, NaN and -inf scores last among real documents, padding anywhere in a row last."""
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        x = (rng.integers(-3, 4, (300, 37)) * 0.5).astype(dtype)
        for value, share in ((math.inf, 0.05), (-math.inf, 0.05), (-0.0, 0.05), (math.nan, 0.03)):
            x[rng.random(x.shape) < share] = value  # -0.0 ties with +0.0
        mask = rng.random(x.shape) < 0.8
        ranked = Ranked(ranking_keys(x, mask), np.zeros(x.shape, int), mask)
        want = M.sort_order(torch.from_numpy(x), torch.from_numpy(mask)).numpy()
        assert np.array_equal(ranked.order, want)


def test_sort_order_accepts_grad_half_and_int_masks():
    s = torch.tensor([[0.5, 2.0, 0.5, 9.0]], requires_grad=True)
    m = torch.tensor([[1, 1, 1, 0]])  # an integer mask
    assert M.sort_order(s, m).tolist() == [[1, 0, 2, 3]]
    assert M.sort_order(s.detach().half(), m).tolist() == [[1, 0, 2, 3]]
    assert M.sort_order(s.detach().bfloat16(), m).tolist() == [[1, 0, 2, 3]]
    l = torch.tensor([[0, 2, 1, 4]])
    assert M.ideal_dcg(l, m).item() == pytest.approx(3 + 1 / LOG3)


def test_nan_scores_rank_last_among_real_documents():
    s = torch.tensor([[math.nan, 1.0, 0.0, 7.0]])
    l = torch.tensor([[2, 0, 1, 3]])
    m = torch.tensor([[True, True, True, False]])
    assert M.ranks_padded(s, m)[0, :3].tolist() == [3, 1, 2]
    assert M.metric_padded("mrr", s, l, m).item() == pytest.approx(0.5)


def test_ideal_dcg_integer_and_float_paths_agree(queries):
    _, l, m = to_padded(queries)
    for k in (None, 1, 3, 10, 100):
        a = M.ideal_dcg(l, m, k)
        b = M.ideal_dcg(l.double(), m, k)  # float labels: sorting path
        assert torch.allclose(a, b, rtol=1e-13, atol=1e-13), k
    many = torch.tensor([[70, 3, 0, 65]])  # more than 64 grades: sorting path for integers too
    assert M.ideal_dcg(many, torch.ones_like(many, dtype=torch.bool), 2).item() == pytest.approx(
        (2.0**70 - 1) + (2.0**65 - 1) / LOG3
    )


def test_zero_width_batch():
    e = torch.zeros(3, 0)
    for name in ALL_METRICS:
        got = M.metric_padded(name, e, e.long(), e.bool(), no_relevant="zero")
        assert got.tolist() == [0.0] * 3


def test_float32_and_float64_scores_give_the_same_metrics(queries):
    qs, scores = to_queryset(queries)
    a = M.evaluate(scores.astype(np.float32), qs, ALL_METRICS)
    b = M.evaluate(scores, qs, ALL_METRICS)
    for name in ALL_METRICS:
        np.testing.assert_allclose(a.per_query[name], b.per_query[name], rtol=1e-12)


# ====================================================================== real data
@pytest.mark.realdata
def test_real_mq2008_fold_matches_reference():
    import os
    from pathlib import Path

    root = Path(
        os.environ.get(
            "LTR_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "letor"
        )
    )
    path = root / "MQ2008" / "Fold1" / "test.txt"
    if not path.exists():
        pytest.skip(f"{path} not found (set LTR_DATA)")
    from ltr_bench.data.letor import load_letor

    qs = load_letor(path, n_features=46)
    scores = qs.features[:, 0].astype(np.float32)  # one feature as the ranker: many ties
    names = ["ndcg@1", "ndcg@10", "map", "p@5", "mrr", "err@10", "pair_acc"]
    res = M.evaluate(scores, qs, names)
    assert res.n_dropped > 0 and len(res.qids) + res.n_dropped == qs.n_queries
    kept = np.flatnonzero(np.isin(qs.query_ids, res.qids))
    for name in names:
        want = []
        for q in kept:
            sl = slice(qs.offsets[q], qs.offsets[q + 1])
            v = ref_metric(name, scores[sl].tolist(), qs.labels[sl].tolist(), max_grade=2)
            want.append(math.nan if v is None else v)
        np.testing.assert_allclose(res.per_query[name], want, rtol=1e-10, err_msg=name)
