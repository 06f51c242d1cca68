"""Fixed costs of a run, a trial and the help: each measured against its floor, in one run.

Every figure is a fresh process on this machine, timed from launch to exit (median of
``--repeat``; ``import lightning`` and the tiny run in turns, so that drift reaches both), with
``OMP_NUM_THREADS=1``; the goals are ratios between figures of this one run, so they hold on a
faster or slower machine alike:

- ``python -c "import lightning"`` is the goal's floor of a neural run (Lightning imports
  torch); the same import under the commands' garbage-collector policy (``ltr_bench.cli.gc_policy``),
  and with MLflow, its SQL store and matplotlib added, are the floors the libraries force on an
  untracked and a tracked tiny run (MLflow's store module alone loads ``mlflow.genai``);
  ``python -c "import hydra"`` is the floor of ``--help`` and ``--cfg job``;
- a tiny default run (DirectRanker, 1 epoch, MLflow on, 400 synthetic training documents in
  queries of 20) in a folder whose MLflow store exists, and the same run first in a new folder;
- LambdaMART and AdaRank runs: which heavy packages they import;
- a 20-trial sweep of the tiny job (5 inner folds, 2 workers of the ``ltr_pool`` launcher, no
  pruner), the median of
  ``--sweeps`` (each figure of the sweep is that of the run with the median wall time): its wall
  time against one tiny run, when trial 0 is asked and when the first job runs, and the fixed cost
  per job (the workers' time not spent in the runs' timed read, fit and evaluation, per job,
  from the MLflow store as ``bench_sweep_budget.py`` measures it), and its floor under Hydra's
  launcher (the first job's start, then each job's fitting and its per-job floor, two at a
  time). The per-job floor is what any job costs: a worker's job with a no-op task (the payload,
  Hydra's singleton state, Hydra composing the config, ``run_job``), Optuna
  asking and telling its trial in a SQLite study, and MLflow logging its run in a SQLite store.
  Trial 0's floor is a fresh process that imports Hydra and Optuna, composes the config once,
  creates a SQLite study and asks a trial, and nothing else.

    .venv/bin/python benchmarks/bench_fixed_costs.py [--repeat 5] [--trials 20] [--sweeps 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

BIN = Path(sys.executable).parent
LTR_BENCH = str(BIN / "ltr-bench")
TINY = [
    "dataset.n_train=400",
    "dataset.docs_per_query=20",
    "model.epochs=1",
    "trainer.enable_progress_bar=false",
]
QUIET = ["hydra.job_logging.root.level=WARNING", "hydra.hydra_logging.root.level=WARNING"]
TRACKED_RUN_IMPORTS = (
    "import lightning, mlflow, matplotlib.pyplot, mlflow.store.tracking.sqlalchemy_store"
)
# The floors of the commands' own ratios import under the commands' garbage-collector policy
# (ltr_bench.cli.gc_policy), as the commands do; the goal's floor is the plain `import lightning`.
WITH_GC_POLICY = "import ltr_bench.cli.gc_policy as g; g.tune_garbage_collection()\n"
HEAVY = ("torch", "lightning", "mlflow", "sklearn", "scipy", "pandas", "git")


def env() -> dict[str, str]:
    out = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for var in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        out.pop(var, None)
    return out


def timed(cmd: list[str], cwd: Path) -> float:
    """Wall seconds of one process from launch to exit (it must succeed)."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def median_of(repeat: int, once: Callable[[int], float]) -> float:
    return statistics.median(once(i) for i in range(repeat))


def loaded_packages(code: str, cwd: Path) -> list[str]:
    """Which of ``HEAVY`` are in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint('LOADED', *sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    out = python_output(probe, cwd)
    return [x for x in out.splitlines() if x.startswith("LOADED")][-1].split()[1:]


def python_output(code: str, cwd: Path) -> str:
    """The standard output of ``code`` run by a fresh interpreter in ``cwd`` (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"python -c failed:\n{done.stderr[-3000:]}")
    return done.stdout


def run_probe(overrides: list[str]) -> str:
    return (
        "from ltr_bench.cli.main import main\n"
        f"try:\n    main({[*overrides, 'hydra.run.dir=run', *QUIET]!r})\n"
        "except SystemExit as exc:\n    assert not exc.code\n"
    )


