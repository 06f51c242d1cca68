"""Soak test of resumable, shared sweeps: kill workers at random moments, restart them, check.

A ``--trials``-trial TPE sweep (``ltr-bench -m``, DirectRanker on small synthetic data, the
default config enqueued as trial 0, the top three re-evaluated) is run by ``--workers`` processes
sharing one SQLite study and one MLflow store. ``--kills`` times, at a random moment while work is
done (after 1-3 more trial or re-evaluation runs started, plus up to a second), a random live
worker is SIGKILLed and started again with the same command; then all run to the end and
``ltr-bench refit_best=<sweep dir>`` refits the choice. Checked at the end:

- exactly ``--trials`` COMPLETE trials, no parameter set twice among them;
- no MLflow run RUNNING; each COMPLETE trial has exactly one FINISHED trial run;
- each re-evaluation ran once (one FINISHED re-evaluation run and one completed claim per
  re-evaluated trial, as many as ``top_k``); the enqueued default was evaluated;
- the refit exits 0 with a FINISHED refit run.

Prints kills survived, trials lost (target 0) and duplicated (target 0), and exits 1 if a check
fails. ``python benchmarks/soak_sweep.py [--kills 5] [--trials 12] [--workers 2] [--seed 0]``;
about 5-10 minutes on two busy cores (each restart pays the start-up of torch and MLflow).

``--jobs N`` (N > 1) runs each worker's trials ``N`` at a time in the launcher's workers
(``hydra/launcher=ltr_pool``: trials in flight, the next started as one ends); a killed worker's
jobs are then stopped by the orphan guard, and its restart resumes.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

LTR_BENCH = str(Path(sys.executable).parent / "ltr-bench")
TOP_K = 3
SPACE = [
    "optimizer.lr=choice(0.001,0.002,0.004,0.008)",
    "model.dropout=choice(0.0,0.1,0.2)",
    "activation=choice(tanh,sigmoid)",
]
DATA = [
    "dataset.n_train=300",
    "dataset.n_vali=100",
    "dataset.n_test=200",
    "dataset.n_features=10",
    "dataset.docs_per_query=20",
    "model.epochs=8",
    "trainer.enable_progress_bar=false",
    "threads=1",
    "protocol.inner_cv=2",
]


def sweep_command(work: Path, worker: int, n_trials: int, jobs: int = 1) -> list[str]:
    parallel = (
        [
            "hydra/launcher=ltr_pool",
            f"hydra.launcher.n_jobs={jobs}",
            f"hydra.sweeper.n_jobs={jobs}",
            "hydra.sweeper.orphan_grace_period=5",
        ]
        if jobs > 1
        else []
    )
    return [
        LTR_BENCH,
        "-m",
        "hydra/sweeper=ltr_optuna",
        *SPACE,
        *DATA,
        f"hydra.sweeper.storage=sqlite:///{work / 'study.db'}",
        "hydra.sweeper.study_name=soak",
        f"hydra.sweeper.n_trials={n_trials}",
        "hydra.sweeper.enqueue_defaults=true",
        f"hydra.sweeper.reevaluate.top_k={TOP_K}",
        "hydra.sweeper.heartbeat_interval=2",
        f"hydra.sweep.dir={work / f'w{worker}'}",
        *parallel,
    ]


def env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")


def start(work: Path, worker: int, n_trials: int, attempt: int, jobs: int) -> subprocess.Popen:
    log = open(work / f"w{worker}.{attempt}.log", "w")
    return subprocess.Popen(
        sweep_command(work, worker, n_trials, jobs),
        cwd=work,
        env=env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def mlflow_rows(work: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{work / 'mlflow.db'}?mode=ro", uri=True, timeout=30)
    try:
        return list(con.execute(sql))
    finally:
        con.close()


def started_runs(work: Path) -> int:
    """How many trial and re-evaluation runs have been started (0 before the store exists)."""
    try:
        return mlflow_rows(work, "select count(*) from tags where key = 'ltr.trial_number'")[0][0]
    except sqlite3.Error:
        return 0


def running_runs(work: Path) -> list[str]:
    try:
        return [
            name for (name,) in mlflow_rows(work, "select name from runs where status = 'RUNNING'")
        ]
    except sqlite3.Error:
        return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--jobs", type=int, default=1, help="trials in flight per worker (ltr_pool)"
    )
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="ltr_soak_"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"soak in {work}: {args.trials} trials, {args.workers} workers x {args.jobs} jobs, "
        f"{args.kills} SIGKILLs",
        flush=True,
    )
    t0 = time.monotonic()
    attempts = [0] * args.workers
    procs = [start(work, i, args.trials, 0, args.jobs) for i in range(args.workers)]
    kills = []
    while len(kills) < args.kills:
        # A random moment while work is done: after 1-3 more trial or re-evaluation runs have
        # started (start-up alone would be a dull target), plus up to a second.
        target = started_runs(work) + rng.randint(1, 3)
        while started_runs(work) < target and any(p.poll() is None for p in procs):
            time.sleep(0.1)
        time.sleep(rng.uniform(0.0, 1.0))
        alive = [i for i, p in enumerate(procs) if p.poll() is None]
        if not alive:
            break
        victim = rng.choice(alive)
        hit = running_runs(work)
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        kills.append((round(time.monotonic() - t0, 1), victim, hit))
        attempts[victim] += 1
        procs[victim] = start(work, victim, args.trials, attempts[victim], args.jobs)
        print(
            f"  kill {len(kills)} at {kills[-1][0]} s: worker {victim} (restarted); running then: {hit}",
            flush=True,
        )
    codes = [p.wait(timeout=3600) for p in procs]
    elapsed = time.monotonic() - t0
    print(f"workers exited {codes} after {elapsed:.0f} s", flush=True)

    import optuna

    storage = f"sqlite:///{work / 'study.db'}"
    trials = optuna.load_study(study_name="soak", storage=storage).get_trials(deepcopy=False)
    claims = optuna.load_study(study_name="soak:reevaluations", storage=storage).get_trials(
        deepcopy=False
    )
    done = [t for t in trials if t.state.name == "COMPLETE"]
    points = Counter(tuple(sorted(t.params.items())) for t in done)
    duplicated = sum(n - 1 for n in points.values())
    states = Counter((t.state.name, t.user_attrs.get("ltr_sweeper.fail_reason")) for t in trials)
    running = mlflow_rows(work, "select name from runs where status = 'RUNNING'")
    trial_runs = mlflow_rows(
        work,
        """
        select t.value, r.status, coalesce(e.value, 'false') from runs r
        join tags t on t.run_uuid = r.run_uuid and t.key = 'ltr.trial_number'
        join tags role on role.run_uuid = r.run_uuid and role.key = 'ltr.role' and role.value = 'trial'
        left join tags e on e.run_uuid = r.run_uuid and e.key = 'ltr.reevaluation'""",
    )
    finished = Counter(
        int(n) for n, status, again in trial_runs if status == "FINISHED" and again != "true"
    )
    reevaluated = Counter(
        int(n) for n, status, again in trial_runs if status == "FINISHED" and again == "true"
    )
    claims_done = Counter(
        t.user_attrs["ltr_sweeper.reevaluates"] for t in claims if t.state.name == "COMPLETE"
    )
    default = [t for t in done if t.system_attrs.get("fixed_params")]

    refit = subprocess.run(
        [LTR_BENCH, f"refit_best={work / 'w0'}", "threads=1"],
        cwd=work,
        env=env(),
        capture_output=True,
        text=True,
    )
    refit_runs = mlflow_rows(
        work,
        "select r.status from runs r join tags t on t.run_uuid = r.run_uuid "
        "and t.key = 'ltr.refit' and t.value = 'true'",
    )

    checks = {
        f"exactly {args.trials} complete trials": len(done) == args.trials,
        "no parameter set completed twice": duplicated == 0,
        "no MLflow run RUNNING": not running,
        "one FINISHED trial run per complete trial": sorted(finished)
        == sorted(t.number for t in done)
        and set(finished.values()) == {1},
        "no FINISHED trial run of a trial that is not complete": set(finished)
        <= {t.number for t in done},
        f"each of the top {TOP_K} re-evaluated once": len(reevaluated) == TOP_K
        and set(reevaluated.values()) == {1}
        and claims_done == reevaluated,
        "the enqueued default was evaluated": len(default) >= 1,
        "workers exited 0": set(codes) == {0},
        "the refit ran": refit.returncode == 0 and refit_runs == [("FINISHED",)],
    }
    print(f"trial states: {dict(states)}")
    print(
        f"claims: {dict(Counter((t.state.name, t.user_attrs.get('ltr_sweeper.fail_reason')) for t in claims))}"
    )
    print(
        f"kills survived: {len(kills)} of {args.kills} ({'; '.join(f'{s} s w{w} {h}' for s, w, h in kills)})"
    )
    print(
        f"trials lost: {max(args.trials - len(done), 0)}; duplicated: {duplicated}; "
        f"interrupted and re-run: {states.get(('FAIL', 'interrupted'), 0)}; "
        f"re-evaluations run twice: {sum(n > 1 for n in reevaluated.values())}"
    )
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {name}")
    if refit.returncode != 0:
        print(refit.stderr[-2000:])
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
