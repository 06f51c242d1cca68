"""The processes jobs run in: who a process is (host, pid namespace, pid, start time: stored on
whatever it runs, so that another process can tell whether it is still alive), SIGTERM as an
exception while jobs run, and the guard that stops the jobs in a launcher's workers once the
sweeper that launched them is gone."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class Terminated(KeyboardInterrupt):
    """SIGTERM while jobs run, in a process that installed no SIGTERM handler of its own."""


# SIGTERMs whose handler ran inside the current sigterm_raises_interrupt() block. A handler that
# happens to run inside a weakref callback or a __del__ (SQLAlchemy's, say) has its exception
# printed and ignored by Python; a wait that polls raises it again from here.
received: list[int] = []


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
        received.append(signum)
        raise Terminated(f"signal {signum}")

    received.clear()
    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        received.clear()


def end_by_sigterm() -> None:
    """End this process as SIGTERM's default action does (exit status 143 in a shell)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


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


def orphan_guard(task_function: Any, grace_s: float) -> Any:
    """``task_function`` that, in a launcher's worker, is interrupted by SIGTERM once this process
    (the sweeper) is gone, the worker ending ``grace_s`` later."""
    return functools.partial(_run_guarded, task_function, worker_identity(), float(grace_s))


_WATCHED: set[int] = set()  # sweeper pids this worker process already watches


def _run_guarded(task_function: Any, sweeper: Mapping[str, Any], grace_s: float, cfg: Any) -> Any:
    if (
        os.getpid() == sweeper.get("pid")
        or not is_local_worker(sweeper)
        or threading.current_thread() is not threading.main_thread()
    ):
        return task_function(cfg)
    try:
        with sigterm_raises_interrupt():  # a SIGTERM: the job's finally blocks run
            if sweeper.get("pid") not in _WATCHED:
                _WATCHED.add(int(sweeper.get("pid", -1)))
                args = (dict(sweeper), grace_s)
                name = "ltr-sweeper-orphan-guard"
                threading.Thread(target=_watch, args=args, name=name, daemon=True).start()
            return task_function(cfg)
    except Terminated:
        # The job has cleaned up. The worker ends as SIGTERM asked: its sweeper is gone, or the
        # pool that holds it is being ended (a worker that took the signal for one job alone
        # would keep its pool waiting on it).
        end_by_sigterm()
        raise


def _watch(sweeper: dict[str, Any], grace_s: float, every_s: float = 1.0) -> None:
    """Wait until the sweeper process is gone, SIGTERM this worker, kill it ``grace_s`` later
    (a job that did not stop by then)."""
    while not is_dead_local_worker(sweeper):
        time.sleep(every_s)
    log.warning("The sweeper (pid %s) is gone; stopping this job.", sweeper.get("pid"))
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os.kill(os.getpid(), signal.SIGKILL)