HYDRA_JOB = """
import statistics, time
import ltr_bench.cli.gc_policy as g
g.tune_garbage_collection()  # as in the sweep's workers (sweep.on_worker_start)
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.singleton import Singleton
from hydra.core.utils import setup_globals
from hydra.types import HydraContext, RunMode
from hydra._internal.callbacks import Callbacks
import cloudpickle  # what the ltr_pool launcher pickles a job's payload with
from ltr_bench.launching import worker
setup_globals()
with initialize_config_module(version_base="1.3", config_module="ltr_bench.conf"):
    loader = GlobalHydra.instance().config_loader()
    master = loader.load_configuration(
        "config", [*TINY, *QUIET, "hydra.sweep.dir=hydra-floor"], RunMode.MULTIRUN
    )
    context = HydraContext(config_loader=loader, callbacks=Callbacks(master))
    payload = cloudpickle.dumps((context, master, lambda c: 0.0, Singleton.get_state()))
    composed, jobs = [], []
    for i in range(12):
        overrides = [f"optimizer.lr=0.00{i % 9 + 1}"]
        t0 = time.perf_counter()
        loader.load_sweep_config(master, overrides)
        t1 = time.perf_counter()
        # what a worker does per job: unpickle the job's payload, then the launcher's job
        # function (singleton state, Hydra composing the config, run_job of a no-op)
        worker.run(i, overrides, payload)
        composed.append(t1 - t0)
        jobs.append(time.perf_counter() - t1)
print("HYDRA", *(statistics.median(x[2:]) for x in (composed, jobs)))
"""


def hydra_floor(root: Path) -> tuple[float, float]:
    """Seconds per job in a warm process (medians): composing its config from conf/ with Hydra,
    and what a worker does per job with a no-op task (the payload unpickled, Hydra's singleton
    state set, the config composed by Hydra, ``run_job``: the output folder, three YAML files,
    logging): the floor of a job's fixed cost."""
    code = f"TINY = {TINY!r}\nQUIET = {QUIET!r}\n{HYDRA_JOB}"
    composed, job = python_output(code, root).split("HYDRA")[-1].split()
    return float(composed), float(job)


# What the sweeper cannot skip before it asks trial 0: Python, Hydra and Optuna imported under
# the commands' GC policy, the config composed once, a new SQLite study created, one trial asked
TRIAL0_FLOOR = """
import ltr_bench.cli.gc_policy as g
g.tune_garbage_collection()
import os, warnings
import optuna
from hydra import compose, initialize_config_module
warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.WARNING)
with initialize_config_module(version_base="1.3", config_module="ltr_bench.conf"):
    compose("config", overrides=[*TINY, *QUIET])
storage = optuna.storages.RDBStorage("sqlite:///trial0-floor.db", heartbeat_interval=30)
study = optuna.create_study(storage=storage, study_name="floor", direction="maximize")
study.ask({"optimizer.lr": optuna.distributions.FloatDistribution(0.0005, 0.01)})
os._exit(0)  # timed to the ask, as the sweep's trial 0 is
"""


def trial0_floor(root: Path, repeat: int) -> float:
    """Seconds from launch to the ask of a fresh process that does only what the sweeper must
    before it asks trial 0 (median of ``repeat``, each in a new folder: a new study, as a sweep's)."""
    code = f"TINY = {TINY!r}\nQUIET = {QUIET!r}\n{TRIAL0_FLOOR}"
    return median_of(
        repeat, lambda i: timed([sys.executable, "-c", code], _fresh(root, f"trial0-{i}"))
    )


