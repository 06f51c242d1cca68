"""Every private Optuna name the sweeper needs, each with why no public API does
(``tests/sweeper/test_private_names.py`` fails naming the one a release removes or changes); the
private Hydra names are in :mod:`ltr_bench.sweeper.hydra_private`."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

#: (object kind, attribute) pairs read below; the test checks each against the installed release
PRIVATE_NAMES = (
    # a trial's storage id (heartbeats, locks, storage calls); ``number`` counts within a study,
    # and the public lookup by number costs a storage query per call
    ("optuna.trial.Trial", "_trial_id"),
    ("optuna.trial.FrozenTrial", "_trial_id"),
    # the storage a sampler or a pruner's study writes to (a sampler gets only the study)
    ("optuna.Study", "_storage"),
    # the one method every trial list of a study reads: the reproducible mode's view overrides it
    ("optuna.Study", "_get_trials"),
    # Optuna's staleness query (what fail_stale_trials uses), without failing the trials: the
    # sweeper fails them with a reason and checks local workers' processes too
    ("optuna.storages.RDBStorage", "_get_stale_trial_ids"),
    # whether a distribution holds a value (enqueued points checked against the space)
    ("optuna.distributions.BaseDistribution", "_contains"),
)


def trial_id(trial: Any) -> int:
    """The storage id of a ``Trial`` or ``FrozenTrial`` (its ``number`` counts within a study)."""
    return int(trial._trial_id)


def study_storage(study: Any) -> Any:
    """The storage a loaded ``optuna.Study`` reads and writes."""
    return study._storage


def stale_trial_ids(rdb: Any, study: Any) -> set[int]:
    """Ids of the study's RUNNING trials whose heartbeat is older than the grace period."""
    return set(rdb._get_stale_trial_ids(rdb.get_study_id_from_name(study.study_name)))


class _EarlierTrials(optuna.Study):
    """A view of a study (its storage shared) whose ``_get_trials`` keeps those below ``before``."""

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


def earlier_trials(study: optuna.Study, before: int) -> optuna.Study:
    """``study`` as if only its trials numbered below ``before`` existed."""
    return _EarlierTrials(study, before)


def distribution_contains(distribution: Any, internal_value: float) -> bool:
    """Whether ``distribution`` holds a value in Optuna's internal representation."""
    return bool(distribution._contains(internal_value))
