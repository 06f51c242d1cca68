"""The search of one study: ask new trials within the budget (counted over every process sharing
it; a surplus or repeated trial fails as ``surplus``/``duplicate``), run them through a pool, tell
Optuna each outcome (a value, FAIL with a reason, PRUNED)."""

from __future__ import annotations

import logging
import math
import random
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from ltr_bench.held_signals import signals_deferred
from ltr_bench.launching.pools import Pool, worker_died
from ltr_bench.launching.processes import worker_identity
from ltr_bench.sweeper import trials
from ltr_bench.sweeper.hydra_private import job_error
from ltr_bench.sweeper.job import user_attrs_of
from ltr_bench.sweeper.liveness import report_interrupted
from ltr_bench.sweeper.optuna_private import study_storage, trial_id
from ltr_bench.sweeper.search import pruning
from ltr_bench.sweeper.state import StudyState

log = logging.getLogger(__name__)

MAX_ENUMERATED_POINTS = 100_000  # finite spaces up to this size get a free point queued on repeats


class TooManyFailures(RuntimeError):
    """More trials failed than ``hydra.sweeper.max_failure_rate`` allows."""


def reject(study: Any, trial: Any, reason: str, heartbeat: Any) -> None:
    """Tell the trial FAIL with ``reason`` (a ``ltr_sweeper.fail_reason`` attribute), stop its beat."""
    trial.set_user_attr(trials.ATTR_FAIL, reason)
    study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
    heartbeat.discard(trial_id(trial))


def fail_all(
    study: Any, asked: Sequence[Any], heartbeat: Any, reason: str, error: str | None = None
) -> None:
    """:func:`reject` each trial (best effort: the sweep is failing already); a trial that cannot
    be failed is named in a warning (a resume fails the RUNNING trials of a sweeper that is gone)."""
    for trial in asked:
        try:
            if error:
                trial.set_user_attr(trials.ATTR_ERROR, error[:2000])
            reject(study, trial, reason, heartbeat)
        except Exception as e:  # noqa: BLE001 - never mask the error that ends the sweep
            log.warning(f"Could not mark trial {trial.number} as {reason}: {type(e).__name__}: {e}")


def remaining(
    study: Any, space: Any, budget: int, max_failure_rate: float, stored: Any = None
) -> int:
    """How many trials the study may still start (0 once the space is exhausted); raises
    :class:`TooManyFailures` when more than ``max_failure_rate`` of the budget failed.
    ``stored``: the study's trials, when just read."""
    stored = study.get_trials(deepcopy=False) if stored is None else stored
    used = sum(trials.counts_toward_budget(t) for t in stored)
    failed = sum(trials.is_counted_failure(t) for t in stored)
    if failed > max_failure_rate * budget:
        raise TooManyFailures(
            f"{failed} of n_trials={budget} trials of study '{study.study_name}' failed, more than "
            f"hydra.sweeper.max_failure_rate={max_failure_rate}; see the job logs."
        )
    size = space.size()
    if (
        size is not None
        and len(trials.taken_points(stored, list(space.params))) >= size
        and budget - used > 0
    ):
        log.info(
            f"Search space of study '{study.study_name}' exhausted after {size} distinct points."
        )
        return 0
    if budget - used <= 0:
        log.info("Study '%s' has used its n_trials=%d.", study.study_name, budget)
    return budget - used


def ask_one(study: Any, space: Any, budget: int, heartbeat: Any, max_retries: int) -> Any:
    """Ask one new trial; None when the budget is used up (a signal fails it as interrupted)."""
    asked: list[Any] = []  # the trial being checked, failed as interrupted on Ctrl-C/SIGTERM
    try:
        return _ask_checked(study, space, budget, heartbeat, max_retries, asked)
    except BaseException:
        fail_all(study, asked, heartbeat, trials.FAIL_INTERRUPTED)
        raise


