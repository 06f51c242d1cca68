"""A job's Python logging configured with the loggers' level caches cleared once, not per logger.

Hydra configures each job's logging (``hydra.job_logging``) with ``logging.config.dictConfig``,
which resets every existing child of the loggers the config names (Lightning's and MLflow's
modules: ~200 loggers in a sweep's worker). Each reset calls ``Logger.setLevel``, and each
``setLevel`` clears the level caches of every logger in the process (~600 once torch, Lightning
and MLflow are loaded): ~9 ms of a worker's job. Configured with the clearing deferred to the
end, the same loggers are left behind, their caches cleared once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

#: The private name relied on (tests/launching/test_job_logging.py checks it in this Python)
PRIVATE_NAMES = (("logging.Manager", "_clear_cache"),)


def install() -> None:
    """Have Hydra's ``run_job`` configure a job's logging through :func:`clearing_caches_once`
    (idempotent)."""
    import hydra.core.utils as hydra_utils

    if not getattr(hydra_utils.configure_log, "clears_caches_once", False):
        hydra_utils.configure_log = clearing_caches_once(hydra_utils.configure_log)


def clearing_caches_once(configure: Callable[..., Any]) -> Callable[..., Any]:
    """``configure`` (a function that configures logging) with the level caches of the
    loggers cleared once, when it returns, instead of on every ``setLevel`` it makes."""

    @functools.wraps(configure)
    def configured(*args: Any, **kwargs: Any) -> Any:
        manager = logging.Logger.manager
        manager._clear_cache = _later  # type: ignore[attr-defined]  # an instance attribute
        try:
            return configure(*args, **kwargs)
        finally:
            manager.__dict__.pop("_clear_cache", None)  # the class's method again
            manager._clear_cache()  # type: ignore[attr-defined]

    configured.clears_caches_once = True  # type: ignore[attr-defined]
    return configured


def _later() -> None:
    """Stands for ``Manager._clear_cache`` while a configuration runs: the caches are cleared
    once it ends."""
