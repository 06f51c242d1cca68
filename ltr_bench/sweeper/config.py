"""Structured configs of the ``ltr_optuna`` Hydra sweeper, registered in Hydra's ConfigStore.

Groups: ``hydra/sweeper`` -> ``ltr_optuna``; ``hydra/sweeper/sampler`` -> ``tpe`` (default),
``random``, ``grid``; ``hydra/sweeper/pruner`` -> ``none`` (default), ``median``,
``successive_halving``, ``hyperband``. The surface follows hydra-optuna-sweeper (``params``, ``sampler``,
``direction``, ``n_trials``, ``n_jobs``, ``storage``, ``study_name``, ``max_failure_rate``) and adds
the keys this project needs for resumable, shareable sweeps (see ``LtrOptunaSweeperConf``).
:class:`Settings` is the same keys as the sweeper uses them: plain data, each checked once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from ltr_bench.confutil import plain
from ltr_bench.errors import UserError

SWEEPER_TARGET = "hydra_plugins.ltr_bench_sweeper.LtrOptunaSweeper"


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
    """Every point of the grid of the (discrete) params once: in product order (``seed: null``,
    params in declaration order) or a seeded shuffle (when ``n_trials`` is below the grid size)."""

    _target_: str = "ltr_bench.sweeper.search.grid.GridSearchSampler"
    seed: int | None = None


@dataclass
class NopPrunerConf:
    """No pruning: every trial runs all its steps (``hydra/sweeper/pruner=none``, the default)."""

    _target_: str = "optuna.pruners.NopPruner"


@dataclass
class MedianPrunerConf:
    """Optuna's MedianPruner: stop a trial worse at a step than the median of the completed
    trials' values at that step."""

    _target_: str = "optuna.pruners.MedianPruner"
    n_startup_trials: int = 5
    n_warmup_steps: int = 0
    interval_steps: int = 1
    n_min_trials: int = 1


@dataclass
class SuccessiveHalvingPrunerConf:
    """Optuna's asynchronous successive halving: at rungs of ``min_resource *
    reduction_factor**k`` steps only the top ``1/reduction_factor`` go on."""

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
    """Re-evaluation of a study's best trials after the search (off with ``top_k: 0``); see
    ``LtrOptunaSweeperConf.reevaluate`` and :mod:`ltr_bench.sweeper.reevaluation`."""

    top_k: int = 0
    overrides: list[str] = field(default_factory=list)
    # null: every re-evaluation runs all its folds; a pruner config (``_target_``) races them, e.g.
    # {_target_: ltr_bench.sweeper.reevaluation.racing.PairedRacePruner, z: 2.0, min_folds: 3}
    # (the search=<model> TPE configs): a candidate that cannot catch up is dropped.
    pruner: Any = None


