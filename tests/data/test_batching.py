"""Pair sampling and query batching for the neural rankers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.data.batching import (
    PairBatches,
    PairSampler,
    QueryBatches,
)
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError


def make_set(labels_per_query: list[list[int]], n_features: int = 3) -> QuerySet:
    labels = np.concatenate([np.asarray(q, dtype=np.int32) for q in labels_per_query])
    qid = np.repeat(np.arange(len(labels_per_query)) + 100, [len(q) for q in labels_per_query])
    x = np.random.default_rng(0).normal(size=(len(labels), n_features)).astype(np.float32)
    return QuerySet.from_arrays(x, labels, qid)


def all_pairs(data: QuerySet, neighbours: bool) -> set[tuple[int, int]]:
    """Brute force: (hi, lo) row pairs the sampler may return."""
    out = set()
    for q in range(data.n_queries):
        rows = range(data.offsets[q], data.offsets[q + 1])
        present = sorted(set(int(data.labels[r]) for r in rows))
        for i in rows:
            for j in rows:
                li, lj = int(data.labels[i]), int(data.labels[j])
                if li > lj and (not neighbours or present.index(li) - present.index(lj) == 1):
                    out.add((i, j))
    return out


queries = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(queries, st.sampled_from(["all", "neighbours"]), st.sampled_from(["pairs", "documents"]))
def test_sampled_pairs_are_valid(labels: list[list[int]], mode: str, dist: str) -> None:
    data = make_set(labels)
    allowed = all_pairs(data, neighbours=mode == "neighbours")
    sampler = PairSampler(data, pairs=mode, distribution=dist)
    assert sampler.n_pairs == len(all_pairs(data, neighbours=mode == "neighbours"))
    if not allowed:
        with pytest.raises(UserError):
            sampler.sample(4)
        return
    batch = sampler.sample(300, torch.Generator().manual_seed(1))
    got = set(zip(batch.hi.tolist(), batch.lo.tolist()))
    assert got <= allowed  # same query, higher label first, neighbouring classes honoured
    assert (batch.label_hi > batch.label_lo).all()
    assert torch.equal(
        batch.label_hi, torch.as_tensor(data.labels[batch.hi.numpy()], dtype=torch.int64)
    )


def test_neighbours_skip_absent_classes_but_not_queries() -> None:
    # query 0 has labels {0, 1, 2}: only 2-1 and 1-0 pairs; query 1 has {0, 2}: the 2-0 pair stays
    data = make_set([[0, 1, 2, 0], [2, 0]])
    batch = PairSampler(data, pairs="neighbours").sample(2000, torch.Generator().manual_seed(0))
    gaps = set(zip(batch.label_hi.tolist(), batch.label_lo.tolist()))
    assert gaps == {(1, 0), (2, 1), (2, 0)}
    q_of_hi = data.query_index()[batch.hi.numpy()]
    assert set(q_of_hi[(batch.label_hi == 2).numpy() & (batch.label_lo == 0).numpy()]) == {1}


def test_pair_distribution_uniform_over_pairs() -> None:
    # query 0 has 1 x 3 pairs, query 1 has 2 x 2 = 4 pairs: "pairs" draws each of the 7 equally
    data = make_set([[1, 0, 0, 0], [1, 1, 0, 0]])
    n = 70_000
    batch = PairSampler(data, distribution="pairs").sample(n, torch.Generator().manual_seed(0))
    keys = batch.hi * 100 + batch.lo
    _, counts = torch.unique(keys, return_counts=True)
    assert len(counts) == 7
    np.testing.assert_allclose(counts.numpy() / n, 1 / 7, atol=0.01)
    # "documents": each of the 8 documents is the anchor equally often; query 0's relevant doc
    # is then in 1/8 (as anchor) + 3/8 * 1/1 (as partner of its 3 irrelevant docs) of the pairs
    batch = PairSampler(data, distribution="documents").sample(n, torch.Generator().manual_seed(0))
    assert (batch.hi == 0).float().mean().item() == pytest.approx(0.5, abs=0.01)


def test_big_query_is_not_materialised() -> None:
    # one query with 200k documents has ~1e10 pairs; tables stay O(documents) (its speed is
    # benchmarks/bench_pair_sampler.py's job, not a test's)
    n = 200_000
    labels = np.random.default_rng(0).integers(0, 5, size=n)
    data = QuerySet.from_arrays(np.zeros((n, 1), np.float32), labels, np.zeros(n, np.int64))
    sampler = PairSampler(data)
    assert sampler.n_pairs > 10**10
    assert all(v.shape == (n,) for v in sampler._t.values())
    batch = sampler.sample(100_000, torch.Generator().manual_seed(0))
    assert batch.hi.shape == (100_000,)
    assert (batch.label_hi > batch.label_lo).all()


def test_pair_batches_epochs_ranks_and_reproducibility() -> None:
    data = make_set([[0, 1, 2, 0, 1], [1, 0, 0], [2, 2, 0, 1]])
    sampler = PairSampler(data)
    single = PairBatches(sampler, batch_size=8, pairs_per_epoch=100, seed=3)
    assert len(single) == 13
    e0, e1 = [torch.cat([b.hi for b in single]) for _ in range(2)]
    assert e0.shape == (13 * 8,) and not torch.equal(e0, e1)  # a new draw per epoch
    again = PairBatches(sampler, batch_size=8, pairs_per_epoch=100, seed=3)
    assert torch.equal(torch.cat([b.hi for b in again]), e0)  # same seed, same pairs
    # DDP: the step's 8 pairs are split over the ranks, so both ranks take the single process's
    # 13 steps and the epoch still has 13 x 8 pairs in all.
    r0, r1 = (PairBatches(sampler, 8, 100, seed=3, rank=r, world_size=2) for r in (0, 1))
    assert len(r0) == len(r1) == 13
    h0, h1 = (torch.cat([b.hi for b in r]) for r in (r0, r1))
    assert h0.shape == h1.shape == (13 * 4,) and not torch.equal(h0, h1)
    r0, r1, r2 = (PairBatches(sampler, 8, 100, seed=3, rank=r, world_size=3) for r in range(3))
    assert [len(next(iter(r)).hi) for r in (r0, r1, r2)] == [3, 3, 2]  # uneven shares sum to 8


def test_query_batches_cover_each_query_once() -> None:
    lengths = [3, 1, 7, 2, 8, 5, 5, 16, 1, 4]
    data = make_set([[i % 3 for i in range(n)] for n in lengths])
    batches = QueryBatches(data, batch_queries=3, max_cells=20, cost_power=1, seed=1)
    rows = []
    for b in batches:
        assert b.rows.shape == b.mask.shape
        assert b.rows.shape[0] * b.rows.shape[1] <= max(20, b.rows.shape[1])  # cell budget
        assert b.rows.shape[0] <= 3
        rows.append(b.rows[b.mask])
        # each row of the batch is one whole query, padded at the end
        q = data.query_index()[b.rows[:, 0].numpy()]
        np.testing.assert_array_equal(b.mask.sum(1).numpy(), data.query_lengths[q])
    rows = torch.cat(rows).sort().values
    assert torch.equal(rows, torch.arange(data.n_docs))
    # lambda-style budget: B x L^2 <= max_cells unless a single query exceeds it
    for b in QueryBatches(data, batch_queries=8, max_cells=64, cost_power=2):
        assert b.rows.shape[0] == 1 or b.rows.shape[0] * b.rows.shape[1] ** 2 <= 64


def test_query_batches_ddp_ranks_take_equal_steps() -> None:
    data = make_set([[0, 1]] * 7)
    r0, r1 = (QueryBatches(data, batch_queries=2, rank=r, world_size=2) for r in (0, 1))
    b0, b1 = list(r0), list(r1)
    # A step's 2 queries are split over the 2 ranks: 7 batches of one query, 4 steps per rank
    # (one process: 4 batches of <= 2 queries, 4 steps).
    assert len(QueryBatches(data, batch_queries=2)) == 4
    assert len(b0) == len(b1) == 4 and all(b.rows.shape[0] == 1 for b in b0 + b1)
    seen = torch.cat([b.rows[b.mask] for b in b0 + b1]).unique()
    assert len(seen) == data.n_docs


def test_auto_pair_batch_size() -> None:
    from ltr_bench.data.batching import auto_pair_batch_size

    assert auto_pair_batch_size(9630) == 512  # MQ2008 Fold1: ~19 steps per epoch
    assert auto_pair_batch_size(723_000) == 4096  # MSLR-WEB10K fold
    assert auto_pair_batch_size(100) == 256
    assert auto_pair_batch_size(2 * 16 * 1024) == 2048