def _ask_checked(
    study: Any, space: Any, budget: int, heartbeat: Any, max_retries: int, asked: list[Any]
) -> Any:
    """:func:`ask_one`'s loop; ``asked`` holds the trial being checked (none once told)."""
    names = list(space.params)
    distributions = space.distributions()
    identity = worker_identity()
    for attempt in range(max_retries + 1):
        asked.clear()
        # A signal while Optuna asks (its sampler runs after the trial is stored RUNNING) is held
        # until the trial is in `asked`, where it can be failed as interrupted.
        with signals_deferred(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Heartbeat of storage.*")  # we beat
            trial = study.ask(distributions)
            asked.append(trial)
        try:  # a signal landing before the trial is handed on fails it (no RUNNING orphan)
            heartbeat.add(trial_id(trial))
            trial.set_user_attr(trials.ATTR_WORKER, identity)
            others = trials.settled_others(study, trial.number, names)  # no half-asked rival
            # A queued trial numbered before this one holds its place: taken later, it counts only
            # the trials numbered before it, so this one must count it now.
            if sum(trials.holds_a_place(t, trial.number) for t in others) >= budget:
                reject(study, trial, trials.FAIL_SURPLUS, heartbeat)
                asked.clear()
                return None
            key = trials.params_key(trial.params, names)
            rivals = [
                t
                for t in others
                if trials.counts_toward_budget(t)
                and (t.number < trial.number or t.state.is_finished())
            ]
            taken = trials.taken_points(rivals, names) | trials.queued_points(
                others, names, trial.number
            )
            if key is None or key not in taken:
                return trial
            size = space.size()
            enumerable = size is not None and size <= MAX_ENUMERATED_POINTS
            if attempt == max_retries and not enumerable:
                log.warning(
                    f"Trial {trial.number} repeats evaluated params {trial.params}; running it anyway."
                )
                return trial
            reject(study, trial, trials.FAIL_DUPLICATE, heartbeat)
            asked.clear()
            if enumerable and attempt >= max_retries // 2:
                enqueue_free_point(study, space, trial.number)
        except BaseException:
            fail_all(study, [trial], heartbeat, trials.FAIL_INTERRUPTED)
            raise
    log.warning(
        f"No new parameters after {max_retries + 1} proposals; ending study '{study.study_name}'."
    )
    return None


def enqueue_free_point(study: Any, space: Any, seed: int) -> None:
    """Queue a random not-yet-evaluated point of a finite space (the sampler keeps repeating)."""
    names = list(space.params)
    taken = trials.taken_points(study.get_trials(deepcopy=False), names)
    free = [p for p in space.grid_points() if tuple(p[n] for n in names) not in taken]
    if free:
        study.enqueue_trial(random.Random(seed).choice(free))


def search(
    state: StudyState,
    after_tell: Callable[[], None],
    drained: Callable[[int], None] | None = None,
) -> None:
    """Run trials until the budget is used or no new point is left; ``after_tell()`` per round,
    ``drained(free)`` per round once no trial is left to ask (``free``: the pool's free places)."""
    study, heartbeat = state.study, state.heartbeat
    pool = state.jobs.pool()
    if pool.in_flight:
        log.info(
            f"Study '{study.study_name}': up to {state.settings.n_jobs} trials in flight and one "
            "more queued: a worker starts the next trial as soon as its own ends."
        )

    def filled() -> BaseException | None:
        error = fill(state, pool)
        if error is None and drained is not None and len(pool) < pool.capacity:
            drained(pool.capacity - len(pool))
        return error

    def stopped(untold: list[Any]) -> None:
        # Ctrl-C, SIGTERM: the trials in flight (their workers stopped) and any not yet told are
        # failed as interrupted, and their runs handed to the app's hook (e.g. MLflow KILLED)
        fail_all(study, untold, heartbeat, trials.FAIL_INTERRUPTED)
        report_interrupted(state.config, study, state.locks)

    pool.run(
        filled, lambda trial, outcome: tell_outcome(state, trial, outcome), stopped, after_tell
    )


def fill(state: StudyState, pool: Pool) -> BaseException | None:
    """Ask and submit trials until the pool is full; the error that stops the search, if any."""
    s, study, heartbeat = state.settings, state.study, state.heartbeat
    stored: list[Any] | None = state.recover()
    while len(pool) < pool.capacity:
        try:
            if remaining(study, state.space, state.budget, s.max_failure_rate, stored) <= 0:
                return None
        except TooManyFailures as e:
            return e
        stored = None  # read again for the next trial: this one is asked below
        trial = ask_one(study, state.space, state.budget, heartbeat, s.max_duplicate_retries)
        if trial is None:
            return None
        try:
            # reproducible: the job's pruner sees the trials numbered before its batch's first
            first = pool.keys()[0] if len(pool) else trial
            before = first.number if s.reproducible else None
            racing = pruning.job_overrides(state.url, s.pruner, before=before)
            overrides = state.job_overrides(trial.params, trial.number, racing)
            log.info(f"Trial {trial.number} of study '{study.study_name}': {' '.join(overrides)}")
            pool.submit(trial, overrides)
        except Exception as e:  # noqa: BLE001 - a config Hydra cannot compose: fatal, told below
            fail_all(
                study, [trial], heartbeat, trials.FAIL_CONFIG, error=f"{type(e).__name__}: {e}"
            )
            return e
        except BaseException:
            if trial not in pool.keys():  # a submitted job's trial is failed by pool.abort()
                fail_all(study, [trial], heartbeat, trials.FAIL_INTERRUPTED)
            raise
    return None


def tell_outcome(state: StudyState, trial: Any, outcome: Any) -> BaseException | None:
    """Tell a job's ``JobReturn``, or the exception that kept it from returning one."""
    if not isinstance(outcome, BaseException):
        return tell(state, trial, outcome)
    died = worker_died(outcome)
    why = f"{type(outcome).__name__}: {outcome}"
    what = "its worker process died" if died else "aborting the sweep"
    log.error(f"Trial {trial.number} did not run to the end ({what}): {why}")
    reason = trials.FAIL_INTERRUPTED if died else trials.FAIL_CONFIG
    fail_all(state.study, [trial], state.heartbeat, reason, why)
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
    fatal = trials.is_fatal(error, state.settings.fatal_classes)
    what = "aborting the sweep" if fatal else "recorded as FAIL, sweep goes on"
    traced = isinstance(error, BaseException) and not fatal  # a config error is one sentence
    exc_info = (type(error), error, error.__traceback__) if traced else None
    log.error(
        "Trial %d failed (%s): %s: %s",
        trial.number,
        what,
        type(error).__name__,
        error,
        exc_info=exc_info,
    )
    trial.set_user_attr(trials.ATTR_ERROR, f"{type(error).__name__}: {error}"[:2000])
    reason = trials.FAIL_CONFIG if fatal else trials.FAIL_EXCEPTION
    reject(state.study, trial, reason, state.heartbeat)
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
    """Tell PRUNED a job the pruner stopped (its last reported value stays in the study)."""
    reported = study_storage(state.study).get_trial(trial_id(trial))
    step = reported.last_step
    value = None if step is None else float(reported.intermediate_values[step])
    frozen = state.study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
    state.heartbeat.discard(trial_id(trial))
    log.info(
        f"Trial {trial.number} pruned after step {step} with value {value} ({frozen.state.name})."
    )