@dataclass
class LtrOptunaSweeperConf:
    """Config of the project's Optuna sweeper (``hydra/sweeper=ltr_optuna``).

    storage: ``null`` -> SQLite file ``<storage_dir>/<study_name>.db`` (``storage_dir`` relative to
      the directory the command was started in), so re-running the same command resumes the study;
      any SQLAlchemy URL (``postgresql://...``, ``sqlite:///abs/path.db``) shares one study between
      processes and machines. The folder of a ``sqlite:///`` URL must exist (as for
      ``tracking.tracking_uri``; only the default ``storage_dir`` is created).
    study_name: ``null`` -> ``<job name>[-<task override>...]-<sampler>`` built from the sorted
      non-sweep command-line overrides (``hydra.*``/``sweep.*`` excluded), so the same command maps
      to the same study. Interpolations such as ``${model.name}-${dataset.name}`` also work.
    n_trials: trials of the study in total (over all processes and resumptions); ``null`` -> the
      grid size for ``sampler=grid``, 20 otherwise.
    study_per: override keys whose values (``key=0,1,2`` / ``range(5)``) each get their own study
      (run one after another, name suffixed ``-key=value``) instead of being optimised.
    max_failure_rate: abort once more than this fraction of ``n_trials`` failed (raised / NaN).
    fatal_errors: exception classes (dotted paths) that abort the sweep at once (config errors).
    sampler.seed: a fresh study is reproducible; a resumed study uses seed + (trials stored), so it
      does not replay its first proposals; with an explicit ``storage`` the seed is also salted per
      process, so that workers sharing a study explore differently.
    enqueue_defaults: evaluate the composed config's own values of the swept parameters first (the
      option chosen for a group such as ``activation``; a default outside the space is left to the
      sampler), so the search starts from a known-good point -- Optuna's ``enqueue_trial``.
    enqueue_trials: further points to evaluate first, each a mapping parameter -> value (e.g. a
      published config); values must lie in the search space. Both are enqueued once per study
      (again on resume when their trial was interrupted), count toward ``n_trials``, and are
      chosen as best only on their merit.
    reevaluate: ``top_k`` (0 = off) best trials are re-run after the search as re-evaluation jobs
      (``++sweep.reevaluation=true`` plus ``reevaluate.overrides``) and the best trial is the one
      with the best value pooled over search and re-evaluation; a less lucky, more reliable choice
      when the objective is noisy. Stored in the study, so resuming does not repeat them.
      ``reevaluate.pruner`` (a pruner config, null = off) races them fold by fold and drops a
      candidate that cannot catch up (:mod:`ltr_bench.sweeper.reevaluation.racing`).
    Every job gets the overrides ``++sweep.trial_number=<n>`` and ``++sweep.study_name=<name>``.
    pruner: ``hydra/sweeper/pruner=none|median|successive_halving|hyperband`` (Optuna's pruners,
      options as keys, e.g. ``hydra.sweeper.pruner.n_startup_trials=8``); with one, search jobs
      also get ``++sweep.storage=<url>`` and ``++sweep.pruner={...}`` so that they can report
      their running objective and stop early (:mod:`ltr_bench.sweeper.search.pruning`).
    progress: one updating line per study (trials done, pruned, failed, best with its SE,
      elapsed, ETA): a tqdm bar on a terminal, plain log lines otherwise.
    heartbeat_interval / grace_period: seconds; a trial of another host whose heartbeat is older
      than ``grace_period`` (default 2 x interval) is marked FAIL; a trial of a dead process on this
      host is marked FAIL at once.
    orphan_grace_period: seconds a launcher's worker (e.g. joblib) whose sweeper was killed gets to
      end its job after SIGTERM before it is ended for good (a job may handle SIGTERM itself).
    asynchronous: with ``hydra/launcher=joblib`` and ``n_jobs > 1``, keep ``n_jobs`` trials in
      flight and start the next as soon as one ends (done, pruned or failed): no worker waits for
      the slowest trial of a batch. ``false``, or another launcher: batches of ``n_jobs``.
    reproducible: trials in fixed batches of ``n_jobs`` in number order, each job's pruner seeing
      only the trials of earlier batches (re-evaluations alike), so that a sweep's trials and
      choice do not depend on how fast its jobs run: the same seed, the same result. Costs the
      batch barrier (see docs/guides/sweeps.md, "Reproducible parallel sweeps").
    """

    _target_: str = SWEEPER_TARGET
    _recursive_: bool = False  # the sweeper builds the sampler itself (seed offset, grid space)
    defaults: list[Any] = field(default_factory=lambda: [{"sampler": "tpe"}, {"pruner": "none"}])
    sampler: Any = MISSING
    pruner: Any = MISSING
    progress: bool = True
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


class Settings:
    """The ``hydra.sweeper`` keys (:class:`LtrOptunaSweeperConf`) as the sweeper uses them: plain
    data, each checked here once, a bad value one sentence naming its key."""

    def __init__(self, **options: Any) -> None:
        c = LtrOptunaSweeperConf(**options)  # an unknown key: TypeError, as for any constructor
        self.sampler = c.sampler
        self.direction = str(c.direction).lower()
        self.n_trials = c.n_trials
        self.n_jobs = int(c.n_jobs)
        self.storage = c.storage
        self.storage_dir = c.storage_dir
        self.study_name = c.study_name
        self.study_per = list(c.study_per or [])
        self.max_failure_rate = float(c.max_failure_rate)
        self.fatal_errors = list(c.fatal_errors or [])
        self.fatal_classes: tuple[type[BaseException], ...] = ()  # resolve_fatal_errors()
        self.max_duplicate_retries = int(c.max_duplicate_retries)
        self.heartbeat_interval = int(c.heartbeat_interval)
        gp = c.grace_period
        self.grace_period = int(gp) if gp is not None else 2 * self.heartbeat_interval
        self.orphan_grace_period = float(c.orphan_grace_period)
        self.enqueue_defaults = bool(c.enqueue_defaults)
        self.enqueue_trials = list(plain(c.enqueue_trials) or [])
        reevaluate = plain(c.reevaluate) or {}
        if not isinstance(reevaluate, dict):  # the dataclass default
            reevaluate = vars(reevaluate)
        self.top_k = reevaluate.get("top_k", 0)
        self.reevaluate_overrides = [str(o) for o in reevaluate.get("overrides") or []]
        self.race: dict[str, Any] = plain(reevaluate.get("pruner")) or {}  # reevaluate.pruner
        self.params: dict[str, Any] = plain(c.params) or {}
        self.pruner: dict[str, Any] = {} if c.pruner == MISSING else plain(c.pruner) or {}
        self.progress = bool(c.progress)
        self.asynchronous = bool(c.asynchronous)
        self.reproducible = bool(c.reproducible)
        self._check()

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
    samplers: tuple[tuple[str, type], ...] = (
        ("tpe", TPESamplerConf),
        ("random", RandomSamplerConf),
        ("grid", GridSamplerConf),
    )
    for name, node in samplers:
        cs.store(group="hydra/sweeper/sampler", name=name, node=node, provider="ltr_bench")
    for name, node in PRUNERS.items():
        cs.store(group="hydra/sweeper/pruner", name=name, node=node, provider="ltr_bench")
