"""One study being swept (:class:`StudyState`, handed to the search, the re-evaluation and the
summary) and its setup before the first trial."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf

from ltr_bench.config.util import plain
from ltr_bench.errors import UserError
from ltr_bench.launching.pools import Jobs
from ltr_bench.launching.processes import worker_identity
from ltr_bench.sweeper.config import Settings
from ltr_bench.sweeper.job import LOCKS_SUFFIX, STUDY_NAME_KEY, TRIAL_NUMBER_KEY, make_pruner
from ltr_bench.sweeper.liveness import Heartbeat, fail_interrupted_trials, report_interrupted
from ltr_bench.sweeper.search.grid import GridSearchSampler
from ltr_bench.sweeper.search.space import SearchSpace, format_value
from ltr_bench.sweeper.storage import (
    StudyNames,
    open_storage,
    open_study,
    redact,
    resumed_name,
    study_storage_url,
)
from ltr_bench.sweeper.trials import needs_enqueueing

log = logging.getLogger(__name__)

DEFAULT_N_TRIALS = 20


@dataclass
class StudyState:
    """A study ready for its search: its settings, where it is stored, what it may spend."""

    settings: Settings
    config: DictConfig  # the sweep's config (the app's hooks sweep.on_*, hydra.runtime)
    jobs: Jobs  # the launcher, the job numbers, the pools jobs run in
    study: optuna.Study
    rdb: optuna.storages.RDBStorage  # the storage the study lives in
    url: str
    locks: optuna.Study | None  # the companion study of re-evaluation locks, None without
    heartbeat: Heartbeat  # beats for this process's running trials and locks
    space: SearchSpace
    variant: list[str]  # the study's own overrides (one value of each study_per key)
    budget: int  # n_trials of the study, over every process sharing it

    def recover(self, locks_too: bool = False) -> list[optuna.trial.FrozenTrial]:
        """Fail the trials (and locks) whose sweeper is gone; hand them to the app's hook. The
        study's trials after that, read once (a storage read costs the sweeper ~5 ms a trial)."""
        stored = self.study.get_trials(deepcopy=False)
        failed = fail_interrupted_trials(self.study, self.rdb, self.settings.grace_s, stored=stored)
        found = list(failed)
        if locks_too and self.locks is not None:
            found += fail_interrupted_trials(self.locks, self.rdb, self.settings.grace_s)
        if found:
            report_interrupted(self.config, self.study, self.locks)
        return self.study.get_trials(deepcopy=False) if failed else stored

    def job_overrides(
        self, params: Mapping[str, Any], number: int, extra: Sequence[str] = ()
    ) -> list[str]:
        """A job's overrides: parameters, the study's own overrides, ``extra``, trial and study."""
        return [
            *self.space.job_overrides(params),
            *self.variant,
            *extra,
            f"++{TRIAL_NUMBER_KEY}={number}",
            f"++{STUDY_NAME_KEY}={format_value(self.study.study_name)}",
        ]


def make_sampler(sampler_cfg: Any, space: Any, n_existing: int, n_jobs: int, shared: bool) -> Any:
    """The study's sampler; ``shared``: the storage was named (other workers may use it)."""
    from hydra.utils import get_class, instantiate

    cfg = dict(plain(sampler_cfg) or {})  # a copy: the seed is changed below
    if not cfg or "_target_" not in cfg:
        raise UserError(
            "hydra.sweeper.sampler needs a _target_ (use hydra/sweeper/sampler=tpe|random|grid)."
        )
    if issubclass(get_class(cfg["_target_"]), (GridSearchSampler, optuna.samplers.GridSampler)):
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
    """Each swept parameter's value (or group option) in the composed config, if in the space."""
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


def open_study_state(
    settings: Settings,
    config: DictConfig,
    jobs: Jobs,
    names: StudyNames,
    space: SearchSpace,
    variant: list[str],
) -> StudyState:
    """Open the study: recover, enqueue, sampler, pruner, budget; heartbeats until closed."""
    s = settings
    cwd = OmegaConf.select(config, "hydra.runtime.cwd", default=None) or Path.cwd()
    url = str(
        s.storage or study_storage_url(s.storage_dir, names.file, names.study, names.earlier, cwd)
    )
    rdb = open_storage(url, s.heartbeat_interval, s.grace_s)
    study_name = resumed_name(rdb, names.study, names.earlier)
    study = open_study(rdb, study_name, s.direction)
    fail_interrupted_trials(study, rdb, s.grace_s)
    locks = None
    if s.top_k > 0:
        locks = open_study(rdb, study.study_name + LOCKS_SUFFIX, s.direction)
        fail_interrupted_trials(locks, rdb, s.grace_s)
    report_interrupted(config, study, locks)
    n_existing = len(study.get_trials(deepcopy=False))  # before enqueueing: keeps a fresh seed
    for point in points_to_enqueue(config, space, s.enqueue_defaults, s.enqueue_trials):
        if needs_enqueueing(study.get_trials(deepcopy=False), point):
            study.enqueue_trial(point)
    study.sampler = make_sampler(s.sampler, space, n_existing, s.n_jobs, s.storage is not None)
    study.pruner = make_pruner(s.pruner)
    if locks is not None:  # a bad race option stops the sweep before any job
        make_pruner(s.race, "hydra.sweeper.reevaluate.pruner")
    budget = budget_of(study.sampler, s.n_trials)
    sampler = type(study.sampler).__name__
    log.info(
        f"Study '{study_name}' in {redact(url)}: sampler {sampler}, {s.direction}, "
        f"n_trials={budget}, {n_existing} trial(s) already stored."
    )
    heartbeat = Heartbeat(rdb, s.heartbeat_interval)
    return StudyState(s, config, jobs, study, rdb, url, locks, heartbeat, space, variant, budget)
