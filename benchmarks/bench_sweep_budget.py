"""Sweeps at the papers' budget: racing trials and re-evaluations, trials in flight, Table 1's
time, and the shared preprocessing cache.

Part ``pruning`` -- the README's MQ2008 DirectRanker sweep (``search=direct_ranker
protocol=letor_folds``, a study per outer fold, ``--jobs`` workers of the ``ltr_pool`` launcher) once per variant, each
in a fresh folder with the same sampler seed, then ``refit_best=<sweep> seed=<seeds>``. Prints per
variant: sweep wall time (search + re-evaluation, from the sweep's log), trials completed /
pruned, inner folds fitted by the search and the re-evaluation, re-evaluations dropped, and the
refit's test NDCG@10 / MAP as the mean over the seeds and folds; speed-ups and the NDCG@10
difference are against ``--base`` measured in the same run. A variant is
``<pruner>[:<flag>...]``:

- ``none``: no racing at all (every trial runs every fold, every re-evaluation every fold);
- ``median``, ``successive_halving``, ``hyperband``: that search pruner, and the search config's
  raced re-evaluation (``hydra.sweeper.reevaluate.pruner``);
- flags: ``async`` (the default: trials in flight, a worker starts the next trial as soon as its
  own ends), ``batch`` (``hydra.sweeper.asynchronous=false``: batches of ``--jobs`` trials, each
  waiting for its slowest), ``batchN`` (batches of N trials for the ``--jobs`` workers),
  ``reproducible`` (``hydra.sweeper.reproducible=true``), ``fullreeval`` (re-evaluations not
  raced), ``rfN`` (the pruner's ``reduction_factor=N``), ``workers`` (``--jobs`` sweeper processes sharing one SQLite study, one trial at a
  time each, then one more run that re-evaluates).

Part ``table1`` -- ``ltr-bench experiment=table1`` on MQ2008, five-fold variant
(``experiment.datasets=[mq2008] experiment.run_variants=[letor_folds]``), its wall time against
the target (``TABLE1_TARGET_MIN``) and where it went (``benchmarks/table1_timing.py``).

Part ``preprocessing`` -- the time of one sweep trial (5-fold inner CV, in-process
``ltr_bench.runner.run`` with ``sweep.trial_number=0``, tracking off) before (``LTR_TRANSFORM_CACHE
=off``: every trial refits the quantile transform on every inner fold) and after (the cache filled
by an earlier trial), on MQ2008 fold 1 and on an MSLR-WEB10K-shaped generated fold (136 features,
``--mslr-docs`` training documents, 120 per query, labels 0-4), for which the model is cut to
``--mslr-epochs`` epochs (the fit is the same before and after; what changes is the preparation).

The full-size targets, each one command on an idle 2-core machine (hours each):

    # the MQ2008 sweep, five folds, 30 trials, top 5, refit seeds 0-3: racing vs no racing
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sweep_budget.py --part pruning \
        --pruners none:batch,none,successive_halving:batch,successive_halving
    # one MQ2008 fold at the papers' budget (30 trials, 5-fold inner CV, top 5, 2 workers)
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sweep_budget.py --part pruning \
        --folds 1 --pruners none,successive_halving
    # Table 1 on MQ2008, five-fold variant, at the papers' budget
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sweep_budget.py --part table1

``--quick`` = one outer fold, 10 trials, re-evaluation of the top 2, refit seed 0, no MSLR-shaped
fold (``--part pruning --quick``: a few minutes on 2 cores; ``--part table1 --quick``: Table 1's
smoke size, ``scale=quick``). Every size is an option.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ltr_bench.data.datasets import resolve_data_root

LTR_BENCH = str(Path(sys.executable).parent / "ltr-bench")
TABLE1_TARGET_MIN = 15  # Table 1, MQ2008, five folds at the papers' budget, 2 cores
DEFAULT_DATA = resolve_data_root(os.environ.get("LTR_DATA"))


# ------------------------------------------------------------------------------ pruning
def variant(spec: str, jobs: int) -> tuple[str, int | None, list[str]]:
    """``<pruner>[:<flag>...]`` -> (mode: async | batch | workers, batch size, its overrides)."""
    name, *flags = spec.split(":")
    mode, batch = "async", None
    extra = [f"hydra/sweeper/pruner={name}"]
    if name == "none" or "fullreeval" in flags:
        extra.append("hydra.sweeper.reevaluate.pruner=null")
    for flag in flags:
        if flag.startswith("batch"):
            mode, batch = "batch", int(flag[len("batch") :] or jobs)
            extra.append("hydra.sweeper.asynchronous=false")
        elif flag == "reproducible":
            extra.append("hydra.sweeper.reproducible=true")
        elif flag == "workers":
            mode = "workers"
        elif flag.startswith("rf"):  # the pruner's reduction factor (successive halving)
            extra.append(f"hydra.sweeper.pruner.reduction_factor={int(flag[2:])}")
        elif flag not in ("async", "fullreeval"):
            raise SystemExit(f"unknown flag '{flag}' in '{spec}'")
    return mode, batch, extra


def run_sweep(workdir: Path, spec: str, args: argparse.Namespace) -> dict[str, Any]:
    """One variant's sweep and refit in ``workdir``; wall times, work done, the refit's metrics."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LTR_DATA": str(args.data)}
    sweep_dir = workdir / "sweep"
    folds = ",".join(str(f) for f in args.folds)
    mode, batch, extra = variant(spec, args.jobs)
    cmd = [
        LTR_BENCH,
        "-m",
        "search=direct_ranker",
        "dataset=mq2008",
        "protocol=letor_folds",
        f"dataset.fold={folds}",
        "hydra.sweeper.study_per=[dataset.fold]",
        f"hydra.sweeper.n_trials={args.trials}",
        f"hydra.sweeper.sampler.seed={args.sampler_seed}",
        *extra,
    ]
    top_k = [] if args.top_k is None else [f"hydra.sweeper.reevaluate.top_k={args.top_k}"]
    t0 = time.perf_counter()
    if mode == "workers":
        # `jobs` sweeper processes sharing one SQLite study, one trial at a time each: a pruned
        # trial frees its worker at once. Then one more run of the same command re-evaluates the
        # top trials and writes the summary.
        shared = [*cmd, f"hydra.sweeper.storage=sqlite:///{workdir / 'shared.db'}", "threads=1"]
        procs = [
            subprocess.Popen(
                [*shared, "hydra.sweeper.reevaluate.top_k=0", f"hydra.sweep.dir={workdir}/w{i}"],
                cwd=workdir,
                env=env,
                stdout=open(workdir / f"w{i}.log", "w"),
                stderr=subprocess.STDOUT,
            )
            for i in range(args.jobs)
        ]
        if any(p.wait() != 0 for p in procs):
            raise SystemExit(f"a worker failed; see {workdir}/w*.log")
        cmd = [*shared, *top_k, f"hydra.sweep.dir={sweep_dir}"]
    else:
        cmd += [
            "hydra/launcher=ltr_pool",
            f"hydra.launcher.n_jobs={args.jobs}",
            f"hydra.sweeper.n_jobs={batch or args.jobs}",
            f"hydra.sweep.dir={sweep_dir}",
            *top_k,
        ]
    _check(
        subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True),
        workdir / "sweep.log",
    )
    sweep_s = time.perf_counter() - t0
    seeds = ",".join(str(s) for s in args.seeds)
    t0 = time.perf_counter()
    _check(
        subprocess.run(
            [LTR_BENCH, f"refit_best={sweep_dir}", f"seed={seeds}"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
        ),
        workdir / "refit.log",
    )
    refit_s = time.perf_counter() - t0
    phases = phase_times((workdir / "sweep.log").read_text()) if mode != "workers" else {}
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    studies = results["studies"] if "studies" in results else [results]
    test = {"ndcg@10": [], "map": []}
    for path in sorted((sweep_dir / "refit").glob("*/seed*/results.json")):
        mean = json.loads(path.read_text())["mean"]["test"]
        for k in test:
            test[k].append(mean[k])
    return {
        "variant": spec,
        "workers": worker_time(workdir / "mlflow.db", args.jobs),
        "sweep_s": sweep_s,
        "refit_s": refit_s,
        "search_s": phases.get("search", float("nan")),
        "reevaluation_s": phases.get("reevaluation", float("nan")),
        "complete": sum(s["n_complete"] for s in studies),
        "pruned": sum(s.get("n_pruned", 0) for s in studies),
        "failed": sum(s["n_failed"] for s in studies),
        **work_done(studies),
        "best": [s["best_params"] for s in studies],
        "ndcg@10": statistics.fmean(test["ndcg@10"]),
        "map": statistics.fmean(test["map"]),
        "n_refits": len(test["ndcg@10"]),
    }


def work_done(studies: list[dict[str, Any]]) -> dict[str, int]:
    """Inner folds fitted by the search (steps reported, else the trial's fold count) and by the
    re-evaluation (each record's folds), and re-evaluations dropped, over ``studies``."""
    import optuna

    search = 0
    for s in studies:
        for t in optuna.load_study(study_name=s["study_name"], storage=s["storage"]).trials:
            if t.state.name in ("COMPLETE", "PRUNED"):
                search += len(t.intermediate_values) or int(
                    t.user_attrs.get("objective_n_folds", 0)
                )
    records = [r for s in studies for r in s.get("reevaluated") or []]
    return {
        "search_folds": search,
        "reevaluation_folds": sum(int(r["reevaluation_n"]) for r in records),
        "dropped": sum(r.get("dropped_after") is not None for r in records),
    }


def worker_time(store: Path, workers: int) -> dict[str, float]:
    """Where the workers' time went, from the trial runs of an MLflow store: seconds of fitting
    (each run's timed read, fit and evaluation), of the rest of the runs, and between runs (a
    worker waiting for its next job: the sweeper's ask and tell, Hydra's job setup), over the
    span from the first trial run's start to the last one's end."""
    import sqlite3

    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    spans = con.execute(
        "select r.start_time, r.end_time from runs r join tags t on t.run_uuid = r.run_uuid "
        "where t.key = 'ltr.role' and t.value = 'trial' and r.end_time is not null"
    ).fetchall()
    (timed,) = con.execute(
        "select coalesce(sum(m.value), 0) from metrics m join tags t on t.run_uuid = m.run_uuid "
        "where t.key = 'ltr.role' and t.value = 'trial' "
        "and m.key in ('time_read_s', 'time_fit_s', 'time_eval_s')"
    ).fetchone()
    con.close()
    if not spans:
        return {}
    span = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1000
    in_runs = sum(e - s for s, e in spans) / 1000
    return {
        "jobs": len(spans),
        "span_s": span,
        "fitting_s": float(timed),
        "rest_of_runs_s": in_runs - float(timed),
        "between_s": workers * span - in_runs,
    }


def phase_times(log: str) -> dict[str, float]:
    """Seconds of a sweep log spent searching and re-evaluating, summed over its studies."""
    from table1_timing import study_phase_times  # a sibling: this script's folder is on sys.path

    studies = study_phase_times(log).values()
    return {k: sum(s[k] for s in studies) for k in ("search", "reevaluation")}


def _check(proc: subprocess.CompletedProcess, log: Path) -> None:
    log.write_text(proc.stdout + "\n" + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}); see {log}:\n{proc.stderr[-2000:]}")


