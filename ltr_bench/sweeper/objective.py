"""A job's objective with its uncertainty, for the sweeper; any other sweeper sees a plain float.

A task may return :class:`Objective` instead of a float: the value is what Optuna optimises, and
``attrs`` (e.g. ``se``, the standard error of an inner-CV mean) are stored as the trial's user
attributes ``objective_<name>``. With ``se`` on the trials, the sweep's summary says how many
trials lie within one standard error of the best -- how much of the choice is noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

ATTR_PREFIX = "objective_"
ATTR_SE = ATTR_PREFIX + "se"


class Objective(float):
    """``float(value)`` plus finite numeric ``attrs`` (others are dropped); pickles as itself, so
    it crosses process-based launchers (joblib) intact."""

    attrs: dict[str, float]

    def __new__(cls, value: float, **attrs: Any) -> Objective:
        obj = super().__new__(cls, value)
        obj.attrs = {str(k): float(v) for k, v in attrs.items() if is_finite(v)}
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (float(self), dict(self.attrs)))

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.attrs.items())
        return f"Objective({float(self)!r}{extra})"


def _rebuild(value: float, attrs: dict[str, float]) -> Objective:
    return Objective(value, **attrs)


def is_finite(v: Any) -> bool:
    """Whether ``v`` converts to a finite float."""
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def user_attrs_of(value: Any) -> dict[str, float]:
    """The trial user attributes a job's return value carries (none for a plain float)."""
    attrs = getattr(value, "attrs", None)
    if not isinstance(attrs, Mapping):
        return {}
    return {ATTR_PREFIX + k: float(v) for k, v in attrs.items() if is_finite(v)}


def within_one_se(values: Sequence[float], best: float, se: float, maximize: bool) -> int:
    """How many of ``values`` lie within ``se`` of ``best`` (on the good side of best - se)."""
    if maximize:
        return sum(v >= best - se for v in values)
    return sum(v <= best + se for v in values)
