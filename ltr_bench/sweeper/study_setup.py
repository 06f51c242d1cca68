"""Setting a study up before its first trial: storage, study, sampler, pruner, budget, enqueued
points -- and the one lookup of the chosen sampler (its name, its class, whether it is a grid).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from ltr_bench.confutil import plain
from ltr_bench.errors import UserError

if TYPE_CHECKING:
    from ltr_bench.sweeper.sweeper import OptunaSweeperImpl

log = logging.getLogger("ltr_bench.sweeper.sweeper")

DEFAULT_N_TRIALS = 20


@dataclass
class OpenStudy:
    """A study ready for its search: where it is stored and what it may spend."""

    study: Any
    rdb: Any  # the optuna.storages.RDBStorage the study lives in
    url: str
    locks: Any  # the companion study of re-evaluation locks, or None without re-evaluation
    budget: int
    n_existing: int  # trials stored before this process started


def sampler_config(sampler_cfg: Any) -> dict[str, Any]:
    """A copy of ``hydra.sweeper.sampler`` as plain data; a UserError without a ``_target_``."""
    cfg = dict(plain(sampler_cfg) or {})
    if not cfg or "_target_" not in cfg:
        raise UserError(
            "hydra.sweeper.sampler needs a _target_ (use hydra/sweeper/sampler=tpe|random|grid)."
        )
    return cfg


def is_grid_sampler(cls: type) -> bool:
    """Whether a sampler class walks a grid (ours or Optuna's): it is built from the grid values."""
    import optuna

    from ltr_bench.sweeper.grid import GridSearchSampler

    return issubclass(cls, (GridSearchSampler, optuna.samplers.GridSampler))


def sampler_choice(config: DictConfig, sampler_cfg: Any) -> str:
    """The sampler's name in study names: the chosen ``hydra/sweeper/sampler`` option, else
    the class name of its ``_target_``."""
    choice = OmegaConf.select(config, "hydra.runtime.choices", default={}).get(
        "hydra/sweeper/sampler"
    )
    if choice:
        return str(choice)
    return str(sampler_cfg.get("_target_", "sampler")).rsplit(".", 1)[-1].lower()


def make_sampler(sampler_cfg: Any, space: Any, n_existing: int, n_jobs: int, shared: bool) -> Any:
    """The study's sampler; ``shared``: the storage was named (other workers may use it)."""
    from hydra.utils import get_class, instantiate

    from ltr_bench.sweeper.trials import worker_identity

    cfg = sampler_config(sampler_cfg)  # a copy: the seed is changed below
    if is_grid_sampler(get_class(cfg["_target_"])):
        return instantiate(cfg, search_space=space.grid_values())
    if "constant_liar" in cfg and cfg["constant_liar"] is None:
        # parallel proposals (a batch of n_jobs, or workers sharing a storage) would otherwise
        # sample alike: the running trials are told to TPE as if they had a bad value
        cfg["constant_liar"] = n_jobs > 1 or shared
    if cfg.get("seed") is not None:
        # A resumed study must not replay the first run's random stream (it would re-propose the
        # finished points); a shared storage salts per process so workers explore differently.
        salt = zlib.crc32(repr(worker_identity()).encode()) if shared else 0
        cfg["seed"] = (int(cfg["seed"]) + n_existing + salt) % (2**31)
    return instantiate(cfg)


def budget_of(sampler: Any, n_trials: int | None) -> int:
    """``n_trials``, capped by a grid's size; a grid's size or 20 when unset."""
    from ltr_bench.sweeper.grid import GridSearchSampler

    if isinstance(sampler, GridSearchSampler):
        size = sampler.grid_size
        if n_trials is not None and int(n_trials) > size:
            log.warning("hydra.sweeper.n_trials=%s exceeds the grid size %d.", n_trials, size)
        return size if n_trials is None else min(int(n_trials), size)
    return DEFAULT_N_TRIALS if n_trials is None else int(n_trials)


def points_to_enqueue(
    config: DictConfig, space: Any, enqueue_defaults: bool, enqueue_trials: Sequence[Any]
) -> list[dict[str, Any]]:
    """The config's defaults (``enqueue_defaults``) and the ``enqueue_trials``, as Optuna params."""
    points = []
    if enqueue_defaults:
        point = default_point(config, space)
        if point:
            points.append(point)
    for i, values in enumerate(enqueue_trials):
        points.append(space.point(values, f"hydra.sweeper.enqueue_trials[{i}]"))
    return points


def default_point(config: DictConfig, space: Any) -> dict[str, Any]:
    """Each swept parameter's value in the composed config: the chosen option of a config
    group, else the value at its key; one outside the search space is left to the sampler."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
    point: dict[str, Any] = {}
    for name in space.params:
        if name in choices:
            value = choices[name]
        else:
            node = OmegaConf.select(config, name, default=None, throw_on_missing=False)
            value = (
                OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
            )
        try:
            point.update(space.point({name: value}, "hydra.sweeper.enqueue_defaults"))
        except UserError as e:
            log.info("Not enqueued as a default (the sampler chooses it): %s", e)
    return point


def storage_url(sweeper: OptunaSweeperImpl, study_name: str) -> str:
    """``hydra.sweeper.storage``, else a SQLite file named after the study under ``storage_dir``."""
    from ltr_bench.sweeper.storage import default_storage_url

    assert sweeper.config is not None
    if sweeper.storage:
        return str(sweeper.storage)
    base = OmegaConf.select(sweeper.config, "hydra.runtime.cwd", default=None) or Path.cwd()
    return default_storage_url(sweeper.storage_dir, study_name, base)


def open_study_for_search(sweeper: OptunaSweeperImpl, study_name: str, space: Any) -> OpenStudy:
    """Create or load the study, fail its interrupted trials (and locks), enqueue the configured
    points, and give it the configured sampler and pruner."""
    from ltr_bench.sweeper import reevaluation_locks as locks_
    from ltr_bench.sweeper.hooks import report_interrupted
    from ltr_bench.sweeper.pruning import make_pruner
    from ltr_bench.sweeper.storage import open_storage, open_study, redact
    from ltr_bench.sweeper.trials import fail_interrupted_trials, needs_enqueueing

    assert sweeper.config is not None
    url = storage_url(sweeper, study_name)
    rdb = open_storage(url, sweeper.heartbeat_interval, sweeper.grace_period)
    study = open_study(rdb, study_name, sweeper.direction)
    fail_interrupted_trials(study, rdb, sweeper.grace_period)
    locks = None
    if sweeper.reevaluate_top_k > 0:
        locks = locks_.open_locks(rdb, study)
        fail_interrupted_trials(locks, rdb, sweeper.grace_period)
    report_interrupted(sweeper.config, study, locks)
    n_existing = len(
        study.get_trials(deepcopy=False)
    )  # before enqueueing: a fresh study keeps its seed
    points = points_to_enqueue(
        sweeper.config, space, sweeper.enqueue_defaults, sweeper.enqueue_trials
    )
    for point in points:
        if needs_enqueueing(study.get_trials(deepcopy=False), point):
            study.enqueue_trial(point)
    study.sampler = make_sampler(
        sweeper.sampler_cfg, space, n_existing, sweeper.n_jobs, sweeper.storage is not None
    )
    study.pruner = make_pruner(sweeper.pruner_cfg)
    if locks is not None:  # a bad race option stops the sweep before any job
        make_pruner(sweeper.reevaluate_pruner_cfg, "hydra.sweeper.reevaluate.pruner")
    budget = budget_of(study.sampler, sweeper.n_trials)
    log.info(
        "Study '%s' in %s: sampler %s, %s, n_trials=%d, %d trial(s) already stored.",
        study_name,
        redact(url),
        type(study.sampler).__name__,
        sweeper.direction,
        budget,
        n_existing,
    )
    return OpenStudy(study, rdb, url, locks, budget, n_existing)
