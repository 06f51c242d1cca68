"""Claiming a study's re-evaluations through its storage, so that workers sharing it run each once.

Search trials are claimed by Optuna itself (each ``ask`` creates a new trial). A re-evaluation
repeats a finished trial, so it is claimed with a trial of the companion study
``<study>:reevaluations`` in the same storage: a RUNNING claim trial carries the user attributes
``ltr_sweeper.reevaluates`` (the re-evaluated trial's number) and ``ltr_sweeper.worker`` (who
runs it), written in the same transaction that creates it, and gets heartbeats like a search
trial. So the machinery that fails search trials of gone sweepers
(:func:`~ltr_bench.sweeper.trials.fail_interrupted_trials`) also fails their claims
(``interrupted``), and the re-evaluation can be claimed again.

Among the RUNNING claims of one trial the one with the lowest storage id wins; the others
withdraw (FAIL, ``duplicate``) before running anything. SQLite serialises writers, so a claim
with a lower id was committed before a later claimant looks; on a database server a second look
after a short pause covers a concurrent insert that had not been committed yet. A claim that
finished (COMPLETE, or FAIL because the job itself failed) means the re-evaluation is done.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.sweeper.trials import (
    ATTR_FAIL,
    ATTR_WORKER,
    FAIL_DUPLICATE,
    FAIL_INTERRUPTED,
    counts_toward_budget,
)

CLAIMS_SUFFIX = ":reevaluations"
ATTR_REEVALUATES = "ltr_sweeper.reevaluates"
SETTLE_S = 1.0  # second look on database servers (see the module docstring)


def open_claims(rdb: optuna.storages.RDBStorage, study: optuna.Study) -> optuna.Study:
    """The companion study holding ``study``'s re-evaluation claims (created on first use)."""
    from ltr_bench.sweeper.storage import open_study

    return open_study(rdb, study.study_name + CLAIMS_SUFFIX, study.direction.name.lower())


def _claims_of(claims: optuna.Study, number: int) -> list[FrozenTrial]:
    return [
        t for t in claims.get_trials(deepcopy=False) if t.user_attrs.get(ATTR_REEVALUATES) == number
    ]


def is_done(claims: optuna.Study, number: int) -> bool:
    """True when a claim on trial ``number`` finished: the re-evaluation ran (or its job failed)."""
    return any(
        t.state != TrialState.RUNNING and counts_toward_budget(t)
        for t in _claims_of(claims, number)
    )


def is_claimed(claims: optuna.Study, number: int) -> bool:
    """True when a (live, as far as anyone has checked) claim on trial ``number`` is RUNNING."""
    return any(t.state == TrialState.RUNNING for t in _claims_of(claims, number))


def claim(
    claims: optuna.Study,
    number: int,
    identity: Mapping[str, Any],
    heartbeat: Any,
    settle_s: float = 0.0,
) -> int | None:
    """Claim the re-evaluation of trial ``number``; the claim's trial id, or None when it is
    done or another worker holds it. ``heartbeat`` (a :class:`~ltr_bench.sweeper.trials.Heartbeat`)
    keeps a won claim alive; ``settle_s`` > 0 looks a second time after that pause."""
    if is_done(claims, number) or is_claimed(claims, number):
        return None
    template = optuna.trial.create_trial(
        state=TrialState.RUNNING, user_attrs={ATTR_REEVALUATES: number, ATTR_WORKER: dict(identity)}
    )
    storage = claims._storage
    trial_id = storage.create_new_trial(claims._study_id, template_trial=template)
    heartbeat.add(trial_id)
    for look in range(2 if settle_s > 0 else 1):
        if look:
            time.sleep(settle_s)
        mine = _claims_of(claims, number)
        running = [t._trial_id for t in mine if t.state == TrialState.RUNNING]
        done = any(t.state != TrialState.RUNNING and counts_toward_budget(t) for t in mine)
        if done or not running or min(running) != trial_id:
            release(claims, trial_id, FAIL_DUPLICATE, heartbeat)
            return None
    return trial_id


def finish(claims: optuna.Study, trial_id: int, value: float, heartbeat: Any) -> None:
    """Mark a claim COMPLETE with the re-evaluation's value (after its record is stored)."""
    heartbeat.discard(trial_id)
    try:
        claims._storage.set_trial_state_values(trial_id, state=TrialState.COMPLETE, values=[value])
    except optuna.exceptions.UpdateFinishedTrialError:
        pass  # failed as stale meanwhile; the stored record is what counts


def release(claims: optuna.Study, trial_id: int, reason: str, heartbeat: Any) -> None:
    """Mark a claim FAIL with ``reason`` (``exception``/``nan``: done; others: claimable again)."""
    heartbeat.discard(trial_id)
    try:
        claims._storage.set_trial_user_attr(trial_id, ATTR_FAIL, reason)
        claims._storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
    except optuna.exceptions.UpdateFinishedTrialError:
        pass


def interrupted(claims: optuna.Study) -> dict[int, float]:
    """Re-evaluated trial number -> when its latest interrupted claim was failed (epoch seconds):
    a re-evaluation run of that trial started before then has no process left."""
    out: dict[int, float] = {}
    for t in claims.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        number = t.user_attrs.get(ATTR_REEVALUATES)
        if (
            number is None
            or t.user_attrs.get(ATTR_FAIL) != FAIL_INTERRUPTED
            or t.datetime_complete is None
        ):
            continue
        out[int(number)] = max(out.get(int(number), 0.0), t.datetime_complete.timestamp())
    return out
