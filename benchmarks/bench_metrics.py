"""Benchmark: vectorised NDCG@10 over 10k queries (~120 documents each, MSLR-WEB10K-shaped)
against per-query Python loops. Target: >= 10x faster than a per-query loop.

Three loop baselines, all measured in the same run, so the ratio is not flattered by the choice:
  * python: plain Python per query (sorted() and math.log2), the usual hand-written evaluation;
  * padded: this package's own metric_padded called once per query (what batching over queries
    buys);
  * numpy : a tuned NumPy per query (stable argsort, dot products) -- the strongest loop.

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_metrics.py [--queries N]
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

from ltr_bench.data.queryset import QuerySet
from ltr_bench.metrics import evaluate, metric_padded, ndcg_at_k


def make_data(n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat scores, labels (MSLR-like grade frequencies) and qids; scores have ties."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(60, 181, n_queries)  # mean 120
    n = int(lengths.sum())
    labels = rng.choice(5, size=n, p=[0.52, 0.32, 0.13, 0.02, 0.01]).astype(np.int32)
    scores = np.round(labels + rng.normal(0, 1.5, n), 1)  # rounded: many ties
    qid = np.repeat(np.arange(n_queries, dtype=np.int64), lengths)
    return scores, labels, qid


def ndcg_loop_python(scores: np.ndarray, labels: np.ndarray, offsets: np.ndarray, k: int) -> float:
    """Baseline: plain Python per query, ties by document order, queries with IDCG = 0 dropped."""
    s_all, l_all = scores.tolist(), labels.tolist()
    values = []
    for q in range(len(offsets) - 1):
        lo, hi = int(offsets[q]), int(offsets[q + 1])
        s, lab = s_all[lo:hi], l_all[lo:hi]
        order = sorted(range(hi - lo), key=lambda i: (-s[i], i))
        dcg = sum((2 ** lab[i] - 1) / math.log2(r + 2) for r, i in enumerate(order[:k]))
        ideal = sorted(lab, reverse=True)[:k]
        idcg = sum((2**x - 1) / math.log2(r + 2) for r, x in enumerate(ideal))
        if idcg > 0:
            values.append(dcg / idcg)
    return sum(values) / len(values)


def ndcg_loop_padded(scores: np.ndarray, labels: np.ndarray, offsets: np.ndarray, k: int) -> float:
    """Baseline: the package's padded NDCG, called on one query at a time."""
    values = []
    for q in range(len(offsets) - 1):
        lo, hi = offsets[q], offsets[q + 1]
        s, lab = scores[lo:hi][None], labels[lo:hi][None]
        v = metric_padded(f"ndcg@{k}", s, lab, np.ones(s.shape, dtype=bool)).item()
        if not math.isnan(v):
            values.append(v)
    return sum(values) / len(values)


def ndcg_loop(scores: np.ndarray, labels: np.ndarray, offsets: np.ndarray, k: int) -> float:
    """Baseline: tuned NumPy per query, ties by document order, queries with IDCG = 0 dropped."""
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    values = []
    for q in range(len(offsets) - 1):
        s = scores[offsets[q] : offsets[q + 1]]
        g = 2.0 ** labels[offsets[q] : offsets[q + 1]] - 1.0
        top = g[np.argsort(-s, kind="stable")[:k]]
        ideal = np.sort(g)[::-1][:k]
        idcg = float(ideal @ disc[: len(ideal)])
        if idcg > 0:
            values.append(float(top @ disc[: len(top)]) / idcg)
    return float(np.mean(values))


def best_of(fn, repeats: int) -> tuple[float, object]:
    """Fastest of ``repeats`` timed calls, after one untimed warm-up call (the first calls of a
    process pay for page faults of fresh allocations; every contender gets the same treatment)."""
    out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    scores, labels, qid = make_data(args.queries)  # float64 scores, exactly float32 values
    scores32 = scores.astype(np.float32)  # what neural rankers give; same ranking and ties
    data = QuerySet.from_arrays(np.zeros((len(labels), 0), np.float32), labels, qid)
    offsets = data.offsets
    l_pad, mask = data.pad()
    print(
        f"data: {args.queries} queries, {len(labels)} documents, "
        f"max length {mask.shape[1]}, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"
    )

    loops = {
        "python": best_of(lambda: ndcg_loop_python(scores, labels, offsets, 10), args.repeats),
        "padded": best_of(lambda: ndcg_loop_padded(scores, labels, offsets, 10), 1),
        "numpy": best_of(lambda: ndcg_loop(scores, labels, offsets, 10), args.repeats),
    }
    v_ref = loops["numpy"][1]
    print(f"NDCG@10 = {v_ref:.6f} (every implementation below agrees to 1e-12)")
    for name, (t, v) in loops.items():
        assert abs(v - v_ref) < 1e-12, (name, v, v_ref)
        print(f"  per-query loop, {name:6s}           : {t * 1e3:8.1f} ms")

    flat = {}
    for label, s in (("float64", scores), ("float32", scores32)):
        s_pad = data.pad(s)[0]
        t_flat, v_flat = best_of(lambda s=s: ndcg_at_k(s, labels, qid, k=10), args.repeats)
        t_eval, res = best_of(lambda s=s: evaluate(s, data, ["ndcg@10"]), args.repeats)
        t_pad, v_pad = best_of(
            lambda s_pad=s_pad: float(np.nanmean(metric_padded("ndcg@10", s_pad, l_pad, mask))),
            args.repeats,
        )
        t_all, _ = best_of(lambda s=s: evaluate(s, data), args.repeats)
        for v in (v_flat, res.means["ndcg@10"], v_pad):
            assert abs(v - v_ref) < 1e-12, (label, v, v_ref)
        flat[label] = t_flat
        print(f"{label} scores:")
        print(f"  ndcg_at_k (flat, incl. grouping) : {t_flat * 1e3:8.1f} ms")
        print(f"  evaluate(QuerySet, ['ndcg@10'])  : {t_eval * 1e3:8.1f} ms")
        print(f"  metric_padded (pre-padded arrays): {t_pad * 1e3:8.1f} ms")
        print(f"  evaluate, 6 default metrics      : {t_all * 1e3:8.1f} ms")
    for label, t_flat in flat.items():
        for name, (t, _) in loops.items():
            ratio = t / t_flat
            print(
                f"RESULT ndcg_at_k ({label}) vs per-query {name:6s} loop: {ratio:6.1f}x "
                f"(target >= 10x: {'met' if ratio >= 10 else 'NOT met'})"
            )


if __name__ == "__main__":
    main()
