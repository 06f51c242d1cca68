"""Where a real sweep job's time goes outside its MLflow run, phase by phase, in the workers.

The fixed-costs page measures the per-job cost on a tiny synthetic sweep; this one runs the
README's sweep on real data (``search=<model>`` on MQ2008, one outer fold, 5-fold inner CV,
``--jobs`` workers of the ``ltr_pool`` launcher), with a worker hook (:func:`hook`, the sweep's
``sweep.on_worker_start``, which also applies the default hook's garbage-collector policy) that
stamps wall and CPU time at each phase's edges: the payload unpacked and Hydra's singleton state
set; the job's config composed by Hydra from the config files; the launcher's job
(:func:`ltr_bench.launching.worker.run`) up to Hydra's ``run_job`` (output folder,
``HydraConfig.set_config``, deep copies, the three ``.hydra`` YAML files); the task; ``ltr_bench.runner.run`` up to the trial's MLflow run (config checks, data, ranker,
tracker, tags, the study's sweep run); and after the run. Each worker's first job (its imports
and caches warming) is left out. The same jobs' time inside their MLflow runs but outside the
timed read, fit and evaluation comes from the sweep's MLflow store.

    .venv/bin/python benchmarks/bench_job_phases.py [--model direct_ranker] [--trials 20]
"""

from __future__ import annotations

import argparse
import functools
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

GOAL_PER_JOB_S = 0.15  # a job's fixed cost at most (the goal on docs/results/fixed-costs.md)
OUT_ENV = "LTR_JOB_PHASES_OUT"  # the folder the workers' stamps go to
# (label, from mark, to mark, which occurrence of each: first or last), in a job's order
PHASES = [
    ("the payload unpacked, Hydra's singleton state set", "job>", "compose>", 0, 0),
    ("the job's config composed by Hydra from the config files", "compose>", "<compose", 0, 0),
    ("the launcher's job, up to run_job", "<compose", "run_job>", 0, 0),
    ("run_job, up to the task", "run_job>", "task>", 0, 0),
    ("the task, up to ltr_bench.runner.run", "task>", "run>", 0, 0),
    ("ltr_bench.runner.run, up to the trial's MLflow run", "run>", "start_run>", 0, -1),
    ("the MLflow run's end, until run returns", "<end_run", "<run", -1, 0),
    ("run's return, until the job ends", "<run", "<job", 0, 0),
]
IDLE = "a worker idle between its jobs"
WITHIN = [  # parts of run_job's phase, summed over their calls in the job
    ("- of which the three .hydra YAML files", "save"),
    ("- of which HydraConfig.set_config (each call of the job)", "set_config"),
]


