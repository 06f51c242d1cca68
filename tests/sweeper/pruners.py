"""A deterministic pruner for end-to-end tests (set as ``hydra.sweeper.pruner._target_``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import optuna

#: The checkout: subprocess sweeps import this module from it (see :func:`pythonpath_with_repo`).
REPO = Path(__file__).resolve().parents[2]
#: Overrides that race a sweep with :class:`PruneOddTrials` instead of its search config's pruner.
PRUNE_ODD = [
    "hydra/sweeper/pruner=none",
    "hydra.sweeper.pruner._target_=tests.sweeper.pruners.PruneOddTrials",
]


def pythonpath_with_repo() -> str:
    """``PYTHONPATH`` for a subprocess sweep that must import ``tests.sweeper.pruners``."""
    return os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])


class PruneOddTrials(optuna.pruners.BasePruner):
    """Prunes every odd-numbered trial at its first reported step; even ones run to the end."""

    def prune(self, study: optuna.Study, trial: Any) -> bool:
        return trial.number % 2 == 1 and trial.last_step is not None
