"""Running the re-evaluations of a study's top trials (their records and how they pool:
:mod:`~ltr_bench.sweeper.reevaluation.records`). Each re-evaluation is locked, so that workers
sharing the study run it once: a RUNNING trial of the companion study ``<study>:reevaluations``
(with heartbeats, like a search trial); of a trial's RUNNING locks the lowest storage id wins (on
a server after a second look), the others withdraw (FAIL ``duplicate``); a finished lock means the
re-evaluation is done, and holds its record."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import optuna
from hydra.core.utils import JobStatus
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.launching.pools import worker_died
from ltr_bench.launching.processes import worker_identity
from ltr_bench.sweeper import job
from ltr_bench.sweeper.hydra_private import job_error
from ltr_bench.sweeper.liveness import report_interrupted
from ltr_bench.sweeper.optuna_private import study_storage, trial_id
from ltr_bench.sweeper.reevaluation.racing import lock_attrs
from ltr_bench.sweeper.reevaluation.records import make_record, search_n, store, stored, top_trials
from ltr_bench.sweeper.search import pruning
from ltr_bench.sweeper.state import StudyState
from ltr_bench.sweeper.trials import (
    ATTR_REEVALUATES,
    ATTR_WORKER,
    FAIL_CONFIG,
    FAIL_DUPLICATE,
    FAIL_EXCEPTION,
    FAIL_INTERRUPTED,
    close_trial,
    counts_toward_budget,
    is_fatal,
)

log = logging.getLogger(__name__)

SETTLE_S = 1.0  # on database servers a locker looks a second time after this pause


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
    study_id = storage.get_study_id_from_name(locks.study_name)
    new_id = storage.create_new_trial(study_id, template_trial=template)
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


def pause(state: StudyState) -> float:
    """How long to wait before looking at other workers' trials or locks again."""
    return min(float(state.settings.heartbeat_interval), 2.0)


def start_early(state: StudyState, pool: Any, free: int) -> None:
    """While the search's last trials run, start (up to ``free``) re-evaluations of the top trials
    that the trials still running or queued cannot push out of the top ``top_k``, so that a worker
    the search no longer needs re-evaluates; :func:`reevaluate` goes on with ``pool``. A config
    error is left to :func:`reevaluate`, which meets it again."""
    trials = state.recover(locks_too=True)
    pending = sum(t.state in (TrialState.RUNNING, TrialState.WAITING) for t in trials)
    s = state.settings
    sure = top_trials(trials, s.top_k - pending, s.direction == "maximize")
    todo = _not_started(state, sure, pool)[: max(free, 0)]
    if todo:
        _lock_and_submit(state, todo, pool)


def release_aborted(state: StudyState, pool: Any) -> None:
    """Stop ``pool``'s re-evaluations (Ctrl-C, SIGTERM, an error): their locks can be taken again."""
    for _, lock_id, _ in pool.abort():
        release(state.locks, lock_id, FAIL_INTERRUPTED, state.heartbeat)


def reevaluate(state: StudyState, pool: Any = None) -> None:
    """Re-evaluate the top trials not yet re-evaluated, waiting for those other workers hold;
    ``pool``: the one :func:`start_early` started re-evaluations in."""
    pool = state.jobs.pool() if pool is None else pool
    waited = False

    def fill() -> BaseException | None:
        nonlocal waited
        while True:
            todo = _todo(state, pool)
            error = _lock_and_submit(state, todo, pool)
            if error is not None or len(pool) or not todo:
                return error
            if not waited:  # all held by other workers: wait for them (or find them gone)
                log.info(
                    f"Waiting for the re-evaluation(s) other workers run: {[t.number for t in todo]}."
                )
                waited = True
            time.sleep(pause(state))

    def stopped(untold: list[Any]) -> None:  # Ctrl-C, SIGTERM: they can be locked again
        for _, lock_id, _ in untold:
            release(state.locks, lock_id, FAIL_INTERRUPTED, state.heartbeat)
        report_interrupted(state.config, state.study, state.locks)

    pool.run(fill, lambda key, outcome: record(state, key, outcome), stopped)


def _todo(state: StudyState, pool: Any) -> list[Any]:
    """The top trials whose re-evaluation is neither stored, done, nor running here."""
    trials = state.recover(locks_too=True)
    s = state.settings
    return _not_started(state, top_trials(trials, s.top_k, s.direction == "maximize"), pool)


