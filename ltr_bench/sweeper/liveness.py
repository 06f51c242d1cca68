"""Liveness and recovery: every RUNNING trial (and re-evaluation lock) carries its sweeper's
identity and heartbeats; a gone sweeper's trials are failed (``interrupted``) and reported to the
app's ``sweep.on_interrupted`` hook (its jobs in launcher workers stop:
``ltr_bench.launching.processes.orphan_guard``)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.launching.processes import is_dead_local_worker, is_local_worker
from ltr_bench.sweeper import optuna_private
from ltr_bench.sweeper.trials import (
    ATTR_FAIL,
    ATTR_REEVALUATES,
    ATTR_WORKER,
    FAIL_INTERRUPTED,
    close_trial,
)

log = logging.getLogger(__name__)


def fail_interrupted_trials(
    study: optuna.Study,
    rdb: optuna.storages.RDBStorage,
    grace_period_s: float,
    now: Callable[[], dt.datetime] = dt.datetime.now,
    stored: Sequence[FrozenTrial] | None = None,
) -> list[int]:
    """Fail (``interrupted``) the RUNNING trials whose sweeper is gone: a dead process of this
    host, a stale heartbeat of another, or no owner and older than the grace period. ``stored``:
    the study's trials, when just read."""
    stored = study.get_trials(deepcopy=False) if stored is None else stored
    running = [t for t in stored if t.state == TrialState.RUNNING]
    if not running:
        return []
    stale_ids: set[int] = set()
    if rdb.get_heartbeat_interval() is not None:
        try:  # Optuna's own staleness query (what optuna.storages.fail_stale_trials uses)
            stale_ids = optuna_private.stale_trial_ids(rdb, study)
        except AttributeError:
            log.warning(
                "This Optuna version has no heartbeat query; only local trials are checked."
            )
    current = now()
    failed = []
    for t in running:
        worker = t.user_attrs.get(ATTR_WORKER)
        if isinstance(worker, Mapping) and is_local_worker(worker):
            gone = is_dead_local_worker(worker)
        elif isinstance(worker, Mapping):
            gone = optuna_private.trial_id(t) in stale_ids
        else:
            started = t.datetime_start or current
            gone = (
                optuna_private.trial_id(t) in stale_ids
                or (current - started).total_seconds() > grace_period_s
            )
        tid = optuna_private.trial_id(t)
        if gone and close_trial(rdb, tid, TrialState.FAIL, reason=FAIL_INTERRUPTED):
            failed.append(t.number)
    if failed:
        log.warning("Marked interrupted trials %s of study '%s' as FAIL.", failed, study.study_name)
    return failed


def report_interrupted(config: DictConfig, study: Any, locks: Any) -> None:
    """Hand the interrupted trials and re-evaluations to the app's ``sweep.on_interrupted`` hook
    (it may hear the same again); a failing hook is logged."""
    from hydra.utils import get_method

    hook = OmegaConf.select(config, "sweep.on_interrupted", default=None)
    if not hook:
        return
    trials = sorted(
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if t.user_attrs.get(ATTR_FAIL) == FAIL_INTERRUPTED
    )
    reevaluations: dict[int, float] = {}  # re-evaluated trial -> when its latest lock was failed
    for t in [] if locks is None else locks.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        number = t.user_attrs.get(ATTR_REEVALUATES)
        reason = t.user_attrs.get(ATTR_FAIL)
        if number is None or reason != FAIL_INTERRUPTED or t.datetime_complete is None:
            continue
        end = t.datetime_complete.timestamp()
        reevaluations[int(number)] = max(reevaluations.get(int(number), 0.0), end)
    if not trials and not reevaluations:
        return
    try:
        get_method(str(hook))(config, study.study_name, trials, reevaluations)
    except Exception as e:  # noqa: BLE001 - the app's bookkeeping must not stop the sweep
        log.warning("sweep.on_interrupted=%s failed for study '%s': %s", hook, study.study_name, e)


class Heartbeat:
    """One thread beating for this process's running trials and locks (Optuna's beats only
    inside ``Study.optimize``)."""

    def __init__(self, rdb: optuna.storages.RDBStorage, interval_s: float) -> None:
        self._rdb = rdb
        self._interval = interval_s
        self._trial_ids: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ltr-sweeper-heartbeat", daemon=True)
        self._thread.start()

    def add(self, trial_id: int) -> None:
        self._beat(trial_id)
        with self._lock:
            self._trial_ids.add(trial_id)

    def discard(self, trial_id: int) -> None:
        with self._lock:
            self._trial_ids.discard(trial_id)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self, trial_id: int) -> None:
        try:
            self._rdb.record_heartbeat(trial_id)
        except Exception as e:  # noqa: BLE001 - a missed beat (any storage error) must not end the thread
            log.warning("Could not record the heartbeat of trial id %s: %s", trial_id, e)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                ids = list(self._trial_ids)
            for trial_id in ids:
                self._beat(trial_id)
