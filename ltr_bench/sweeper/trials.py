"""What a trial's state means to the sweeper: whether it uses the budget, which point it holds.

COMPLETE, PRUNED, RUNNING, and FAIL when the job itself failed (raised, returned NaN/None) use one
of the study's ``n_trials``: those parameters were evaluated. A FAIL because the sweep was
interrupted, a config error, a duplicate or a surplus trial does not (the reason is the user
attribute ``ltr_sweeper.fail_reason``), so a resumed sweep runs the trial again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from optuna.trial import FrozenTrial, TrialState

ATTR_WORKER = "ltr_sweeper.worker"  # who runs a RUNNING trial (liveness.worker_identity)
ATTR_FAIL = "ltr_sweeper.fail_reason"
ATTR_ERROR = "ltr_sweeper.error"

# Fail reasons. Only the first two count toward n_trials.
FAIL_EXCEPTION = "exception"
FAIL_NAN = "nan"
FAIL_INTERRUPTED = "interrupted"
FAIL_CONFIG = "config_error"
FAIL_DUPLICATE = "duplicate"
FAIL_SURPLUS = "surplus"
COUNTED_FAIL_REASONS = frozenset({FAIL_EXCEPTION, FAIL_NAN})


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
    """True when ``trial`` takes a place of the budget ahead of trial ``before``: it counts, or it
    waits in the queue (taken later, although trials numbered after it were asked first)."""
    if trial.number >= before:
        return False
    return counts_toward_budget(trial) or trial.state == TrialState.WAITING


def queued_points(trials: Iterable[FrozenTrial], names: Sequence[str], before: int) -> set:
    """Points of the trials waiting in the queue numbered before ``before``: taken, whoever will
    run them."""
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
    """The study's trials other than ``number``, read once every earlier RUNNING trial holds all
    of ``names`` (read between another worker's ``ask`` and its last parameter write, its point
    looks free); ``wait_s`` bounds the wait for a worker that died mid-ask."""
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
    """True when ``trial`` was enqueued with (or sampled) exactly ``point``, compared as Optuna's
    ``enqueue_trial(skip_if_exists=True)`` compares (numbers with ``isclose``)."""
    params = trial.system_attrs.get("fixed_params", trial.params)
    if set(params) != set(point):
        return False

    def same(a: Any, b: Any) -> bool:
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            return math.isclose(float(a), float(b), rel_tol=1e-5)  # Optuna's np.isclose
        return a == b

    return all(same(value, params[name]) for name, value in point.items())


def needs_enqueueing(trials: Iterable[FrozenTrial], point: Mapping[str, Any]) -> bool:
    """True unless a trial with ``point`` waits, runs or was evaluated (uses budget): unlike
    ``skip_if_exists``, a point whose trial was interrupted, stopped by a config error or rejected
    is enqueued again on resume (the default config is not lost when trial 0 is killed)."""
    return not any(
        (t.state == TrialState.WAITING or counts_toward_budget(t)) and _same_point(t, point)
        for t in trials
    )
