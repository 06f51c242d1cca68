"""Launching a batch of jobs through the Hydra launcher: their overrides, SIGTERM, and failures.

Search trials and re-evaluations launch the same way; only what a failed launch marks differs
(their trials, or their re-evaluation locks), which the caller passes as ``on_failure``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
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


def launch(
    sweeper: OptunaSweeperImpl,
    jobs: list[list[str]],
    on_failure: Callable[[str, BaseException], None],
) -> Sequence[Any]:
    """Run ``jobs`` as one batch of the sweeper's launcher; their ``JobReturn`` s.

    A batch of several jobs is composed first, so that one bad config cannot waste the others'
    runs. When the launch itself raises, ``on_failure(reason, error)`` marks what the batch held
    -- ``config`` for an exception (launchers compose each job's config before running it),
    ``interrupted`` for Ctrl-C or SIGTERM -- and the error propagates.
    """
    from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_INTERRUPTED

    assert sweeper.launcher is not None
    try:
        if len(jobs) > 1:
            sweeper.validate_batch_is_legal(jobs)
        with sigterm_raises_interrupt():
            returns = sweeper.launcher.launch(jobs, initial_job_idx=sweeper.job_idx)
    except Exception as e:
        on_failure(FAIL_CONFIG, e)
        raise
    except BaseException as e:
        on_failure(FAIL_INTERRUPTED, e)
        raise
    sweeper.job_idx += len(jobs)
    return returns
