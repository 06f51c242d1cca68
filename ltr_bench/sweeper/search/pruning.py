"""The pruners of a study's jobs, run by each job on its own trial through the
``sweep.storage``/``sweep.pruner`` overrides; in the reproducible mode wrapped in
:class:`EarlierTrialsOnly` (Hyperband, reading the storage itself, sees every trial)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from ltr_bench.errors import find_in_chain
from ltr_bench.sweeper.job import PRUNER_KEY, STORAGE_KEY
from ltr_bench.sweeper.optuna_private import earlier_trials
from ltr_bench.sweeper.search.space import format_value

NOP_TARGET = "optuna.pruners.NopPruner"
EARLIER_ONLY_TARGET = "ltr_bench.sweeper.search.pruning.EarlierTrialsOnly"


def is_racing(cfg: Mapping[str, Any] | None) -> bool:
    """Whether a pruner config prunes at all (a ``_target_`` other than Optuna's NopPruner)."""
    target = dict(cfg or {}).get("_target_")
    return bool(target) and target != NOP_TARGET


def job_overrides(url: str, cfg: Mapping[str, Any] | None, before: int | None = None) -> list[str]:
    """The overrides that let a job report into its trial (empty without a pruner); with
    ``before``, its pruner sees only the trials numbered below it (the reproducible mode)."""
    cfg = {k: v for k, v in dict(cfg or {}).items() if v is not None}
    if not is_racing(cfg):
        return []
    if before is not None:
        cfg = {"_target_": EARLIER_ONLY_TARGET, "before": int(before), "pruner": cfg}
    body = ",".join(f"{k}:{format_value(v)}" for k, v in cfg.items())
    return [f"++{STORAGE_KEY}={format_value(url)}", f"++{PRUNER_KEY}={{{body}}}"]


def is_pruned(error: Any) -> bool:
    """Whether a job's exception (also wrapped) says the job stopped because it was pruned."""
    if not isinstance(error, BaseException):
        return False
    return find_in_chain(error, optuna.TrialPruned) is not None


class EarlierTrialsOnly(optuna.pruners.BasePruner):
    """``pruner``, deciding as if only the trials numbered below ``before`` existed."""

    def __init__(self, pruner: optuna.pruners.BasePruner, before: int) -> None:
        if not isinstance(pruner, optuna.pruners.BasePruner):
            raise TypeError(f"EarlierTrialsOnly needs an Optuna pruner, got {pruner!r}")
        self.pruner = pruner
        self.before = int(before)

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        return bool(self.pruner.prune(earlier_trials(study, self.before), trial))
