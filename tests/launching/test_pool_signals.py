"""SIGTERM during a sweep with trials in flight ends the sweeper's wait, even when the handler's
exception is lost: a handler that runs inside a weakref callback or a ``__del__`` (SQLAlchemy's
connection pool has such callbacks) has its exception printed and ignored by Python."""

from __future__ import annotations

import concurrent.futures
import signal
from collections.abc import Iterator

import pytest

from ltr_bench.launching.launcher import PoolLauncher
from ltr_bench.launching.processes import Terminated, sigterm_raises_interrupt


@pytest.fixture
def default_sigterm() -> Iterator[None]:
    """SIGTERM's default disposition, so the sweeper installs its own handler."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.timeout(120)  # a guard against a hang only: without the fix the wait never returns
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_sigterm_whose_exception_was_swallowed_still_ends_the_wait(default_sigterm) -> None:
    never_ends = concurrent.futures.Future()  # no worker is started
    with sigterm_raises_interrupt():
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)

        class RunsTheHandlerWhenCollected:
            def __del__(self) -> None:
                handler(signal.SIGTERM, None)  # Python prints and ignores its Terminated

        RunsTheHandlerWhenCollected()
        with pytest.raises(Terminated):
            PoolLauncher(n_jobs=1).wait([never_ends], poll_s=0.01)


def test_a_sigterm_before_the_block_is_not_carried_into_the_next(default_sigterm) -> None:
    with pytest.raises(Terminated), sigterm_raises_interrupt():
        signal.raise_signal(signal.SIGTERM)
    done = concurrent.futures.Future()
    done.set_result("ok")
    with sigterm_raises_interrupt():
        assert PoolLauncher(n_jobs=1).wait([done, concurrent.futures.Future()], poll_s=0.01) == {
            done
        }
