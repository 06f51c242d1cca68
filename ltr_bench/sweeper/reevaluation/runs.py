"""Running the re-evaluations of a study's top trials, each once across the workers sharing it:
once the search's last trials are told, the ``reevaluate.top_k`` best trials not yet re-evaluated
run as ``++sweep.reevaluation=true`` jobs, ``n_jobs`` at a time through the search's kind of
pool, each locked first (:mod:`~ltr_bench.sweeper.reevaluation.locks`), raced with
``reevaluate.pruner``, its pooled record stored in the study.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from hydra.core.utils import JobStatus

from ltr_bench.sweeper.job import REEVALUATION_KEY, REEVALUATION_TRIAL_KEY, is_finite, user_attrs_of
from ltr_bench.sweeper.launching import (
    is_fatal,
    job_overrides,
    sigterm_raises_interrupt,
    worker_died,
)
from ltr_bench.sweeper.liveness import report_interrupted, worker_identity
from ltr_bench.sweeper.optuna_private import job_error, study_storage
from ltr_bench.sweeper.reevaluation import locks as rl
from ltr_bench.sweeper.reevaluation import pooling as rv
from ltr_bench.sweeper.reevaluation.racing import lock_attrs
from ltr_bench.sweeper.search import pruning
from ltr_bench.sweeper.state import StudyState
from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_EXCEPTION, FAIL_INTERRUPTED

log = logging.getLogger(__name__)


def pause(state: StudyState) -> float:
    """How long to wait before looking at other workers' trials or locks again."""
    return min(float(state.settings.heartbeat_interval), 2.0)


def reevaluate(state: StudyState) -> None:
    """Re-evaluate the top trials not yet re-evaluated, waiting for those other workers hold. A
    failed or dropped (raced) re-evaluation leaves its trial out of the selection; a config
    error aborts, as for trials."""
    locks: Any = state.locks
    pool = state.jobs.pool()
    error: BaseException | None = None
    untold: list[Any] = []  # re-evaluations whose job ended, not yet recorded
    waited = False
    try:
        with sigterm_raises_interrupt():
            while True:
                todo: list[Any] = []
                if error is None:
                    todo = _todo(state, pool)
                    error = _lock_and_submit(state, todo, pool)
                if not len(pool):
                    if error is not None or not todo:
                        break
                    if not waited:  # all held by other workers: wait for them (or find them gone)
                        numbers = [t.number for t in todo]
                        log.info(f"Waiting for the re-evaluation(s) other workers run: {numbers}.")
                        waited = True
                    time.sleep(pause(state))
                    continue
                ended = pool.wait()
                untold = [key for key, _ in ended]
                for key, outcome in ended:
                    error = error or record(state, key, outcome)
                    untold.remove(key)
    except BaseException:  # Ctrl-C, SIGTERM: the running re-evaluations can be locked again
        for _, lock_id, _ in [*untold, *pool.abort()]:
            rl.release(locks, lock_id, FAIL_INTERRUPTED, state.heartbeat)
        report_interrupted(state.config, state.study, locks)
        raise
    if error is not None:
        raise error


def _todo(state: StudyState, pool: Any) -> list[Any]:
    """The top trials whose re-evaluation is neither stored, done, nor running here."""
    state.recover(locks_too=True)
    locks: Any = state.locks
    done = rv.stored(state.study)
    mine = {t.number for t, _, _ in pool.keys()}
    s = state.settings
    top = rv.top_trials(state.study.get_trials(deepcopy=False), s.top_k, s.direction == "maximize")
    return [
        t
        for t in top
        if t.number not in done and t.number not in mine and not rl.is_done(locks, t.number)
    ]