def hook() -> None:
    """``sweep.on_worker_start``: the default hook, then stamps around each phase's functions."""
    from ltr_bench.cli.gc_policy import tune_garbage_collection

    tune_garbage_collection()
    import hydra.core.utils as hydra_utils
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.hydra_config import HydraConfig

    import ltr_bench.launching.processes as processes
    import ltr_bench.launching.worker as worker
    import ltr_bench.runner as runner
    from ltr_bench.tracking.tracker import Tracker

    # open for the worker's life, line-buffered: each stamp is on disk as it is written
    out = open(Path(os.environ[OUT_ENV]) / f"{os.getpid()}.marks", "a", buffering=1)

    def stamped(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out.write(f"{time.perf_counter():.6f} {time.process_time():.6f} {label}>\n")
            try:
                return inner(*args, **kwargs)
            finally:
                out.write(f"{time.perf_counter():.6f} {time.process_time():.6f} <{label}\n")

        setattr(owner, name, wrapper)

    stamped(worker, "run", "job")  # (each job's call finds worker.run by its name)
    stamped(ConfigLoaderImpl, "load_sweep_config", "compose")
    stamped(hydra_utils, "run_job", "run_job")
    stamped(hydra_utils, "_save_config", "save")
    stamped(HydraConfig, "set_config", "set_config")
    stamped(processes, "_run_guarded", "task")
    stamped(runner, "run", "run")
    stamped(Tracker, "start_run", "start_run")
    stamped(Tracker, "end_run", "end_run")


def read_marks(path: Path) -> list[tuple[float, float, str]]:
    """A worker's stamps: (wall, CPU, mark) per line."""
    marks = []
    for line in path.read_text().splitlines():
        wall, cpu, mark = line.split()
        marks.append((float(wall), float(cpu), mark))
    return marks


def job_phases(marks: list[tuple[float, float, str]]) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of each phase (``PHASES``, ``WITHIN``) per job of one worker, its first
    job left out, and of the worker's idle time between jobs."""
    jobs: list[list[tuple[float, float, str]]] = []
    for wall, cpu, mark in marks:
        if mark == "job>":
            jobs.append([])
        if jobs:
            jobs[-1].append((wall, cpu, mark))
    jobs = [j for j in jobs if j[-1][2] == "<job"]  # ended jobs only
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for job in jobs[1:]:
        at: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for wall, cpu, mark in job:
            at[mark].append((wall, cpu))
        for label, start, end, i, j in PHASES:
            (w0, c0), (w1, c1) = at[start][i], at[end][j]
            out[label].append((w1 - w0, c1 - c0))
        for label, name in WITHIN:
            pairs = list(zip(at[f"{name}>"], at[f"<{name}"]))
            out[label].append(
                (sum(b[0] - a[0] for a, b in pairs), sum(b[1] - a[1] for a, b in pairs))
            )
    for before, after in zip(jobs[1:], jobs[2:]):
        out[IDLE].append((after[0][0] - before[-1][0], after[0][1] - before[-1][1]))
    return out


def in_run_rest(store: Path) -> list[float]:
    """Seconds of each trial run outside its timed read, fit and evaluation (MLflow store)."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = con.execute(
        "select (r.end_time - r.start_time) / 1000.0 - coalesce(sum(m.value), 0) from runs r "
        "join tags t on t.run_uuid = r.run_uuid and t.key = 'ltr.role' and t.value = 'trial' "
        "left join metrics m on m.run_uuid = r.run_uuid "
        "and m.key in ('time_read_s', 'time_fit_s', 'time_eval_s') "
        "where r.end_time is not null group by r.run_uuid"
    ).fetchall()
    con.close()
    return [float(r[0]) for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="direct_ranker")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fold", type=int, default=1)
    ap.add_argument("--data", default=os.environ.get("LTR_DATA"))
    args = ap.parse_args()
    from ltr_bench.data.datasets import resolve_data_root

    data = resolve_data_root(args.data)
    work = Path(tempfile.mkdtemp(prefix="bench_job_phases-"))
    marks = work / "marks"
    marks.mkdir()
    command = [
        str(Path(sys.executable).parent / "ltr-bench"),
        "-m",
        f"search={args.model}",
        f"model={args.model}",
        "dataset=mq2008",
        f"dataset.root={data}",
        "protocol=letor_folds",
        f"dataset.fold={args.fold}",
        f"hydra.sweeper.n_trials={args.trials}",
        "hydra/launcher=ltr_pool",
        f"hydra.launcher.n_jobs={args.jobs}",
        f"hydra.sweeper.n_jobs={args.jobs}",
        "trainer.enable_progress_bar=false",
        f"hydra.sweep.dir={work / 'sweep'}",
        "sweep.on_worker_start=bench_job_phases.hook",
    ]
    here = str(Path(__file__).resolve().parent)
    env = {
        **os.environ,
        OUT_ENV: str(marks),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p),
    }
    shown = [c for c in command[1:] if not c.startswith(("dataset.root=", "hydra.sweep.dir="))]
    print(f"work dir {work}; ltr-bench {' '.join(shown)}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    phases: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for path in sorted(marks.glob("*.marks")):
        for label, values in job_phases(read_marks(path)).items():
            phases[label].extend(values)
    rest = in_run_rest(work / "mlflow.db")
    print_table(phases, rest, wall, args)


def print_table(
    phases: dict[str, list[tuple[float, float]]],
    rest: list[float],
    wall: float,
    args: argparse.Namespace,
) -> None:
    """The phases' medians and means (ms) and their sum outside the runs."""
    n_jobs = len(phases[PHASES[0][0]])
    if not n_jobs:
        raise SystemExit("no job timed (each worker's first is left out): give more --trials")
    print(
        f"\n{args.trials}-trial sweep of search={args.model} on MQ2008 fold {args.fold}, "
        f"{args.jobs} workers: {wall:.1f} s wall; {n_jobs} jobs timed (each worker's first "
        "left out)\n"
    )
    print("| phase | wall median (ms) | wall mean (ms) | CPU median (ms) |")
    print("| --- | ---: | ---: | ---: |")
    # (the idle time needs a worker's third job: left out when none had one)
    outside = [label for label, *_ in PHASES] + [IDLE]
    outside = [label for label in outside if phases[label]]
    order = outside[:4] + [label for label, _ in WITHIN] + outside[4:]  # run_job's parts after it
    for label in order:
        walls = [w * 1000 for w, _ in phases[label]]
        cpus = [c * 1000 for _, c in phases[label]]
        print(
            f"| {label} | {statistics.median(walls):.1f} | {statistics.mean(walls):.1f} | "
            f"{statistics.median(cpus):.1f} |"
        )
    median_sum = sum(statistics.median(w for w, _ in phases[label]) for label in outside)
    mean_sum = sum(statistics.mean(w for w, _ in phases[label]) for label in outside)
    print(
        f"| a job outside its MLflow run (the sum) | {median_sum * 1000:.1f} | {mean_sum * 1000:.1f} | |"
    )
    if rest:
        rest_median, rest_mean = statistics.median(rest), statistics.mean(rest)
        print(
            f"| a trial run, outside its timed read, fit and evaluation ({len(rest)} runs, all "
            f"jobs) | {rest_median * 1000:.1f} | {rest_mean * 1000:.1f} | |"
        )
        print(
            f"| a job's fixed cost: the two above | {(median_sum + rest_median) * 1000:.1f} | "
            f"{(mean_sum + rest_mean) * 1000:.1f} | |"
        )
        print(f"\nThe fixed-costs goal: at most {GOAL_PER_JOB_S * 1000:.0f} ms a job.")


if __name__ == "__main__":
    main()
