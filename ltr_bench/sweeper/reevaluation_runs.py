"""Running the re-evaluations of a study's top trials, each once across the workers sharing it.

Once the search's last trials (of every worker) are told, the ``reevaluate.top_k`` best trials
not yet re-evaluated run once more as ``++sweep.reevaluation=true`` jobs (``n_jobs`` at a time);
each is locked through the storage first (:mod:`~ltr_bench.sweeper.reevaluation_locks`) and its
pooled record stored in the study (:mod:`~ltr_bench.sweeper.reevaluation`). With
``reevaluate.pruner`` they race (:mod:`~ltr_bench.sweeper.reevaluation_racing`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobStatus

from ltr_bench.sweeper.launching import REEVALUATION_KEY, job_overrides
from ltr_bench.sweeper.optuna_private import job_error

if TYPE_CHECKING:
    from ltr_bench.sweeper.sweeper import OptunaSweeperImpl

log = logging.getLogger("ltr_bench.sweeper.sweeper")


def pause(sweeper: OptunaSweeperImpl) -> float:
    """How long to wait before looking at other workers' trials or locks again."""
    return min(float(sweeper.heartbeat_interval), 2.0)


def reevaluate(
    sweeper: OptunaSweeperImpl,
    study: Any,
    space: Any,
    variant: list[str],
    rdb: Any,
    locks: Any,
    heartbeat: Any,
    url: str,
) -> None:
    """Run the ``reevaluate.top_k`` best trials not yet re-evaluated once more and store each
    pooled record in the study. Each re-evaluation is locked through the storage first, so
    workers sharing the study run each once; a worker waits for re-evaluations other workers
    hold. Up to ``n_jobs`` run at once, through the same kind of pool as the search (in flight
    in joblib workers: a freed worker starts the next candidate at once). A failing
    re-evaluation is logged and leaves its trial out of the selection; a dropped one (the race)
    too; a config error aborts, as for trials."""
    from ltr_bench.sweeper import reevaluation_locks as rl
    from ltr_bench.sweeper.hooks import report_interrupted
    from ltr_bench.sweeper.job_pool import make_pool
    from ltr_bench.sweeper.launching import sigterm_raises_interrupt
    from ltr_bench.sweeper.trials import FAIL_INTERRUPTED

    assert sweeper.config is not None
    pool = make_pool(sweeper)
    error: BaseException | None = None
    untold: list[Any] = []  # re-evaluations whose job ended, not yet recorded
    waited = False
    try:
        with sigterm_raises_interrupt():
            while True:
                todo: list[Any] = []
                if error is None:
                    todo = _todo(sweeper, study, rdb, locks, pool)
                    error = _lock_and_submit(
                        sweeper, study, space, variant, locks, todo, pool, heartbeat, url
                    )
                if not len(pool):
                    if error is not None or not todo:
                        break
                    if (
                        not waited
                    ):  # all held by other workers: wait for them (or to find them gone)
                        log.info(
                            "Waiting for the re-evaluation(s) other workers run: trial(s) %s.",
                            [t.number for t in todo],
                        )
                        waited = True
                    time.sleep(pause(sweeper))
                    continue
                ended = pool.wait()
                untold = [key for key, _ in ended]
                for key, outcome in ended:
                    error = error or record(sweeper, study, locks, key, outcome, heartbeat)
                    untold.remove(key)
    except BaseException:  # Ctrl-C, SIGTERM: the running re-evaluations can be locked again
        for _, lock_id, _ in [*untold, *pool.abort()]:
            rl.release(locks, lock_id, FAIL_INTERRUPTED, heartbeat)
        report_interrupted(sweeper.config, study, locks)
        raise
    if error is not None:
        raise error


def _todo(sweeper: OptunaSweeperImpl, study: Any, rdb: Any, locks: Any, pool: Any) -> list[Any]:
    """The top trials whose re-evaluation is neither stored, done, nor running here."""
    from ltr_bench.sweeper import reevaluation as rv
    from ltr_bench.sweeper import reevaluation_locks as rl
    from ltr_bench.sweeper.hooks import report_interrupted
    from ltr_bench.sweeper.trials import fail_interrupted_trials

    assert sweeper.config is not None
    found = fail_interrupted_trials(study, rdb, sweeper.grace_period)
    found += fail_interrupted_trials(locks, rdb, sweeper.grace_period)
    if found:
        report_interrupted(sweeper.config, study, locks)
    done = rv.stored(study)
    mine = {t.number for t, _, _ in pool.keys()}
    top = rv.top_trials(
        study.get_trials(deepcopy=False), sweeper.reevaluate_top_k, sweeper.direction == "maximize"
    )
    return [
        t
        for t in top
        if t.number not in done and t.number not in mine and not rl.is_done(locks, t.number)
    ]


