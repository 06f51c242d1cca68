"""Signals during tracking: a run ends KILLED on Ctrl-C / SIGTERM and never stays RUNNING.

SIGTERM becomes :class:`RunTerminated` (SIGINT already raises KeyboardInterrupt), so ``finally``
blocks end runs; every store call is made with SIGINT/SIGTERM held (:class:`SignalSafe`,
:func:`signals_deferred`), so a signal never lands between a write and its commit.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


class RunTerminated(BaseException):
    """Raised in the main thread on SIGTERM, so ``finally`` blocks end runs as KILLED."""


def install_signal_handlers() -> None:
    """Turn SIGTERM into :class:`RunTerminated` (SIGINT already raises KeyboardInterrupt).

    Lightning's own SIGTERM handler chains to this one, so it also fires mid-training.
    """

    def _raise(signum: int, frame: Any) -> None:
        raise RunTerminated(f"terminated by signal {signum}")

    signal.signal(signal.SIGTERM, _raise)


class SignalSafe:
    """A proxy of an ``MlflowClient`` whose every method call holds SIGINT/SIGTERM until it returns.

    A signal's exception raised in the middle of a store call (e.g. inside SQLAlchemy, between a
    write and its commit) can leave the call's SQLite connection checked out with its write lock
    held; the ``finally`` that then ends the run KILLED waits for that lock and fails with
    "database is locked", and the run stays RUNNING. Held until the call returns, the signal is
    raised right after it, where ending the run works.
    """

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with signals_deferred():
                return attr(*args, **kwargs)

        call.__name__ = getattr(attr, "__name__", name)
        call.__doc__ = getattr(attr, "__doc__", None)
        return call


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while a run is being ended, so a second Ctrl-C cannot leave it RUNNING."""
    received: list[int] = []
    try:
        old = {
            s: signal.signal(s, lambda n, f: received.append(n))
            for s in (signal.SIGINT, signal.SIGTERM)
        }
    except ValueError:  # not in the main thread: signals cannot arrive here anyway
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if received:
            signal.raise_signal(received[0])
