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
trial and never re-evaluated.

A re-evaluation job races the same way when ``hydra.sweeper.reevaluate.pruner`` is set: it gets
the storage, that pruner and ``++sweep.reevaluation_trial=<n>``, the number of its lock trial in
the companion study ``<study>:reevaluations`` (:mod:`~ltr_bench.sweeper.reevaluation_locks`), and
reports into that trial (:mod:`~ltr_bench.sweeper.reevaluation_racing`).

In the reproducible mode the pruner a job gets is wrapped in
:class:`~ltr_bench.sweeper.reproducible.EarlierTrialsOnly` (it sees the trials of earlier batches).

Any Hydra app can race this way; the sweeper knows nothing of folds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

STORAGE_KEY = "sweep.storage"
PRUNER_KEY = "sweep.pruner"
REEVALUATION_TRIAL_KEY = "sweep.reevaluation_trial"
NOP_TARGET = "optuna.pruners.NopPruner"
EARLIER_ONLY_TARGET = "ltr_bench.sweeper.reproducible.EarlierTrialsOnly"
ATTR_N_STEPS = "ltr_sweeper.n_steps"  # a job's planned steps, when it says (TrialReporter.plan)


# ------------------------------------------------------------------ sweeper side
def make_pruner(cfg: Mapping[str, Any] | None, key: str = "hydra.sweeper.pruner") -> Any:
    """The Optuna pruner of ``hydra.sweeper.pruner`` (``None`` or no ``_target_``: no pruning);
    a bad config is a UserError naming ``key``."""
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
        raise UserError(f"{key}: cannot build {cfg['_target_']} ({cause}).") from e
    if not isinstance(pruner, optuna.pruners.BasePruner):
        raise UserError(f"{key}: {cfg['_target_']} is not an Optuna pruner.")
    return pruner


def is_racing(cfg: Mapping[str, Any] | None) -> bool:
    """Whether a pruner config prunes at all (a ``_target_`` other than Optuna's NopPruner)."""
    target = dict(cfg or {}).get("_target_")
    return bool(target) and target != NOP_TARGET


def job_overrides(url: str, cfg: Mapping[str, Any] | None, before: int | None = None) -> list[str]:
    """The overrides that let a job report into its trial (empty without a pruner); with
    ``before``, its pruner sees only the trials numbered below it (the reproducible mode)."""
    from ltr_bench.sweeper.search_space import format_value

    cfg = {k: v for k, v in dict(cfg or {}).items() if v is not None}
    if not is_racing(cfg):
        return []
    if before is not None:
        cfg = {"_target_": EARLIER_ONLY_TARGET, "before": int(before), "pruner": cfg}
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
        with the pruner of ``sweep.pruner`` -- on a re-evaluation, its lock trial
        ``sweep.reevaluation_trial`` in ``<study>:reevaluations``; None when any is missing."""
        from omegaconf import OmegaConf

        from ltr_bench.sweeper.reevaluation_locks import LOCKS_SUFFIX

        sweep = cfg.get("sweep") if hasattr(cfg, "get") else None
        if not sweep:
            return None
        url, name = sweep.get("storage"), sweep.get("study_name")
        number, pruner_cfg = sweep.get("trial_number"), sweep.get("pruner")
        if sweep.get("reevaluation"):
            number = sweep.get("reevaluation_trial")
            name = f"{name}{LOCKS_SUFFIX}" if name else None
        if not url or not name or number is None or not pruner_cfg:
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

    def plan(self, n_steps: int) -> None:
        """Tell the pruner how many steps the job will report when it is not pruned (a race
        that projects a final value needs it, e.g. the re-evaluation race)."""
        self.trial.set_user_attr(ATTR_N_STEPS, int(n_steps))

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
    "REEVALUATION_TRIAL_KEY",
    "ATTR_N_STEPS",
    "is_racing",
    "make_pruner",
    "job_overrides",
    "is_pruned",
    "last_reported",
    "TrialReporter",
]
