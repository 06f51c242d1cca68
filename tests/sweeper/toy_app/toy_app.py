"""Tiny Hydra app driven by the sweeper tests (run as ``python toy_app.py --multirun ...``).

Objective: ``-(x-1)^2 - (y-2)^2`` (+0.5 for kind=b). Knobs: ``fail_x`` raises for that x,
``nan_x`` returns NaN for that x, ``user_error_x`` raises a UserError (a config error, fatal for
the sweep), ``reevaluation_user_error_x`` does so in that x's re-evaluation only, ``sleep_s`` slows every job, ``hang_at_trial`` (a trial number) and/or
``hang_reevaluation`` (true: a re-evaluation job) select the jobs that hang: the first of them to
create ``hang_marker`` (atomically, holding its trial number) sleeps for an hour, so that a test
can wait for that file and then kill the sweep mid-trial; exactly one job hangs, whatever the
order of parallel workers. ``wait_for_workers`` = n with ``workers_dir``: every job registers its
process there and waits until n processes have (so that each of n workers is sure to run jobs,
whatever their start-up times). ``calls_file`` gets one JSON line per executed job (to count runs),
``se`` returns the value as an :class:`Objective` with that standard error (and ``n_folds``),
``lucky_x`` adds ``lucky_bonus`` to that x's value in search jobs but not in re-evaluations
(``sweep.reevaluation=true``): a trial that only looks best. ``steps`` > 0 makes a job race: it
reports its value after each of ``steps`` steps through :class:`TrialReporter` (when the sweeper
passed a pruner; a re-evaluation too when the sweeper races them) and stops when pruned;
``calls_file`` then also records the steps done. ``hold_trial`` (a trial number) with
``hold_until_calls`` = n: that trial's job waits until ``calls_file`` holds n records (so that it is
still running while other jobs start). ``grow_mb`` makes a worker's first job keep that many MB
for the worker's life (a worker that loads its data and libraries on its first job). ``jitter_s`` sleeps a random time up to that long (not
seeded: each run times its jobs differently) before each step and before returning.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import hydra
import optuna
from omegaconf import DictConfig

from ltr_bench.errors import UserError
from ltr_bench.sweeper.job import Objective, TrialReporter

_KEPT: list = []  # what a job keeps for its worker's life (grow_mb)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    trial = cfg.sweep.trial_number
    if cfg.wait_for_workers:
        _rendezvous(Path(cfg.workers_dir), int(cfg.wait_for_workers))
    if cfg.grow_mb and not _KEPT:
        import numpy as np

        _KEPT.append(np.ones(int(cfg.grow_mb) * 2**20 // 8))  # written: resident memory
    value = -((cfg.x - 1) ** 2) - (cfg.y - 2) ** 2 + (0.5 if cfg.kind == "b" else 0.0)
    steps_done = _race(cfg, value)
    if cfg.calls_file:
        record = {
            "trial": trial,
            "study": cfg.sweep.study_name,
            "x": cfg.x,
            "y": cfg.y,
            "kind": cfg.kind,
            "pid": os.getpid(),
            "reevaluation": cfg.sweep.reevaluation,
            "steps": steps_done,
        }
        with open(cfg.calls_file, "a") as f:
            f.write(json.dumps(record) + "\n")
    if cfg.hold_trial is not None and trial == cfg.hold_trial and not cfg.sweep.reevaluation:
        _hold(Path(cfg.calls_file), int(cfg.hold_until_calls))
    if _wants_to_hang(cfg) and _claim_marker(Path(cfg.hang_marker), trial):
        time.sleep(3600)  # the test kills the sweep long before
    if cfg.sleep_s:
        time.sleep(cfg.sleep_s)
    _jitter(cfg)
    if cfg.user_error_x is not None and cfg.x == cfg.user_error_x:
        raise UserError(f"toy config error for x={cfg.x}")
    bad_reevaluation = cfg.reevaluation_user_error_x
    if cfg.sweep.reevaluation and bad_reevaluation is not None and cfg.x == bad_reevaluation:
        raise UserError(f"toy config error in the re-evaluation of x={cfg.x}")
    if cfg.fail_x is not None and cfg.x == cfg.fail_x:
        raise RuntimeError(f"toy failure for x={cfg.x}")
    if cfg.nan_x is not None and cfg.x == cfg.nan_x:
        return float("nan")
    if steps_done < cfg.steps:
        raise optuna.TrialPruned(f"pruned after {steps_done} steps")
    if cfg.lucky_x is not None and cfg.x == cfg.lucky_x and not cfg.sweep.reevaluation:
        value += cfg.lucky_bonus
    return Objective(value, se=cfg.se, n_folds=cfg.n_folds) if cfg.se is not None else value


def _rendezvous(folder: Path, n: int, guard_s: float = 600.0) -> None:
    """Register this process in ``folder``; return once ``n`` processes have registered (the
    limit only stops a hang: a worker that never starts)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + guard_s
    while len(list(folder.iterdir())) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(list(folder.iterdir()))} of {n} workers started")
        time.sleep(0.05)


def _hold(calls_file: Path, n: int, guard_s: float = 600.0) -> None:
    """Return once ``calls_file`` holds ``n`` records (the limit only stops a hang)."""
    deadline = time.monotonic() + guard_s
    while len(calls_file.read_text().splitlines()) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(calls_file.read_text().splitlines())} of {n} jobs ran")
        time.sleep(0.05)


def _jitter(cfg: DictConfig) -> None:
    """Sleep a random time up to ``cfg.jitter_s`` (from the OS's entropy: not reproducible)."""
    if cfg.jitter_s:
        time.sleep(random.SystemRandom().uniform(0.0, float(cfg.jitter_s)))


def _wants_to_hang(cfg: DictConfig) -> bool:
    """True when this job is one that ``hang_at_trial`` / ``hang_reevaluation`` select."""
    if cfg.hang_marker is None or (cfg.hang_at_trial is None and not cfg.hang_reevaluation):
        return False
    if cfg.hang_at_trial is not None and cfg.sweep.trial_number != cfg.hang_at_trial:
        return False
    return bool(cfg.sweep.reevaluation) == bool(cfg.hang_reevaluation)


def _claim_marker(marker: Path, trial: int) -> bool:
    """Create ``marker`` holding ``trial`` unless it exists; True when this job created it.

    Written to a private file first and then hard-linked, so the marker appears complete and only
    once, even when two workers try at the same moment.
    """
    private = marker.with_name(f"{marker.name}.{os.getpid()}")
    private.write_text(str(trial))
    try:
        os.link(private, marker)
        return True
    except FileExistsError:
        return False
    finally:
        private.unlink()


def _race(cfg: DictConfig, value: float) -> int:
    """Report ``value`` after each of ``cfg.steps`` steps; the steps done before being pruned."""
    reporter = TrialReporter.from_config(cfg) if cfg.steps else None
    if reporter is None:
        return cfg.steps
    reporter.plan(cfg.steps)
    for step in range(1, cfg.steps + 1):
        _jitter(cfg)
        if reporter.report(value, step):
            return step
    return cfg.steps


if __name__ == "__main__":
    main()