LIBRARY_FLOORS = """
import random, statistics, time, warnings
import mlflow, optuna
from mlflow.entities import Metric, Param, RunTag
warnings.simplefilter("ignore")
optuna.logging.set_verbosity(optuna.logging.WARNING)
# Optuna: ask and tell the tiny sweep's trials (TPE, one float, heartbeats on) in a SQLite study
storage = optuna.storages.RDBStorage("sqlite:///floor-optuna.db", heartbeat_interval=30)
sampler = optuna.samplers.TPESampler(seed=0, constant_liar=True)
study = optuna.create_study(storage=storage, study_name="floor", direction="maximize", sampler=sampler)
space = {"optimizer.lr": optuna.distributions.FloatDistribution(0.0005, 0.01)}
asking = []
for i in range(TRIALS):
    t0 = time.perf_counter()
    trial = study.ask(space)
    storage.record_heartbeat(trial._trial_id)
    study.tell(trial, random.random())
    asking.append(time.perf_counter() - t0)
# MLflow: one run per trial with a trial's calls (tags, params, fold and summary metrics, end)
client = mlflow.MlflowClient("sqlite:///floor-mlflow.db")
exp = client.create_experiment("floor")
runs = []
for i in range(TRIALS + 2):
    t0 = time.perf_counter()
    run = client.create_run(exp, tags={f"tag{k}": "x" for k in range(12)}, run_name=f"trial {i}")
    rid = run.info.run_id
    client.log_batch(rid, params=[Param(f"p{k}", "1") for k in range(30)])
    now = int(time.time() * 1000)
    metrics = [Metric(f"cv_fold/m{k}", 0.5, now, s) for k in range(6) for s in range(5)]
    client.log_batch(rid, metrics=metrics + [Metric(f"cv/m{k}", 0.5, now, 0) for k in range(15)])
    client.set_terminated(rid)
    runs.append(time.perf_counter() - t0)
print("FLOORS", statistics.mean(asking), statistics.mean(runs[2:]))
"""


def library_floors(root: Path, trials: int) -> tuple[float, float]:
    """Seconds per trial that the libraries take whatever the sweeper does (means): Optuna asking
    and telling the tiny sweep's trials in a SQLite study, and MLflow logging one trial's run
    (tags, params, fold and summary metrics, end) in a SQLite store."""
    out = python_output(f"TRIALS = {trials}\n{LIBRARY_FLOORS}", root)
    optuna_s, mlflow_s = out.split("FLOORS")[-1].split()
    return float(optuna_s), float(mlflow_s)


def sweep_command(root: Path, trials: int) -> list[str]:
    """The tiny sweep's command (``ltr-bench`` first), its MLflow store and sweep folder in ``root``."""
    return [
        LTR_BENCH,
        "-m",
        "hydra/sweeper=ltr_optuna",
        f"hydra.sweeper.n_trials={trials}",
        "optimizer.lr=interval(0.0005,0.01)",
        "hydra/launcher=ltr_pool",
        "hydra.launcher.n_jobs=2",
        "hydra.sweeper.n_jobs=2",
        "protocol.inner_cv=5",
        "threads=1",
        f"hydra.sweep.dir={root}/sweep",
        *TINY,
        *QUIET,
    ]


def sweep(root: Path, trials: int) -> dict[str, Any]:
    """The 20-trial tiny sweep run in ``root`` (its MLflow store and sweep folder): wall time,
    trial 0's ask and first job, fixed cost per job."""
    import optuna
    from bench_sweep_budget import worker_time  # a sibling benchmark: the same worker table

    started = dt.datetime.now()
    wall = timed(sweep_command(root, trials), root)
    results = yaml.safe_load((root / "sweep" / "optimization_results.yaml").read_text())
    study = optuna.load_study(study_name=results["study_name"], storage=results["storage"])
    asked = min(t.datetime_start for t in study.trials if t.datetime_start)
    done = min(t.datetime_complete for t in study.trials if t.datetime_complete)
    workers = worker_time(root / "mlflow.db", 2)
    first_job = _first_trial_run_start(root / "mlflow.db")
    return {
        "wall_s": wall,
        "trials": len(study.trials),
        "trial0_asked_s": (asked - started).total_seconds(),
        "first_job_s": first_job - started.timestamp(),
        "first_done_s": (done - started).total_seconds(),
        "fixed_per_job_s": (workers["rest_of_runs_s"] + workers["between_s"]) / workers["jobs"],
        "untimed_per_job_s": workers["rest_of_runs_s"] / workers["jobs"],
        "between_per_job_s": workers["between_s"] / workers["jobs"],
        "fitting_per_job_s": workers["fitting_s"] / workers["jobs"],
        "jobs": workers["jobs"],
    }


