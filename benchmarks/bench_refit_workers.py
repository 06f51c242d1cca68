"""The refit with one worker and with two: ``refit_best=<sweep> seed=0,1,2,3 refit_jobs=1|2``.

A small sweep of DirectRanker on the five MQ2008 folds (a study per fold, ``--trials`` trials,
2-fold inner CV, no re-evaluation) gives five studies; their best configs are then refit with
``--seeds`` seeds each (20 refits by default), once one process at a time and once two at a time,
both with ``threads=1``. Prints the wall time of each, the speed-up (target: at least 1.8x) and
whether the two give the same test metrics.

    LTR_DATA=/path/to/letor .venv/bin/python benchmarks/bench_refit_workers.py [--seeds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LTR_BENCH = str(Path(sys.executable).parent / "ltr-bench")


def run(cmd: list[str], cwd: Path) -> float:
    """Wall seconds of ``cmd`` in ``cwd`` (it must succeed)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0


def test_metrics(sweep_dir: Path) -> dict[str, float]:
    """Each refit's test NDCG@10, by its folder under ``refit/``."""
    return {
        str(p.parent.relative_to(sweep_dir)): json.loads(p.read_text())["mean"]["test"]["ndcg@10"]
        for p in sorted((sweep_dir / "refit").glob("*/seed*/results.json"))
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4, help="refit seeds per study")
    ap.add_argument("--trials", type=int, default=2, help="trials per study of the sweep")
    args = ap.parse_args()
    if not os.environ.get("LTR_DATA"):
        raise SystemExit("set LTR_DATA to the folder holding MQ2008/")
    with tempfile.TemporaryDirectory(prefix="ltr-refit-") as tmp:
        root = Path(tmp)
        sweep_dir = root / "sweep"
        fixed = ["threads=1", "trainer.enable_progress_bar=false", "tracking=none"]
        run(
            [
                LTR_BENCH,
                "-m",
                "search=direct_ranker",
                "dataset=mq2008",
                "protocol=letor_folds",
                "dataset.fold=1,2,3,4,5",
                "hydra.sweeper.study_per=[dataset.fold]",
                f"hydra.sweeper.n_trials={args.trials}",
                "hydra.sweeper.reevaluate.top_k=0",
                "protocol.inner_cv=2",
                f"hydra.sweep.dir={sweep_dir}",
                *fixed,
            ],
            root,
        )
        seeds = f"seed=range(0,{args.seeds})"
        walls, metrics = {}, {}
        for jobs in (1, 2):
            walls[jobs] = run(
                [LTR_BENCH, f"refit_best={sweep_dir}", seeds, f"refit_jobs={jobs}", *fixed], root
            )
            metrics[jobs] = test_metrics(sweep_dir)
            for folder in (sweep_dir / "refit").iterdir():  # the next pass writes afresh
                subprocess.run(["rm", "-rf", str(folder)], check=True)
    n = len(metrics[1])
    same = metrics[1] == metrics[2]
    print("| refit_jobs | refits | wall s |")
    print("| ---: | ---: | ---: |")
    for jobs in (1, 2):
        print(f"| {jobs} | {len(metrics[jobs])} | {walls[jobs]:.1f} |")
    print()
    print(f"speed-up with 2 workers: {walls[1] / walls[2]:.2f}x (target >= 1.8x) over {n} refits")
    print(f"same test NDCG@10 in every refit: {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
