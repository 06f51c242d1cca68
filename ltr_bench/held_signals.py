"""Hold SIGINT/SIGTERM while a database call runs, so that a signal never lands inside it.

A signal's exception raised in the middle of a store call (inside SQLAlchemy, between a write and
its commit) can leave the call's SQLite connection with its write lock held; whatever then tries
to record the interruption (an MLflow run ended KILLED, an Optuna trial failed as interrupted)
waits for that lock and fails with "database is locked". Held until the call returns, the signal
is raised right after it, where recording works. Both MLflow tracking and the sweeper's Optuna
storage use this module, so it depends on neither.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block ends, then raise the first one that came."""
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


class SignalSafe:
    """A proxy whose every method call holds SIGINT/SIGTERM until it returns (an ``MlflowClient``,
    say); attributes that are not callable pass through."""

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
