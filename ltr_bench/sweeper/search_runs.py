"""The search of one study: ask trials within the budget, run them through a pool, tell each outcome.

With a :class:`~ltr_bench.sweeper.job_pool.JobPool` (joblib workers, the default there) the
sweeper keeps ``n_jobs`` trials in flight: as soon as one ends -- done, pruned or failed -- it is
told and the next trial is asked and started, so a trial pruned after one fold frees its worker
at once. With a :class:`~ltr_bench.sweeper.job_pool.BatchPool` it asks ``n_jobs`` trials, runs
them as one batch of the launcher and tells each.

With ``hydra.sweeper.reproducible=true`` the pool is a batch pool and each job's pruner sees only
the trials of earlier batches (:class:`~ltr_bench.sweeper.reproducible.EarlierTrialsOnly`), so
that neither what is asked nor what is pruned depends on how fast the jobs of a batch run.

A config error of a job (``fatal_errors``) and too many failures stop the asking; the jobs in
flight are told first, then the error is raised. Ctrl-C and SIGTERM fail the trials in flight as
interrupted (their workers are stopped).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltr_bench.sweeper.job_pool import BatchPool, JobPool
    from ltr_bench.sweeper.study_setup import OpenStudy
    from ltr_bench.sweeper.sweeper import OptunaSweeperImpl

log = logging.getLogger("ltr_bench.sweeper.sweeper")


def search(
    sweeper: OptunaSweeperImpl,
    opened: OpenStudy,
    space: Any,
    variant: list[str],
    heartbeat: Any,
    after_tell: Callable[[], None],
) -> None:
    """Run trials until the study's budget is used (by any worker sharing it) or the sampler
    has no new point; ``after_tell()`` after each round of told trials (progress, summary)."""
    from ltr_bench.sweeper.hooks import report_interrupted
    from ltr_bench.sweeper.job_pool import make_pool
    from ltr_bench.sweeper.launching import sigterm_raises_interrupt
    from ltr_bench.sweeper.telling import fail_all, tell_outcome
    from ltr_bench.sweeper.trials import FAIL_INTERRUPTED

    assert sweeper.config is not None
    study = opened.study
    pool = make_pool(sweeper)
    if pool.in_flight:
        log.info(
            "Study '%s': up to %d trials in flight in joblib workers; a worker starts the next "
            "trial as soon as its own ends.",
            study.study_name,
            sweeper.n_jobs,
        )
    error: BaseException | None = None
    untold: list[Any] = []  # trials whose job ended, not yet told
    try:
        with sigterm_raises_interrupt():
            while True:
                if error is None:
                    error = fill(sweeper, opened, space, variant, heartbeat, pool)
                if not len(pool):
                    break
                ended = pool.wait()
                untold = [trial for trial, _ in ended]
                for trial, outcome in ended:
                    told = tell_outcome(study, trial, outcome, heartbeat, sweeper.fatal_errors)
                    error = error or told
                    untold.remove(trial)
                after_tell()
    except BaseException:
        # Ctrl-C, SIGTERM: the trials in flight (their workers stopped) and any not yet told are
        # failed as interrupted, and their runs handed to the app's hook (e.g. MLflow KILLED)
        fail_all(study, [*untold, *pool.abort()], heartbeat, FAIL_INTERRUPTED)
        report_interrupted(sweeper.config, study, opened.locks)
        raise
    if error is not None:
        raise error


def fill(
    sweeper: OptunaSweeperImpl,
    opened: OpenStudy,
    space: Any,
    variant: list[str],
    heartbeat: Any,
    pool: BatchPool | JobPool,
) -> BaseException | None:
    """Ask and submit trials until ``n_jobs`` are in the pool or the budget is used; the error
    that stops the search (too many failures, a config error), if any."""
    from ltr_bench.sweeper.asking import TooManyFailures, ask_one, remaining
    from ltr_bench.sweeper.hooks import report_interrupted
    from ltr_bench.sweeper.launching import job_overrides
    from ltr_bench.sweeper.pruning import job_overrides as racing_overrides
    from ltr_bench.sweeper.telling import fail_all
    from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_INTERRUPTED, fail_interrupted_trials

    assert sweeper.config is not None
    study, budget = opened.study, opened.budget
    if fail_interrupted_trials(study, opened.rdb, sweeper.grace_period):
        report_interrupted(sweeper.config, study, opened.locks)
    while len(pool) < sweeper.n_jobs:
        try:
            if remaining(study, space, budget, sweeper.max_failure_rate) <= 0:
                return None
        except TooManyFailures as e:
            return e
        trial = ask_one(study, space, budget, heartbeat, sweeper.max_duplicate_retries)
        if trial is None:
            return None
        try:
            # reproducible: the job's pruner sees the trials numbered before its batch's first
            first = pool.keys()[0] if len(pool) else trial
            before = first.number if sweeper.reproducible else None
            racing = racing_overrides(opened.url, sweeper.pruner_cfg, before=before)
            overrides = job_overrides(
                study.study_name, space, variant, trial.params, trial.number, racing
            )
            log.info(
                "Trial %d of study '%s': %s", trial.number, study.study_name, " ".join(overrides)
            )
            pool.submit(trial, overrides)
        except Exception as e:  # noqa: BLE001 - a config Hydra cannot compose: fatal, told below
            fail_all(study, [trial], heartbeat, FAIL_CONFIG, error=f"{type(e).__name__}: {e}")
            return e
        except BaseException:
            fail_all(study, [trial], heartbeat, FAIL_INTERRUPTED)
            raise
    return None
