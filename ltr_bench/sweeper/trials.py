"""What a trial's state means to the sweeper: COMPLETE, PRUNED, RUNNING and a FAIL of the job
itself use one of the budget's ``n_trials``; a FAIL for another reason (user attribute
``ltr_sweeper.fail_reason``) does not, so a resumed sweep runs it again."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.errors import find_in_chain

ATTR_WORKER = "ltr_sweeper.worker"  # who runs a RUNNING trial (launching.processes.worker_identity)
ATTR_FAIL = "ltr_sweeper.fail_reason"
ATTR_ERROR = "ltr_sweeper.error"
ATTR_REEVALUATES = "ltr_sweeper.reevaluates"  # the trial a re-evaluation lock is for

# Fail reasons. Only the first two count toward n_trials.
FAIL_EXCEPTION = "exception"
FAIL_NAN = "nan"
FAIL_INTERRUPTED = "interrupted"
FAIL_CONFIG = "config_error"
FAIL_DUPLICATE = "duplicate"
FAIL_SURPLUS = "surplus"
COUNTED_FAIL_REASONS = frozenset({FAIL_EXCEPTION, FAIL_NAN})


def close_trial(
    storage: Any, trial_id: int, state: TrialState, value: float | None = None, reason: str = ""
) -> bool:
    """Finish a trial through its storage (FAIL with ``reason``); False when already finished."""
    try:
        if reason:
            storage.set_trial_user_attr(trial_id, ATTR_FAIL, reason)
        values = None if value is None else [value]
        return bool(storage.set_trial_state_values(trial_id, state=state, values=values))
    except UpdateFinishedTrialError:
        return False  # finished meanwhile (by its owner, or failed as stale)


def is_fatal(error: Any, fatal_errors: tuple[type[BaseException], ...]) -> bool:
    """A job's config error (also wrapped): every other trial would fail the same way."""
    if not isinstance(error, BaseException):
        return False
    return find_in_chain(error, fatal_errors) is not None


def is_counted_failure(trial: FrozenTrial) -> bool:
    """A FAIL of the job itself: it uses budget and counts toward ``max_failure_rate``."""
    return (
        trial.state == TrialState.FAIL and trial.user_attrs.get(ATTR_FAIL) in COUNTED_FAIL_REASONS
    )


def counts_toward_budget(trial: FrozenTrial) -> bool:
    """True when ``trial`` uses up one of the study's ``n_trials`` (see module docstring)."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
        return True
    return is_counted_failure(trial)


def params_key(params: Mapping[str, Any], names: Sequence[str]) -> tuple[Any, ...] | None:
    """Hashable identity of a parameter set over ``names``; None when a name is missing."""
    if any(n not in params for n in names):
        return None
    return tuple(params[n] for n in names)


def taken_points(
    trials: Iterable[FrozenTrial], names: Sequence[str], exclude: int | None = None
) -> set:
    """Parameter sets already evaluated or being evaluated (counted trials), except ``exclude``."""
    taken = set()
    for t in trials:
        if t.number != exclude and counts_toward_budget(t):
            key = params_key(t.params, names)
            if key is not None:
                taken.add(key)
    return taken


def holds_a_place(trial: FrozenTrial, before: int) -> bool:
    """True when ``trial`` takes (or waits queued for) a place of the budget ahead of ``before``."""
    if trial.number >= before:
        return False
    return counts_toward_budget(trial) or trial.state == TrialState.WAITING


def queued_points(trials: Iterable[FrozenTrial], names: Sequence[str], before: int) -> set:
    """Points of the queued trials numbered before ``before`` (taken, whoever runs them)."""
    points = set()
    for t in trials:
        if t.state == TrialState.WAITING and t.number < before:
            key = params_key(t.system_attrs.get("fixed_params", {}), names)
            if key is not None:
                points.add(key)
    return points


def settled_others(
    study: Any, number: int, names: Sequence[str], wait_s: float = 5.0
) -> list[FrozenTrial]:
    """The other trials, once every earlier RUNNING one holds all ``names`` (<= ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while True:
        others = [t for t in study.get_trials(deepcopy=False) if t.number != number]
        unsettled = [
            t
            for t in others
            if t.number < number
            and t.state == TrialState.RUNNING
            and params_key(t.params, names) is None
        ]
        if not unsettled or time.monotonic() > deadline:
            return others
        time.sleep(0.02)


def _same_point(trial: FrozenTrial, point: Mapping[str, Any]) -> bool:
    """Whether ``trial`` holds ``point`` (compared as ``enqueue_trial(skip_if_exists=True)``)."""
    params = trial.system_attrs.get("fixed_params", trial.params)
    if set(params) != set(point):
        return False

    def same(a: Any, b: Any) -> bool:
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            return math.isclose(float(a), float(b), rel_tol=1e-5)  # Optuna's np.isclose
        return a == b

    return all(same(value, params[name]) for name, value in point.items())


def needs_enqueueing(trials: Iterable[FrozenTrial], point: Mapping[str, Any]) -> bool:
    """True unless a trial with ``point`` waits or uses budget (unlike ``skip_if_exists``, an
    interrupted one's point is enqueued again)."""
    return not any(
        (t.state == TrialState.WAITING or counts_toward_budget(t)) and _same_point(t, point)
        for t in trials
    )
