"""Locking a study's re-evaluations, so that workers sharing it run each once: a RUNNING trial of
the companion study ``<study>:reevaluations`` (with heartbeats, like a search trial) locks one; of
a trial's RUNNING locks the lowest storage id wins (on a server after a second look), the others
withdraw (FAIL ``duplicate``); a finished lock means the re-evaluation is done."""

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
    close_trial,
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


def lock(
    locks: optuna.Study,
    number: int,
    identity: Mapping[str, Any],
    heartbeat: Any,
    attrs: Mapping[str, Any] | None = None,
) -> int | None:
    """Lock the re-evaluation of trial ``number``: the lock's trial id, or None when it is done or
    held (a RUNNING lock); ``attrs`` go on the lock trial."""
    if any(counts_toward_budget(t) for t in _locks_of(locks, number)):
        return None
    template = optuna.trial.create_trial(
        state=TrialState.RUNNING,
        user_attrs={**dict(attrs or {}), ATTR_REEVALUATES: number, ATTR_WORKER: dict(identity)},
    )
    storage = study_storage(locks)
    engine = getattr(storage, "engine", None)  # SQLite serialises writers: no second look
    settle_s = 0.0 if engine is None or engine.dialect.name == "sqlite" else SETTLE_S
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


def last_reported(locks: optuna.Study, lock_id: int) -> tuple[int | None, float | None]:
    """The last fold a raced re-evaluation reported into its lock trial, and its running mean."""
    trial = study_storage(locks).get_trial(lock_id)
    step = trial.last_step
    return step, (None if step is None else float(trial.intermediate_values[step]))


def release(
    locks: Any,
    lock_id: int,
    reason: str,
    heartbeat: Any,
    state: TrialState = TrialState.FAIL,
    value: float | None = None,
) -> None:
    """Finish a lock: FAIL with ``reason`` (``exception``/``nan``: done, others: lockable again),
    or COMPLETE (its record stored) / PRUNED (the race dropped it) with ``value``."""
    heartbeat.discard(lock_id)
    close_trial(study_storage(locks), lock_id, state, value, reason)


def interrupted(locks: optuna.Study) -> dict[int, float]:
    """Re-evaluated trial number -> when its latest interrupted lock was failed (epoch s)."""
    out: dict[int, float] = {}
    for t in locks.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        number = t.user_attrs.get(ATTR_REEVALUATES)
        reason = t.user_attrs.get(ATTR_FAIL)
        if number is None or reason != FAIL_INTERRUPTED or t.datetime_complete is None:
            continue
        out[int(number)] = max(out.get(int(number), 0.0), t.datetime_complete.timestamp())
    return out
