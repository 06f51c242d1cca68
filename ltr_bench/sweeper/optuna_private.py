"""Every private Optuna and Hydra name the sweeper needs, in one place (those of running jobs are
in ``ltr_bench.launching.hydra_private``); ``tests/sweeper/test_optuna_private.py`` fails naming
the one a release removes or changes."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Container
from types import ModuleType
from typing import Any

import optuna

# Hydra quotes override values with it; no public function does (used by search.space)
from hydra._internal.grammar.utils import escape_special_characters as escape_special_characters
from optuna.trial import FrozenTrial, TrialState

#: The importance evaluators built on scikit-learn's forests, and their modules
SKLEARN_EVALUATORS = {
    "FanovaImportanceEvaluator": "optuna.importance._fanova",
    "MeanDecreaseImpurityImportanceEvaluator": "optuna.importance._mean_decrease_impurity",
}

#: (object kind, attribute) pairs read below; the test checks each against the installed releases
PRIVATE_NAMES = (
    ("optuna.trial.Trial", "_trial_id"),
    ("optuna.trial.FrozenTrial", "_trial_id"),
    ("optuna.Study", "_storage"),
    ("optuna.Study", "_study_id"),
    ("optuna.Study", "_get_trials"),
    ("optuna.storages.RDBStorage", "_get_stale_trial_ids"),
    ("optuna.distributions.BaseDistribution", "_contains"),
    ("hydra.core.utils.JobReturn", "_return_value"),
    ("hydra._internal.grammar.utils", "escape_special_characters"),
    ("optuna.storages._rdb.storage._VersionManager", "get_head_version"),
    *((where, name) for name, where in SKLEARN_EVALUATORS.items()),
)


def trial_id(trial: Any) -> int:
    """The storage id of a ``Trial`` or ``FrozenTrial`` (its ``number`` counts within a study)."""
    return int(trial._trial_id)


def study_storage(study: Any) -> Any:
    """The storage a loaded ``optuna.Study`` reads and writes."""
    return study._storage


def study_id(study: Any) -> int:
    """The storage id of a loaded ``optuna.Study``."""
    return int(study._study_id)


def stale_trial_ids(rdb: Any, study: Any) -> set[int]:
    """Ids of the study's RUNNING trials whose heartbeat is older than the grace period."""
    return set(rdb._get_stale_trial_ids(study_id(study)))


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


def remember_schema_head() -> None:
    """Have ``RDBStorage()`` look up Optuna's schema head revision (~0.1 s) once per process."""
    from optuna.storages._rdb.storage import _VersionManager

    if getattr(_VersionManager.get_head_version, "remembered", False):
        return
    looked_up = _VersionManager.get_head_version
    head: list[str] = []

    def get_head_version(self: Any) -> str:
        if not head:
            head.append(looked_up(self))
        return head[0]

    get_head_version.remembered = True  # type: ignore[attr-defined]
    _VersionManager.get_head_version = get_head_version  # type: ignore[method-assign]


def distribution_contains(distribution: Any, internal_value: float) -> bool:
    """Whether ``distribution`` holds a value in Optuna's internal representation."""
    return bool(distribution._contains(internal_value))


def job_error(ret: Any) -> Any:
    """A finished job's exception when it failed, else its return value (never raised)."""
    return ret._return_value


def importance_without_sklearn() -> ModuleType:
    """``optuna.importance``, imported without scikit-learn's forests (~1.2 s) when they are not
    loaded yet: the package imports them eagerly for two evaluators that the default one
    (PED-ANOVA, what the importance plot uses) does not need. Those two then import on demand,
    whole, the first time they are named (``optuna.importance.FanovaImportanceEvaluator``)."""
    if "optuna.importance" in sys.modules or "sklearn.ensemble" in sys.modules:
        return importlib.import_module("optuna.importance")
    # (for the ~0.1 s of this import another thread could not import scikit-learn either; the
    # processes that draw a study's plots import none then)
    blocked = [name for name in ("sklearn", "sklearn.ensemble") if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]  # None: importing it fails at once
    try:
        module = importlib.import_module("optuna.importance")
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    for name, where in SKLEARN_EVALUATORS.items():  # imported without sklearn: forget them
        for loaded in [m for m in sys.modules if m == where or m.startswith(where + ".")]:
            del sys.modules[loaded]
        delattr(module, name)
    module.__getattr__ = _sklearn_evaluator  # type: ignore[method-assign]
    return module


def _sklearn_evaluator(name: str) -> Any:
    """``optuna.importance``'s module ``__getattr__`` for the evaluators left out above."""
    where = SKLEARN_EVALUATORS.get(name)
    if where is None:
        raise AttributeError(f"module 'optuna.importance' has no attribute {name!r}")
    evaluator = getattr(importlib.import_module(where), name)
    setattr(sys.modules["optuna.importance"], name, evaluator)
    return evaluator
