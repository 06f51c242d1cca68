"""Asking Optuna for new trials within the study's budget, without exact repeats.

The budget counts the trials of every process sharing the study; a trial asked beyond it is
rejected (FAIL ``surplus``), one repeating an evaluated parameter set too (FAIL ``duplicate``),
and a finite space that the sampler keeps repeating gets a free point queued.
"""

from __future__ import annotations

import contextlib
import logging
import random
import warnings
from collections.abc import Sequence
from typing import Any

from optuna.trial import TrialState

from ltr_bench.sweeper import trials
from ltr_bench.sweeper.liveness import worker_identity
from ltr_bench.sweeper.optuna_private import trial_id

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
    """:func:`reject` each trial (best effort: the sweep is failing already)."""
    for trial in asked:
        with contextlib.suppress(Exception):
            if error:
                trial.set_user_attr(trials.ATTR_ERROR, error[:2000])
            reject(study, trial, reason, heartbeat)


def remaining(study: Any, space: Any, budget: int, max_failure_rate: float) -> int:
    """How many trials the study may still start (0 once the space is exhausted); raises
    :class:`TooManyFailures` when more than ``max_failure_rate`` of the budget failed."""
    stored = study.get_trials(deepcopy=False)
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
    """Ask one new trial; None when the study's budget is used up by other trials. Ctrl-C or
    SIGTERM while a new trial is checked fails it as interrupted."""
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
        with warnings.catch_warnings():  # Optuna: heartbeats are for Study.optimize; we beat
            warnings.filterwarnings("ignore", message=".*Heartbeat of storage.*")
            trial = study.ask(distributions)
        try:  # a signal landing before the trial is handed on fails it (no RUNNING orphan)
            asked.append(trial)
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