def _not_started(state: StudyState, top: list[Any], pool: Any) -> list[Any]:
    """Those of ``top`` whose re-evaluation is neither stored, done, nor running in ``pool``."""
    locks: Any = state.locks
    done = stored(state.study, locks)
    mine = {t.number for t, _, _ in pool.keys()}
    return [
        t
        for t in top
        if t.number not in done and t.number not in mine and not is_done(locks, t.number)
    ]


def _lock_and_submit(state: StudyState, todo: list[Any], pool: Any) -> BaseException | None:
    """Lock and start re-evaluations of ``todo`` until the pool is full; a config error, if any."""
    s, heartbeat, locks = state.settings, state.heartbeat, state.locks
    assert locks is not None
    for t in todo:
        if len(pool) >= pool.capacity:
            break
        attrs = lock_attrs(t.value, search_n(t))
        lock_id = lock(locks, t.number, worker_identity(), heartbeat, attrs=attrs)
        if lock_id is None:
            continue
        number = int(study_storage(locks).get_trial_number_from_id(lock_id))
        extra = [*s.reevaluate_overrides, f"++{job.REEVALUATION_KEY}=true"]
        if pruning.is_racing(s.race):
            # reproducible: the race sees the candidates locked before this batch's first
            before = (pool.keys()[0][2] if len(pool) else number) if s.reproducible else None
            extra += pruning.job_overrides(state.url, s.race, before=before)
            extra.append(f"++{job.REEVALUATION_TRIAL_KEY}={number}")
        study_name = state.study.study_name
        overrides = state.job_overrides(t.params, t.number, extra)
        log.info("Re-evaluating trial(s) %d of study '%s'.", t.number, study_name)
        log.info("Re-evaluation of study '%s': %s", study_name, " ".join(overrides))
        try:
            pool.submit((t, lock_id, number), overrides)
        except Exception as e:  # noqa: BLE001 - a config Hydra cannot compose: fatal, raised by the caller
            release(locks, lock_id, FAIL_CONFIG, heartbeat)
            return e
        except BaseException:
            release(locks, lock_id, FAIL_INTERRUPTED, heartbeat)
            raise
    return None


def wait_for_running_trials(state: StudyState) -> None:
    """Wait until no trial of the study is RUNNING (told, or failed as interrupted)."""
    announced = False
    while True:
        running = [t.number for t in state.recover() if t.state.name == "RUNNING"]
        if not running:
            return
        if not announced:
            log.info("Waiting for trial(s) %s of other workers before re-evaluating.", running)
            announced = True
        time.sleep(pause(state))


def record(state: StudyState, key: Any, outcome: Any) -> BaseException | None:
    """Store one re-evaluation's outcome and close its lock; the error that aborts, if any."""
    heartbeat, locks = state.heartbeat, state.locks
    assert locks is not None
    trial, lock_id, _ = key
    if isinstance(outcome, BaseException):  # no JobReturn: a dead worker, a config error
        died = worker_died(outcome)
        release(locks, lock_id, FAIL_INTERRUPTED if died else FAIL_CONFIG, heartbeat)
        log.error("Re-evaluation of trial %d did not run to the end: %r", trial.number, outcome)
        return outcome
    value = job_error(outcome)
    if outcome.status == JobStatus.COMPLETED and job.is_finite(value):
        rec = make_record(trial, float(value), job.user_attrs_of(value))
        store(locks, lock_id, rec)
        release(locks, lock_id, "", heartbeat, TrialState.COMPLETE, rec.reevaluation_value)
        log.info(
            f"Trial {trial.number} re-evaluated: {rec.reevaluation_value:.6g} "
            f"(search {rec.search_value:.6g}, pooled {rec.value:.6g})."
        )
    elif pruning.is_pruned(value) and last_reported(locks, lock_id)[0] is not None:
        folds, running = last_reported(locks, lock_id)
        assert folds is not None and running is not None
        rec = make_record(trial, running, {}, dropped_after=folds)
        store(locks, lock_id, rec)
        release(locks, lock_id, "", heartbeat, TrialState.PRUNED, running)
        log.info(
            f"Re-evaluation of trial {trial.number} dropped after {folds} fold(s) (running "
            f"{running:.6g}, pooled {rec.value:.6g}): it cannot catch up with another candidate; "
            "left out of the selection."
        )
    elif is_fatal(value, state.settings.fatal_classes):
        release(locks, lock_id, FAIL_CONFIG, heartbeat)
        return value
    else:
        release(locks, lock_id, FAIL_EXCEPTION, heartbeat)
        log.warning(
            f"Re-evaluation of trial {trial.number} failed ({value!r}); left out of selection."
        )
    return None
