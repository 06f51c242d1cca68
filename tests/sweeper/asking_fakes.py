"""Stand-ins for what :func:`ltr_bench.sweeper.search.loop.ask_one` reads besides the study: a
heartbeat that beats nothing and a one-parameter search space."""

from __future__ import annotations

from typing import Any

from optuna.distributions import IntDistribution


class NoBeat:
    """A heartbeat that records nothing."""

    def add(self, trial_id: int) -> None:
        pass

    def discard(self, trial_id: int) -> None:
        pass


class OneIntSpace:
    """The part of a search space that :func:`ask_one` reads: one integer parameter."""

    params = {"x": None}

    def distributions(self) -> dict[str, Any]:
        return {"x": IntDistribution(0, 1000)}

    def size(self) -> int:
        return 1001

    def grid_points(self) -> list[dict[str, int]]:
        return [{"x": x} for x in range(1001)]
