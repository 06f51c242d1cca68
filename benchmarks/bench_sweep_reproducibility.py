"""How often two parallel sweeps with the same seed choose the same configuration, per mode.

Runs ``--pairs`` pairs of the same MQ2008 DirectRanker sweep (``search=direct_ranker``: TPE,
successive halving over the inner folds, the raced re-evaluation; one outer fold, ``--jobs``
workers of the ``ltr_pool`` launcher, the same sampler seed), each sweep in a fresh folder, once per mode:

- ``batch``: batches of ``--jobs`` trials (``hydra.sweeper.asynchronous=false``, the behaviour
  before trials ran in flight);
- ``async``: trials in flight (the default with ``hydra/launcher=ltr_pool``);
- ``reproducible``: ``hydra.sweeper.reproducible=true``.

Prints per mode: in how many pairs both sweeps chose the same trial parameters, in how many every
trial (parameters, state, value, reported steps) was the same, and the mean sweep wall time (the
reproducible mode's cost is its time against ``async``).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sweep_reproducibility.py --pairs 10
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sweep_reproducibility.py --quick --modes batch

``--quick`` = 2 pairs, 8 trials of which the first 4 random (TPE's ``n_startup_trials``), 3 inner
folds (a few minutes per mode on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from ltr_bench.data.datasets import resolve_data_root

LTR_BENCH = str(Path(sys.executable).parent / "ltr-bench")
MODES = {
    "batch": ["hydra.sweeper.asynchronous=false"],
    "async": [],
    "reproducible": ["hydra.sweeper.reproducible=true"],
}


def run_sweep(folder: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One sweep in ``folder``: its wall time, chosen parameters and trial table."""
    import optuna

    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LTR_DATA": str(args.data)}
    cmd = [
        LTR_BENCH,
        "-m",
        "search=direct_ranker",
        "dataset=mq2008",
        "protocol=letor_folds",
        f"dataset.fold={args.fold}",
        f"protocol.inner_cv={args.inner_cv}",
        f"hydra.sweeper.n_trials={args.trials}",
        f"hydra.sweeper.reevaluate.top_k={args.top_k}",
        f"hydra.sweeper.sampler.seed={args.sampler_seed}",
        *([f"hydra.sweeper.sampler.n_startup_trials={args.startup}"] if args.startup else []),
        "hydra/launcher=ltr_pool",
        f"hydra.launcher.n_jobs={args.jobs}",
        f"hydra.sweeper.n_jobs={args.jobs}",
        f"hydra.sweep.dir={folder / 'sweep'}",
        "tracking=none",
        *MODES[mode],
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (folder / "sweep.log").write_text(proc.stdout + "\n" + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed; see {folder / 'sweep.log'}:\n{proc.stderr[-2000:]}")
    result = yaml.safe_load((folder / "sweep" / "optimization_results.yaml").read_text())
    trials = optuna.load_study(
        study_name=result["study_name"], storage=result["storage"]
    ).get_trials(deepcopy=False)
    table = [
        (t.number, t.params, t.state.name, t.value, dict(t.intermediate_values)) for t in trials
    ]
    return {"wall_s": wall, "best": result["best_params"], "table": table}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="2 pairs, 8 trials, 3 inner folds")
    ap.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES))
    ap.add_argument("--pairs", type=int, default=None)
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--inner-cv", type=int, default=None)
    ap.add_argument("--startup", type=int, default=None, help="TPE's random trials (config: 10)")
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--fold", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sampler-seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=resolve_data_root(os.environ.get("LTR_DATA")))
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    sizes = {"pairs": 2, "trials": 8, "inner_cv": 3, "startup": 4} if args.quick else {}
    for key, value in {"pairs": 10, "trials": 30, "inner_cv": 5, "startup": 0, **sizes}.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    unknown = set(args.modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown mode(s) {sorted(unknown)}; choose from {list(MODES)}")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench_sweep_reproducibility-"))
    print(
        f"work dir {root} (machine: {os.cpu_count()} cores); MQ2008 fold {args.fold}, "
        f"{args.trials} trials ({args.startup or 'config'} random), {args.inner_cv} inner folds, "
        f"top_k {args.top_k}, "
        f"{args.jobs} workers, seed {args.sampler_seed}, {args.pairs} pairs per mode",
        flush=True,
    )
    rows = []
    for mode in args.modes:
        same_choice = same_trials = 0
        walls = []
        for pair in range(args.pairs):
            a, b = (run_sweep(root / mode / f"{pair}{side}", mode, args) for side in "ab")
            same_choice += a["best"] == b["best"]
            same_trials += a["table"] == b["table"]
            walls += [a["wall_s"], b["wall_s"]]
            print(
                f"  {mode} pair {pair}: same choice {a['best'] == b['best']}, same trials "
                f"{a['table'] == b['table']} ({a['wall_s']:.0f} s, {b['wall_s']:.0f} s)",
                flush=True,
            )
        rows.append((mode, same_choice, same_trials, statistics.fmean(walls)))
    print(f"\n{'mode':<14}{'same choice':>13}{'same trials':>13}{'sweep':>9}")
    for mode, choice, trials, wall in rows:
        print(
            f"{mode:<14}{choice:>6} of {args.pairs:<4}{trials:>6} of {args.pairs:<4}{wall:>8.0f}s"
        )


if __name__ == "__main__":
    main()
