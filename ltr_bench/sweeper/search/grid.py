"""Grid search as an Optuna sampler: each new trial gets the first grid point no budget-counting
trial holds (Optuna's ``GridSampler`` would lose an interrupted trial's point)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from ltr_bench.sweeper.optuna_private import study_storage, trial_id
from ltr_bench.sweeper.trials import taken_points

ATTR_GRID_INDEX = "ltr_sweeper.grid_index"


class GridSearchSampler(BaseSampler):
    """Walk the product of ``search_space`` values, skipping points already taken in the study."""

    def __init__(self, search_space: Mapping[str, Sequence[Any]], seed: int | None = None) -> None:
        self._names = list(search_space)
        self._points = list(itertools.product(*(list(v) for v in search_space.values())))
        self._order = list(range(len(self._points)))
        if seed is not None:
            random.Random(seed).shuffle(self._order)
        self._assigned: dict[int, tuple[Any, ...]] = {}

    @property
    def grid_size(self) -> int:
        return len(self._points)

    def free_points(self, study: optuna.Study, exclude: int | None = None) -> list[int]:
        """Indices (in walk order) of grid points no counted trial holds."""
        taken = taken_points(study.get_trials(deepcopy=False), self._names, exclude=exclude)
        return [i for i in self._order if self._points[i] not in taken]

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        if "fixed_params" in trial.system_attrs:
            return
        free = self.free_points(study, exclude=trial.number)
        index = free[0] if free else self._order[0]  # exhausted: the sweeper rejects the duplicate
        self._assigned[trial_id(trial)] = self._points[index]
        study_storage(study).set_trial_user_attr(trial_id(trial), ATTR_GRID_INDEX, index)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        point = self._assigned.get(trial_id(trial))
        if point is None or param_name not in self._names:
            raise ValueError(f"GridSearchSampler has no grid value for parameter '{param_name}'.")
        return point[self._names.index(param_name)]

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self._assigned.pop(trial_id(trial), None)
