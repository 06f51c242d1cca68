"""An Optuna RDB storage whose every call holds SIGINT/SIGTERM until it returns.

A Ctrl-C or SIGTERM raised inside SQLAlchemy (after a read, before its transaction ends) can leave
the connection open with SQLite's lock held, until the garbage collector closes it. The sweeper
then fails its trials in flight as interrupted through another connection: that waits for the
lock (SQLite's 60 s) and fails, and the trials stay RUNNING. Held until the call returns, the
signal is raised right after it, between storage calls, where failing the trials works. Optuna
wraps this storage as it wraps any ``RDBStorage`` (its cache), so nothing else changes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from optuna.storages import RDBStorage

from ltr_bench.held_signals import signals_deferred

# Pickling copies state, no call: these run outside any transaction.
_NOT_HELD = frozenset({"__getstate__", "__setstate__"})


def _held(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with signals_deferred():
            return method(*args, **kwargs)

    return call


# A subclass defining each method RDBStorage defines, private ones included (Optuna's cache calls
# private ones), as that method with signals held.
SignalSafeRDBStorage = type(
    "SignalSafeRDBStorage",
    (RDBStorage,),
    {
        "__doc__": ":class:`optuna.storages.RDBStorage` with each method run with signals held.",
        "__module__": __name__,
        **{
            name: _held(method)
            for name, method in vars(RDBStorage).items()
            if inspect.isfunction(method) and name not in _NOT_HELD
        },
    },
)
