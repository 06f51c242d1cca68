"""Sweep throughput with 1 and 2 local workers, and the per-trial overhead of the whole stack.

Real ``ltr-bench -m hydra/sweeper=ltr_optuna`` sweeps of a tiny DirectRanker (one hidden layer of
16, ``model.epochs=1``, 2 inner-CV folds) on tiny synthetic data, each in a fresh temporary
directory, with ``threads=1`` per process:

1. one worker: one process, ``--trials`` trials;
2. two workers: two processes started together with the same command against one SQLite study
   (``hydra.sweeper.storage=sqlite:///...``), ``--trials`` trials in total -- the multi-machine
   recipe of the README on one machine;
3. in flight: one process keeping two trials in flight in ``hydra/launcher=ltr_pool`` workers.

For each: wall time from launch to the last exit, trials per minute end to end (including
process start-up) and in the steady state (from the study's trial timestamps, once every worker
has finished its first trial).

Per-trial overhead of Hydra + Optuna + MLflow + Lightning: in the one-worker sweep, the median
time between consecutive trial completions (ask, launch, compose, read data, fit, evaluate, log,
tell) minus the *baseline*: the same work in plain Python measured in this run -- the same data
and preprocessing, the same inner folds, the same scorer and number of optimisation steps in a
bare torch loop, the same validation and scoring. Target: under 2 s per trial. The interval is
split with each trial's results.json (``time_total_s``: the runner; ``time_fit_s``: Lightning's
fit) into sweeper + Hydra, runner + MLflow, and Lightning's share.

    .venv/bin/python benchmarks/bench_sweep_throughput.py [--trials 40] [--no-pool]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_OVERHEAD_S = 2.0
LTR_BENCH = str(Path(sys.executable).parent / "ltr-bench")
DATA = dict(n_train=600, n_vali=200, n_test=100, n_features=10, docs_per_query=20, sigma=0.5)
HIDDEN = [16]
INNER_CV = 2


def sweep_args(trials: int) -> list[str]:
    """The sweep command's overrides (the same for every worker)."""
    data = [f"dataset.{k}={v}" for k, v in DATA.items()]
    return [
        "-m",
        "hydra/sweeper=ltr_optuna",
        f"hydra.sweeper.n_trials={trials}",
        "optimizer.lr=interval(0.0005,0.01)",
        *data,
        f"model.hidden_sizes=[{HIDDEN[0]}]",
        "model.epochs=1",
        f"protocol.inner_cv={INNER_CV}",
        "trainer.enable_progress_bar=false",
        "threads=1",
        "hydra.job_logging.root.level=WARNING",
        "hydra.hydra_logging.root.level=WARNING",
    ]


def env() -> dict[str, str]:
    out = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for var in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        out.pop(var, None)
    return out


def run_workers(workdir: Path, commands: list[list[str]]) -> float:
    """Start every command at once in ``workdir``; wait for all; return the wall time.

    Each worker gets its own session, as a worker on its own machine would: with the kernel's
    autogroup scheduling, processes of one session share one CPU share, so on a machine busy
    with other sessions two workers of one session would get no more CPU than one.
    """
    start = time.perf_counter()
    procs = []
    for i, cmd in enumerate(commands):
        log = open(workdir / f"worker{i}.log", "w")
        procs.append(
            (
                subprocess.Popen(
                    cmd,
                    cwd=workdir,
                    env=env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                ),
                log,
            )
        )
    for i, (proc, log) in enumerate(procs):
        code = proc.wait()
        log.close()
        if code != 0:
            tail = (workdir / f"worker{i}.log").read_text()[-3000:]
            raise SystemExit(f"worker {i} failed with exit code {code}:\n{tail}")
    return time.perf_counter() - start


