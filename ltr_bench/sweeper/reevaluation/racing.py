"""Racing the re-evaluations of a study's top trials: :class:`PairedRacePruner` drops a candidate
whose optimistic projected pooled value, paired fold by fold with a candidate that ran as many
folds, stays behind that one's (the rule: docs/guides/sweeps.md, "Racing the re-evaluation")."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.sweeper.job import ATTR_N_STEPS
from ltr_bench.sweeper.trials import ATTR_REEVALUATES

ATTR_SEARCH_VALUE = "ltr_sweeper.search_value"  # the re-evaluated trial's search value
ATTR_SEARCH_N = "ltr_sweeper.search_n"  # ... and how many folds it pooled


def lock_attrs(search_value: float, search_n: int) -> dict[str, Any]:
    """The user attributes a re-evaluation's lock trial carries for the race."""
    return {ATTR_SEARCH_VALUE: float(search_value), ATTR_SEARCH_N: int(search_n)}


def fold_values(trial: FrozenTrial) -> list[float]:
    """The per-fold values behind a trial's running means (steps 1, 2, ... up to a gap)."""
    means = trial.intermediate_values
    out: list[float] = []
    previous = 0.0
    k = 1
    while k in means and math.isfinite(means[k]):
        out.append(k * means[k] - (k - 1) * previous)
        previous = means[k]
        k += 1
    return out


@dataclass(frozen=True)
class Candidate:
    """One re-evaluation in the race: its search value and fold count, its folds so far."""

    number: int  # the re-evaluated trial
    search_value: float
    search_n: int
    folds: list[float]

    @classmethod
    def of(cls, lock: FrozenTrial) -> Candidate | None:
        attrs: Mapping[str, Any] = lock.user_attrs
        if ATTR_REEVALUATES not in attrs or ATTR_SEARCH_VALUE not in attrs:
            return None
        return cls(
            int(attrs[ATTR_REEVALUATES]),
            float(attrs[ATTR_SEARCH_VALUE]),
            max(int(attrs.get(ATTR_SEARCH_N, 1)), 1),
            fold_values(lock),
        )


def cannot_catch_up(
    mine: Candidate, theirs: Candidate, j: int, n: int, z: float, sign: float
) -> bool:
    """Whether ``mine``, after ``j`` of ``n`` re-evaluation folds, stays behind ``theirs``
    even at the optimistic end of its projection (``sign`` -1 when the study minimises)."""
    if j < 2 or j >= n or len(mine.folds) < j or len(theirs.folds) < j:
        return False
    diffs = [sign * (a - b) for a, b in zip(mine.folds[:j], theirs.folds[:j])]
    bound = statistics.fmean(diffs) + z * statistics.stdev(diffs) * math.sqrt((n - j) / (j * n))
    m = sign * statistics.fmean(theirs.folds[:j])
    optimistic = (mine.search_n * sign * mine.search_value + n * (m + bound)) / (mine.search_n + n)
    pooled = (theirs.search_n * sign * theirs.search_value + n * m) / (theirs.search_n + n)
    return optimistic < pooled


class PairedRacePruner(optuna.pruners.BasePruner):
    """Drop a re-evaluation that cannot catch up with another candidate: ``z`` is the prediction
    bound's width in SDs, ``min_folds`` (>= 2) the folds run before a drop."""

    def __init__(self, z: float = 2.0, min_folds: int = 3) -> None:
        if not (isinstance(z, (int, float)) and math.isfinite(z) and z >= 0):
            raise ValueError(f"z must be a number >= 0, not {z!r}")
        if isinstance(min_folds, bool) or not isinstance(min_folds, int) or min_folds < 2:
            raise ValueError(f"min_folds must be an integer >= 2, not {min_folds!r}")
        self.z = float(z)
        self.min_folds = int(min_folds)

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        j = trial.last_step
        mine = Candidate.of(trial)
        n = trial.user_attrs.get(ATTR_N_STEPS)
        if j is None or j < self.min_folds or mine is None or n is None:
            return False
        sign = 1.0 if study.direction == StudyDirection.MAXIMIZE else -1.0
        for other in study.get_trials(deepcopy=False):
            if other.number == trial.number or other.state not in (
                TrialState.RUNNING,
                TrialState.COMPLETE,
            ):
                continue  # a dropped (PRUNED) or failed candidate is out of the race
            theirs = Candidate.of(other)
            if theirs is None or theirs.number == mine.number:
                continue
            if cannot_catch_up(mine, theirs, int(j), int(n), self.z, sign):
                return True
        return False
