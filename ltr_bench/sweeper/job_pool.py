"""Where the sweeper's jobs run: a batch of the Hydra launcher, or jobs in flight in joblib's workers.

Both pools have one interface: :meth:`submit` a job under a key (its trial, or its re-evaluation
lock), :meth:`wait` for outcomes, :meth:`abort` on Ctrl-C/SIGTERM. An outcome is the job's
``JobReturn``, or the exception that kept the job from returning one (a config Hydra could not
compose, a worker process that died).

:class:`BatchPool` (any launcher): the submitted jobs run as one batch of the launcher once the
sweeper waits, and every outcome comes back when the slowest job of the batch ends.

:class:`JobPool` (``hydra/launcher=joblib`` with ``hydra.sweeper.n_jobs > 1``, unless
``hydra.sweeper.asynchronous=false`` or ``hydra.sweeper.reproducible=true``): each job starts as
it is submitted and :meth:`JobPool.wait` returns as soon as one ends (done, pruned or failed), so
that the sweeper tells its trial and starts the next at once: no worker waits for another's
trial. The jobs run where the joblib launcher runs them -- loky's reusable worker processes, the
executor ``joblib.Parallel`` uses, with the thread caps joblib gives its workers -- and each is
executed by the launcher's own job function (Hydra composes its config, runs it in its folder,
returns its ``JobReturn``), so a job sees the same config, job number, logging and orphan guard
as in a batch.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltr_bench.sweeper.sweeper import OptunaSweeperImpl

log = logging.getLogger("ltr_bench.sweeper.sweeper")

IDLE_WORKER_TIMEOUT_S = 300  # joblib's default: idle workers end after this long


def runs_jobs_elsewhere(launcher: Any) -> bool:
    """Whether ``launcher`` is Hydra's joblib launcher (jobs in worker processes)."""
    try:
        from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
    except ImportError:  # the launcher plugin is not installed
        return False
    return isinstance(launcher, JoblibLauncher)


def make_pool(sweeper: OptunaSweeperImpl) -> BatchPool | JobPool:
    """The pool the sweeper's settings ask for (see the module docstring)."""
    if (
        sweeper.n_jobs > 1
        and sweeper.asynchronous
        and not sweeper.reproducible
        and runs_jobs_elsewhere(sweeper.launcher)
    ):
        return JobPool(sweeper)
    return BatchPool(sweeper)


def release_workers(executors: set[Any]) -> None:
    """End the idle workers of ``executors`` once the sweep's every job has returned. Left to
    themselves they would end only at the sweeper's exit, which then waits for each worker's
    interpreter to shut down (about 3 s with torch, Lightning and MLflow loaded); an idle worker
    holds nothing to save."""
    for executor in executors:
        executor.shutdown(wait=True, kill_workers=True)
    executors.clear()


def worker_died(error: BaseException) -> bool:
    """Whether an outcome's exception says the job's worker process died (killed, out of memory)."""
    from concurrent.futures.process import BrokenProcessPool

    return isinstance(error, BrokenProcessPool)


