"""How a sweep's jobs run: SIGTERM, warm-up, and two pools with one interface
(``capacity``, ``submit``, ``wait`` for ``(key, outcome)`` pairs, ``abort``): :class:`BatchPool`
runs a batch of any launcher, :class:`JobPool` keeps jobs in flight in joblib's reusable workers."""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ltr_bench.errors import UserError
from ltr_bench.held_signals import signals_deferred

log = logging.getLogger(__name__)

IDLE_WORKER_TIMEOUT_S = 300  # joblib's default: idle workers end after this long
MEET_TIMEOUT_S = 30.0  # the longest a warming-up worker waits for the others to start


class Terminated(KeyboardInterrupt):
    """SIGTERM during a batch, in an app that installed no SIGTERM handler of its own."""


# SIGTERMs whose handler ran inside the current sigterm_raises_interrupt() block. A handler that
# happens to run inside a weakref callback or a __del__ (SQLAlchemy's, say) has its exception
# printed and ignored by Python; the pools' polling raises it again from here.
_received: list[int] = []


@contextlib.contextmanager
def sigterm_raises_interrupt() -> Iterator[None]:
    """Make SIGTERM raise :class:`Terminated` in the main thread (unless the app handles it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if callable(previous):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        _received.append(signum)
        raise Terminated(f"signal {signum}")

    _received.clear()
    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _received.clear()


def release_workers(executors: set[Any]) -> None:
    """End the idle workers of ``executors`` (else the exit waits for each to shut down)."""
    for executor in executors:
        executor.shutdown(wait=True, kill_workers=True)
    executors.clear()


def import_objects(
    names: Sequence[str], on_start: str | None = None, meet: tuple[str, int] | None = None
) -> None:
    """In a worker, ahead of its jobs: with ``meet`` (a folder, the workers' count), wait until
    every worker has taken its warm-up, so that no worker takes two while another starts its jobs
    cold; call the app's ``on_start`` hook, then import each object or module of ``names`` (a name
    that does not import is left for the job to report). The objects alive then (the libraries,
    for the worker's life) are frozen out of garbage collection: loky collects after a worker's
    first call, and the collector passes during the jobs would otherwise traverse them all. The
    worker is kept when its first jobs grow its memory, which loky would take for a leak after
    this call (``hydra_private.keep_worker_as_it_grows``)."""
    from hydra.utils import get_method, get_object

    from ltr_bench.launching.hydra_private import keep_worker_as_it_grows

    keep_worker_as_it_grows()

    if meet is not None:
        folder, n_workers = meet
        Path(folder, str(os.getpid())).touch()
        deadline = time.monotonic() + MEET_TIMEOUT_S  # a worker that never starts
        while len(os.listdir(folder)) < n_workers and time.monotonic() < deadline:
            time.sleep(0.01)
    try:
        if on_start:
            get_method(on_start)()
    except Exception as e:  # noqa: BLE001 - a warm-up only saves time; the job reports errors
        log.warning("sweep.on_worker_start=%s failed: %s", on_start, e)
    for name in names:
        try:
            get_object(name)
        except Exception as e:  # noqa: BLE001 - a warm-up only saves time; the job reports errors
            log.debug("warm-up import of %s failed: %s", name, e)
    gc.freeze()


def worker_died(error: BaseException) -> bool:
    """Whether an outcome's exception says the job's worker process died (killed, out of memory)."""
    from concurrent.futures.process import BrokenProcessPool

    return isinstance(error, BrokenProcessPool)


class Jobs:
    """The sweep's launcher and what its studies' jobs share: job numbers, joblib executors."""

    def __init__(
        self, launcher: Any, validate: Callable[[Any], None], n_jobs: int, in_flight: bool
    ) -> None:
        try:
            from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

            joblib = isinstance(launcher, JoblibLauncher)
        except ImportError:  # the launcher plugin is not installed
            joblib = False
        if joblib and launcher.joblib.get("n_jobs") == 0:
            raise UserError(
                "hydra.launcher.n_jobs=0 starts no job; give a count >= 1, or -1 for every core."
            )
        self.launcher = launcher
        self.validate = validate
        self.in_flight = in_flight and n_jobs > 1 and joblib
        self.n_jobs = n_jobs
        self.job_idx = 0
        self.executors: set[Any] = set()  # joblib executors of the sweep's jobs in flight
        if self.in_flight:
            self.warm_up()

    def executor(self) -> Any:
        """joblib's reusable loky executor for the jobs in flight (the same one on every call)."""
        from hydra.core.utils import setup_globals
        from joblib.externals.loky import get_reusable_executor

        from ltr_bench.launching.hydra_private import joblib_worker_env

        n_workers = self.n_workers()
        setup_globals()  # what the launcher does before a batch: Hydra's resolvers
        executor = get_reusable_executor(
            max_workers=n_workers, timeout=IDLE_WORKER_TIMEOUT_S, env=joblib_worker_env(n_workers)
        )
        self.executors.add(executor)
        return executor

    def warm_up(self) -> None:
        """Start the workers now, each calling the app's ``sweep.on_worker_start`` hook and
        importing its ``sweep.warm_up`` objects, so that they load their libraries while the study
        is set up; the first jobs queue behind."""
        from omegaconf import OmegaConf

        config = self.launcher.config
        if config is None:  # a launcher not set up by Hydra: no app to warm up for
            return
        names = OmegaConf.select(config, "sweep.warm_up", default=None) or []
        on_start = OmegaConf.select(config, "sweep.on_worker_start", default=None)
        executor = self.executor()
        meet = (tempfile.mkdtemp(prefix="ltr-warm-up-"), self.n_workers())
        weakref.finalize(self, shutil.rmtree, meet[0], True)
        for _ in range(meet[1]):
            executor.submit(
                import_objects, [str(n) for n in names], on_start and str(on_start), meet
            )

    def n_workers(self) -> int:
        """The joblib workers of the jobs in flight (``hydra.launcher.n_jobs``, -1: every core)."""
        import joblib

        return int(joblib.effective_n_jobs(self.launcher.joblib.get("n_jobs", -1)))

    def start_in_worker(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        """Start ``fn(*args)`` in one of the warm workers of the jobs in flight (queued behind the
        jobs already there); its future."""
        return self.executor().submit(fn, *args)

    def pool(self) -> BatchPool | JobPool:
        """A pool for a phase of a study."""
        return JobPool(self) if self.in_flight else BatchPool(self)

    def launch(self, jobs: list[list[str]]) -> Sequence[Any]:
        """Run ``jobs`` as one batch (composed first); their ``JobReturn`` s."""
        if len(jobs) > 1:
            self.validate(jobs)
        with sigterm_raises_interrupt():
            returns = self.launcher.launch(jobs, initial_job_idx=self.job_idx)
        self.job_idx += len(jobs)
        return returns


class BatchPool:
    """Jobs collected into one batch of the launcher, run when :meth:`wait` is called."""

    in_flight = False  # submitted jobs wait for wait()

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self.capacity = jobs.n_jobs  # jobs a batch holds
        self.pending: list[tuple[Any, list[str]]] = []

    def __len__(self) -> int:
        return len(self.pending)

    def keys(self) -> list[Any]:
        return [key for key, _ in self.pending]

    def submit(self, key: Any, overrides: list[str]) -> None:
        self.pending.append((key, overrides))

    def wait(self) -> list[tuple[Any, Any]]:
        """Launch the pending jobs as one batch; ``(key, outcome)`` in submission order."""
        jobs = [overrides for _, overrides in self.pending]
        try:
            returns = self.jobs.launch(jobs)
        except Exception as e:  # noqa: BLE001 - any launch error is each job's outcome: its trial fails with it
            outcomes: list[Any] = [e] * len(jobs)
        else:
            outcomes = list(returns)
        done = [(key, outcome) for (key, _), outcome in zip(self.pending, outcomes)]
        self.pending = []
        return done

    def abort(self) -> list[Any]:
        """The keys of the jobs that did not report back (their batch was interrupted)."""
        keys = self.keys()
        self.pending = []
        return keys


class JobPool:
    """Jobs in flight in joblib's loky workers; :meth:`wait` returns as soon as any ends."""

    in_flight = True  # a submitted job starts as soon as a worker is free

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self.executor = jobs.executor()
        # A job waits in joblib's queue while every worker is busy, so that a worker whose job
        # ends starts the next at once rather than after the sweeper has told its trial and asked
        # one: one more than n_jobs when there are as many workers (fewer workers queue already).
        self.capacity = jobs.n_jobs + (1 if jobs.n_workers() == jobs.n_jobs else 0)
        self.futures: dict[concurrent.futures.Future, Any] = {}  # -> key, in submission order
        self.payload: bytes | None = None  # what every job of the pool is given, pickled once

    def __len__(self) -> int:
        return len(self.futures)

    def keys(self) -> list[Any]:
        return list(self.futures.values())

    def submit(self, key: Any, overrides: list[str]) -> None:
        """Start the job in a worker (the pool's first is composed here too, to fail early). The
        launcher's context, config, task and Hydra's singleton state, the same for every job of
        the pool, are pickled with its first (~16 ms a job otherwise)."""
        from hydra.core.singleton import Singleton
        from joblib.externals.loky.backend.reduction import dumps  # as loky pickles a job

        from ltr_bench.launching.composing import execute_job

        if self.payload is None:
            self.jobs.validate([overrides])
            launcher = self.jobs.launcher
            shared = (launcher.hydra_context, launcher.config, launcher.task_function)
            self.payload = bytes(dumps((*shared, Singleton.get_state())))
        with signals_deferred():  # a job started is one abort() stops
            future = self.executor.submit(
                execute_job, self.jobs.job_idx, list(overrides), self.payload
            )
            self.futures[future] = key
        self.jobs.job_idx += 1

    def wait(self, poll_s: float = 1.0) -> list[tuple[Any, Any]]:
        """``(key, outcome)`` of the jobs that ended, once one has; polls, so signals raise."""
        done: set[concurrent.futures.Future] = set()
        while not done:
            if _received:  # a SIGTERM whose exception was lost (see _received)
                raise Terminated(f"signal {_received[-1]}")
            done, _ = concurrent.futures.wait(
                list(self.futures), timeout=poll_s, return_when=concurrent.futures.FIRST_COMPLETED
            )
        ended = [future for future in self.futures if future in done]
        return [(self.futures.pop(f), f.exception() or f.result()) for f in ended]

    def abort(self) -> list[Any]:
        """End the running jobs' workers; the keys of the jobs that did not report back."""
        keys = self.keys()
        self.futures.clear()
        if keys:
            try:
                self.executor.shutdown(wait=True, kill_workers=True)
            except Exception as e:  # noqa: BLE001 - the sweep is ending anyway: warn, never mask its error
                log.warning("Could not stop the joblib workers: %s", e)
        return keys
