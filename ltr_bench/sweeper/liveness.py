"""Liveness and recovery: who runs a trial, whether that process is still there, and what
becomes of the trials of a sweeper that is gone.

Every RUNNING trial (and re-evaluation lock) carries its sweeper's identity (host, pid namespace,
pid, process start time) and gets heartbeats from that sweeper (:class:`Heartbeat`). A trial of a
dead process on this host is failed (``interrupted``) at once, one of another host once its
heartbeat is older than the grace period, and the app's ``sweep.on_interrupted`` hook hears of
it. A killed sweeper's jobs still running in launcher workers stop (:func:`orphan_guard`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.sweeper import optuna_private
from ltr_bench.sweeper.reevaluation import locks as locks_
from ltr_bench.sweeper.trials import ATTR_FAIL, ATTR_WORKER, FAIL_INTERRUPTED

log = logging.getLogger(__name__)


def _proc_start_time(pid: int) -> str | None:
    """Start time (clock ticks since boot) of a live process, None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # fields from 3 on; the command name may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def worker_identity() -> dict[str, Any]:
    """Identity of this process, stored on every trial it runs."""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "pidns": pidns,
        "pid": pid,
        "start": _proc_start_time(pid),
    }


def is_local_worker(worker: Mapping[str, Any]) -> bool:
    """True when ``worker`` ran on this host in this pid namespace (so its pid can be checked)."""
    me = worker_identity()
    return worker.get("host") == me["host"] and worker.get("pidns", "") == me["pidns"]


def is_dead_local_worker(worker: Mapping[str, Any]) -> bool:
    """True when ``worker`` ran on this host (same pid namespace) and that process is gone."""
    if not is_local_worker(worker):
        return False
    pid = int(worker.get("pid", -1))
    if Path("/proc").is_dir():
        current = _proc_start_time(pid)
        return current is None or current != worker.get("start")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _mark_failed(storage: Any, trial: FrozenTrial, reason: str) -> bool:
    try:
        storage.set_trial_user_attr(optuna_private.trial_id(trial), ATTR_FAIL, reason)
        return storage.set_trial_state_values(optuna_private.trial_id(trial), state=TrialState.FAIL)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False  # its owner finished it meanwhile


def fail_interrupted_trials(
    study: optuna.Study,
    rdb: optuna.storages.RDBStorage,
    grace_period_s: float,
    now: Callable[[], dt.datetime] = dt.datetime.now,
) -> list[int]:
    """Mark RUNNING trials whose sweeper is gone FAIL (``interrupted``); their numbers. Gone: of
    this host, its process is dead (Optuna's ``fail_stale_trials`` would wait out the grace
    period); of another host, its heartbeat is stale; without an owner, its heartbeat is stale or
    it started more than the grace period ago (by ``now()``, a clock tests can replace)."""
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
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
        if gone and _mark_failed(rdb, t, FAIL_INTERRUPTED):
            failed.append(t.number)
    if failed:
        log.warning("Marked interrupted trials %s of study '%s' as FAIL.", failed, study.study_name)
    return failed


def report_interrupted(config: DictConfig, study: Any, locks: Any) -> None:
    """Hand the study's interrupted trial numbers and, per re-evaluated trial, when its latest
    interrupted lock was failed (epoch seconds) to the app's ``sweep.on_interrupted`` hook (ltr-bench
    marks their MLflow runs KILLED); it may be called again with the same. Failures are logged."""
    from hydra.utils import get_method

    hook = OmegaConf.select(config, "sweep.on_interrupted", default=None)
    if not hook:
        return
    trials = sorted(
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if t.user_attrs.get(ATTR_FAIL) == FAIL_INTERRUPTED
    )
    reevaluations = locks_.interrupted(locks) if locks is not None else {}
    if not trials and not reevaluations:
        return
    try:
        get_method(str(hook))(config, study.study_name, trials, reevaluations)
    except Exception as e:  # noqa: BLE001 - the app's bookkeeping must not stop the sweep
        log.warning("sweep.on_interrupted=%s failed for study '%s': %s", hook, study.study_name, e)


def orphan_guard(task_function: Any, grace_s: float) -> Any:
    """``task_function`` wrapped so that, run in a launcher's worker process, the job stops once
    this sweeper is gone: a thread of the worker then raises KeyboardInterrupt in the job through
    SIGTERM (its ``finally`` blocks run, e.g. an MLflow run ends KILLED) and ends the worker
    ``grace_s`` later if the job is still there (a job may handle SIGTERM itself)."""
    return functools.partial(_run_guarded, task_function, worker_identity(), float(grace_s))


_WATCHED: set[int] = set()  # sweeper pids this worker process already watches


def _run_guarded(task_function: Any, sweeper: Mapping[str, Any], grace_s: float, cfg: Any) -> Any:
    if (
        os.getpid() == sweeper.get("pid")
        or not is_local_worker(sweeper)
        or threading.current_thread() is not threading.main_thread()
    ):
        return task_function(cfg)

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"the sweeper (pid {sweeper.get('pid')}) is gone")

    previous = signal.getsignal(signal.SIGTERM)
    if not callable(previous):
        signal.signal(signal.SIGTERM, interrupt)
    if sweeper.get("pid") not in _WATCHED:
        _WATCHED.add(int(sweeper.get("pid", -1)))
        threading.Thread(
            target=_watch,
            args=(dict(sweeper), grace_s),
            name="ltr-sweeper-orphan-guard",
            daemon=True,
        ).start()
    try:
        return task_function(cfg)
    except KeyboardInterrupt:
        if is_dead_local_worker(sweeper):
            os._exit(1)  # the job has cleaned up; nobody is left to take its result
        raise
    finally:
        if not callable(previous):
            signal.signal(signal.SIGTERM, previous)


def _watch(sweeper: dict[str, Any], grace_s: float, every_s: float = 1.0) -> None:
    """Wait until the sweeper process is gone, SIGTERM this worker, end it ``grace_s`` later."""
    while not is_dead_local_worker(sweeper):
        time.sleep(every_s)
    log.warning("The sweeper (pid %s) is gone; stopping this job.", sweeper.get("pid"))
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(1)


class Heartbeat:
    """One thread beating for this process's running trials and locks (Optuna's own heartbeat
    thread serves one trial, and only inside ``Study.optimize``; the sweeper asks and tells)."""

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