def _lock_and_submit(state: StudyState, todo: list[Any], pool: Any) -> BaseException | None:
    """Lock and start re-evaluations of ``todo`` (best first) until ``n_jobs`` run; a config
    error that stops them, if any."""
    s, heartbeat, locks = state.settings, state.heartbeat, state.locks
    assert locks is not None
    settle = 0.0 if locks_on_sqlite(locks) else rl.SETTLE_S
    for t in todo:
        if len(pool) >= s.n_jobs:
            break
        attrs = lock_attrs(t.value, rv.search_n(t))
        lock_id = rl.lock(locks, t.number, worker_identity(), heartbeat, settle, attrs=attrs)
        if lock_id is None:
            continue
        number = rl.lock_number(locks, lock_id)
        extra = [*s.reevaluate_overrides, f"++{REEVALUATION_KEY}=true"]
        if pruning.is_racing(s.race):
            # reproducible: the race sees the candidates locked before this batch's first
            before = (pool.keys()[0][2] if len(pool) else number) if s.reproducible else None
            extra += pruning.job_overrides(state.url, s.race, before=before)
            extra.append(f"++{REEVALUATION_TRIAL_KEY}={number}")
        study_name = state.study.study_name
        overrides = job_overrides(study_name, state.space, state.variant, t.params, t.number, extra)
        log.info("Re-evaluating trial(s) %d of study '%s'.", t.number, study_name)
        log.info("Re-evaluation of study '%s': %s", study_name, " ".join(overrides))
        try:
            pool.submit((t, lock_id, number), overrides)
        except Exception as e:  # noqa: BLE001 - a config Hydra cannot compose: fatal, raised by the caller
            rl.release(locks, lock_id, FAIL_CONFIG, heartbeat)
            return e
        except BaseException:
            rl.release(locks, lock_id, FAIL_INTERRUPTED, heartbeat)
            raise
    return None


def locks_on_sqlite(locks: Any) -> bool:
    """Whether the lock study lives in SQLite (writers serialised: no second look needed)."""
    engine = getattr(study_storage(locks), "engine", None)
    return engine is None or engine.dialect.name == "sqlite"


def wait_for_running_trials(state: StudyState) -> None:
    """Wait until no trial of the study is RUNNING (other workers' last trials are told, or
    their workers are found gone and the trials failed as interrupted)."""
    announced = False
    while True:
        state.recover()
        study = state.study
        running = [t.number for t in study.get_trials(deepcopy=False) if t.state.name == "RUNNING"]
        if not running:
            return
        if not announced:
            log.info("Waiting for trial(s) %s of other workers before re-evaluating.", running)
            announced = True
        time.sleep(pause(state))


def record(state: StudyState, key: Any, outcome: Any) -> BaseException | None:
    """Store one re-evaluation's outcome and finish its lock: a record (pooled), a dropped
    record (the race stopped it), or a released lock (failed); the error that aborts, if any."""
    study, heartbeat, locks = state.study, state.heartbeat, state.locks
    assert locks is not None
    trial, lock_id, _ = key
    if isinstance(outcome, BaseException):  # no JobReturn: a dead worker, a config error
        died = worker_died(outcome)
        rl.release(locks, lock_id, FAIL_INTERRUPTED if died else FAIL_CONFIG, heartbeat)
        log.error("Re-evaluation of trial %d did not run to the end: %r", trial.number, outcome)
        return outcome
    value = job_error(outcome)
    if outcome.status == JobStatus.COMPLETED and is_finite(value):
        rec = rv.make_record(trial, float(value), user_attrs_of(value))
        rv.store(study, rec)
        rl.finish(locks, lock_id, rec.reevaluation_value, heartbeat)
        log.info(
            f"Trial {trial.number} re-evaluated: {rec.reevaluation_value:.6g} "
            f"(search {rec.search_value:.6g}, pooled {rec.value:.6g})."
        )
    elif pruning.is_pruned(value) and rl.last_reported(locks, lock_id)[0] is not None:
        folds, running = rl.last_reported(locks, lock_id)
        assert folds is not None and running is not None
        rec = rv.make_record(trial, running, {}, dropped_after=folds)
        rv.store(study, rec)
        rl.drop(locks, lock_id, running, heartbeat)
        log.info(
            f"Re-evaluation of trial {trial.number} dropped after {folds} fold(s) (running "
            f"{running:.6g}, pooled {rec.value:.6g}): it cannot catch up with another candidate; "
            "left out of the selection."
        )
    elif is_fatal(value, state.settings.fatal_classes):
        rl.release(locks, lock_id, FAIL_CONFIG, heartbeat)
        return value
    else:
        rl.release(locks, lock_id, FAIL_EXCEPTION, heartbeat)
        log.warning(
            f"Re-evaluation of trial {trial.number} failed ({value!r}); left out of selection."
        )
    return None
