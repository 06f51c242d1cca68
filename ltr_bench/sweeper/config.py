"""Structured configs of the ``ltr_optuna`` sweeper and its ``sampler``/``pruner`` groups (Hydra's
ConfigStore), and :class:`Settings`, the same keys checked once as the sweeper uses them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from ltr_bench.config.util import plain
from ltr_bench.errors import UserError

SWEEPER_TARGET = "hydra_plugins.ltr_bench_sweeper.LtrOptunaSweeper"


@dataclass(frozen=True)
class StudyPlot:
    """One plot a study can leave (``hydra.sweeper.plots``): Optuna's matplotlib function drawing
    it, the complete trials it needs, and whether it needs a parameter that varies."""

    function: str  # in optuna.visualization.matplotlib
    min_complete: int
    needs_varying_params: bool = False


# name (the file is <name>.png) -> plot; drawn in this order
STUDY_PLOTS = {
    "optimization_history": StudyPlot("plot_optimization_history", 1),
    "param_importances": StudyPlot("plot_param_importances", 2, needs_varying_params=True),
}


@dataclass
class TPESamplerConf:
    """Optuna's TPE sampler (the default). ``seed`` makes a fresh sweep reproducible."""

    _target_: str = "optuna.samplers.TPESampler"
    seed: int | None = 0
    n_startup_trials: int = 10
    n_ei_candidates: int = 24
    multivariate: bool = False
    group: bool = False
    # None: on when trials run in parallel (n_jobs > 1 or a storage shared by workers), so that
    # workers proposing at the same time do not sample alike; true/false forces it.
    constant_liar: bool | None = None


@dataclass
class RandomSamplerConf:
    """Optuna's random sampler."""

    _target_: str = "optuna.samplers.RandomSampler"
    seed: int | None = 0


@dataclass
class GridSamplerConf:
    """Every grid point once: in product order (``seed: null``) or a seeded shuffle."""

    _target_: str = "ltr_bench.sweeper.search.grid.GridSearchSampler"
    seed: int | None = None


@dataclass
class NopPrunerConf:
    """No pruning: every trial runs all its steps (``hydra/sweeper/pruner=none``, the default)."""

    _target_: str = "optuna.pruners.NopPruner"


@dataclass
class MedianPrunerConf:
    """Optuna's MedianPruner: stop a trial worse at a step than the median there."""

    _target_: str = "optuna.pruners.MedianPruner"
    n_startup_trials: int = 5
    n_warmup_steps: int = 0
    interval_steps: int = 1
    n_min_trials: int = 1


@dataclass
class SuccessiveHalvingPrunerConf:
    """Optuna's asynchronous successive halving."""

    _target_: str = "optuna.pruners.SuccessiveHalvingPruner"
    min_resource: Any = "auto"
    reduction_factor: int = 4
    min_early_stopping_rate: int = 0
    bootstrap_count: int = 0


@dataclass
class HyperbandPrunerConf:
    """Optuna's HyperbandPruner: several successive-halving brackets."""

    _target_: str = "optuna.pruners.HyperbandPruner"
    min_resource: int = 1
    max_resource: Any = "auto"
    reduction_factor: int = 3
    bootstrap_count: int = 0


PRUNERS = {
    "none": NopPrunerConf,
    "median": MedianPrunerConf,
    "successive_halving": SuccessiveHalvingPrunerConf,
    "hyperband": HyperbandPrunerConf,
}


@dataclass
class ReevaluateConf:
    """Re-evaluation of a study's best trials after the search (off with ``top_k: 0``)."""

    top_k: int = 0
    overrides: list[str] = field(default_factory=list)
    # null: every re-evaluation runs all its folds; a pruner config (``_target_``) races them
    pruner: Any = None


