"""The reproducible mode's pruner: it decides on the trials of earlier batches only.

With ``hydra.sweeper.reproducible=true`` the sweeper asks and tells trials in fixed batches of
``n_jobs`` in number order (no job in flight across a batch's end), and every job's pruner is
wrapped in :class:`EarlierTrialsOnly` with the number of its batch's first trial: the pruner sees
the study as if only the trials numbered below that existed, all of them finished before the
batch started. Whether the other jobs of its batch have reached a step yet -- a matter of timing
-- then changes nothing, so the same seed gives the same trials, values and states however fast
each job runs. The same holds for a raced re-evaluation (its batch's first lock trial number).

It works for pruners that read the study through ``Study.get_trials`` (Optuna's median,
percentile and successive-halving pruners, the re-evaluation race); Hyperband builds studies of
its own from the storage and would see every trial.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState


class _EarlierTrials(optuna.Study):
    """A view of a study whose trial lists hold only the trials numbered below ``before``
    (it shares the study's storage, so a pruner's writes land in the study itself)."""

    def __init__(self, study: optuna.Study, before: int) -> None:  # no Study.__init__: a view
        self.__dict__.update(study.__dict__)
        self._before = int(before)

    def _get_trials(
        self,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
        use_cache: bool = False,
    ) -> list[FrozenTrial]:
        trials = super()._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)
        return [t for t in trials if t.number < self._before]


class EarlierTrialsOnly(optuna.pruners.BasePruner):
    """``pruner``, deciding as if only the trials numbered below ``before`` existed."""

    def __init__(self, pruner: optuna.pruners.BasePruner, before: int) -> None:
        if not isinstance(pruner, optuna.pruners.BasePruner):
            raise TypeError(f"EarlierTrialsOnly needs an Optuna pruner, got {pruner!r}")
        self.pruner = pruner
        self.before = int(before)

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        return bool(self.pruner.prune(_EarlierTrials(study, self.before), trial))


def earlier_trials(study: optuna.Study, before: int) -> Any:
    """The view :class:`EarlierTrialsOnly` gives its pruner (for tests and other callers)."""
    return _EarlierTrials(study, before)


__all__ = ["EarlierTrialsOnly", "earlier_trials"]
