"""Signals during tracking: a run ends KILLED on Ctrl-C / SIGTERM and never stays RUNNING.

SIGTERM becomes :class:`RunTerminated` (SIGINT already raises KeyboardInterrupt), so ``finally``
blocks end runs; every store call is made with SIGINT/SIGTERM held
(:mod:`ltr_bench.held_signals`), so a signal never lands between a write and its commit.
"""

from __future__ import annotations

import signal
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
