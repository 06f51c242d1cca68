"""Racing the re-evaluation of a study's top trials: drop a candidate that cannot catch up.

The selection rule stays the one of :mod:`~ltr_bench.sweeper.reevaluation.pooling`: the re-evaluated
trial with the best value pooled over its search folds and its re-evaluation folds. With
``hydra.sweeper.reevaluate.pruner`` set to :class:`PairedRacePruner` (the ``search=<model>`` TPE
configs do), each re-evaluation job reports its running mean after every fold into its lock trial
of ``<study>:reevaluations`` and is stopped -- *dropped* -- as soon as, against another candidate
still in the race that has run at least as many re-evaluation folds, even an optimistic
projection of its final pooled value falls below that candidate's pooled value:

* every re-evaluation scores the same folds (ltr_bench: the same inner-CV repeats and seeds), so
  the differences ``d_i = mine_i - theirs_i`` on the ``j`` folds both have run are paired (a fold's
  difficulty cancels); ``d`` = their mean, ``s`` = their standard deviation;
* over all ``n`` re-evaluation folds the mean difference is at most
  ``d + z * s * sqrt((n - j) / (j * n))`` (a ``z``-sigma prediction bound for the ``n - j`` folds to
  come, 0 once ``j = n``);
* dropped when ``(n_s * search_mine + n * (m + bound)) / (n_s + n)`` is below
  ``(n_s' * search_theirs + n * m) / (n_s' + n)``, with ``m`` their mean on the common folds and
  ``n_s``, ``n_s'`` the search fold counts (the pooled values of the selection rule).

Never before ``min_folds`` folds, never at a candidate's last fold (a finished re-evaluation is a
result), never against a dropped candidate. A dropped candidate is left out of the selection; the
study's summary lists it with ``dropped_after`` (its folds). The re-evaluation job must say how
many folds it will run (:meth:`~ltr_bench.sweeper.job.TrialReporter.plan`); without that no
candidate is dropped.
"""

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
from ltr_bench.sweeper.reevaluation.locks import ATTR_REEVALUATES

ATTR_SEARCH_VALUE = "ltr_sweeper.search_value"  # the re-evaluated trial's search value
ATTR_SEARCH_N = "ltr_sweeper.search_n"  # ... and how many folds it pooled


def lock_attrs(search_value: float, search_n: int) -> dict[str, Any]:
    """The user attributes a re-evaluation's lock trial carries for the race."""
    return {ATTR_SEARCH_VALUE: float(search_value), ATTR_SEARCH_N: int(search_n)}


def fold_values(trial: FrozenTrial) -> list[float]:
    """The per-fold values behind a trial's reported running means (steps 1, 2, ... without a
    gap; the values up to the first missing step)."""
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
    """Drop a re-evaluation that cannot catch up with another candidate (module docstring).

    Args:
        z: width of the prediction bound in standard deviations (larger: fewer drops).
        min_folds: re-evaluation folds a candidate runs before it can be dropped (at least 2).
    """

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
