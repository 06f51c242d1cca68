"""Benchmark: reading LETOR text and the quantile-normal transform, on MSLR-WEB10K-shaped data.

Writes (once, reused later) a LETOR file of --queries queries x ~--docs documents (default
2000 x ~120 = ~240k lines), 136 features on every line, labels 0-4, into --out (default
benchmarks/out/, git-ignored). Then prints, against baselines measured in the same run:

  * parse:   load_letor (first load: sklearn parse + checks + sha256 + cache write) vs
             sklearn's load_svmlight_file alone with the same arguments.   Target ratio <= 1.2
  * reload:  load_letor from the cache (memory-mapped) vs that same parse.  Target >= 20x
             (also shown: reload + reading every feature, and reload with a forced re-hash)
  * quantile normal: QuantileNormal (fit + transform) vs sklearn QuantileTransformer
             (output_distribution="normal", same n_quantiles and subsample; float64 input as in the
             papers' code), and their max |diff|.

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_letor.py [--queries N] [--qn-rows N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from sklearn.datasets import dump_svmlight_file, load_svmlight_file  # noqa: E402
from sklearn.preprocessing import QuantileTransformer  # noqa: E402

from ltr_bench.data.letor import load_letor  # noqa: E402
from ltr_bench.data.transforms import QuantileNormal  # noqa: E402

N_FEATURES = 136


def write_mslr_like(path: Path, n_queries: int, docs: int, seed: int = 0) -> None:
    """MSLR-like columns: integer counts, short decimals, heavy tails; no zeros (all written)."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.normal(docs, docs / 4, n_queries).round().astype(int), 5, None)
    n = int(lengths.sum())
    qid = np.repeat(np.arange(1, n_queries + 1) * 3 + 1, lengths)
    X = np.empty((n, N_FEATURES), dtype=np.float64)
    kind = np.arange(N_FEATURES) % 3
    X[:, kind == 0] = rng.integers(1, 500, (n, int((kind == 0).sum())))
    X[:, kind == 1] = np.round(rng.uniform(0.001, 1, (n, int((kind == 1).sum()))), 3)
    X[:, kind == 2] = np.round(rng.lognormal(3, 2, (n, int((kind == 2).sum()))), 2) + 0.01
    y = np.minimum(rng.geometric(0.5, n) - 1, 4)
    tmp = path.with_suffix(".tmp")
    dump_svmlight_file(X, y, str(tmp), zero_based=False, query_id=qid)
    os.replace(tmp, path)


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--docs", type=int, default=120)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--qn-rows", type=int, default=0,
                    help="rows for the quantile benchmark (tiles the data; 0 = as parsed)")
    args = ap.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"mslr_like_{args.queries}x{args.docs}.txt"
    if not path.exists():
        t = time.perf_counter()
        write_mslr_like(path, args.queries, args.docs)
        print(f"wrote {path} in {time.perf_counter() - t:.1f} s")
    n_lines = sum(1 for _ in open(path, "rb"))
    print(f"file: {path.name}: {n_lines:,} lines, {path.stat().st_size / 2**20:.0f} MiB, "
          f"{N_FEATURES} features")

    def sk():
        return load_svmlight_file(str(path), n_features=N_FEATURES, dtype=np.float32,
                                  query_id=True, zero_based=False)

    t_sk, _ = best(sk, args.repeat)

    caches: list[str] = []

    def ours_cold():
        d = tempfile.mkdtemp(prefix="ltr_bench_cache_", dir=args.out)
        caches.append(d)
        return load_letor(path, N_FEATURES, cache_dir=d)

    t_cold, qs = best(ours_cold, args.repeat)
    t_nocache, _ = best(lambda: load_letor(path, N_FEATURES, use_cache=False), args.repeat)
    cache = caches[-1]
    t_hot, hot = best(lambda: load_letor(path, N_FEATURES, cache_dir=cache), 5)
    t_hot_read, _ = best(
        lambda: float(np.asarray(load_letor(path, N_FEATURES, cache_dir=cache).features).sum()), 3
    )
    os.environ["LTR_CACHE_VERIFY"] = "1"
    t_verify, _ = best(lambda: load_letor(path, N_FEATURES, cache_dir=cache), 3)
    del os.environ["LTR_CACHE_VERIFY"]
    assert np.array_equal(np.asarray(hot.features), qs.features)

    print("\n== parse (best of %d) ==" % args.repeat)
    print(f"sklearn load_svmlight_file alone      {t_sk:8.2f} s")
    print(f"load_letor, first load (cache write)  {t_cold:8.2f} s   ratio {t_cold / t_sk:.2f}"
          "  (target <= 1.2)")
    print(f"load_letor, cache off                 {t_nocache:8.2f} s   "
          f"ratio {t_nocache / t_sk:.2f}")
    print("\n== cached reload ==")
    print(f"load_letor from cache (mmap)          {t_hot * 1e3:8.1f} ms  speed-up "
          f"{t_cold / t_hot:,.0f}x vs first load (target >= 20x)")
    print(f"  + reading every feature value       {t_hot_read * 1e3:8.1f} ms  speed-up "
          f"{t_cold / t_hot_read:,.0f}x")
    print(f"  with a forced re-hash (VERIFY=1)    {t_verify * 1e3:8.1f} ms  speed-up "
          f"{t_cold / t_verify:,.0f}x")

    X = np.asarray(qs.features)
    if args.qn_rows and args.qn_rows != len(X):
        reps = -(-args.qn_rows // len(X))
        X = np.tile(X, (reps, 1))[: args.qn_rows]
    sub = 100_000
    t = time.perf_counter()
    ours = QuantileNormal(scale=1 / 3, n_quantiles=1000, subsample=sub, seed=0).fit(X)
    t_fit = time.perf_counter() - t
    t = time.perf_counter()
    z = ours.transform_array(X)
    t_tr = time.perf_counter() - t
    # sklearn on float64, as the papers' code had it (load_svmlight_file's default dtype). On
    # float32 input sklearn's 1e-7 bound tests round away (x + 1e-7 == x for |x| >= 2), so its
    # largest values get ~3.1 instead of the bound 5.2; QuantileNormal follows the float64 rule.
    X64 = X.astype(np.float64)
    t = time.perf_counter()
    qt = QuantileTransformer(n_quantiles=1000, output_distribution="normal", subsample=sub,
                             random_state=0).fit(X64)
    t_skfit = time.perf_counter() - t
    t = time.perf_counter()
    zs = qt.transform(X64) / 3
    t_sktr = time.perf_counter() - t
    diff = float(np.max(np.abs(z.astype(np.float64) - zs)))
    # Fitted on the same rows (no subsampling), the two must agree to float32 precision.
    part = X[:50_000]
    exact = QuantileNormal(subsample=len(part)).fit(part).transform_array(part)
    part64 = part.astype(np.float64)
    exact_sk = QuantileTransformer(n_quantiles=1000, output_distribution="normal",
                                   subsample=len(part)).fit(part64).transform(part64) / 3
    diff_exact = float(np.max(np.abs(exact.astype(np.float64) - exact_sk)))
    print(f"\n== quantile normal on {X.shape[0]:,} x {X.shape[1]} ==")
    print(f"sklearn QuantileTransformer  fit {t_skfit:6.2f} s  transform {t_sktr:6.2f} s  "
          f"total {t_skfit + t_sktr:6.2f} s")
    print(f"QuantileNormal (numpy)       fit {t_fit:6.2f} s  transform {t_tr:6.2f} s  "
          f"total {t_fit + t_tr:6.2f} s   speed-up {(t_skfit + t_sktr) / (t_fit + t_tr):.1f}x")
    print(f"max |ours - sklearn| = {diff:.2e} (different {sub:,}-row subsamples); "
          f"fitted on the same {len(part):,} rows: {diff_exact:.2e}")

    for d in caches:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
