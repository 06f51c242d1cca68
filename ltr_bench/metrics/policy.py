"""The ``no_relevant`` policy: what a query without a relevant document scores (both APIs)."""

from __future__ import annotations

import math
from typing import Literal

from ltr_bench.errors import UserError

NoRelevantPolicy = Literal["drop", "zero", "one"]
NO_RELEVANT_POLICIES: tuple[str, ...] = ("drop", "zero", "one")


def policy_value(no_relevant: str) -> float:
    """The value a query without relevant documents gets under ``no_relevant`` (NaN: dropped)."""
    if no_relevant not in NO_RELEVANT_POLICIES:
        raise UserError(
            f"no_relevant={no_relevant!r} is not a valid policy; use one of {NO_RELEVANT_POLICIES}"
        )
    return {"drop": math.nan, "zero": 0.0, "one": 1.0}[no_relevant]
