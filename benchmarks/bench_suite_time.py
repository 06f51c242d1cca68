"""The test suite's time beside the machine's speed, in one run.

The goals: ``make test`` takes at most 5 min in a fresh clone on an idle 2-core machine like CI's,
and at most 10 min with one core kept busy. Wall times depend on the machine, so the page states
its speed: the yardstick is LightGBM lambdarank's 100-tree fit on ``bench_direct_ranker.py``'s
MSLR-WEB10K-shaped data (2 threads; it took 52 s on the machine the goals were set on).

One run measures, in this order:

* the yardstick;
* ``make test SEED=<seed>`` (lint, then pytest) in a fresh clone of the committed HEAD on the idle
  machine, and again in another fresh clone while a busy loop keeps one core loaded. Each clone
  gets its ``.venv`` as ``stress_suite.py`` makes it (hard links to this checkout's, relocated:
  seconds, so the times are the suite's; the clone's own caches, mypy's and pytest's, start
  empty as in a new clone). The same seed (the same test order) both times.

Run it on an otherwise idle machine (about 20 min on 2 cores). Without LTR_DATA the tests that
need the LETOR data skip, as in any clone without ``../shared`` beside it; export it to run them.

    .venv/bin/python benchmarks/bench_suite_time.py [--seed 12345]
    .venv/bin/python benchmarks/bench_suite_time.py --n-train 50000 \
        --pytest-args tests/test_stats.py                 # a smoke check of the script
    .venv/bin/python -m ltr_bench.provenance docs/results/suite-time.md \\
        --title "The test suite's time" -- .venv/bin/python benchmarks/bench_suite_time.py
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_direct_ranker import lightgbm_fit, mslr_shaped_splits  # siblings: this folder
from stress_suite import REPO, fresh_clone, git, relocated_venv, start_busy_loop, test_command

IDLE_TARGET_MIN, BUSY_TARGET_MIN = 5, 10
GOALS_YARDSTICK_S = 52  # the yardstick on the machine the goals were set on
SUMMARY = re.compile(r"^=*\s*(\d+ passed.*?) in ([\d.]+)s", re.MULTILINE)


def yardstick(threads: int, n_train: int) -> float:
    """Seconds of LightGBM lambdarank's 100-tree fit on the MSLR-WEB10K-shaped training part."""
    train, _, _ = mslr_shaped_splits(n_train)
    return lightgbm_fit(train, threads, 100)[1]


def timed_make_test(
    label: str, commit: str, workdir: Path, seed: int, busy: bool, pytest_args: str = ""
) -> tuple[float, str, float]:
    """``make test`` in a fresh clone: its wall seconds, pytest's summary and pytest's seconds."""
    clone, log = workdir / label, workdir / f"{label}.log"
    fresh_clone(REPO, commit, clone)
    relocated_venv(REPO, clone)
    cmd = test_command(
        argparse.Namespace(heavy=False, skip_lint=False, pytest_args=pytest_args), seed
    )
    spinner = start_busy_loop() if busy else None
    try:
        start = time.perf_counter()
        with open(log, "a") as out:
            code = subprocess.call(cmd, cwd=clone, stdout=out, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    text = log.read_text(errors="replace")
    if code != 0:
        sys.exit(f"{' '.join(cmd)} failed in {clone} (exit {code}); its log:\n{text[-3000:]}")
    shutil.rmtree(clone, ignore_errors=True)
    found = SUMMARY.findall(text)
    summary, seconds = found[-1] if found else ("(no summary line)", "nan")
    return wall, summary, float(seconds)


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seed", type=int, default=12345, help="pytest-randomly's order")
    parser.add_argument("--threads", type=int, default=2, help="the yardstick's threads")
    parser.add_argument(
        "--n-train", type=int, default=723_000, help="the yardstick's training documents"
    )
    parser.add_argument("--pytest-args", default="", help="passed as make's PYTEST_ARGS")
    args = parser.parse_args(argv)
    commit = git("rev-parse", "HEAD", cwd=REPO)
    workdir = Path(tempfile.mkdtemp(prefix="ltr_bench_suite_time_"))
    print(f"make test at {commit[:10]}, seed {args.seed}, clones in $TMPDIR", flush=True)
    speed = yardstick(args.threads, args.n_train)
    print(f"yardstick: {speed:.1f} s", flush=True)
    rows = []
    for label, busy, target in (("idle", False, IDLE_TARGET_MIN), ("busy", True, BUSY_TARGET_MIN)):
        wall, summary, pytest_s = timed_make_test(
            label, commit, workdir, args.seed, busy, args.pytest_args
        )
        rows.append((label, busy, target, wall, summary, pytest_s))
        print(f"make test, {label}: {minutes(wall)} ({summary})", flush=True)
    shutil.rmtree(workdir, ignore_errors=True)

    print()
    print("| what | time | target | holds |")
    print("| --- | ---: | --- | --- |")
    print(
        f"| yardstick: LightGBM lambdarank, 100 trees, {args.threads} threads, MSLR-WEB10K-shaped "
        f"fold ({args.n_train} training documents) | {speed:.1f} s "
        f"| ({GOALS_YARDSTICK_S} s where the goals were set) | - |"
    )
    for _, busy, target, wall, summary, pytest_s in rows:
        what = "one core kept busy" if busy else "idle"
        holds = "yes" if wall <= 60 * target else "no"
        print(f"| make test, fresh clone, {what} | {minutes(wall)} | <= {target} min | {holds} |")
        print(f"| - of which pytest ({summary}) | {minutes(pytest_s)} | | |")
    print(
        f"\nScaled to the goals' machine ({GOALS_YARDSTICK_S} s / {speed:.1f} s = "
        f"{GOALS_YARDSTICK_S / speed:.2f}x slower), make test would take about "
        + " and ".join(
            f"{minutes(wall * GOALS_YARDSTICK_S / speed)} {label}"
            for label, _, _, wall, _, _ in rows
        )
        + " (an estimate: the suite is not LightGBM)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
