"""A deterministic pruner for end-to-end tests (set as ``hydra.sweeper.pruner._target_``)."""

from __future__ import annotations

from typing import Any

import optuna


class PruneOddTrials(optuna.pruners.BasePruner):
    """Prunes every odd-numbered trial at its first reported step; even ones run to the end."""

    def prune(self, study: optuna.Study, trial: Any) -> bool:
        return trial.number % 2 == 1 and trial.last_step is not None
