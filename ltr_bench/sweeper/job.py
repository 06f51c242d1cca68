"""The job's side of the sweeper, the one module of it the app imports: the ``sweep.*`` keys a job
is given, :class:`Objective`, :class:`TrialReporter`, and what the app needs to read a finished
sweep (its results file, override values, file stems). Light to import."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ltr_bench.errors import UserError
from ltr_bench.sweeper.storage import file_stem, open_storage, redact

TRIAL_NUMBER_KEY = "sweep.trial_number"
STUDY_NAME_KEY = "sweep.study_name"
REEVALUATION_KEY = "sweep.reevaluation"
STORAGE_KEY = "sweep.storage"
PRUNER_KEY = "sweep.pruner"
REEVALUATION_TRIAL_KEY = "sweep.reevaluation_trial"
LOCKS_SUFFIX = ":reevaluations"  # the companion study of re-evaluation locks
ATTR_N_STEPS = "ltr_sweeper.n_steps"  # a job's planned steps, when it says (TrialReporter.plan)
ATTR_PREFIX = "objective_"  # the trial user attributes an Objective carries
ATTR_SE = ATTR_PREFIX + "se"

RESULTS_FILE = "optimization_results.yaml"  # each study's summary and best overrides, per sweep

# what the app uses (some from the storage module)
__all__ = ["Objective", "TrialReporter", "RESULTS_FILE", "file_stem", "format_value", "redact"]


def format_value(value: Any) -> str:
    """``value`` (scalars, lists, dicts) in Hydra's override grammar, parsing back to exactly it
    (the search's formatter, imported when called: it needs Optuna)."""
    from ltr_bench.sweeper.search.space import format_value as search_format_value

    return search_format_value(value)


class Objective(float):
    """A float with finite numeric ``attrs`` (e.g. ``se``, ``n_folds``), stored as the trial's
    user attributes ``objective_<name>``; a plain float to other sweepers."""

    attrs: dict[str, float]

    def __new__(cls, value: float, **attrs: Any) -> Objective:
        obj = super().__new__(cls, value)
        obj.attrs = {str(k): float(v) for k, v in attrs.items() if is_finite(v)}
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (float(self), dict(self.attrs)))

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.attrs.items())
        return f"Objective({float(self)!r}{extra})"


def _rebuild(value: float, attrs: dict[str, float]) -> Objective:
    return Objective(value, **attrs)


def is_finite(v: Any) -> bool:
    """Whether ``v`` converts to a finite float."""
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def user_attrs_of(value: Any) -> dict[str, float]:
    """The trial user attributes a job's return value carries (none for a plain float)."""
    attrs = getattr(value, "attrs", None)
    if not isinstance(attrs, Mapping):
        return {}
    return {ATTR_PREFIX + k: float(v) for k, v in attrs.items() if is_finite(v)}


def make_pruner(cfg: Mapping[str, Any] | None, key: str = "hydra.sweeper.pruner") -> Any:
    """The Optuna pruner of a ``_target_`` config (none: NopPruner); a bad one names ``key``."""
    import optuna
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    cfg = dict(cfg or {})
    if not cfg.get("_target_"):
        return optuna.pruners.NopPruner()
    try:
        pruner = instantiate(cfg)
    except InstantiationException as e:  # a bad option: one sentence
        raise UserError(f"{key}: cannot build {cfg['_target_']} ({e.__cause__ or e}).") from e
    if not isinstance(pruner, optuna.pruners.BasePruner):
        raise UserError(f"{key}: {cfg['_target_']} is not an Optuna pruner.")
    return pruner


class TrialReporter:
    """A job's handle on its own trial: it reports its running objective per step and, when
    :meth:`report` says so, cleans up and raises :meth:`pruned`."""

    def __init__(self, study: Any, trial: Any) -> None:
        self.study = study
        self.trial = trial
        self.last_step: int | None = None
        self.last_value: float | None = None

    @classmethod
    def from_config(cls, cfg: Any) -> TrialReporter | None:
        """The reporter of the job's trial (a re-evaluation's: its lock trial); None without one."""
        import optuna

        from ltr_bench.config.util import plain

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
        storage = open_storage(str(url), None, None, existing=True)
        pruner = make_pruner(plain(pruner_cfg))
        study = optuna.load_study(study_name=str(name), storage=storage, pruner=pruner)
        study_id = storage.get_study_id_from_name(str(name))
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, int(number))
        return cls(study, optuna.trial.Trial(study, trial_id))

    def plan(self, n_steps: int) -> None:
        """Tell the pruner how many steps the job reports unless pruned (the race projects on it)."""
        self.trial.set_user_attr(ATTR_N_STEPS, int(n_steps))

    def report(self, value: float, step: int) -> bool:
        """Record a finite ``value`` at ``step``; True when the pruner stops the trial here."""
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
