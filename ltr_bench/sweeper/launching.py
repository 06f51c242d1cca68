"""Launching jobs through the Hydra launcher: their overrides, SIGTERM, and one batch of them.

Search trials and re-evaluations launch the same way, through a pool of
:mod:`~ltr_bench.sweeper.job_pool` (a batch of the launcher, or jobs in flight in joblib's workers).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltr_bench.sweeper.sweeper import OptunaSweeperImpl

TRIAL_NUMBER_KEY = "sweep.trial_number"
REEVALUATION_KEY = "sweep.reevaluation"
STUDY_NAME_KEY = "sweep.study_name"


class Terminated(KeyboardInterrupt):
    """SIGTERM during a batch, in an app that installed no SIGTERM handler of its own."""


@contextlib.contextmanager
def sigterm_raises_interrupt() -> Iterator[None]:
    """Make SIGTERM raise in the main thread, so that running trials are marked before exiting.

    An app's own SIGTERM handler is kept (``ltr-bench`` raises ``RunTerminated``, ends its MLflow
    runs KILLED and exits 143); without one, SIGTERM raises :class:`Terminated`, and
    :meth:`OptunaSweeperImpl.sweep` ends the process by SIGTERM once the trials are marked.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if callable(previous):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def job_overrides(
    study_name: str,
    space: Any,
    variant: list[str],
    params: dict[str, Any],
    number: int,
    extra: Sequence[str] = (),
) -> list[str]:
    """A job's overrides: the trial's parameters, the study's own overrides, ``extra``, and
    the trial number and study name the job is told."""
    from ltr_bench.sweeper.search_space import format_value

    return [
        *space.job_overrides(params),
        *variant,
        *extra,
        f"++{TRIAL_NUMBER_KEY}={number}",
        f"++{STUDY_NAME_KEY}={format_value(study_name)}",
    ]


def launch(sweeper: OptunaSweeperImpl, jobs: list[list[str]]) -> Sequence[Any]:
    """Run ``jobs`` as one batch of the sweeper's launcher; their ``JobReturn`` s.

    A batch of several jobs is composed first, so that one bad config cannot waste the others'
    runs; a composition error (or any error of the launcher itself) propagates, and so do Ctrl-C
    and SIGTERM.
    """
    assert sweeper.launcher is not None
    if len(jobs) > 1:
        sweeper.validate_batch_is_legal(jobs)
    with sigterm_raises_interrupt():
        returns = sweeper.launcher.launch(jobs, initial_job_idx=sweeper.job_idx)
    sweeper.job_idx += len(jobs)
    return returns