class BatchPool:
    """Jobs collected into one batch of the sweeper's Hydra launcher, run when :meth:`wait` is
    called; every outcome returns once the batch's slowest job ended."""

    in_flight = False  # submitted jobs wait for wait()

    def __init__(self, sweeper: OptunaSweeperImpl) -> None:
        self.sweeper = sweeper
        self.pending: list[tuple[Any, list[str]]] = []

    def __len__(self) -> int:
        return len(self.pending)

    def keys(self) -> list[Any]:
        return [key for key, _ in self.pending]

    def submit(self, key: Any, overrides: list[str]) -> None:
        self.pending.append((key, overrides))

    def wait(self) -> list[tuple[Any, Any]]:
        """Launch the pending jobs as one batch; ``(key, outcome)`` for each, in submission order.
        An error of the launch itself (e.g. a config Hydra cannot compose) is every job's outcome;
        Ctrl-C and SIGTERM propagate with the jobs still pending (see :meth:`abort`)."""
        from ltr_bench.sweeper.launching import launch

        jobs = [overrides for _, overrides in self.pending]
        try:
            returns = launch(self.sweeper, jobs)
        except Exception as e:  # noqa: BLE001 - the caller fails the batch's trials with it
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
    """Jobs in flight in joblib's loky worker processes; :meth:`wait` returns as soon as any
    ends. The workers are ``hydra.launcher.n_jobs`` (joblib's ``effective_n_jobs``)."""

    in_flight = True  # a submitted job starts at once

    def __init__(self, sweeper: OptunaSweeperImpl) -> None:
        import joblib
        from hydra.core.utils import setup_globals
        from joblib.externals.loky import get_reusable_executor

        from ltr_bench.sweeper.optuna_private import joblib_worker_env

        launcher: Any = sweeper.launcher  # a JoblibLauncher (make_pool checked)
        assert launcher is not None
        self.sweeper = sweeper
        n_workers = joblib.effective_n_jobs(launcher.joblib.get("n_jobs", -1))
        setup_globals()  # what the launcher does before a batch: Hydra's resolvers
        self.executor = get_reusable_executor(
            max_workers=n_workers,
            timeout=IDLE_WORKER_TIMEOUT_S,
            env=joblib_worker_env(n_workers),
        )
        sweeper.job_executors.add(self.executor)
        # future -> (submission number, key)
        self.futures: dict[concurrent.futures.Future, tuple[int, Any]] = {}
        self.n_submitted = 0

    def __len__(self) -> int:
        return len(self.futures)

    def keys(self) -> list[Any]:
        return [key for _, key in sorted(self.futures.values(), key=lambda pair: pair[0])]

    def submit(self, key: Any, overrides: list[str]) -> None:
        """Start the job in a worker with the next job number. The pool's first job is composed
        here too, so that a config error of the sweep raises before any worker is busy; later
        jobs differ in the searched values only, and the worker composes each (a config error
        there is the job's outcome, as fatal as here). Composing every job here cost the
        workers' cores about 0.3 s per trial."""
        from hydra.core.singleton import Singleton

        from ltr_bench.sweeper.optuna_private import joblib_execute_job

        sweeper = self.sweeper
        launcher: Any = sweeper.launcher
        assert launcher is not None
        if self.n_submitted == 0:
            sweeper.validate_batch_is_legal([overrides])
        future = self.executor.submit(
            joblib_execute_job(),
            sweeper.job_idx,
            list(overrides),
            launcher.hydra_context,
            launcher.config,
            launcher.task_function,
            Singleton.get_state(),
        )
        sweeper.job_idx += 1
        self.futures[future] = (self.n_submitted, key)
        self.n_submitted += 1

    def wait(self, poll_s: float = 1.0) -> list[tuple[Any, Any]]:
        """``(key, outcome)`` of the jobs that ended, once at least one has (submission order).
        Polls so that a signal handler's exception (Ctrl-C, SIGTERM) is raised promptly."""
        done: set[concurrent.futures.Future] = set()
        while not done:
            done, _ = concurrent.futures.wait(
                list(self.futures), timeout=poll_s, return_when=concurrent.futures.FIRST_COMPLETED
            )
        ended = []
        for future in done:
            number, key = self.futures.pop(future)
            error = future.exception()
            ended.append((number, key, error if error is not None else future.result()))
        ended.sort(key=lambda item: item[0])
        return [(key, outcome) for _, key, outcome in ended]

    def abort(self) -> list[Any]:
        """Stop the running jobs as ``joblib.Parallel`` does on an interrupt (their workers are
        ended); the keys of the jobs that did not report back."""
        keys = self.keys()
        self.futures.clear()
        if keys:
            try:
                self.executor.shutdown(wait=True, kill_workers=True)
            except Exception as e:  # noqa: BLE001 - the sweep is ending anyway
                log.warning("Could not stop the joblib workers: %s", e)
        return keys
