"""The one place that reaches into MLflow's private modules; each use has a guard test
(tests/test_mlflow_private.py) that fails when an MLflow release moves what it relies on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def pinned_requirements_unchecked() -> Iterator[None]:
    """Skip MLflow's check of a model's pip requirements against the installed packages while a
    model is saved whose requirements were just pinned to the installed versions.

    The check cannot find a mismatch there, and it maps every installed distribution to its
    modules first (``importlib.metadata.packages_distributions``): about a second per process,
    more than the rest of logging a small model."""
    from mlflow.utils import environment

    check = environment.warn_dependency_requirement_mismatches
    environment.warn_dependency_requirement_mismatches = _no_check
    try:
        yield
    finally:
        environment.warn_dependency_requirement_mismatches = check


def _no_check(model_requirements: list[str]) -> None:
    """What stands in for the check: nothing to warn about (see above)."""