def bench_pruning(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    rows = []
    for spec in args.pruners:
        print(f"sweep {spec} ...", flush=True)
        rows.append(run_sweep(root / spec.replace(":", "-"), spec, args))
        r = rows[-1]
        print(
            f"  {r['sweep_s']:.0f} s sweep ({r['search_s']:.0f} s search, {r['reevaluation_s']:.0f} s "
            f"re-evaluation), {r['refit_s']:.0f} s refit, {r['complete']} complete, {r['pruned']} pruned, "
            f"{r['dropped']} re-evaluations dropped",
            flush=True,
        )
    base = next((r for r in rows if r["variant"] == args.base), rows[0])
    print(
        f"\nMQ2008 DirectRanker sweep: folds {args.folds}, {args.trials} trials per study, "
        f"{args.jobs} ltr_pool workers, re-evaluation top_k={args.top_k if args.top_k is not None else 'config'}, "
        f"refit seeds {args.seeds} (test metrics: mean over seeds and folds); base {base['variant']}"
    )
    print(
        f"{'variant':<34}{'sweep':>8}{'x':>7}{'search':>8}{'x':>7}{'re-eval':>8}{'complete':>9}"
        f"{'pruned':>7}{'folds':>7}{'re-ev.f':>8}{'dropped':>8}{'ndcg@10':>9}{'d ndcg':>8}{'map':>8}"
    )
    for r in rows:
        print(
            f"{r['variant']:<34}{r['sweep_s']:>7.0f}s{base['sweep_s'] / r['sweep_s']:>6.2f}x"
            f"{r['search_s']:>7.0f}s{base['search_s'] / r['search_s']:>6.2f}x{r['reevaluation_s']:>7.0f}s"
            f"{r['complete']:>9}{r['pruned']:>7}{r['search_folds']:>7}{r['reevaluation_folds']:>8}"
            f"{r['dropped']:>8}{r['ndcg@10']:>9.4f}{r['ndcg@10'] - base['ndcg@10']:>+8.4f}{r['map']:>8.4f}"
        )
    for r in rows:
        if r is not base:
            ratio, diff = base["sweep_s"] / r["sweep_s"], r["ndcg@10"] - base["ndcg@10"]
            print(
                f"target: {r['variant']} vs {base['variant']}: {ratio:.2f}x faster (>= 2.2x, stretch "
                f"2.5x: {'met' if ratio >= 2.2 else 'not met'}), refit test NDCG@10 {diff:+.4f} "
                f"(within 0.003: {'met' if abs(diff) <= 0.003 else 'not met'})"
            )
    print(
        f"\nWhere the {args.jobs} workers' time went, from the first trial run's start to the last "
        "one's end (worker-seconds; fitting = the runs' timed read, fit and evaluation; between "
        "jobs = waiting for the next job: the sweeper's ask and tell, Hydra's job setup; fixed = "
        "rest + between, per job and as a share of the span; fit x = the base's fitting over the "
        "variant's, the speed-up were a job to cost its fitting only)"
    )
    print(
        f"{'variant':<34}{'jobs':>6}{'span':>8}{'fitting':>9}{'rest':>8}{'between':>9}{'per job':>9}"
        f"{'fixed/job':>10}{'fixed %':>8}{'fit x':>7}"
    )
    base_fitting = (base["workers"] or {}).get("fitting_s")
    for r in rows:
        w = r["workers"]
        if w:
            fixed = w["rest_of_runs_s"] + w["between_s"]
            fit_x = (
                base_fitting / w["fitting_s"] if base_fitting and w["fitting_s"] else float("nan")
            )
            print(
                f"{r['variant']:<34}{w['jobs']:>6}{w['span_s']:>7.0f}s{w['fitting_s']:>8.0f}s"
                f"{w['rest_of_runs_s']:>7.0f}s{w['between_s']:>8.0f}s"
                f"{w['between_s'] / w['jobs']:>8.2f}s{fixed / w['jobs']:>9.2f}s"
                f"{100 * fixed / (args.jobs * w['span_s']):>7.0f}%{fit_x:>6.2f}x"
            )
    if "none" in args.pruners:
        replay_none(root / "none", args.top_k)
    return rows


def replay_none(workdir: Path, top_k: int | None) -> None:
    """The ``none`` sweep replayed under racing rules (``benchmarks/replay_racing.py``): what
    each rule would have fitted and chosen on the same trials."""
    from replay_racing import load, report, rules_grid

    studies = load(workdir / "mlflow.db", "ndcg_at_10")
    print(
        f"\nThe 'none' sweep's {len(studies)} studies replayed under racing rules "
        "(benchmarks/replay_racing.py: the same trials; sh<r> = successive halving with reduction "
        "factor r, z/m = the re-evaluation race; x folds = the fold ratio, a bound on the "
        "speed-up; same = studies choosing the trial the sweep chose; approx = studies where a "
        "replayed candidate was never re-evaluated in the record)"
    )
    report(studies, rules_grid("0,3,4,8", "-1,2,1", "3"), top_k or 5, 2, 0.9)


# ------------------------------------------------------------------------------ table 1
def bench_table1(args: argparse.Namespace, root: Path) -> None:
    """Table 1 on MQ2008, five-fold variant (``--quick``: its smoke size), timed end to end."""
    sys.path.insert(0, str(Path(__file__).parent))
    from table1_timing import timings, worker_budget

    work = root / "table1"
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LTR_DATA": str(args.data)}
    cmd = [
        LTR_BENCH,
        "experiment=table1",
        "experiment.datasets=[mq2008]",
        "experiment.run_variants=[letor_folds]",
        f"experiment.n_jobs={args.jobs}",
        # quick: Table 1's smoke size, its sweeps' trials in flight in ltr_pool workers too
        *(
            [
                "scale=quick",
                "experiment.launcher_overrides=['hydra/launcher=ltr_pool',"
                "'hydra.launcher.n_jobs=${experiment.n_jobs}',"
                "'hydra.sweeper.n_jobs=${experiment.n_jobs}']",
            ]
            if args.quick
            else []
        ),
    ]
    print(f"table 1: {' '.join(cmd[1:])} ...", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    _check(proc, work / "table1.log")
    out = next(
        Path(line.split("outputs: ", 1)[1].strip())
        for line in proc.stdout.splitlines()
        if line.startswith("outputs: ")
    )
    out = out if out.is_absolute() else work / out
    rows = timings(out)
    print(f"{'model':<15}{'search':>9}{'re-eval':>9}{'refit':>8}")
    for r in rows:
        print(
            f"{r['model']:<15}{r['search_s']:>8.0f}s{r['reevaluation_s']:>8.0f}s{r['refit_s']:>7.0f}s"
        )
    verdict = (
        "quick size: no target"
        if args.quick
        else f"target <= {TABLE1_TARGET_MIN} min: {'met' if wall <= TABLE1_TARGET_MIN * 60 else 'not met'}"
    )
    print(
        f"Table 1, MQ2008, five-fold variant{' (quick)' if args.quick else ''}: {wall / 60:.1f} min "
        f"wall ({verdict}); outputs {out}"
    )
    print_worker_budget(worker_budget(work / "mlflow.db", wall, args.jobs), wall, args)


def print_worker_budget(b: dict[str, float], wall: float, args: argparse.Namespace) -> None:
    """The Table 1 run's floor (its fits over the workers) and where the rest of its time went."""
    jobs = b["trial_runs"] + b["fold_runs"]
    if not jobs or not b["fitting_s"]:
        print("\nno timed sweep job or refit fold in the run's MLflow store: no floor to show")
        return
    rows = [
        ("wall time", wall),
        (
            f"fitting: the timed read, fit and evaluation of {b['trial_runs']:.0f} sweep jobs and "
            f"{b['fold_runs']:.0f} refit folds (worker-seconds)",
            b["fitting_s"],
        ),
        (f"the floor: that fitting over {args.jobs} workers", b["floor_s"]),
        ("in those runs, outside their timed parts (worker-seconds)", b["rest_of_runs_s"]),
        (
            "outside runs: sweeps and refits starting, Hydra's job set-up, Optuna's ask and tell, "
            "a worker without a job at a study's end, the report (worker-seconds)",
            b["outside_runs_s"],
        ),
        ("- both of those per run", (b["rest_of_runs_s"] + b["outside_runs_s"]) / jobs),
    ]
    print("\n| what | seconds |\n| --- | ---: |")
    for what, seconds in rows:
        print(f"| {what} | {seconds:.{2 if seconds < 10 else 0}f} |")
    if args.quick:
        return
    target = TABLE1_TARGET_MIN * 60
    print("\n| goal | measured | target | holds |\n| --- | ---: | --- | --- |")
    print(
        f"| wall time (min) | {wall / 60:.1f} | <= {TABLE1_TARGET_MIN} | "
        f"{'yes' if wall <= target else 'no'} |"
    )
    print(
        f"| wall time / the fits' floor | {wall / b['floor_s']:.2f} | "
        f"(floor 1; the target is {target / b['floor_s']:.2f}x the floor) | - |"
    )


# ------------------------------------------------------------------------------ preprocessing
class GeneratedFolds:
    """An in-memory one-fold dataset of MSLR-WEB10K's shape, with a cache root like a LETOR folder's
    (so the runner shares its preprocessing). Labels depend on the first features (learnable)."""

    _memo: dict[tuple, Any] = {}

    def __init__(
        self,
        n_train_docs: int = 723_000,
        n_features: int = 136,
        docs_per_query: int = 120,
        cache_dir: str | None = None,
        relevance_threshold: int = 2,
        name: str = "mslr_shaped",
        **_: Any,
    ) -> None:
        self.n_train_docs, self.n_features, self.dpq = (
            int(n_train_docs),
            int(n_features),
            int(docs_per_query),
        )
        self.cache_dir = cache_dir
        self.relevance_threshold = int(relevance_threshold)
        self.name = name
        self.n_folds = 1

    def _part(self, n_docs: int, seed: int) -> Any:
        from ltr_bench.data.queryset import QuerySet

        rng = np.random.default_rng(seed)
        nq = max(n_docs // self.dpq, 2)
        x = rng.normal(size=(nq * self.dpq, self.n_features)).astype(np.float32)
        x[:, 40:80] = np.round(x[:, 40:80] * 2)  # many ties, like MSLR's count features
        score = x[:, :5].sum(1) + rng.normal(size=len(x))
        labels = np.digitize(score, np.quantile(score, [0.5, 0.75, 0.9, 0.97]))
        return QuerySet.from_arrays(x, labels, np.repeat(np.arange(nq) + seed * 10**7, self.dpq))

    def load_fold(self, i: int) -> Any:
        from ltr_bench.data.datasets import FoldData

        key = (self.n_train_docs, self.n_features, self.dpq)
        if key not in self._memo:
            n = self.n_train_docs
            self._memo[key] = FoldData(
                self._part(n, 1), self._part(n // 3, 2), self._part(n // 3, 3), self.name
            )
        return self._memo[key]

    def load_all(self) -> Any:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "n_train_docs": self.n_train_docs, "n_features": self.n_features}


def time_trial(overrides: list[str], cache: str) -> dict[str, float]:
    """One sweep trial's run times (in-process, tracking off); ``cache`` = on | off."""
    from hydra import compose, initialize_config_dir

    from ltr_bench.cli.main import config_dir
    from ltr_bench.runner import run

    os.environ["LTR_TRANSFORM_CACHE"] = "on" if cache == "on" else "off"
    with initialize_config_dir(config_dir(), version_base="1.3"):
        cfg = compose(
            "config",
            [
                "tracking=none",
                "threads=1",
                "sweep.trial_number=0",
                "sweep.study_name=bench",
                "protocol=single",
                *overrides,
            ],
        )
    t0 = time.perf_counter()
    result = run(cfg, verbose=False)
    return {
        "total": time.perf_counter() - t0,
        "read": result.times["time_read_s"],
        "fit": result.times["time_fit_s"],
        "objective": float(result.objective),
    }


def bench_preprocessing(args: argparse.Namespace, root: Path) -> None:
    cache = root / "cache"
    cases = (
        []
        if args.skip_mq2008
        else [
            (
                "MQ2008 fold 1",
                [
                    "dataset=mq2008",
                    f"dataset.root={args.data}",
                    "dataset.fold=1",
                    f"dataset.cache_dir={cache}",
                ],
            )
        ]
    )
    if args.mslr_docs:
        cases.append(
            (
                f"MSLR-shaped ({args.mslr_docs} train docs x 136)",
                [
                    "dataset=mslr_web10k",
                    "dataset._target_=__main__.GeneratedFolds",
                    f"+dataset.n_train_docs={args.mslr_docs}",
                    f"dataset.cache_dir={cache}",
                    f"model.epochs={args.mslr_epochs}",
                ],
            )
        )
    importlib.import_module("lightning")  # its ~5 s import is not part of any timed trial

    print("\ntime per sweep trial (5 inner folds; read = splitting + preprocessing)")
    print(f"{'data':<38}{'cache':>7}{'total':>9}{'read':>9}{'fit':>9}{'objective':>11}")
    for label, ov in cases:
        if ov[0] == "dataset=mq2008":
            time_trial(ov, "off")  # warm-up: imports, the parse cache, first-call costs (not shown)
        else:
            GeneratedFolds(args.mslr_docs).load_fold(0)  # generate outside the timed trials
        before = time_trial(ov, "off")
        time_trial(ov, "on")  # fills the cache (what the first trial of a sweep does)
        after = time_trial(ov, "on")
        assert abs(before["objective"] - after["objective"]) < 1e-6, (before, after)
        for name, t in (("off", before), ("warm", after)):
            print(
                f"{label:<38}{name:>7}{t['total']:>8.1f}s{t['read']:>8.1f}s{t['fit']:>8.1f}s{t['objective']:>11.4f}"
            )
        print(
            f"{'':<38}{'ratio':>7}{before['total'] / after['total']:>8.2f}x"
            f"{before['read'] / max(after['read'], 1e-9):>8.1f}x",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick", action="store_true", help="1 fold, 10 trials, top_k 2, seed 0, no MSLR fold"
    )
    ap.add_argument("--part", choices=("all", "pruning", "table1", "preprocessing"), default="all")
    ap.add_argument("--folds", type=lambda s: [int(x) for x in s.split(",")], default=None)
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument(
        "--top-k", type=int, default=None, help="re-evaluation top_k (default: the search config's)"
    )
    ap.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=None)
    ap.add_argument(
        "--pruners",
        type=lambda s: s.split(","),
        default=["none", "successive_halving"],
        help="variants <pruner>[:flag...], flags async|batch|batchN|reproducible|fullreeval|rfN|workers",
    )
    ap.add_argument("--base", default="none", help="the variant the speed-ups are against")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sampler-seed", type=int, default=0)
    ap.add_argument(
        "--mslr-docs", type=int, default=None, help="0 skips the MSLR-shaped fold (723000)"
    )
    ap.add_argument("--mslr-epochs", type=int, default=1)
    ap.add_argument(
        "--skip-mq2008", action="store_true", help="preprocessing part: the MSLR-shaped fold only"
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    quick = {"folds": [1], "trials": 10, "top_k": 2, "seeds": [0], "mslr_docs": 0}
    full = {
        "folds": [1, 2, 3, 4, 5],
        "trials": 30,
        "top_k": None,
        "seeds": [0, 1, 2, 3],
        "mslr_docs": 723_000,
    }
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if not (args.data / "MQ2008" / "Fold1" / "train.txt").is_file():
        raise SystemExit(f"MQ2008 not found under {args.data} (set LTR_DATA or --data)")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench_sweep_budget-"))
    print(f"work dir {root} (machine: {os.cpu_count()} cores)", flush=True)
    if args.part in ("all", "preprocessing"):
        bench_preprocessing(args, root)
    if args.part in ("all", "pruning"):
        bench_pruning(args, root)
    if args.part in ("all", "table1"):
        bench_table1(args, root)


if __name__ == "__main__":
    main()