@dataclass
class LtrOptunaSweeperConf:
    """Config of the project's Optuna sweeper (``hydra/sweeper=ltr_optuna``): the keys of
    hydra-optuna-sweeper plus resuming, sharing, pruning, parallel trials and re-evaluation; each
    key's meaning is in docs/guides/sweeps.md ("Sweeper options")."""

    _target_: str = SWEEPER_TARGET
    _recursive_: bool = False  # the sweeper builds the sampler itself (seed offset, grid space)
    defaults: list[Any] = field(default_factory=lambda: [{"sampler": "tpe"}, {"pruner": "none"}])
    sampler: Any = MISSING
    pruner: Any = MISSING
    progress: bool = True
    plots: list[str] = field(default_factory=lambda: list(STUDY_PLOTS))
    asynchronous: bool = True
    reproducible: bool = False
    direction: str = "maximize"
    n_trials: int | None = None
    n_jobs: int = 1
    storage: str | None = None
    storage_dir: str = "multirun/optuna"
    study_name: str | None = None
    study_per: list[str] = field(default_factory=list)
    max_failure_rate: float = 0.5
    fatal_errors: list[str] = field(
        default_factory=lambda: [
            "ltr_bench.errors.UserError",
            "omegaconf.errors.OmegaConfBaseException",
            "hydra.errors.ConfigCompositionException",
        ]
    )
    max_duplicate_retries: int = 10
    heartbeat_interval: int = 30
    grace_period: int | None = None
    orphan_grace_period: float = 30.0
    enqueue_defaults: bool = False
    enqueue_trials: list[Any] = field(default_factory=list)
    reevaluate: ReevaluateConf = field(default_factory=ReevaluateConf)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Settings(LtrOptunaSweeperConf):
    """The ``hydra.sweeper`` keys as the sweeper uses them: plain data, each checked here once
    (an unknown key: TypeError, as for any constructor)."""

    fatal_classes: tuple[type[BaseException], ...] = field(init=False, default=())
    top_k: Any = field(init=False, default=0)  # reevaluate.top_k, checked in _check
    reevaluate_overrides: list[str] = field(init=False, default_factory=list)
    race: dict[str, Any] = field(init=False, default_factory=dict)  # reevaluate.pruner

    def __post_init__(self) -> None:
        self.direction = str(self.direction).lower()
        self.study_per, self.fatal_errors = (
            list(self.study_per or []),
            list(self.fatal_errors or []),
        )
        self.enqueue_trials = list(plain(self.enqueue_trials) or [])
        self.plots = [str(p) for p in plain(self.plots) or []]
        reevaluate = plain(self.reevaluate) or {}
        if not isinstance(reevaluate, dict):  # the dataclass default
            reevaluate = vars(reevaluate)
        self.top_k = reevaluate.get("top_k", 0)
        self.reevaluate_overrides = [str(o) for o in reevaluate.get("overrides") or []]
        self.race = plain(reevaluate.get("pruner")) or {}
        self.params = plain(self.params) or {}
        self.pruner = {} if self.pruner == MISSING else plain(self.pruner) or {}
        self._check()

    @property
    def grace_s(self) -> int:
        """``grace_period``, else twice ``heartbeat_interval``."""
        return 2 * self.heartbeat_interval if self.grace_period is None else self.grace_period

    def _check(self) -> None:
        if self.direction not in ("maximize", "minimize"):
            raise UserError(
                f"hydra.sweeper.direction must be maximize or minimize, not '{self.direction}'."
            )
        if self.n_jobs < 1:
            raise UserError(f"hydra.sweeper.n_jobs must be >= 1, not {self.n_jobs}.")
        if self.n_trials is not None and int(self.n_trials) < 1:
            raise UserError(f"hydra.sweeper.n_trials must be >= 1 or null, not {self.n_trials}.")
        if not 0.0 <= self.max_failure_rate <= 1.0:
            raise UserError(
                f"hydra.sweeper.max_failure_rate must be in [0, 1], not {self.max_failure_rate}."
            )
        unknown = [p for p in self.plots if p not in STUDY_PLOTS]
        if unknown:
            raise UserError(
                f"hydra.sweeper.plots: unknown plot {unknown[0]!r}; choose from "
                f"{', '.join(STUDY_PLOTS)} (or [] for none)."
            )
        for i, point in enumerate(self.enqueue_trials):
            if not isinstance(point, dict) or not point:
                raise UserError(
                    f"hydra.sweeper.enqueue_trials[{i}] must be a mapping parameter -> value, got {point!r}."
                )
        top_k = self.top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise UserError(
                f"hydra.sweeper.reevaluate.top_k must be an integer >= 0, not {top_k!r}."
            )
        if self.reproducible and str(self.pruner.get("_target_")).endswith(".HyperbandPruner"):
            raise UserError(
                "hydra.sweeper.reproducible=true does not hold with hydra/sweeper/pruner=hyperband "
                "(its brackets read every trial of the storage); choose another pruner or set "
                "reproducible=false."
            )
        if self.heartbeat_interval < 1:
            raise UserError(
                f"hydra.sweeper.heartbeat_interval must be >= 1 s, not {self.heartbeat_interval}."
            )

    def resolve_fatal_errors(self) -> None:
        """``fatal_errors``' dotted names as exception classes (``fatal_classes``)."""
        from hydra.utils import get_class

        classes = []
        for dotted in self.fatal_errors:
            try:
                cls = get_class(dotted)
            except (ImportError, ValueError) as e:  # no such module or class
                raise UserError(f"hydra.sweeper.fatal_errors: cannot import '{dotted}'.") from e
            if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                raise UserError(
                    f"hydra.sweeper.fatal_errors: '{dotted}' is not an exception class."
                )
            classes.append(cls)
        self.fatal_classes = tuple(classes)


def register_configs() -> None:
    """Store the sweeper and sampler configs in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(
        group="hydra/sweeper", name="ltr_optuna", node=LtrOptunaSweeperConf, provider="ltr_bench"
    )
    samplers = {"tpe": TPESamplerConf, "random": RandomSamplerConf, "grid": GridSamplerConf}
    for group, nodes in (("sampler", samplers), ("pruner", PRUNERS)):
        for name, node in nodes.items():
            cs.store(group=f"hydra/sweeper/{group}", name=name, node=node, provider="ltr_bench")
