"""The search of one study: ask trials within the budget, run them through a pool (``n_jobs`` in
flight, or batches of ``n_jobs``: :mod:`~ltr_bench.sweeper.launching`), tell each outcome to
Optuna: its value, FAIL with a reason, or PRUNED. A job's config error (``fatal_errors``, also
wrapped) and too many failures stop the asking; the jobs in flight are told first, then the
error is raised. Ctrl-C and SIGTERM fail the trials in flight as interrupted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from ltr_bench.sweeper import trials
from ltr_bench.sweeper.job import user_attrs_of
from ltr_bench.sweeper.launching import (
    BatchPool,
    JobPool,
    is_fatal,
    job_overrides,
    sigterm_raises_interrupt,
    worker_died,
)
from ltr_bench.sweeper.liveness import report_interrupted
from ltr_bench.sweeper.optuna_private import job_error, trial_id
from ltr_bench.sweeper.search import pruning
from ltr_bench.sweeper.search.asking import TooManyFailures, ask_one, fail_all, reject, remaining
from ltr_bench.sweeper.state import StudyState

log = logging.getLogger(__name__)


def search(state: StudyState, after_tell: Callable[[], None]) -> None:
    """Run trials until the study's budget is used (by any worker sharing it) or the sampler
    has no new point; ``after_tell()`` after each round of told trials (progress, summary)."""
    study, heartbeat = state.study, state.heartbeat
    pool = state.jobs.pool()
    if pool.in_flight:
        log.info(
            f"Study '{study.study_name}': up to {state.settings.n_jobs} trials in flight in joblib "
            "workers; a worker starts the next trial as soon as its own ends."
        )
    error: BaseException | None = None
    untold: list[Any] = []  # trials whose job ended, not yet told
    try:
        with sigterm_raises_interrupt():
            while True:
                if error is None:
                    error = fill(state, pool)
                if not len(pool):
                    break
                ended = pool.wait()
                untold = [trial for trial, _ in ended]
                for trial, outcome in ended:
                    told = tell_outcome(state, trial, outcome)
                    error = error or told
                    untold.remove(trial)
                after_tell()
    except BaseException:
        # Ctrl-C, SIGTERM: the trials in flight (their workers stopped) and any not yet told are
        # failed as interrupted, and their runs handed to the app's hook (e.g. MLflow KILLED)
        fail_all(study, [*untold, *pool.abort()], heartbeat, trials.FAIL_INTERRUPTED)
        report_interrupted(state.config, study, state.locks)
        raise
    if error is not None:
        raise error


def fill(state: StudyState, pool: BatchPool | JobPool) -> BaseException | None:
    """Ask and submit trials until ``n_jobs`` are in the pool or the budget is used; the error
    that stops the search (too many failures, a config error), if any."""
    s, study, heartbeat = state.settings, state.study, state.heartbeat
    state.recover()
    while len(pool) < s.n_jobs:
        try:
            if remaining(study, state.space, state.budget, s.max_failure_rate) <= 0:
                return None
        except TooManyFailures as e:
            return e
        trial = ask_one(study, state.space, state.budget, heartbeat, s.max_duplicate_retries)
        if trial is None:
            return None
        try:
            # reproducible: the job's pruner sees the trials numbered before its batch's first
            first = pool.keys()[0] if len(pool) else trial
            before = first.number if s.reproducible else None
            racing = pruning.job_overrides(state.url, s.pruner, before=before)
            overrides = job_overrides(
                study.study_name, state.space, state.variant, trial.params, trial.number, racing
            )
            log.info(f"Trial {trial.number} of study '{study.study_name}': {' '.join(overrides)}")
            pool.submit(trial, overrides)
        except Exception as e:  # noqa: BLE001 - a config Hydra cannot compose: fatal, told below
            fail_all(
                study, [trial], heartbeat, trials.FAIL_CONFIG, error=f"{type(e).__name__}: {e}"
            )
            return e
        except BaseException:
            fail_all(study, [trial], heartbeat, trials.FAIL_INTERRUPTED)
            raise
    return None


def tell_outcome(state: StudyState, trial: Any, outcome: Any) -> BaseException | None:
    """Tell a job's outcome: its ``JobReturn`` (:func:`tell`), or the exception that kept it from
    returning one: FAIL ``interrupted`` when its worker died, else ``config_error`` (fatal)."""
    if not isinstance(outcome, BaseException):
        return tell(state, trial, outcome)
    died = worker_died(outcome)
    why = f"{type(outcome).__name__}: {outcome}"
    what = "its worker process died" if died else "aborting the sweep"
    log.error(f"Trial {trial.number} did not run to the end ({what}): {why}")
    fail_all(
        state.study,
        [trial],
        state.heartbeat,
        trials.FAIL_INTERRUPTED if died else trials.FAIL_CONFIG,
        why,
    )
    return outcome


def tell(state: StudyState, trial: Any, ret: JobReturn) -> BaseException | None:
    """Tell Optuna one job's outcome; return the exception when it is fatal."""
    if ret.status == JobStatus.COMPLETED:
        _tell_value(state, trial, ret.return_value)
        return None
    error = job_error(ret)
    if pruning.is_pruned(error):
        _tell_pruned(state, trial)
        return None
    fatal = is_fatal(error, state.settings.fatal_classes)
    log.error(
        "Trial %d failed (%s): %s: %s",
        trial.number,
        "aborting the sweep" if fatal else "recorded as FAIL, sweep goes on",
        type(error).__name__,
        error,
        # a config error is one sentence (the CLI repeats it), not a traceback
        exc_info=(type(error), error, error.__traceback__)
        if isinstance(error, BaseException) and not fatal
        else None,
    )
    trial.set_user_attr(trials.ATTR_ERROR, f"{type(error).__name__}: {error}"[:2000])
    reject(
        state.study, trial, trials.FAIL_CONFIG if fatal else trials.FAIL_EXCEPTION, state.heartbeat
    )
    return error if fatal and isinstance(error, BaseException) else None


def _tell_value(state: StudyState, trial: Any, value: Any) -> None:
    """Tell a completed job's return value: COMPLETE when finite, FAIL ``nan`` otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        log.warning("Trial %d returned %r; recorded as FAIL.", trial.number, value)
        trial.set_user_attr(trials.ATTR_ERROR, f"returned {value!r}"[:2000])
        reject(state.study, trial, trials.FAIL_NAN, state.heartbeat)
        return
    for key, attr in user_attrs_of(value).items():  # e.g. the objective's SE
        trial.set_user_attr(key, attr)
    frozen = state.study.tell(trial, number, skip_if_finished=True)
    state.heartbeat.discard(trial_id(trial))
    if frozen.state.name == "COMPLETE":
        log.info("Trial %d finished with value %s.", trial.number, number)
    else:  # another worker failed it as stale (e.g. heartbeats blocked for too long)
        log.warning(
            f"Trial {trial.number} was already {frozen.state.name}; its value {number} is not recorded."
        )


def _tell_pruned(state: StudyState, trial: Any) -> None:
    """Record a job that stopped because the pruner said so: PRUNED, with the last value it
    reported into the study (Optuna's rule), which the job wrote from its own process."""
    reported = state.study.get_trials(deepcopy=False)[trial.number]
    step = reported.last_step
    value = None if step is None else float(reported.intermediate_values[step])
    frozen = state.study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
    state.heartbeat.discard(trial_id(trial))
    log.info(
        f"Trial {trial.number} pruned after step {step} with value {value} ({frozen.state.name})."
    )
