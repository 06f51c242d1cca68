"""Running the re-evaluations of a study's top trials, each once across the workers sharing it.

Once the search's last trials (of every worker) are told, the ``reevaluate.top_k`` best trials
not yet re-evaluated run once more as ``++sweep.reevaluation=true`` jobs (``n_jobs`` at a time);
each is locked through the storage first (:mod:`~ltr_bench.sweeper.reevaluation_locks`) and its
pooled record stored in the study (:mod:`~ltr_bench.sweeper.reevaluation`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobStatus

from ltr_bench.sweeper.launching import REEVALUATION_KEY, job_overrides, launch
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
) -> None:
    """Run the ``reevaluate.top_k`` best trials not yet re-evaluated once more and store each
    pooled record in the study. Each re-evaluation is locked through the storage first, so
    workers sharing the study run each once; a worker waits for re-evaluations other workers
    hold. A failing re-evaluation is logged and leaves its trial out of the selection; a config
    error aborts, as for trials."""
    from ltr_bench.sweeper import reevaluation as rv
    from ltr_bench.sweeper import reevaluation_locks as rl
    from ltr_bench.sweeper.hooks import report_interrupted
    from ltr_bench.sweeper.trials import fail_interrupted_trials, worker_identity

    assert sweeper.config is not None
    maximize = sweeper.direction == "maximize"
    settle = 0.0 if rdb.engine.dialect.name == "sqlite" else rl.SETTLE_S
    identity = worker_identity()
    waited = False
    while True:
        found = fail_interrupted_trials(study, rdb, sweeper.grace_period)
        found += fail_interrupted_trials(locks, rdb, sweeper.grace_period)
        if found:
            report_interrupted(sweeper.config, study, locks)
        trials = study.get_trials(deepcopy=False)
        done = rv.stored(study)
        todo = [
            t
            for t in rv.top_trials(trials, sweeper.reevaluate_top_k, maximize)
            if t.number not in done and not rl.is_done(locks, t.number)
        ]
        if not todo:
            return
        batch: list[tuple[Any, int]] = []
        for t in todo:
            if len(batch) == sweeper.n_jobs:
                break
            lock_id = rl.lock(locks, t.number, identity, heartbeat, settle)
            if lock_id is not None:
                batch.append((t, lock_id))
        if not batch:  # all held by other workers: wait for them (or to find them gone)
            if not waited:
                log.info(
                    "Waiting for the re-evaluation(s) other workers run: trial(s) %s.",
                    [t.number for t in todo],
                )
                waited = True
            time.sleep(pause(sweeper))
            continue
        run_reevaluations(sweeper, study, space, variant, locks, batch, heartbeat)


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


def run_reevaluations(
    sweeper: OptunaSweeperImpl,
    study: Any,
    space: Any,
    variant: list[str],
    locks: Any,
    batch: list[tuple[Any, int]],
    heartbeat: Any,
) -> None:
    """Launch one batch of locked re-evaluations; store each record, then finish its lock."""
    from ltr_bench.sweeper import reevaluation as rv
    from ltr_bench.sweeper import reevaluation_locks as rl
    from ltr_bench.sweeper.objective import is_finite, user_attrs_of
    from ltr_bench.sweeper.telling import is_fatal
    from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_EXCEPTION

    extra = [*sweeper.reevaluate_overrides, f"++{REEVALUATION_KEY}=true"]
    jobs = [
        job_overrides(study.study_name, space, variant, t.params, t.number, extra) for t, _ in batch
    ]
    log.info(
        "Re-evaluating trial(s) %s of study '%s'.",
        ", ".join(str(t.number) for t, _ in batch),
        study.study_name,
    )
    for overrides in jobs:
        log.info("Re-evaluation of study '%s': %s", study.study_name, " ".join(overrides))

    def release_all(reason: str, error: BaseException) -> None:
        for _, lock_id in batch:
            rl.release(locks, lock_id, reason, heartbeat)

    returns = launch(sweeper, jobs, release_all)
    fatal: BaseException | None = None
    for (trial, lock_id), ret in zip(batch, returns):
        value = job_error(ret)
        if ret.status == JobStatus.COMPLETED and is_finite(value):
            record = rv.make_record(trial, float(value), user_attrs_of(value))
            rv.store(study, record)
            rl.finish(locks, lock_id, record.reevaluation_value, heartbeat)
            log.info(
                "Trial %d re-evaluated: %.6g (search %.6g, pooled %.6g).",
                trial.number,
                record.reevaluation_value,
                record.search_value,
                record.value,
            )
        elif is_fatal(value, sweeper.fatal_errors):
            rl.release(locks, lock_id, FAIL_CONFIG, heartbeat)
            fatal = fatal or value
        else:
            rl.release(locks, lock_id, FAIL_EXCEPTION, heartbeat)
            log.warning(
                "Re-evaluation of trial %d failed (%r); it is left out of the selection.",
                trial.number,
                value,
            )
    if fatal is not None:
        raise fatal
