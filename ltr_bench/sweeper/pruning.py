"""Racing trials over their inner folds: Optuna pruners, on the sweeper's side and the job's side.

The sweeper side builds the study's pruner from ``hydra.sweeper.pruner`` (a ``_target_`` config:
``hydra/sweeper/pruner=none|median|successive_halving|hyperband``, Optuna's own pruners with their
parameters) and, when one is active, tells every search job where its trial lives through config
keys::

    ++sweep.storage=<study storage URL>  ++sweep.pruner={_target_: ..., <pruner options>}

(besides ``sweep.trial_number`` / ``sweep.study_name``). A job that can report progress opens the
study with :meth:`TrialReporter.from_config`, reports its running objective after each unit of
work (step = units done: inner folds for ltr_bench) and raises ``optuna.TrialPruned`` when
:meth:`TrialReporter.report` says so. The sweeper records such a job as PRUNED (Optuna then keeps
the last reported value as the trial's value): it uses its share of ``n_trials``, is never the best
trial and never re-evaluated. Re-evaluation jobs get no storage key and are never pruned.

Any Hydra app can race this way; the sweeper knows nothing of folds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

STORAGE_KEY = "sweep.storage"
PRUNER_KEY = "sweep.pruner"
NOP_TARGET = "optuna.pruners.NopPruner"


# ------------------------------------------------------------------ sweeper side
def make_pruner(cfg: Mapping[str, Any] | None) -> Any:
    """The Optuna pruner of ``hydra.sweeper.pruner`` (``None`` or no ``_target_``: no pruning)."""
    import optuna
    from hydra.utils import instantiate

    from ltr_bench.errors import UserError

    cfg = dict(cfg or {})
    if not cfg.get("_target_"):
        return optuna.pruners.NopPruner()
    try:
        pruner = instantiate(cfg)
    except Exception as e:  # noqa: BLE001 - a bad option is a config error, said in one sentence
        cause = e.__cause__ or e
        raise UserError(f"hydra.sweeper.pruner: cannot build {cfg['_target_']} ({cause}).") from e
    if not isinstance(pruner, optuna.pruners.BasePruner):
        raise UserError(f"hydra.sweeper.pruner: {cfg['_target_']} is not an Optuna pruner.")
    return pruner


def job_overrides(url: str, cfg: Mapping[str, Any] | None) -> list[str]:
    """The overrides that let a search job report into its trial (empty without a pruner)."""
    from ltr_bench.sweeper.search_space import format_value

    cfg = {k: v for k, v in dict(cfg or {}).items() if v is not None}
    if not cfg.get("_target_") or cfg["_target_"] == NOP_TARGET:
        return []
    body = ",".join(f"{k}:{format_value(v)}" for k, v in cfg.items())
    return [f"++{STORAGE_KEY}={format_value(url)}", f"++{PRUNER_KEY}={{{body}}}"]


def is_pruned(error: Any) -> bool:
    """Whether a job's exception (also wrapped) says the job stopped because it was pruned."""
    import optuna

    from ltr_bench.errors import find_in_chain

    if not isinstance(error, BaseException):
        return False
    return find_in_chain(error, optuna.TrialPruned) is not None


def last_reported(frozen: Any) -> tuple[int | None, float | None]:
    """The last step a (frozen) trial reported and its value."""
    values = dict(getattr(frozen, "intermediate_values", {}) or {})
    if not values:
        return None, None
    step = max(values)
    return step, float(values[step])


# ------------------------------------------------------------------ job side
class TrialReporter:
    """A job's handle on its own Optuna trial: report a running objective, ask the pruner.

    Built by :meth:`from_config` from the keys the sweeper passes; ``None`` when the job is not
    a prunable search trial (no pruner, a re-evaluation, a plain run).
    """

    def __init__(self, study: Any, trial: Any) -> None:
        self.study = study
        self.trial = trial
        self.last_step: int | None = None
        self.last_value: float | None = None

    @classmethod
    def from_config(cls, cfg: Any) -> TrialReporter | None:
        """Open the trial named by ``sweep.storage`` / ``sweep.study_name`` / ``sweep.trial_number``
        with the pruner of ``sweep.pruner``; None when any is missing or on a re-evaluation."""
        from omegaconf import OmegaConf

        sweep = cfg.get("sweep") if hasattr(cfg, "get") else None
        if not sweep:
            return None
        url, name = sweep.get("storage"), sweep.get("study_name")
        number, pruner_cfg = sweep.get("trial_number"), sweep.get("pruner")
        if not url or not name or number is None or not pruner_cfg or sweep.get("reevaluation"):
            return None
        if OmegaConf.is_config(pruner_cfg):
            pruner_cfg = OmegaConf.to_container(pruner_cfg, resolve=True)
        return cls.open(str(url), str(name), int(number), pruner_cfg)

    @classmethod
    def open(
        cls, url: str, study_name: str, number: int, pruner_cfg: Mapping[str, Any]
    ) -> TrialReporter:
        import optuna

        from ltr_bench.sweeper.storage import open_storage

        storage = open_storage(url, None, None)
        study = optuna.load_study(
            study_name=study_name, storage=storage, pruner=make_pruner(pruner_cfg)
        )
        study_id = storage.get_study_id_from_name(study_name)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
        return cls(study, optuna.trial.Trial(study, trial_id))

    def report(self, value: float, step: int) -> bool:
        """Record ``value`` at ``step`` in the study; True when the pruner stops the trial here.
        A non-finite value is not reported (the job fails on it anyway)."""
        if not math.isfinite(float(value)):
            return False
        self.trial.report(float(value), int(step))
        self.last_step, self.last_value = int(step), float(value)
        return bool(self.trial.should_prune())

    def pruned(self) -> BaseException:
        """The exception a job raises (after cleaning up) to tell the sweeper it was pruned."""
        import optuna

        return optuna.TrialPruned(
            f"trial {self.trial.number} pruned at step {self.last_step} (value {self.last_value:.6g})"
        )


__all__ = [
    "STORAGE_KEY",
    "PRUNER_KEY",
    "make_pruner",
    "job_overrides",
    "is_pruned",
    "last_reported",
    "TrialReporter",
]
