"""A sweep's jobs as a sweeper hands them out: :class:`Jobs` (the launcher, the job numbers) and a
:class:`Pool` per phase of a study, with one interface (``capacity``, ``submit``, ``wait`` for
``(key, outcome)`` pairs, ``abort``). With the ``ltr_pool`` launcher and more than one job at a
time the jobs are in flight (a worker starts the next as soon as its own ends); with any other
launcher (basic, joblib, submitit) they run as batches of Hydra's ``launcher.launch``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ltr_bench.held_signals import signals_deferred
from ltr_bench.launching.launcher import PoolLauncher, check_n_jobs
from ltr_bench.launching.processes import sigterm_raises_interrupt

if TYPE_CHECKING:
    from concurrent.futures import Future

log = logging.getLogger(__name__)


def worker_died(error: BaseException) -> bool:
    """Whether an outcome's exception says the job's worker process died (killed, out of memory)."""
    from concurrent.futures.process import BrokenProcessPool

    return isinstance(error, BrokenProcessPool)


class Jobs:
    """The sweep's launcher and what its studies' jobs share: the job numbers, and whether jobs
    run in flight (``in_flight``: asked for, more than one at a time, and the ``ltr_pool``
    launcher), whose workers start warming up at once."""

    def __init__(
        self, launcher: Any, validate: Callable[[Any], None], n_jobs: int, in_flight: bool
    ) -> None:
        from omegaconf import OmegaConf

        config = getattr(launcher, "config", None)  # set by Hydra's setup of the launcher
        check_n_jobs(OmegaConf.select(config, "hydra.launcher.n_jobs") if config else None)
        self.launcher = launcher
        self.validate = validate  # composes jobs in the sweeper: a config error fails early
        self.n_jobs = n_jobs
        self.job_idx = 0
        self.in_flight = in_flight and n_jobs > 1 and isinstance(launcher, PoolLauncher)
        if in_flight and n_jobs > 1 and not self.in_flight:
            log.info(
                "Trials run in batches of %d with this launcher; hydra/launcher=ltr_pool keeps "
                "them in flight (a worker starts the next as soon as its own ends).",
                n_jobs,
            )
        if self.in_flight:
            launcher.start_workers()  # they warm up while the sweeper sets up the study

    def pool(self) -> Pool:
        """A pool for a phase of a study."""
        return Pool(self)

    def start_in_worker(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Start ``fn(*args)`` in one of the warm workers of the jobs in flight (queued behind
        the jobs already there); its future."""
        return self.launcher.call(fn, *args)

    def launch(self, jobs: list[list[str]]) -> Sequence[Any]:
        """Run ``jobs`` as one batch (composed first); their ``JobReturn`` s."""
        if len(jobs) > 1:
            self.validate(jobs)
        with sigterm_raises_interrupt():
            returns = self.launcher.launch(jobs, initial_job_idx=self.job_idx)
        self.job_idx += len(jobs)
        return returns

    def release(self) -> None:
        """End the idle workers of the jobs in flight (a sweep's end)."""
        if isinstance(self.launcher, PoolLauncher):
            self.launcher.shutdown()


class Pool:
    """One phase's jobs, each under the caller's key: in flight, :meth:`wait` returning as soon as
    any has ended; else collected into one batch of the launcher, run when :meth:`wait` is called."""

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self.in_flight = jobs.in_flight
        # In flight, a job waits in the pool's queue while every worker is busy, so that a worker
        # whose job ends starts the next at once rather than after the sweeper has told its trial
        # and asked one: one more than n_jobs when there are as many workers.
        extra = self.in_flight and jobs.launcher.n_workers == jobs.n_jobs
        self.capacity = jobs.n_jobs + (1 if extra else 0)
        self.futures: dict[Future, Any] = {}  # in flight: future -> key, in submission order
        self.pending: list[tuple[Any, list[str]]] = []  # a batch: (key, overrides)

    def __len__(self) -> int:
        return len(self.futures) + len(self.pending)

    def keys(self) -> list[Any]:
        return [*self.futures.values(), *(key for key, _ in self.pending)]

    def submit(self, key: Any, overrides: list[str]) -> None:
        """Add a job (in flight: start it; the pool's first is composed here too, to fail
        early)."""
        if not self.in_flight:
            self.pending.append((key, overrides))
            return
        if not self.futures:
            self.jobs.validate([overrides])
        with signals_deferred():  # a job started is one abort() stops
            future = self.jobs.launcher.submit(overrides, self.jobs.job_idx)
            self.futures[future] = key
        self.jobs.job_idx += 1

    def wait(self) -> list[tuple[Any, Any]]:
        """``(key, outcome)`` of the jobs that ended (in flight: once one has; a batch: all of it,
        in submission order); an outcome is a ``JobReturn`` or the exception that stopped it."""
        if not self.in_flight:
            batch = self.pending  # kept until the batch returns: abort() names its keys
            try:
                outcomes: list[Any] = list(self.jobs.launch([o for _, o in batch]))
            except Exception as e:  # noqa: BLE001 - any launch error is each job's outcome: its trial fails with it
                outcomes = [e] * len(batch)
            self.pending = []
            return [(key, outcome) for (key, _), outcome in zip(batch, outcomes)]
        done = self.jobs.launcher.wait(list(self.futures))
        ended = [future for future in self.futures if future in done]
        return [(self.futures.pop(f), f.exception() or f.result()) for f in ended]

    def run(
        self,
        fill: Callable[[], BaseException | None],
        tell: Callable[[Any, Any], BaseException | None],
        stopped: Callable[[list[Any]], None],
        after: Callable[[], None] = lambda: None,
    ) -> None:
        """Run a phase: ``fill()`` the pool (the error that ends the filling, if any), wait, and
        ``tell(key, outcome)`` each ended job (the error that ends the filling, if any), then
        ``after()``, until the pool is empty; then raise the first error. On Ctrl-C or SIGTERM
        the jobs are stopped and ``stopped(keys)`` gets those not told, before it is raised."""
        error: BaseException | None = None
        untold: list[Any] = []  # jobs that ended, not yet told
        try:
            with sigterm_raises_interrupt():
                while True:
                    error = error or fill()
                    if not len(self):
                        break
                    ended = self.wait()
                    untold = [key for key, _ in ended]
                    for key, outcome in ended:
                        told = tell(key, outcome)  # every outcome, after an error too
                        error = error or told
                        untold.remove(key)
                    after()
        except BaseException:
            stopped([*untold, *self.abort()])
            raise
        if error is not None:
            raise error

    def abort(self) -> list[Any]:
        """Stop the jobs that did not report back (in flight: end their workers); their keys."""
        keys = self.keys()
        self.futures.clear()
        self.pending = []
        if keys and self.in_flight:
            try:
                self.jobs.launcher.abort()
            except Exception as e:  # noqa: BLE001 - the sweep is ending anyway: warn, never mask its error
                log.warning("Could not stop the workers: %s", e)
        return keys