def _lock_and_submit(
    sweeper: OptunaSweeperImpl,
    study: Any,
    space: Any,
    variant: list[str],
    locks: Any,
    todo: list[Any],
    pool: Any,
    heartbeat: Any,
    url: str,
) -> BaseException | None:
    """Lock and start re-evaluations of ``todo`` (best first) until ``n_jobs`` run; a config
    error that stops them, if any."""
    from ltr_bench.sweeper import reevaluation as rv
    from ltr_bench.sweeper import reevaluation_locks as rl
    from ltr_bench.sweeper.pruning import REEVALUATION_TRIAL_KEY, is_racing
    from ltr_bench.sweeper.pruning import job_overrides as racing_overrides
    from ltr_bench.sweeper.reevaluation_racing import lock_attrs
    from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_INTERRUPTED, worker_identity

    settle = 0.0 if locks_on_sqlite(locks) else rl.SETTLE_S
    for t in todo:
        if len(pool) >= sweeper.n_jobs:
            break
        attrs = lock_attrs(t.value, rv.search_n(t))
        lock_id = rl.lock(locks, t.number, worker_identity(), heartbeat, settle, attrs=attrs)
        if lock_id is None:
            continue
        number = rl.lock_number(locks, lock_id)
        extra = [*sweeper.reevaluate_overrides, f"++{REEVALUATION_KEY}=true"]
        if is_racing(sweeper.reevaluate_pruner_cfg):
            # reproducible: the race sees the candidates locked before this batch's first
            before = (pool.keys()[0][2] if len(pool) else number) if sweeper.reproducible else None
            extra += racing_overrides(url, sweeper.reevaluate_pruner_cfg, before=before)
            extra.append(f"++{REEVALUATION_TRIAL_KEY}={number}")
        overrides = job_overrides(study.study_name, space, variant, t.params, t.number, extra)
        log.info("Re-evaluating trial(s) %d of study '%s'.", t.number, study.study_name)
        log.info("Re-evaluation of study '%s': %s", study.study_name, " ".join(overrides))
        try:
            pool.submit((t, lock_id, number), overrides)
        except Exception as e:  # noqa: BLE001 - a config Hydra cannot compose: fatal
            rl.release(locks, lock_id, FAIL_CONFIG, heartbeat)
            return e
        except BaseException:
            rl.release(locks, lock_id, FAIL_INTERRUPTED, heartbeat)
            raise
    return None


def locks_on_sqlite(locks: Any) -> bool:
    """Whether the lock study lives in SQLite (writers serialised: no second look needed)."""
    from ltr_bench.sweeper.optuna_private import study_storage

    engine = getattr(study_storage(locks), "engine", None)
    return engine is None or engine.dialect.name == "sqlite"


def wait_for_running_trials(sweeper: OptunaSweeperImpl, study: Any, rdb: Any, locks: Any) -> None:
    """Wait until no trial of the study is RUNNING (other workers' last trials are told, or
    their workers are found gone and the trials failed as interrupted)."""
    from ltr_bench.sweeper.hooks import report_interrupted
    from ltr_bench.sweeper.trials import fail_interrupted_trials

    assert sweeper.config is not None
    announced = False
    while True:
        if fail_interrupted_trials(study, rdb, sweeper.grace_period):
            report_interrupted(sweeper.config, study, locks)
        running = [t.number for t in study.get_trials(deepcopy=False) if t.state.name == "RUNNING"]
        if not running:
            return
        if not announced:
            log.info("Waiting for trial(s) %s of other workers before re-evaluating.", running)
            announced = True
        time.sleep(pause(sweeper))


def record(
    sweeper: OptunaSweeperImpl, study: Any, locks: Any, key: Any, outcome: Any, heartbeat: Any
) -> BaseException | None:
    """Store one re-evaluation's outcome and finish its lock: a record (pooled), a dropped
    record (the race stopped it), or a released lock (failed); the error that aborts, if any."""
    from ltr_bench.sweeper import pruning
    from ltr_bench.sweeper import reevaluation as rv
    from ltr_bench.sweeper import reevaluation_locks as rl
    from ltr_bench.sweeper.job_pool import worker_died
    from ltr_bench.sweeper.objective import is_finite, user_attrs_of
    from ltr_bench.sweeper.telling import is_fatal
    from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_EXCEPTION, FAIL_INTERRUPTED

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
            "Trial %d re-evaluated: %.6g (search %.6g, pooled %.6g).",
            trial.number,
            rec.reevaluation_value,
            rec.search_value,
            rec.value,
        )
    elif pruning.is_pruned(value) and rl.last_reported(locks, lock_id)[0] is not None:
        folds, running = rl.last_reported(locks, lock_id)
        assert folds is not None and running is not None
        rec = rv.make_record(trial, running, {}, dropped_after=folds)
        rv.store(study, rec)
        rl.drop(locks, lock_id, running, heartbeat)
        log.info(
            "Re-evaluation of trial %d dropped after %d fold(s) (running %.6g, pooled %.6g): "
            "it cannot catch up with another candidate; left out of the selection.",
            trial.number,
            folds,
            running,
            rec.value,
        )
    elif is_fatal(value, sweeper.fatal_errors):
        rl.release(locks, lock_id, FAIL_CONFIG, heartbeat)
        return value
    else:
        rl.release(locks, lock_id, FAIL_EXCEPTION, heartbeat)
        log.warning(
            "Re-evaluation of trial %d failed (%r); it is left out of the selection.",
            trial.number,
            value,
        )
    return None
