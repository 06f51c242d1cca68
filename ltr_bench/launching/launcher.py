"""The ``ltr_pool`` Hydra launcher (``hydra/launcher=ltr_pool``, registered from
``hydra_plugins.ltr_bench_launcher``): jobs in warm worker processes of a
``concurrent.futures.ProcessPoolExecutor``. ``launch`` runs a batch and returns once every job of
it has ended (Hydra's launcher API: any sweeper); ``submit`` and ``wait`` run jobs one at a time,
so that a sweeper keeps jobs in flight and starts the next as soon as one ends. Each worker warms
up once as it starts (:func:`ltr_bench.launching.worker.start`) and runs each job as Hydra's own
launchers do (:func:`ltr_bench.launching.worker.run`)."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from ltr_bench.errors import UserError
from ltr_bench.launching import worker
from ltr_bench.launching.processes import Terminated, received
from ltr_bench.machine.gpu_share import memory_share, visible_gpus

if TYPE_CHECKING:  # (the pool loads when jobs start: Hydra imports this plugin in every app)
    from concurrent.futures import Future, ProcessPoolExecutor

log = logging.getLogger(__name__)

LAUNCHER_TARGET = "hydra_plugins.ltr_bench_launcher.LtrPoolLauncher"
# The thread pools of the numeric libraries, capped in each worker to cores / workers (as joblib
# caps its workers'), unless the environment sets them.
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
PID_WAIT_S = 30.0  # the longest an abort waits for a starting worker to report its pid


@dataclass
class PoolLauncherConf:
    """``hydra/launcher=ltr_pool``: ``n_jobs`` warm worker processes (-1: one per core, -2: all
    but one, as joblib counts). On a GPU machine the workers share the GPUs, round robin, each
    capped at ``gpu_memory_share`` of its GPU's memory (null: an equal part of what
    ``gpu_memory_headroom`` leaves; see :mod:`ltr_bench.machine.gpu_share`)."""

    _target_: str = LAUNCHER_TARGET
    n_jobs: int = -1
    gpu_memory_share: Optional[float] = None  # noqa: UP045 - Hydra's structured configs
    gpu_memory_headroom: float = 0.1


def register_configs() -> None:
    """Store the launcher's config in Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(
        group="hydra/launcher", name="ltr_pool", node=PoolLauncherConf, provider="ltr_bench"
    )


def check_n_jobs(n_jobs: Any) -> None:
    """Refuse a launcher's ``n_jobs`` of 0 (joblib's count, which this launcher shares)."""
    if n_jobs == 0:
        raise UserError(
            "hydra.launcher.n_jobs=0 starts no job; give a count >= 1, or -1 for every core."
        )


