"""The ``ltr_optuna`` Hydra sweeper: Optuna ask/tell over Hydra jobs, resumable and shareable.

Per study (one, or one per value of the ``study_per`` keys) the sweeper

1. opens the storage (default: a SQLite file named after the study, so re-running the same
   command resumes it) and creates or loads the study, once, before any job starts;
2. marks trials whose sweeper process is gone as FAIL (``interrupted``; they do not use budget);
3. searches (:mod:`ltr_bench.sweeper.search_runs`): counts the budget-using trials of the whole
   study (all processes), asks new trials (rejecting exact repeats of evaluated parameter sets
   and trials beyond ``n_trials``), runs each as a job with the overrides
   ``++sweep.trial_number=<n>`` and ``++sweep.study_name=<name>`` and tells Optuna its return
   value -- or FAIL when the job raised or returned NaN/None. With the joblib launcher and
   ``n_jobs > 1`` up to ``n_jobs`` trials are in flight and a worker starts the next as soon as
   its trial ends; otherwise (or ``asynchronous=false``, ``reproducible=true``) trials run in
   batches of ``n_jobs`` (:mod:`ltr_bench.sweeper.job_pool`);
4. optionally re-evaluates the ``reevaluate.top_k`` best trials (``++sweep.reevaluation=true``
   jobs, raced with ``reevaluate.pruner``) and selects by the pooled value
   (:mod:`ltr_bench.sweeper.reevaluation`): once the search's last trials of every worker are
   told, each re-evaluation locked through the storage
   (:mod:`ltr_bench.sweeper.reevaluation_locks`), so workers sharing the study run each once;
5. writes ``optimization_results.yaml`` (best params/value, counts, storage) into the sweep dir.

Interrupted trials and re-evaluations (their process is gone) are handed to the app's
``sweep.on_interrupted`` hook, if any (ltr-bench marks their MLflow runs KILLED). SIGTERM keeps
an app's own handler; without one it ends the process by SIGTERM once the running trials are
marked. An enqueued point whose trial was interrupted or stopped by a config error is enqueued
again on resume.

Config errors (``fatal_errors``) and more failures than ``max_failure_rate`` abort the sweep.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from ltr_bench.confutil import plain
from ltr_bench.errors import UserError
from ltr_bench.sweeper.asking import TooManyFailures, remaining
from ltr_bench.sweeper.job_pool import release_workers
from ltr_bench.sweeper.launching import (
    REEVALUATION_KEY,
    STUDY_NAME_KEY,
    TRIAL_NUMBER_KEY,
    Terminated,
)
from ltr_bench.sweeper.summary import RESULTS_FILE, log_best, summarize, write_results

log = logging.getLogger(__name__)


class OptunaSweeperImpl(Sweeper):
    """Implementation; Hydra instantiates the thin subclass in ``hydra_plugins.ltr_bench_sweeper``."""

    def __init__(
        self,
        sampler: Any,
        direction: str = "maximize",
        n_trials: int | None = None,
        n_jobs: int = 1,
        storage: str | None = None,
        storage_dir: str = "multirun/optuna",
        study_name: str | None = None,
        study_per: Sequence[str] = (),
        max_failure_rate: float = 0.5,
        fatal_errors: Sequence[str] = (),
        max_duplicate_retries: int = 10,
        heartbeat_interval: int = 30,
        grace_period: int | None = None,
        orphan_grace_period: float = 30.0,
        enqueue_defaults: bool = False,
        enqueue_trials: Sequence[Any] = (),
        reevaluate: Any = None,
        params: Any = None,
        pruner: Any = None,
        progress: bool = True,
        asynchronous: bool = True,
        reproducible: bool = False,
    ) -> None:
        super().__init__()
        self.sampler_cfg = sampler
        self.direction = str(direction).lower()
        self.n_trials = n_trials
        self.n_jobs = int(n_jobs)
        self.storage = storage
        self.storage_dir = storage_dir
        self.study_name = study_name
        self.study_per = list(study_per or [])
        self.max_failure_rate = float(max_failure_rate)
        self.fatal_error_names = list(fatal_errors or [])
        self.max_duplicate_retries = int(max_duplicate_retries)
        self.heartbeat_interval = int(heartbeat_interval)
        self.grace_period = (
            int(grace_period) if grace_period is not None else 2 * self.heartbeat_interval
        )
        self.orphan_grace_period = float(orphan_grace_period)
        self.enqueue_defaults = bool(enqueue_defaults)
        self.enqueue_trials = list(plain(enqueue_trials) or [])
        reevaluate = plain(reevaluate) or {}
        self.reevaluate_top_k = reevaluate.get("top_k", 0)
        self.reevaluate_overrides = [str(o) for o in reevaluate.get("overrides") or []]
        self.reevaluate_pruner_cfg = plain(reevaluate.get("pruner")) or {}
        self.params = plain(params) or {}
        self.pruner_cfg = plain(pruner) or {}
        self.progress = bool(progress)
        self.asynchronous = bool(asynchronous)
        self.reproducible = bool(reproducible)
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher = None
        self.job_idx = 0
        self.job_executors: set[Any] = set()  # joblib executors of the sweep's jobs in flight
        self._validate()

    def _validate(self) -> None:
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
        if (
            isinstance(self.reevaluate_top_k, bool)
            or not isinstance(self.reevaluate_top_k, int)
            or self.reevaluate_top_k < 0
        ):
            raise UserError(
                f"hydra.sweeper.reevaluate.top_k must be an integer >= 0, not {self.reevaluate_top_k!r}."
            )
        if self.heartbeat_interval < 1:
            raise UserError(
                f"hydra.sweeper.heartbeat_interval must be >= 1 s, not {self.heartbeat_interval}."
            )

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        from ltr_bench.sweeper.trials import orphan_guard

        # jobs run by a launcher in other processes (joblib) stop when this sweeper is gone
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context,
            task_function=orphan_guard(task_function, self.orphan_grace_period),
            config=config,
        )
        self.fatal_errors = tuple(self._resolve_error_class(n) for n in self.fatal_error_names)

    @staticmethod
    def _resolve_error_class(dotted: str) -> type:
        from hydra.utils import get_class

        try:
            cls = get_class(dotted)
        except Exception as e:
            raise UserError(f"hydra.sweeper.fatal_errors: cannot import '{dotted}'.") from e
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise UserError(f"hydra.sweeper.fatal_errors: '{dotted}' is not an exception class.")
        return cls

    # ------------------------------------------------------------------ sweep
    def sweep(self, arguments: list[str]) -> list[dict[str, Any]]:
        from ltr_bench.sweeper.search_space import (
            build_space,
            collect_overrides,
            discrete_values,
            parse_override,
        )

        assert self.config is not None and self.launcher is not None
        overrides = collect_overrides(self.params, arguments)
        variants: list[list[str]] = [[]]
        for key in self.study_per:
            name = key.lstrip("+~")
            if name in overrides:
                values = discrete_values(overrides.pop(name))
                variants = [v + [value] for v in variants for value in values]
        space = build_space(overrides)
        cli_fixed = [
            o
            for o in arguments
            if not parse_override(o).is_sweep_override()
            and parse_override(o).get_key_element().lstrip("+~")
            not in {k.lstrip("+~") for k in self.study_per}
        ]
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        base_name = self._base_study_name(cli_fixed)
        results: list[dict[str, Any]] = []
        try:
            for variant in variants:
                name = "-".join([base_name, *variant])
                results.append(self._run_study(name, space, variant, sweep_dir, results))
        except Terminated:
            # The trials are marked; end as SIGTERM would have (exit status 143 in a shell).
            log.warning("Terminated by SIGTERM; the running trials are marked interrupted.")
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            raise
        write_results(sweep_dir, results)
        release_workers(self.job_executors)
        return results

    def _base_study_name(self, cli_fixed: Sequence[str]) -> str:
        from ltr_bench.sweeper.storage import default_study_name
        from ltr_bench.sweeper.study_setup import sampler_choice

        if self.study_name:
            return str(self.study_name)
        assert self.config is not None
        job_name = str(OmegaConf.select(self.config, "hydra.job.name", default="app"))
        return default_study_name(
            job_name, cli_fixed, sampler_choice(self.config, self.sampler_cfg)
        )

    # ------------------------------------------------------------------ one study
    def _run_study(
        self,
        study_name: str,
        space: Any,
        variant: list[str],
        sweep_dir: Path,
        done: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """Search one study (then re-evaluate its top trials), write its summary and artifacts."""
        from ltr_bench.sweeper.hooks import finish_study, report_interrupted
        from ltr_bench.sweeper.progress import StudyProgress
        from ltr_bench.sweeper.study_setup import open_study_for_search
        from ltr_bench.sweeper.trials import Heartbeat

        assert self.config is not None
        opened = open_study_for_search(self, study_name, space)
        study = opened.study
        heartbeat = Heartbeat(opened.rdb, self.heartbeat_interval)
        progress = StudyProgress(study_name, opened.budget, self.direction, enabled=self.progress)
        try:
            progress.update(study)
            self._search_and_reevaluate(
                opened, space, variant, sweep_dir, done, heartbeat, progress
            )
        finally:
            progress.close()
            heartbeat.close()
        report_interrupted(
            self.config, study, opened.locks
        )  # e.g. of another worker gone meanwhile
        summary = summarize(study, opened.budget, opened.url, space, variant, self.direction)
        log_best(summary)
        finish_study(self.config, study, summary, sweep_dir)
        return summary

    def _search_and_reevaluate(
        self,
        opened: Any,
        space: Any,
        variant: list[str],
        sweep_dir: Path,
        done: list[dict[str, Any]],
        heartbeat: Any,
        progress: Any,
    ) -> None:
        """Search until the budget is used, then (with ``reevaluate.top_k``) re-evaluate; a
        trial of a worker that is gone meanwhile frees its budget: search on."""
        from ltr_bench.sweeper.reevaluation_runs import reevaluate, wait_for_running_trials
        from ltr_bench.sweeper.search_runs import search

        assert self.config is not None
        study, rdb, locks, budget = opened.study, opened.rdb, opened.locks, opened.budget

        def after_tell() -> None:
            progress.update(study)
            summary = summarize(study, budget, opened.url, space, variant, self.direction)
            write_results(sweep_dir, [*done, summary])

        while True:
            search(self, opened, space, variant, heartbeat, after_tell)
            if locks is None:
                break
            # The top trials are known once the search's last trials (of any worker) are told.
            wait_for_running_trials(self, study, rdb, locks)
            if remaining(study, space, budget, self.max_failure_rate) > 0:
                continue
            reevaluate(self, study, space, variant, rdb, locks, heartbeat, opened.url)
            break


__all__ = [
    "OptunaSweeperImpl",
    "TooManyFailures",
    "Terminated",
    "RESULTS_FILE",
    "REEVALUATION_KEY",
    "TRIAL_NUMBER_KEY",
    "STUDY_NAME_KEY",
]
