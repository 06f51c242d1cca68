"""Benchmark: reading LETOR text at MSLR scale, the verified cache, and a first run end to end.

Writes MSLR-shaped LETOR files (136 features on every line, ~1,370 bytes a line, ~120 documents a
query, labels 0-4) of each size in --sizes into --out (default $TMPDIR/ltr_bench_letor, never the
repository; big files are deleted at the end unless --keep), then prints, measured in this run:

  * size sweep: the new path (``parse_letor``: read + checks, no cache), the old path
    (scikit-learn ``load_svmlight_file(query_id=True)`` + dense + checks; its parse time alone is the
    "sklearn qid" column) and scikit-learn without query ids, each in a fresh child process with
    its peak memory above the starting RSS (VmHWM - VmRSS), as a multiple of the float32 result.
    MB/s, and the scaling ratio: time per line at each size / time per line at the smallest size
    (linear = 1.0; the target is 4x lines in <= 4.4x time, i.e. <= 1.1). Targets: 2.27M lines
    (~3.1 GB) in <= 60 s on 2 cores, peak memory <= 3x the float32 result.
    The candidate reader the issue named, pyarrow's CSV reader plus pyarrow.compute (dense lines
    only, no checks), is measured beside it with 1 thread and with every core (up to --pyarrow-max).
  * cached reload vs parse: ``load_letor`` from the cache with the entry's checksums verified (the
    default) and without, as speed-ups over the parse (target >= 10x with verification).
  * quantile normal (on the smallest size): QuantileNormal vs scikit-learn's QuantileTransformer.
  * --e2e: a generated MSLR-WEB10K-shaped Fold1 (723k / 235k / 241k lines) and a first run
    ``ltr-bench dataset=letor dataset.path=<folder> dataset.fold=1`` with an empty cache (read and
    fit time as the run prints them), then the same run again (read from the cache).

The old path is quadratic (400k lines: minutes), so it runs only up to --old-max lines;
scikit-learn without query ids up to --sklearn-max. A child exceeding --timeout is killed.

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_letor.py [--sizes 100000,400000] [--e2e]
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

N_FEATURES = 136
REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------- generation
def _block(seed: int, n_queries: int, docs: int) -> tuple[list[int], np.ndarray, list[bytes]]:
    """Labels, query lengths and the ``1:v ... 136:v`` part of each line of one block."""
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.normal(docs, docs / 4, n_queries).round().astype(int), 5, None)
    n = int(lengths.sum())
    X = np.empty((n, N_FEATURES), dtype=np.float64)
    kind = np.arange(N_FEATURES) % 3
    X[:, kind == 0] = rng.integers(1, 500, (n, int((kind == 0).sum())))
    X[:, kind == 1] = np.round(rng.uniform(0.001, 1, (n, int((kind == 1).sum()))), 6)
    X[:, kind == 2] = np.round(rng.lognormal(3, 2, (n, int((kind == 2).sum()))), 2) + 0.01
    y = np.minimum(rng.geometric(0.5, n) - 1, 4)
    buf = io.BytesIO()
    dump_svmlight_file(
        X, y, buf, zero_based=False, query_id=np.repeat(np.arange(n_queries), lengths)
    )
    rests = [line.split(b" ", 2)[2] for line in buf.getvalue().split(b"\n")[:-1]]
    return [int(v) for v in y], lengths, rests


def write_mslr_like(path: Path, n_lines: int, seed: int = 0, docs: int = 120) -> None:
    """An MSLR-shaped file of ``n_lines`` lines: four generated blocks repeated with new qids."""
    blocks = [_block(seed * 10 + s, 200, docs) for s in range(4)]
    q, written, b = 1, 0, 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        while written < n_lines:
            y, lengths, rests = blocks[b % len(blocks)]
            b += 1
            out: list[bytes] = []
            i = 0
            for length in lengths:
                take = min(int(length), n_lines - written - len(out))
                out.extend(b"%d qid:%d %s\n" % (y[i + j], q, rests[i + j]) for j in range(take))
                i += int(length)
                q += 1
                if written + len(out) >= n_lines:
                    break
            f.write(b"".join(out))
            written += len(out)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- child processes
def _status(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def child(mode: str, path: str) -> None:
    """One measurement in this (fresh) process; prints a JSON line."""
    importlib.import_module("pandas")  # imported before the baseline RSS, like sklearn
    from sklearn.datasets import load_svmlight_file

    from ltr_bench.data.letor import parse_letor

    try:  # reset the peak-RSS mark to the current RSS (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    rss0 = _status("VmRSS")
    cpu = time.process_time()
    t = time.perf_counter()
    out: dict = {}
    if mode == "new":
        qs = parse_letor(path, N_FEATURES)
        n = qs.n_docs
    elif mode == "old":
        X, y, qid = load_svmlight_file(
            path, n_features=N_FEATURES, dtype=np.float32, query_id=True, zero_based=False
        )
        out["parse_s"] = time.perf_counter() - t
        assert qid.shape[0] == X.shape[0] and np.all(np.isfinite(X.data)) and np.all(y >= 0)
        starts = np.concatenate([[0], np.flatnonzero(qid[1:] != qid[:-1]) + 1])
        assert len(np.unique(qid[starts])) == len(starts)
        features = X.toarray()
        n = features.shape[0]
    elif mode == "sklearn":
        X, y = load_svmlight_file(path, n_features=N_FEATURES, dtype=np.float32, zero_based=False)
        n = X.shape[0]
    elif mode in ("pyarrow", "pyarrow1"):
        # The candidate the issue named: pyarrow's CSV reader (space-delimited), then the ``k:``
        # prefixes cut off with pyarrow.compute. Dense lines only (every line 1..136, no
        # comments): no check of indices, no irregular line, no message with file:line.
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv

        pa.set_cpu_count(1 if mode == "pyarrow1" else os.cpu_count() or 1)
        names = ["label", "qid"] + [f"f{j}" for j in range(1, N_FEATURES + 1)]
        tbl = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=" "),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in names[1:]}),
        )
        y = tbl["label"].to_numpy()
        qid = pc.cast(pc.utf8_slice_codeunits(tbl["qid"], 4), pa.int64()).to_numpy()
        features = np.empty((tbl.num_rows, N_FEATURES), dtype=np.float32)
        for j in range(1, N_FEATURES + 1):
            col = pc.utf8_slice_codeunits(tbl[f"f{j}"], len(str(j)) + 1)
            features[:, j - 1] = pc.cast(col, pa.float32()).to_numpy()
        assert qid.shape[0] == y.shape[0]
        n = features.shape[0]
    else:
        raise SystemExit(f"unknown mode {mode}")
    out.update(
        seconds=time.perf_counter() - t,
        cpu=time.process_time() - cpu,
        n=int(n),
        peak_extra=_status("VmHWM") - rss0,
        result_bytes=int(n) * N_FEATURES * 4,
    )
    print(json.dumps(out), flush=True)


def measure(mode: str, path: Path, timeout: float) -> dict | None:
    cmd = [sys.executable, __file__, "--child", mode, str(path)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    except subprocess.CalledProcessError as exc:
        print(exc.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(res.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------- sections
def _fmt_t(r: dict | None, key: str = "seconds") -> str:
    if r is None:
        return "-"
    if "timeout" in r:
        return f">{r['timeout']:.0f} s"
    return f"{r[key]:.1f} s"


def size_sweep(args, files: dict[int, Path]) -> dict[int, float]:
    print(f"\n== size sweep (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores) ==")
    head = (
        f"{'lines':>10} {'MB':>6} | {'old path':>9} {'sk qid':>8} {'sk no qid':>9} | "
        f"{'new':>7} {'cpu':>7} {'MB/s':>5} {'scaling':>7} {'peak':>6}"
    )
    print(head + "\n" + "-" * len(head))
    base = None
    parse_s: dict[int, float] = {}
    for n, path in files.items():
        mb = path.stat().st_size / 1e6
        old = measure("old", path, args.timeout) if n <= args.old_max else None
        sk = measure("sklearn", path, args.timeout) if n <= args.sklearn_max else None
        new = measure("new", path, args.timeout)
        arrow = [
            measure(m, path, args.timeout) if n <= args.pyarrow_max else None
            for m in ("pyarrow1", "pyarrow")
        ]
        parse_s[n] = new["seconds"]
        per_line = new["seconds"] / n
        base = base or per_line
        peak = new["peak_extra"] / new["result_bytes"]
        print(
            f"{n:>10,} {mb:>6.0f} | {_fmt_t(old):>9} {_fmt_t(old, 'parse_s'):>8} "
            f"{_fmt_t(sk):>9} | {new['seconds']:>5.1f} s {new['cpu']:>5.1f} s "
            f"{mb / new['seconds']:>5.0f} "
            f"{per_line / base:>7.2f} {peak:>5.2f}x",
            flush=True,
        )
        for name, r in (
            ("pyarrow candidate, 1 thread", arrow[0]),
            (f"pyarrow candidate, {os.cpu_count()} threads", arrow[1]),
        ):
            if r and "peak_extra" in r:
                print(
                    f"{'':>10}   ({name}: {r['seconds']:.1f} s wall, {r['cpu']:.1f} s CPU, "
                    f"{mb / r['seconds']:.0f} MB/s, peak {r['peak_extra'] / r['result_bytes']:.2f}x)"
                )
        for name, r in (("old path", old), ("sklearn no qid", sk)):
            if r and "peak_extra" in r:
                print(
                    f"{'':>10}   ({name}: peak {r['peak_extra'] / r['result_bytes']:.2f}x the "
                    "float32 result)"
                )
    print(
        "scaling = time per line / time per line at the smallest size (linear = 1.00); "
        "peak = peak RSS growth / float32 result; cpu = the new path's user+system CPU time "
        "(the wall time on a shared machine depends on the load)"
    )
    return parse_s


def reload_ratios(args, path: Path, t_parse: float | None) -> None:
    """Reload speed-ups over ``t_parse`` (the sweep's new-path time, else measured here)."""
    from ltr_bench.data.letor import load_letor, parse_letor

    cache = Path(tempfile.mkdtemp(prefix="cache_", dir=args.out))
    try:
        if t_parse is None:
            t = time.perf_counter()
            parse_letor(path, N_FEATURES)
            t_parse = time.perf_counter() - t
        t = time.perf_counter()
        load_letor(path, N_FEATURES, cache_dir=cache)
        t_first = time.perf_counter() - t

        def best(verify: bool, repeat: int = 3) -> float:
            out = []
            for _ in range(repeat):
                t = time.perf_counter()
                qs = load_letor(path, N_FEATURES, cache_dir=cache, verify_cache=verify)
                out.append(time.perf_counter() - t)
                assert isinstance(qs.features, np.memmap)
            return min(out)

        t_plain, t_verified = best(False), best(True)
        n = sum(1 for _ in open(path, "rb"))
        print(f"\n== cached reload vs parse ({n:,} lines, {path.stat().st_size / 1e6:.0f} MB) ==")
        print(f"parse (parse_letor, no cache)            {t_parse:8.2f} s")
        print(f"first load_letor (parse + hash + store)  {t_first:8.2f} s")
        print(
            f"reload, checksums verified (default)     {t_verified * 1e3:8.1f} ms   "
            f"speed-up {t_parse / t_verified:6.1f}x  (target >= 10x)"
        )
        print(
            f"reload, not verified                     {t_plain * 1e3:8.1f} ms   "
            f"speed-up {t_parse / t_plain:6.1f}x"
        )
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def quantile_normal(path: Path) -> None:
    from sklearn.preprocessing import QuantileTransformer

    from ltr_bench.data.letor import parse_letor
    from ltr_bench.data.transforms import QuantileNormal

    X = np.asarray(parse_letor(path, N_FEATURES).features)
    sub = 100_000
    t = time.perf_counter()
    z = (
        QuantileNormal(scale=1 / 3, n_quantiles=1000, subsample=sub, seed=0)
        .fit(X)
        .transform_array(X)
    )
    t_ours = time.perf_counter() - t
    X64 = X.astype(np.float64)
    t = time.perf_counter()
    zs = (
        QuantileTransformer(
            n_quantiles=1000, output_distribution="normal", subsample=sub, random_state=0
        )
        .fit(X64)
        .transform(X64)
        / 3
    )
    t_sk = time.perf_counter() - t
    print(f"\n== quantile normal on {X.shape[0]:,} x {X.shape[1]} ==")
    print(
        f"sklearn QuantileTransformer {t_sk:6.2f} s; QuantileNormal {t_ours:6.2f} s; speed-up "
        f"{t_sk / t_ours:.1f}x; max |diff| {np.max(np.abs(z - zs)):.2e} (different subsamples)"
    )


def end_to_end(args) -> None:
    folder = args.out / "MSLR-WEB10K-shaped"
    sizes = {"train": 723_412, "vali": 235_259, "test": 241_521}  # MSLR-WEB10K Fold1
    for i, (split, n) in enumerate(sizes.items()):
        p = folder / "Fold1" / f"{split}.txt"
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            write_mslr_like(p, n, seed=100 + i)
    total = sum((folder / "Fold1" / f"{s}.txt").stat().st_size for s in sizes) / 1e6
    cache = Path(tempfile.mkdtemp(prefix="e2e_cache_", dir=args.out))
    cmd = [
        str(REPO / ".venv" / "bin" / "ltr-bench"),
        "dataset=letor",
        f"dataset.path={folder}",
        "dataset.fold=1",
        "threads=1",
        "tracking=none",
        *args.e2e_args,
    ]
    env = {**os.environ, "LTR_CACHE": str(cache)}
    print(f"\n== end to end: {' '.join(cmd[1:])} ==")
    print(
        f"Fold1: {sum(sizes.values()):,} lines, {total:.0f} MB; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    try:
        for label in ("first run (empty cache)", "second run (cached)"):
            t = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=args.out)
            wall = time.perf_counter() - t
            m = re.search(r"run times: read ([\d.]+) s, fit ([\d.]+) s", res.stdout)
            if res.returncode or not m:
                print(f"{label}: failed (exit {res.returncode})\n{res.stderr[-3000:]}")
                return
            print(
                f"{label:26s} read {float(m.group(1)):7.1f} s   fit {float(m.group(2)):7.1f} s"
                f"   wall {wall:6.1f} s"
            )
            obj = re.search(r"objective.*", res.stdout)
            if obj and label.startswith("first"):
                print(f"{'':26s} {obj.group(0)}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,200000,400000,2270000")
    ap.add_argument(
        "--out", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "ltr_bench_letor"
    )
    ap.add_argument("--old-max", type=int, default=400_000)
    ap.add_argument("--sklearn-max", type=int, default=2_270_000)
    ap.add_argument(
        "--pyarrow-max",
        type=int,
        default=2_270_000,
        help="measure the pyarrow.csv candidate up to this many lines (0: never)",
    )
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument(
        "--reload-size",
        type=int,
        default=0,
        help="lines of the file for the reload ratios (default: the largest size)",
    )
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--no-quantile", action="store_true")
    ap.add_argument("--e2e", action="store_true", help="also the end-to-end first run")
    ap.add_argument("--e2e-args", nargs="*", default=[], help="extra overrides for the e2e run")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    files: dict[int, Path] = {}
    try:
        for n in sizes:
            p = args.out / f"mslr_like_{n}.txt"
            if not p.exists():
                t = time.perf_counter()
                write_mslr_like(p, n)
                print(
                    f"wrote {p} ({p.stat().st_size / 1e6:.0f} MB) in "
                    f"{time.perf_counter() - t:.0f} s",
                    flush=True,
                )
            files[n] = p
        parse_s = {} if args.no_sweep else size_sweep(args, files)
        if files:
            n = args.reload_size or max(files)
            reload_ratios(args, files[n], parse_s.get(n))
        if files and not args.no_quantile:
            quantile_normal(files[min(files)])
        if args.e2e:
            end_to_end(args)
    finally:
        if not args.keep:
            for p in files.values():
                p.unlink(missing_ok=True)
            shutil.rmtree(args.out / "MSLR-WEB10K-shaped", ignore_errors=True)


if __name__ == "__main__":
    main()