def load_trials(storage: str) -> list[Any]:
    """The complete trials of the one study in ``storage``, by completion time."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    return sorted(done, key=lambda t: t.datetime_complete)


def steady_rate(trials: list[Any]) -> float:
    """Trials per minute once every worker has completed its first trial."""
    first: dict[Any, Any] = {}
    for t in trials:
        worker = json.dumps(t.user_attrs.get("ltr_sweeper.worker"), sort_keys=True)
        first.setdefault(worker, t.datetime_complete)
    t0 = max(first.values())
    later = [t for t in trials if t.datetime_complete > t0]
    if not later:
        return math.nan
    seconds = (later[-1].datetime_complete - t0).total_seconds()
    return 60 * len(later) / seconds if seconds > 0 else math.nan


def sweep(workdir: Path, n_workers: int, trials: int, pool: bool = False) -> dict[str, Any]:
    """One sweep configuration; returns wall time, rates and the trials."""
    storage = f"sqlite:///{workdir / 'study.db'}"
    common = [
        LTR_BENCH,
        *sweep_args(trials),
        f"hydra.sweeper.storage={storage}",
        "hydra.sweeper.study_name=bench",
    ]
    if pool:
        common += ["hydra/launcher=ltr_pool", "hydra.launcher.n_jobs=2", "hydra.sweeper.n_jobs=2"]
    commands = [[*common, f"hydra.sweep.dir={workdir / f'w{i}'}"] for i in range(n_workers)]
    wall = run_workers(workdir, commands)
    done = load_trials(storage)
    if len(done) != trials:
        raise SystemExit(f"{workdir.name}: {len(done)} complete trials, expected {trials}")
    return {
        "wall": wall,
        "trials": done,
        "rate_total": 60 * trials / wall,
        "rate_steady": steady_rate(done),
        "workdir": workdir,
    }


def job_times(workdir: Path) -> dict[int, dict[str, float]]:
    """Trial number -> the run times its job wrote into results.json."""
    out = {}
    for path in workdir.glob("w*/*/results.json"):
        res = json.loads(path.read_text())
        out[int(res["config"]["sweep"]["trial_number"])] = res["times"]
    return out


# ------------------------------------------------------------------------------ the baseline
def bare_trial(lr: float = 0.004, seed: int = 0) -> tuple[float, float]:
    """The work of one trial without Hydra, Optuna, MLflow or Lightning.

    Returns (seconds for the whole trial, seconds of it spent fitting).
    """
    import numpy as np
    import torch

    from ltr_bench.data.batching import PairSampler, auto_pair_batch_size
    from ltr_bench.data.datasets import SyntheticDataset
    from ltr_bench.data.transforms import Preprocessing
    from ltr_bench.losses import l2_pair_loss
    from ltr_bench.metrics import ndcg_at_k
    from ltr_bench.models import DirectRanker
    from ltr_bench.protocols import SingleSplit

    t_start = time.perf_counter()
    fit_s = 0.0
    torch.manual_seed(seed)
    dataset = SyntheticDataset(**DATA)
    protocol = SingleSplit(inner_cv=INNER_CV)
    split = protocol.load(dataset, 0, with_test=False)
    values = []
    for *_, inner_train, inner_vali in protocol.inner_folds(split.train):
        pre = Preprocessing(
            binarize_at=dataset.relevance_threshold,
            relevance_threshold=dataset.relevance_threshold,
            binarize_splits=["vali", "test"],
            drop_no_relevant_splits=["vali", "test"],
        )
        pre.fit(inner_train)
        train = pre.apply(inner_train, "train")
        vali = pre.apply(split.vali, "vali") if split.vali is not None else None
        held_out = pre.apply(inner_vali, "vali")
        t_fit = time.perf_counter()
        scorer = DirectRanker(hidden_sizes=HIDDEN).build_scorer(train.n_features)
        sampler = PairSampler(train)
        batch_size = auto_pair_batch_size(train.n_docs)
        x = torch.as_tensor(np.array(train.features))
        opt = torch.optim.Adam(scorer.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(math.ceil(train.n_docs / batch_size)):  # one epoch, as model.epochs=1
            b = sampler.sample(batch_size, gen)
            g = scorer(x.index_select(0, torch.cat([b.hi, b.lo])))
            loss = l2_pair_loss(torch.tanh(g[: len(b.hi)] - g[len(b.hi) :]), b.label_hi)
            opt.zero_grad()
            loss.backward()
            opt.step()
        scorer.eval()
        with torch.no_grad():
            if vali is not None:  # the epoch's validation (early stopping)
                ndcg_at_k(scorer(torch.as_tensor(vali.features)).numpy(), vali.labels, vali.qid, 10)
            fit_s += time.perf_counter() - t_fit
            scores = scorer(torch.as_tensor(held_out.features)).double().numpy()
        values.append(ndcg_at_k(scores, held_out.labels, held_out.qid, 10))
    assert all(math.isfinite(v) for v in values)
    return time.perf_counter() - t_start, fit_s


def baseline(repeats: int = 7) -> tuple[float, float]:
    """Median (trial, fit) seconds of :func:`bare_trial` after one warm-up call."""
    import torch

    torch.set_num_threads(1)
    bare_trial()
    runs = [bare_trial(seed=i) for i in range(repeats)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


# ------------------------------------------------------------------------------ report
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=40, help="trials per sweep (all workers)")
    parser.add_argument("--no-pool", action="store_true", help="skip the ltr_pool-launcher sweep")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(
        f"{args.trials} trials per sweep: DirectRanker hidden {HIDDEN}, 1 epoch, {INNER_CV} inner "
        f"folds, synthetic {DATA['n_train']} train / {DATA['n_vali']} vali docs; threads=1 per "
        f"process; {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at start "
        "(other processes on the machine slow every figure below)"
    )

    bare_s, bare_fit_s = baseline()
    print(
        f"baseline, the same work in plain Python + torch: {bare_s * 1000:.0f} ms per trial "
        f"({bare_fit_s * 1000:.0f} ms of it fitting)"
    )

    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        root = Path(tmp)
        configs = [("1 worker", 1, False), ("2 workers (2 processes, 1 study)", 2, False)]
        if not args.no_pool:
            configs.append(("ltr_pool launcher, n_jobs=2", 1, True))
        out: dict[str, dict[str, Any]] = {}
        for name, n, pool in configs:
            workdir = root / f"s{len(out)}"
            workdir.mkdir()
            out[name] = sweep(workdir, n, args.trials, pool)
            r = out[name]
            print(
                f"{name:34s} wall {r['wall']:6.1f} s  {r['rate_total']:6.1f} trials/min end to "
                f"end, {r['rate_steady']:6.1f} trials/min steady",
                flush=True,
            )

        one = out["1 worker"]
        for name, r in out.items():
            if r is not one:
                print(
                    f"ratio {name} / 1 worker: {r['rate_total'] / one['rate_total']:.2f}x end to "
                    f"end, {r['rate_steady'] / one['rate_steady']:.2f}x steady"
                )

        # Per-trial cost in the one-worker sweep (steady state: the first trial imports torch,
        # Lightning and MLflow into the sweep process and is reported on its own).
        trials = one["trials"]
        done_at = [t.datetime_complete for t in trials]
        intervals = [(b - a).total_seconds() for a, b in zip(done_at, done_at[1:])]
        interval = statistics.median(intervals)
        times = job_times(one["workdir"])
        later = [times[t.number] for t in trials[1:] if t.number in times]
        total = statistics.median(t["time_total_s"] for t in later)
        fit = statistics.median(t["time_fit_s"] for t in later)
        first = (trials[0].datetime_complete - trials[0].datetime_start).total_seconds()
        overhead = interval - bare_s
        print(
            f"per trial (1 worker, median of {len(intervals)}): {interval:.2f} s between "
            f"completions; first trial {first:.1f} s (imports)"
        )
        print(f"  sweeper + Hydra (ask, compose, launch, tell): {interval - total:.2f} s")
        print(f"  runner + MLflow (data, preprocessing, runs, metrics): {total - fit:.2f} s")
        print(f"  Lightning fit: {fit:.2f} s (bare torch fit: {bare_fit_s:.3f} s)")
        print(
            f"per-trial overhead of the stack = interval - baseline: {overhead:.2f} s "
            f"(target < {TARGET_OVERHEAD_S:.0f} s: {'met' if overhead < TARGET_OVERHEAD_S else 'NOT met'}); "
            f"ratio interval / baseline: {interval / bare_s:.0f}x"
        )


if __name__ == "__main__":
    main()
