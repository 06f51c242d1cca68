"""Refitting a sweep's best configuration: several studies or seeds as processes, some at a time,
and the table of their test metrics (``ltr-bench refit_best=<sweep> [seed=0,1,2,3]``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from ltr_bench.errors import UserError


def refit_workers(args: Sequence[str], n_refits: int) -> int:
    """How many refits run at once: ``refit_jobs=<n>`` from ``args``, else one per CPU core
    (never more than there are refits)."""
    raw = next((a.split("=", 1)[1] for a in args if a.startswith("refit_jobs=")), "null")
    if raw.strip().lower() in ("null", "none", ""):
        return max(1, min(n_refits, os.cpu_count() or 1))
    try:
        jobs = int(raw)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise UserError(
            f"refit_jobs={raw}: give a whole number of refits at a time (1 or more), or null"
        )
    return min(jobs, n_refits)


def run_refits(refits: Sequence[Any], workers: int = 1) -> int:
    """Refit several studies (e.g. one per outer fold, maybe each with several seeds), one
    ``ltr-bench`` process each, ``workers`` at a time, then print the test metrics of every refit
    of the sweep side by side with the mean (SE); returns the worst exit code.

    One at a time, each process streams its output. Several at a time, each runs with
    ``threads=1`` (unless the arguments set ``threads``) and no progress bar, and its output is
    printed in one block when it ends, so the blocks never interleave."""
    import subprocess

    def command(r: Any) -> list[str]:
        return [sys.executable, "-m", "ltr_bench.cli.main", *r.overrides]

    def header(i: int, r: Any) -> str:
        seed = f" seed={r.seed}" if r.seed is not None else ""
        return f"[refit {i}/{len(refits)}] {r.label}{seed} (study {r.study_name})"

    if workers <= 1:
        codes = []
        for i, r in enumerate(refits, 1):
            print(header(i, r), flush=True)
            codes.append(subprocess.call(command(r)))
    else:
        codes = _run_parallel_refits(refits, workers, command, header)
    table = refit_table(refits[0].sweep_dir)
    if table:
        print("\n" + table)
    return max(codes)


def _run_parallel_refits(
    refits: Sequence[Any], workers: int, command: Any, header: Any
) -> list[int]:
    """The refit processes, ``workers`` at a time (see :func:`run_refits`); their exit codes."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor, as_completed

    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    print(
        f"{len(refits)} refits, {workers} at a time; each one's output follows when it ends",
        flush=True,
    )

    def one(r: Any) -> subprocess.CompletedProcess[str]:
        extra = [] if any(o.startswith("threads=") for o in r.overrides) else ["threads=1"]
        extra.append("trainer.enable_progress_bar=false")
        cmd = [*command(r), *extra]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)

    codes = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(one, r): i for i, r in enumerate(refits, 1)}
        for future in as_completed(futures):
            i, done = futures[future], future.result()
            print(header(i, refits[i - 1]), flush=True)
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
            sys.stdout.flush()
            codes.append(done.returncode)
    return codes


def refit_table(sweep_dir: str | None, min_refits: int = 1) -> str | None:
    """:func:`refit_summary` of every refit of the sweep (the latest per study and seed, from
    ``<sweep dir>/refit/``), or None with fewer than ``min_refits``."""
    from ltr_bench.refit_plan import find_refits

    if not sweep_dir:
        return None
    found, superseded = find_refits(sweep_dir)
    rows = [(r.label, r.seed, (r.results.get("mean") or {}).get("test") or {}) for r in found]
    rows = [row for row in rows if row[2]]
    if len(rows) < max(min_refits, 1):
        return None
    table = refit_summary(rows)
    if superseded:
        table += (
            f"\n({superseded} older refit(s) of the same study and seed left out: "
            "the latest of each counts)"
        )
    return table


def refit_summary(rows: Sequence[tuple[str, int | None, dict[str, float]]]) -> str:
    """The refits' test metrics as a text table: a row per study and their mean(SE) over the
    studies. The title says which seeds were averaged. With several seeds per study a row is the
    study's mean over its seeds (listed at the row's end when studies differ in their seeds), and
    a last block shows the mean over studies for each seed all studies have and the standard
    deviation of that figure across seeds (how far a single-seed result can move)."""
    import numpy as np

    from ltr_bench.stats import format_mean_se, mean_se

    names = list(rows[0][2])
    labels = list(dict.fromkeys(label for label, _, _ in rows))
    seeds = list(dict.fromkeys(seed for _, seed, _ in rows if seed is not None))
    by_label = {lab: [m for label, _, m in rows if label == lab] for lab in labels}
    seeds_of = {
        lab: [s for label, s, _ in rows if label == lab and s is not None] for lab in labels
    }
    same_seeds = all(sorted(v) == sorted(seeds) for v in seeds_of.values())
    common = [s for s in seeds if all(s in v for v in seeds_of.values())]

    def mean_of(ms: Sequence[dict[str, float]], n: str) -> float:
        return float(np.mean([m.get(n, float("nan")) for m in ms]))

    width = max(12, *(len(label) + 2 for label in labels))
    head = f"{'':<{width}}" + "".join(f"{n:>11}" for n in names)
    title = "refit test metrics per study"
    if seeds and same_seeds:
        title += (
            f" (mean over seeds {', '.join(map(str, seeds))})"
            if len(seeds) > 1
            else f" (seed {seeds[0]})"
        )
    elif seeds:
        title += " (mean over each study's seeds, listed after its metrics)"
    lines = [title, head]
    for lab in labels:
        tail = "" if same_seeds else "   seeds " + ",".join(map(str, seeds_of[lab]))
        lines.append(
            f"{lab:<{width}}" + "".join(f"{mean_of(by_label[lab], n):>11.4f}" for n in names) + tail
        )
    stats = [mean_se([mean_of(by_label[lab], n) for lab in labels]) for n in names]
    lines.append(
        f"{'mean(SE)':<{width}}" + "".join(f"{format_mean_se(mu, se):>11}" for mu, se, _ in stats)
    )
    if len(common) > 1:
        lines += ["", "mean over studies per seed", head]
        per_seed = []
        for seed in common:
            ms = [m for _, s, m in rows if s == seed]
            values = [mean_of(ms, n) for n in names]
            per_seed.append(values)
            lines.append(f"{f'seed={seed}':<{width}}" + "".join(f"{v:>11.4f}" for v in values))
        sd = np.std(np.asarray(per_seed), axis=0, ddof=1)
        lines.append(f"{'SD(seeds)':<{width}}" + "".join(f"{v:>11.4f}" for v in sd))
    return "\n".join(lines)