class PoolLauncher(Launcher):
    """Implementation; Hydra instantiates its subclass in ``hydra_plugins.ltr_bench_launcher``."""

    def __init__(
        self,
        n_jobs: int = -1,
        gpu_memory_share: float | None = None,
        gpu_memory_headroom: float = 0.1,
    ) -> None:
        self.n_jobs = int(n_jobs)
        self.gpu_memory_share = None if gpu_memory_share is None else float(gpu_memory_share)
        self.gpu_memory_headroom = float(gpu_memory_headroom)
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.config: DictConfig | None = None
        self._executor: ProcessPoolExecutor | None = None
        self._pids: Any = None  # the queue each worker puts its pid into as it starts
        self._payload: bytes | None = None  # what every job is given, pickled once

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        check_n_jobs(self.n_jobs)
        memory_share(1, 1, self.gpu_memory_share, self.gpu_memory_headroom)  # checks both
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config
        self._payload = None

    @property
    def n_workers(self) -> int:
        """The worker processes (``n_jobs``; -1: one per core)."""
        cores = os.cpu_count() or 1
        return self.n_jobs if self.n_jobs > 0 else max(1, cores + 1 + self.n_jobs)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        """Run a batch of jobs; their ``JobReturn`` s, in order, once every one has ended."""
        from hydra.core.utils import configure_log, filter_overrides, setup_globals

        setup_globals()
        assert self.config is not None, "the launcher is not set up"
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(
            f"ltr_pool is launching {len(job_overrides)} jobs in {self.n_workers} worker "
            f"processes; sweep output dir: {sweep_dir}"
        )
        for idx, overrides in enumerate(job_overrides):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        try:
            futures = [self.submit(o, initial_job_idx + i) for i, o in enumerate(job_overrides)]
            self.wait(futures, every=True)
        except BaseException:
            self.abort()  # Ctrl-C, SIGTERM: the batch's jobs end with the sweep
            raise
        return [future.result() for future in futures]

    def submit(self, overrides: Sequence[str], idx: int) -> Future:
        """Start job number ``idx`` in a worker (queued while every worker is busy); its future,
        whose result is the job's ``JobReturn``."""
        if self._payload is None:
            import cloudpickle  # a task function of the app's __main__ goes by value
            from hydra.core.singleton import Singleton

            shared = (self.hydra_context, self.config, self.task_function, Singleton.get_state())
            self._payload = cloudpickle.dumps(shared)
        return self.call(worker.run, idx, list(overrides), self._payload)

    def call(self, fn: Callable[..., Any], *args: Any) -> Future:
        """``fn(*args)`` in a worker, queued behind the jobs there; its future."""
        executor = self.start_workers()
        with _capped_threads(self.n_workers):  # for a worker this call starts
            return executor.submit(fn, *args)

    def wait(self, futures: Sequence[Future], every: bool = False, poll_s: float = 1.0) -> set:
        """The futures of ``futures`` that are done, once one is (``every``: all of them). Polls,
        so that a SIGTERM raises even when its handler's exception was lost; a worker that died
        leaves its pool broken, and the next job starts a fresh one."""
        import concurrent.futures
        from concurrent.futures.process import BrokenProcessPool

        when = concurrent.futures.ALL_COMPLETED if every else concurrent.futures.FIRST_COMPLETED
        done: set = set()
        while futures and not done:
            if received:
                raise Terminated(f"signal {received[-1]}")
            done, _ = concurrent.futures.wait(futures, timeout=poll_s, return_when=when)
            if every and len(done) < len(futures):
                done = set()
        if any(isinstance(f.exception(), BrokenProcessPool) for f in done if not f.cancelled()):
            self.shutdown()  # (its workers were ended by the pool itself)
        return done

    def start_workers(self) -> ProcessPoolExecutor:
        """The workers' pool, started now if it is not: each worker calls the app's
        ``sweep.on_worker_start`` hook and imports its ``sweep.warm_up`` objects as it starts,
        while the sweeper goes on (the first jobs queue behind)."""
        if self._executor is not None:
            return self._executor
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from ltr_bench.machine.facts import gpu_facts

        config = self.config if self.config is not None else OmegaConf.create()
        on_start = OmegaConf.select(config, "sweep.on_worker_start", default=None)
        names = [str(n) for n in OmegaConf.select(config, "sweep.warm_up", default=None) or []]
        context = multiprocessing.get_context("spawn")  # a fresh interpreter, as loky's workers
        self._pids = context.Queue()
        slots = context.Queue()  # each worker takes its number as it starts
        for index in range(self.n_workers):
            slots.put(index)
        gpus = visible_gpus(os.environ, int(gpu_facts()["gpu_count"]))
        share = (self.n_workers, gpus, self.gpu_memory_share, self.gpu_memory_headroom)
        self._executor = ProcessPoolExecutor(
            self.n_workers,
            mp_context=context,
            initializer=worker.start,
            initargs=(self._pids, on_start and str(on_start), names, slots, share),
        )
        for _ in range(self.n_workers):
            self.call(worker.ready)  # a call a worker takes: every worker starts now
        return self._executor

    def abort(self) -> None:
        """End the workers now, the jobs they run with them; the next job starts fresh ones."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        for pid in self._worker_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        executor.shutdown(wait=True, cancel_futures=True)

    def shutdown(self) -> None:
        """End the idle workers (a sweep's end); the next job starts fresh ones."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def _worker_pids(self) -> set[int]:
        """The pids of the pool's workers, each reported as it starts (waiting, up to
        ``PID_WAIT_S``, for a worker that is starting)."""
        pids: set[int] = set()
        while len(pids) < self.n_workers:
            try:
                pids.add(int(self._pids.get(timeout=PID_WAIT_S if not pids else 1.0)))
            except queue.Empty:
                break
        return pids


@contextlib.contextmanager
def _capped_threads(n_workers: int) -> Iterator[None]:
    """Within the block, the environment a worker starts with caps :data:`THREAD_VARS` to cores
    / ``n_workers`` (a variable set already is left alone)."""
    cap = str(max(1, (os.cpu_count() or 1) // n_workers))
    added = [name for name in THREAD_VARS if name not in os.environ]
    os.environ.update(dict.fromkeys(added, cap))
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)
