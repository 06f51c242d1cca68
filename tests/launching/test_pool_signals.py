"""SIGTERM during a sweep with trials in flight ends the sweeper's wait, even when the handler's
exception is lost: a handler that runs inside a weakref callback or a ``__del__`` (SQLAlchemy's
connection pool has such callbacks) has its exception printed and ignored by Python."""

from __future__ import annotations

import concurrent.futures
import signal
from collections.abc import Iterator

import pytest

from ltr_bench.launching.pools import JobPool, Terminated, sigterm_raises_interrupt


@pytest.fixture
def default_sigterm() -> Iterator[None]:
    """SIGTERM's default disposition, so the sweeper installs its own handler."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, previous)


def _pool_with_a_job_that_never_ends() -> JobPool:
    pool = object.__new__(JobPool)  # only wait()'s state: no worker is started
    pool.futures = {concurrent.futures.Future(): "trial 0"}
    return pool


@pytest.mark.timeout(120)  # a guard against a hang only: without the fix the wait never returns
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_whose_exception_was_swallowed_still_ends_the_wait(default_sigterm) -> None:
    pool = _pool_with_a_job_that_never_ends()
    with sigterm_raises_interrupt():
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)

        class RunsTheHandlerWhenCollected:
            def __del__(self) -> None:
                handler(signal.SIGTERM, None)  # Python prints and ignores its Terminated

        RunsTheHandlerWhenCollected()
        with pytest.raises(Terminated):
            pool.wait(poll_s=0.01)


def test_a_sigterm_before_the_block_is_not_carried_into_the_next(default_sigterm) -> None:
    with pytest.raises(Terminated), sigterm_raises_interrupt():
        signal.raise_signal(signal.SIGTERM)
    pool = _pool_with_a_job_that_never_ends()
    done = concurrent.futures.Future()
    done.set_result("ok")
    pool.futures = {done: "trial 1"}
    with sigterm_raises_interrupt():
        assert pool.wait(poll_s=0.01) == [("trial 1", "ok")]
