"""Locking a study's re-evaluations through its storage, so that workers sharing it run each once.

Search trials are claimed by Optuna itself (each ``ask`` creates a trial). A re-evaluation
repeats a finished trial, so it is locked with a trial of the companion study
``<study>:reevaluations`` in the same storage: a RUNNING lock trial carries the re-evaluated
trial's number and its worker's identity, written in the transaction that creates it, and gets
heartbeats like a search trial, so a gone sweeper's locks are failed (``interrupted``) as its
trials are, and the re-evaluation can be locked again.

Among the RUNNING locks of one trial the one with the lowest storage id wins; the others
withdraw (FAIL ``duplicate``) before running anything. SQLite serialises writers, so a lock with
a lower id was committed before a later locker looks; on a database server a second look after a
short pause covers a concurrent insert not yet committed. A finished lock (COMPLETE, PRUNED when
the race dropped it, FAIL because the job failed) means the re-evaluation is done. A raced
re-evaluation reports its folds into its lock trial.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.sweeper.job import LOCKS_SUFFIX
from ltr_bench.sweeper.optuna_private import study_id, study_storage, trial_id
from ltr_bench.sweeper.storage import open_study
from ltr_bench.sweeper.trials import (
    ATTR_FAIL,
    ATTR_WORKER,
    FAIL_DUPLICATE,
    FAIL_INTERRUPTED,
    counts_toward_budget,
)

ATTR_REEVALUATES = "ltr_sweeper.reevaluates"
SETTLE_S = 1.0  # second look on database servers (see the module docstring)


def open_locks(rdb: optuna.storages.RDBStorage, study: optuna.Study) -> optuna.Study:
    """The companion study holding ``study``'s re-evaluation locks (created on first use)."""
    return open_study(rdb, study.study_name + LOCKS_SUFFIX, study.direction.name.lower())


def _locks_of(locks: optuna.Study, number: int) -> list[FrozenTrial]:
    return [
        t for t in locks.get_trials(deepcopy=False) if t.user_attrs.get(ATTR_REEVALUATES) == number
    ]


def is_done(locks: optuna.Study, number: int) -> bool:
    """True when a lock on trial ``number`` finished: the re-evaluation ran (or its job failed)."""
    return any(
        t.state != TrialState.RUNNING and counts_toward_budget(t) for t in _locks_of(locks, number)
    )


def is_locked(locks: optuna.Study, number: int) -> bool:
    """True when a (live, as far as anyone has checked) lock on trial ``number`` is RUNNING."""
    return any(t.state == TrialState.RUNNING for t in _locks_of(locks, number))


def lock(
    locks: optuna.Study,
    number: int,
    identity: Mapping[str, Any],
    heartbeat: Any,
    settle_s: float = 0.0,
    attrs: Mapping[str, Any] | None = None,
) -> int | None:
    """Lock the re-evaluation of trial ``number``; the lock's trial id, or None when it is
    done or another worker holds it. ``heartbeat`` (a :class:`~ltr_bench.sweeper.liveness.Heartbeat`)
    keeps a won lock alive; ``settle_s`` > 0 looks a second time after that pause; ``attrs`` are
    more user attributes of the lock trial (what a race needs)."""
    if is_done(locks, number) or is_locked(locks, number):
        return None
    template = optuna.trial.create_trial(
        state=TrialState.RUNNING,
        user_attrs={**dict(attrs or {}), ATTR_REEVALUATES: number, ATTR_WORKER: dict(identity)},
    )
    storage = study_storage(locks)
    new_id = storage.create_new_trial(study_id(locks), template_trial=template)
    heartbeat.add(new_id)
    for look in range(2 if settle_s > 0 else 1):
        if look:
            time.sleep(settle_s)
        mine = _locks_of(locks, number)
        running = [trial_id(t) for t in mine if t.state == TrialState.RUNNING]
        done = any(t.state != TrialState.RUNNING and counts_toward_budget(t) for t in mine)
        if done or not running or min(running) != new_id:
            release(locks, new_id, FAIL_DUPLICATE, heartbeat)
            return None
    return new_id


def lock_number(locks: optuna.Study, lock_id: int) -> int:
    """The number of a lock trial in its study (what a raced re-evaluation job is told)."""
    return int(study_storage(locks).get_trial_number_from_id(lock_id))


def last_reported(locks: optuna.Study, lock_id: int) -> tuple[int | None, float | None]:
    """The last fold a raced re-evaluation reported into its lock trial, and its running mean."""
    trial = study_storage(locks).get_trial(lock_id)
    step = trial.last_step
    return step, (None if step is None else float(trial.intermediate_values[step]))


def _close(
    locks: Any, lock_id: int, heartbeat: Any, state: TrialState, value: Any = None, reason: str = ""
) -> None:
    heartbeat.discard(lock_id)
    storage = study_storage(locks)
    try:
        if reason:
            storage.set_trial_user_attr(lock_id, ATTR_FAIL, reason)
        values = None if value is None else [value]
        storage.set_trial_state_values(lock_id, state=state, values=values)
    except optuna.exceptions.UpdateFinishedTrialError:
        pass  # failed as stale meanwhile; a stored record is what counts


def finish(locks: optuna.Study, lock_id: int, value: float, heartbeat: Any) -> None:
    """Mark a lock COMPLETE with the re-evaluation's value (after its record is stored)."""
    _close(locks, lock_id, heartbeat, TrialState.COMPLETE, value)


def drop(locks: optuna.Study, lock_id: int, value: float | None, heartbeat: Any) -> None:
    """Mark a lock PRUNED: the race dropped its re-evaluation (done; never run again)."""
    _close(locks, lock_id, heartbeat, TrialState.PRUNED, value)


def release(locks: optuna.Study, lock_id: int, reason: str, heartbeat: Any) -> None:
    """Mark a lock FAIL with ``reason`` (``exception``/``nan``: done; others: lockable again)."""
    _close(locks, lock_id, heartbeat, TrialState.FAIL, reason=reason)


def interrupted(locks: optuna.Study) -> dict[int, float]:
    """Re-evaluated trial number -> when its latest interrupted lock was failed (epoch seconds):
    a re-evaluation run of that trial started before then has no process left."""
    out: dict[int, float] = {}
    for t in locks.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        number = t.user_attrs.get(ATTR_REEVALUATES)
        reason = t.user_attrs.get(ATTR_FAIL)
        if number is None or reason != FAIL_INTERRUPTED or t.datetime_complete is None:
            continue
        out[int(number)] = max(out.get(int(number), 0.0), t.datetime_complete.timestamp())
    return out
