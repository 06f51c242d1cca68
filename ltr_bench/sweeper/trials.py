"""Trial bookkeeping shared by the sweeper and the grid sampler.

Which trials use up the budget (``n_trials``): COMPLETE, PRUNED, RUNNING, and FAIL when the job
itself failed (raised or returned NaN/None) -- those parameters were evaluated. A FAIL caused by
an interrupted sweep, a configuration error, a duplicate proposal or a surplus trial does not
count, so a resumed sweep runs the trial again. The reason is kept in the trial's user attribute
``ltr_sweeper.fail_reason``.

Who owns a RUNNING trial: user attribute ``ltr_sweeper.worker`` = host, pid namespace, pid and
process start time of the sweeper process. A trial of a dead process on this host is failed
at once on resume; a trial of another host is failed once its Optuna heartbeat is older than the
grace period.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import os
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.sweeper import optuna_private

log = logging.getLogger(__name__)

ATTR_WORKER = "ltr_sweeper.worker"
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

# Seconds an orphaned launcher worker gets after its SIGTERM before the guard ends it (default of
# ``hydra.sweeper.orphan_grace_period``).
ORPHAN_GRACE_S = 30.0


def counts_toward_budget(trial: FrozenTrial) -> bool:
    """True when ``trial`` uses up one of the study's ``n_trials`` (see module docstring)."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
        return True
    return (
        trial.state == TrialState.FAIL and trial.user_attrs.get(ATTR_FAIL) in COUNTED_FAIL_REASONS
    )


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
    """True when ``trial`` takes one of the budget's places ahead of trial number ``before``: it
    counts toward the budget, or it waits in the queue (an enqueued point that a worker will take
    later, although trials numbered after it may have been asked first)."""
    if trial.number >= before:
        return False
    return counts_toward_budget(trial) or trial.state == TrialState.WAITING


def queued_points(trials: Iterable[FrozenTrial], names: Sequence[str], before: int) -> set:
    """Parameter sets of the trials waiting in the queue that are numbered before ``before``
    (enqueued with all of ``names``): their points are taken, whoever will run them."""
    points = set()
    for t in trials:
        if t.state == TrialState.WAITING and t.number < before:
            key = params_key(t.system_attrs.get("fixed_params", {}), names)
            if key is not None:
                points.add(key)
    return points


def settled_others(
    study: optuna.Study, number: int, names: Sequence[str], wait_s: float = 5.0
) -> list[FrozenTrial]:
    """The study's trials other than ``number``, read once every earlier RUNNING trial holds all
    of ``names`` (another worker may be between its ``ask`` and its last parameter write: read
    half-written, its point looked free and both workers ran the same point).

    ``wait_s`` bounds the wait for a worker that died mid-ask (its trial then counts as no point).
    """
    import time

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
    """True when ``trial`` was enqueued with (or sampled) exactly ``point``'s values.

    As Optuna's ``enqueue_trial(skip_if_exists=True)`` compares: an enqueued trial by its
    ``fixed_params``, any other by its params, on the same keys; numbers with ``math.isclose``.
    """
    params = trial.system_attrs.get("fixed_params", trial.params)
    if set(params) != set(point):
        return False
    for name, value in point.items():
        have = params[name]
        if (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and isinstance(have, (int, float))
            and not isinstance(have, bool)
        ):
            if not math.isclose(float(value), float(have), rel_tol=1e-5):  # Optuna's np.isclose
                return False
        elif have != value:
            return False
    return True


def needs_enqueueing(trials: Iterable[FrozenTrial], point: Mapping[str, Any]) -> bool:
    """True unless a trial with ``point`` is waiting, running or was evaluated (uses budget).

    Unlike Optuna's ``skip_if_exists``, a point whose trial was interrupted, stopped by a config
    error or rejected is enqueued again on resume: the default config is not lost for good when
    trial 0 is killed.
    """
    return not any(
        (t.state == TrialState.WAITING or counts_toward_budget(t)) and _same_point(t, point)
        for t in trials
    )


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


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def worker_identity() -> dict[str, Any]:
    """Identity of this process, stored on every trial it runs."""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "pidns": _pid_namespace(),
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


def _mark_failed(storage: optuna.storages.BaseStorage, trial: FrozenTrial, reason: str) -> bool:
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
    """Mark RUNNING trials whose sweeper is gone as FAIL (reason ``interrupted``); return numbers.

    Gone means: for a trial of this host, its sweeper process is dead; of another host, its
    heartbeat is older than the grace period; without owner attribute (not started by this
    sweeper), its heartbeat is stale or it started more than the grace period ago (by ``now()``,
    a clock tests can replace).
    """
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


def orphan_guard(task_function: Any, grace_s: float = ORPHAN_GRACE_S) -> Any:
    """``task_function`` wrapped so that, run in another process than this one (a joblib
    launcher's worker), the job stops once this sweeper process is gone.

    A SIGKILLed sweeper leaves the launcher's workers running its jobs: their trials are failed
    as interrupted on resume, yet the jobs would go on (and end their runs as if nothing had
    happened). The guard watches the sweeper from a thread of the worker and, when it is gone,
    raises KeyboardInterrupt in the job through SIGTERM (so its ``finally`` blocks run, e.g. an
    MLflow run ends KILLED), and ends the worker ``grace_s`` seconds later if the job is still there
    (a job whose SIGTERM handler is not the guard's may ignore the signal;
    ``hydra.sweeper.orphan_grace_period``).
    """
    return functools.partial(_run_guarded, task_function, worker_identity(), float(grace_s))


_WATCHED: set[int] = set()  # sweeper pids this worker process already watches


def _run_guarded(task_function: Any, sweeper: Mapping[str, Any], grace_s: float, cfg: Any) -> Any:
    if (
        os.getpid() == sweeper.get("pid")
        or not is_local_worker(sweeper)
        or threading.current_thread() is not threading.main_thread()
    ):
        return task_function(cfg)
    import signal

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
    import signal
    import time

    while not is_dead_local_worker(sweeper):
        time.sleep(every_s)
    log.warning("The sweeper (pid %s) is gone; stopping this job.", sweeper.get("pid"))
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(1)


class Heartbeat:
    """Background thread recording Optuna heartbeats for this process's running trials."""

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
        except Exception as e:  # a missed beat must not kill the sweep
            log.warning("Could not record the heartbeat of trial id %s: %s", trial_id, e)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                ids = list(self._trial_ids)
            for trial_id in ids:
                self._beat(trial_id)