def _first_trial_run_start(store: Path) -> float:
    import sqlite3

    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    (start,) = con.execute(
        "select min(r.start_time) from runs r join tags t on t.run_uuid = r.run_uuid "
        "where t.key = 'ltr.role' and t.value = 'trial'"
    ).fetchone()
    con.close()
    return float(start) / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="processes per figure (median)")
    ap.add_argument("--trials", type=int, default=20, help="trials of the tiny sweep")
    ap.add_argument("--sweeps", type=int, default=3, help="tiny sweeps (the median is shown)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ltr-fixed-") as tmp:
        root = Path(tmp)
        py = sys.executable
        m: dict[str, float] = {"import lightning": 0.0}  # measured beside the tiny run, below
        m["import lightning, with the commands' GC policy"] = median_of(
            args.repeat, lambda i: timed([py, "-c", WITH_GC_POLICY + "import lightning"], root)
        )
        m["import lightning, mlflow, its SQL store, matplotlib, with the commands' GC policy"] = (
            median_of(
                args.repeat,
                lambda i: timed([py, "-c", WITH_GC_POLICY + TRACKED_RUN_IMPORTS], root),
            )
        )
        m["import hydra"] = median_of(
            args.repeat, lambda i: timed([py, "-c", "import hydra"], root)
        )
        m["ltr-bench --help"] = median_of(args.repeat, lambda i: timed([LTR_BENCH, "--help"], root))
        m["ltr-bench --cfg job"] = median_of(
            args.repeat, lambda i: timed([LTR_BENCH, "--cfg", "job"], root)
        )
        (root / "warm").mkdir()
        timed([LTR_BENCH, *TINY, *QUIET], root / "warm")  # the store exists from here on

        def later(i: int) -> float:
            return timed([LTR_BENCH, *TINY, *QUIET, f"hydra.run.dir=r{i}"], root / "warm")

        def first(i: int) -> float:
            (root / f"new{i}").mkdir()
            return timed([LTR_BENCH, *TINY, *QUIET], root / f"new{i}")

        # the goal's two figures in turns, so that the machine's drift reaches both alike
        pairs = [
            (timed([py, "-c", "import lightning"], root), later(i)) for i in range(args.repeat)
        ]
        m["import lightning"] = statistics.median(a for a, _ in pairs)
        m["tiny run"] = statistics.median(b for _, b in pairs)
        m["tiny run, new folder"] = median_of(args.repeat, first)
        m["tiny run, tracking=none"] = median_of(
            args.repeat,
            lambda i: timed(
                [LTR_BENCH, *TINY, *QUIET, "tracking=none", f"hydra.run.dir=n{i}"], root
            ),
        )
        work = json.loads(next((root / "warm").glob("r0/results.json")).read_text())
        m["tiny run: read + fit + eval"] = sum(
            float(work["times"].get(k) or 0) for k in ("time_read_s", "time_fit_s", "time_eval_s")
        )
        imports = {
            name: loaded_packages(run_probe([f"model={name}", "tracking=none"]), _fresh(root, name))
            for name in ("lambdamart", "adarank", "direct_ranker")
        }
        runs = [sweep(_fresh(root, f"sweep{i}"), args.trials) for i in range(args.sweeps)]
        s = sorted(runs, key=lambda run: run["wall_s"])[len(runs) // 2]  # a sweep is noisy
        s["of"], s["walls"] = len(runs), ", ".join(f"{run['wall_s']:.2f}" for run in runs)
        s["compose_s"], s["hydra_job_s"] = hydra_floor(root)
        s["optuna_trial_s"], s["mlflow_run_s"] = library_floors(root, args.trials)
        s["job_floor_s"] = s["hydra_job_s"] + s["optuna_trial_s"] + s["mlflow_run_s"]
        s["trial0_floor_s"] = trial0_floor(root, args.repeat)
    print(page(m, imports, s))


def _fresh(root: Path, name: str) -> Path:
    path = root / f"work-{name}"
    path.mkdir()
    return path


def sweep_floor(s: dict[str, Any]) -> float:
    """What the tiny sweep cannot go below with Hydra's launcher: its first job starts once a worker
    has imported the libraries (a tiny run's own floor), then every job is fitted, evaluated and
    composed and set up by Hydra, two at a time."""
    return float(s["first_job_s"] + s["jobs"] * (s["fitting_per_job_s"] + s["job_floor_s"]) / 2)


def page(m: dict[str, float], imports: dict[str, list[str]], s: dict[str, Any]) -> str:
    lines = ["| what | seconds |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.2f} |" for k, v in m.items()]
    lines += [
        f"| {s['trials']}-trial tiny sweep (5 inner folds, 2 ltr_pool workers; median of "
        f"{s['of']}: {s['walls']}) | {s['wall_s']:.2f} |",
        f"| sweep: trial 0 asked, after launch | {s['trial0_asked_s']:.2f} |",
        f"| sweep: first job's run started, after launch | {s['first_job_s']:.2f} |",
        f"| sweep: first trial complete, after launch | {s['first_done_s']:.2f} |",
        f"| sweep: fixed cost per job ({s['jobs']} jobs; fitting {s['fitting_per_job_s']:.2f} s per job) | {s['fixed_per_job_s']:.2f} |",
        f"| - of which in the job's MLflow run, outside its timed read, fit and evaluation | {s['untimed_per_job_s']:.2f} |",
        f"| - of which between runs (Hydra composing and setting up the job, the sweeper's tell and ask) | {s['between_per_job_s']:.2f} |",
        f"| Hydra: composing one job's config from the files | {s['compose_s']:.3f} |",
        f"| a worker's job with a no-op task (payload, Hydra's singleton state, composing, run_job) | {s['hydra_job_s']:.3f} |",
        f"| Optuna: asking and telling one trial (TPE, SQLite study) | {s['optuna_trial_s']:.3f} |",
        f"| MLflow: one trial's run (tags, params, metrics, end; SQLite store) | {s['mlflow_run_s']:.3f} |",
        f"| the per-job floor: those three | {s['job_floor_s']:.3f} |",
        f"| sweep floor: first job's run started + every job's fitting and per-job floor over 2 workers | {sweep_floor(s):.2f} |",
        f"| trial 0's floor: a process importing Hydra and Optuna, composing the config once, creating a SQLite study and asking a trial | {s['trial0_floor_s']:.2f} |",
    ]
    lightning, hydra, tiny = m["import lightning"], m["import hydra"], m["tiny run"]
    goals = [
        ("tiny run / import lightning", tiny / lightning, "<= 1.3"),
        (
            "tiny run / its forced imports (lightning, mlflow, SQL store, matplotlib; GC policy)",
            tiny
            / m[
                "import lightning, mlflow, its SQL store, matplotlib, with the commands' GC policy"
            ],
            "(floor 1)",
        ),
        (
            "tiny run, tracking=none / import lightning (GC policy)",
            m["tiny run, tracking=none"] / m["import lightning, with the commands' GC policy"],
            "(floor 1)",
        ),
        ("new folder - later run (s)", m["tiny run, new folder"] - tiny, "<= 1.0"),
        ("--help / import hydra", m["ltr-bench --help"] / hydra, "<= 3"),
        ("--cfg job / import hydra", m["ltr-bench --cfg job"] / hydra, "<= 3"),
        ("tiny sweep / tiny run", s["wall_s"] / tiny, "<= 1.5"),
        ("tiny sweep / sweep floor", s["wall_s"] / sweep_floor(s), "(floor 1)"),
        (
            "sweep floor / tiny run (the least tiny sweep / tiny run these floors allow)",
            sweep_floor(s) / tiny,
            "(floor)",
        ),
        ("trial 0 asked after launch (s)", s["trial0_asked_s"], "<= ~2"),
        (
            "trial 0 asked after launch / trial 0's floor",
            s["trial0_asked_s"] / s["trial0_floor_s"],
            "(floor 1)",
        ),
        ("fixed cost per job (s)", s["fixed_per_job_s"], "<= 0.15"),
        (
            "fixed cost per job / the per-job floor",
            s["fixed_per_job_s"] / s["job_floor_s"],
            "(floor 1)",
        ),
    ]
    lines += ["", "| goal | measured | target | holds |", "| --- | ---: | --- | --- |"]
    for name, value, target in goals:
        if target.startswith("("):
            lines.append(f"| {name} | {value:.2f} | {target} | - |")
            continue
        holds = value <= float(target.split()[-1].lstrip("~"))
        lines.append(f"| {name} | {value:.2f} | {target} | {'yes' if holds else 'no'} |")
    lines += ["", "| run | heavy packages imported |", "| --- | --- |"]
    lines += [
        f"| model={k}, tracking=none | {', '.join(v) or 'none'} |" for k, v in imports.items()
    ]
    free = all(not {"lightning", "torch"} & set(imports[k]) for k in ("lambdamart", "adarank"))
    lines += [
        "",
        "| goal | holds |",
        "| --- | --- |",
        f"| a LambdaMART or AdaRank run imports neither Lightning nor torch | {'yes' if free else 'no'} |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
