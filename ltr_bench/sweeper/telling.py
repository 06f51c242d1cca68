"""Telling Optuna how a search trial's job ended: its value, FAIL with a reason, or PRUNED.

A job's exception decides whether the sweep goes on (FAIL ``exception``) or aborts (a config
error of ``hydra.sweeper.fatal_errors``, also when wrapped, e.g. by Hydra's ``instantiate``).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from ltr_bench.errors import find_in_chain
from ltr_bench.sweeper.optuna_private import job_error, trial_id

log = logging.getLogger("ltr_bench.sweeper.sweeper")


def is_fatal(error: Any, fatal_errors: tuple[type[BaseException], ...]) -> bool:
    """A config error, also when wrapped (Hydra's ``instantiate`` raises
    ``InstantiationException`` from the ``UserError`` of a constructor, e.g. a missing
    data folder): every other trial would fail the same way."""
    if not isinstance(error, BaseException):
        return False
    return find_in_chain(error, fatal_errors) is not None


def reject(study: Any, trial: Any, reason: str, heartbeat: Any) -> None:
    """Tell the trial FAIL with ``reason`` (a ``ltr_sweeper.fail`` attribute) and stop its beat."""
    from optuna.trial import TrialState

    from ltr_bench.sweeper.trials import ATTR_FAIL

    trial.set_user_attr(ATTR_FAIL, reason)
    study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
    heartbeat.discard(trial_id(trial))


def fail_all(
    study: Any,
    trials: Sequence[Any],
    heartbeat: Any,
    reason: str,
    error: str | None = None,
) -> None:
    """:func:`reject` each trial (best effort: the sweep is failing already)."""
    from ltr_bench.sweeper.trials import ATTR_ERROR

    for trial in trials:
        with contextlib.suppress(Exception):
            if error:
                trial.set_user_attr(ATTR_ERROR, error[:2000])
            reject(study, trial, reason, heartbeat)


def tell(
    study: Any,
    trial: Any,
    ret: JobReturn,
    heartbeat: Any,
    fatal_errors: tuple[type[BaseException], ...],
) -> BaseException | None:
    """Tell Optuna one job's outcome; return the exception when it is fatal."""
    from ltr_bench.sweeper import pruning
    from ltr_bench.sweeper.trials import ATTR_ERROR, FAIL_CONFIG, FAIL_EXCEPTION

    if ret.status == JobStatus.COMPLETED:
        _tell_value(study, trial, ret.return_value, heartbeat)
        return None
    error = job_error(ret)
    if pruning.is_pruned(error):
        tell_pruned(study, trial, heartbeat)
        return None
    fatal = is_fatal(error, fatal_errors)
    log.error(
        "Trial %d failed (%s): %s: %s",
        trial.number,
        "aborting the sweep" if fatal else "recorded as FAIL, sweep goes on",
        type(error).__name__,
        error,
        # a config error is one sentence (the CLI repeats it), not a traceback
        exc_info=(type(error), error, error.__traceback__)
        if isinstance(error, BaseException) and not fatal
        else None,
    )
    trial.set_user_attr(ATTR_ERROR, f"{type(error).__name__}: {error}"[:2000])
    reject(study, trial, FAIL_CONFIG if fatal else FAIL_EXCEPTION, heartbeat)
    return error if fatal and isinstance(error, BaseException) else None


def tell_outcome(
    study: Any,
    trial: Any,
    outcome: Any,
    heartbeat: Any,
    fatal_errors: tuple[type[BaseException], ...],
) -> BaseException | None:
    """Tell a job's outcome from a pool (:mod:`~ltr_bench.sweeper.job_pool`): its ``JobReturn``
    (:func:`tell`), or the exception that kept it from returning one -- FAIL ``interrupted`` when
    its worker process died, else ``config_error`` (a config Hydra could not compose): fatal."""
    from ltr_bench.sweeper.job_pool import worker_died
    from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_INTERRUPTED

    if not isinstance(outcome, BaseException):
        return tell(study, trial, outcome, heartbeat, fatal_errors)
    died = worker_died(outcome)
    log.error(
        "Trial %d did not run to the end (%s): %s: %s",
        trial.number,
        "its worker process died" if died else "aborting the sweep",
        type(outcome).__name__,
        outcome,
    )
    fail_all(
        study,
        [trial],
        heartbeat,
        FAIL_INTERRUPTED if died else FAIL_CONFIG,
        error=f"{type(outcome).__name__}: {outcome}",
    )
    return outcome


def _tell_value(study: Any, trial: Any, value: Any, heartbeat: Any) -> None:
    """Tell a completed job's return value: COMPLETE when finite, FAIL ``nan`` otherwise."""
    from ltr_bench.sweeper.objective import user_attrs_of
    from ltr_bench.sweeper.trials import ATTR_ERROR, FAIL_NAN

    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        log.warning("Trial %d returned %r; recorded as FAIL.", trial.number, value)
        trial.set_user_attr(ATTR_ERROR, f"returned {value!r}"[:2000])
        reject(study, trial, FAIL_NAN, heartbeat)
        return
    for key, attr in user_attrs_of(value).items():  # e.g. the objective's SE
        trial.set_user_attr(key, attr)
    frozen = study.tell(trial, number, skip_if_finished=True)
    heartbeat.discard(trial_id(trial))
    if frozen.state.name == "COMPLETE":
        log.info("Trial %d finished with value %s.", trial.number, number)
    else:  # another worker failed it as stale (e.g. heartbeats blocked for too long)
        log.warning(
            "Trial %d was already %s; its value %s is not recorded.",
            trial.number,
            frozen.state.name,
            number,
        )


def tell_pruned(study: Any, trial: Any, heartbeat: Any) -> None:
    """Record a job that stopped because the pruner said so: PRUNED, with the last value it
    reported into the study (Optuna's rule), which the job wrote from its own process."""
    from optuna.trial import TrialState

    from ltr_bench.sweeper.pruning import last_reported

    step, value = last_reported(study.get_trials(deepcopy=False)[trial.number])
    frozen = study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
    heartbeat.discard(trial_id(trial))
    log.info(
        "Trial %d pruned after step %s with value %s (%s).",
        trial.number,
        step,
        value,
        frozen.state.name,
    )
