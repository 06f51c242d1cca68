"""Benchmark: PairSampler on one huge query (200k documents, ~1e10 pairs) against the same number
of documents split into 2000 queries of 100. Target: sampling 100k pairs from the huge query takes
at most 3x as long as from the small queries (its tables are O(documents), never O(pairs)).

Both are measured in the same run, so the verdict is a ratio, not a wall time that depends on the
machine. Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_pair_sampler.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from ltr_bench.data.batching import PairSampler
from ltr_bench.data.queryset import QuerySet

N_DOCS = 200_000
N_PAIRS = 100_000
MAX_RATIO = 3.0


def make_set(n_queries: int) -> QuerySet:
    """``N_DOCS`` documents with random grades 0..4 over ``n_queries`` equal queries."""
    labels = np.random.default_rng(0).integers(0, 5, size=N_DOCS)
    qid = np.repeat(np.arange(n_queries, dtype=np.int64), N_DOCS // n_queries)
    return QuerySet.from_arrays(np.zeros((N_DOCS, 1), np.float32), labels, qid)


def best_time(sampler: PairSampler, repeats: int) -> float:
    """The fastest of ``repeats`` draws of ``N_PAIRS`` pairs (least disturbed by other load)."""
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        sampler.sample(N_PAIRS, torch.Generator().manual_seed(i))
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    huge = best_time(PairSampler(make_set(1)), args.repeats)
    small = best_time(PairSampler(make_set(2000)), args.repeats)
    ratio = huge / small
    print(f"one query of {N_DOCS} docs: {huge * 1e3:.1f} ms per {N_PAIRS} pairs")
    print(f"2000 queries of 100 docs: {small * 1e3:.1f} ms per {N_PAIRS} pairs")
    verdict = "ok" if ratio <= MAX_RATIO else "TOO SLOW"
    print(f"ratio {ratio:.2f} (target <= {MAX_RATIO}): {verdict}")
    return 0 if ratio <= MAX_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
