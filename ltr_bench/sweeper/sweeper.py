"""The ``ltr_optuna`` Hydra sweeper: Optuna ask/tell over Hydra jobs, resumable and shareable.

Per study (one, or one per value of the ``study_per`` keys) the sweeper

1. opens the storage (default: a SQLite file named after the study, so re-running the same
   command resumes it) and creates or loads the study, once, before any job starts;
2. marks trials whose sweeper process is gone as FAIL (``interrupted``; they do not use budget);
3. repeats: count the budget-using trials of the whole study (all processes), ask up to
   ``n_jobs`` new trials (rejecting exact repeats of evaluated parameter sets and trials beyond
   ``n_trials``), launch them as one batch through the Hydra launcher with the overrides
   ``++sweep.trial_number=<n>`` and ``++sweep.study_name=<name>``, and tell Optuna each job's
   return value -- or FAIL when the job raised or returned NaN/None;
4. optionally re-evaluates the ``reevaluate.top_k`` best trials (``++sweep.reevaluation=true``
   jobs) and selects by the pooled value (:mod:`ltr_bench.sweeper.reevaluation`): once the
   search's last trials of every worker are told, each re-evaluation claimed through the storage
   (:mod:`ltr_bench.sweeper.claims`), so workers sharing the study run each once;
5. writes ``optimization_results.yaml`` (best params/value, counts, storage) into the sweep dir.

Interrupted trials and re-evaluations (their process is gone) are handed to the app's
``sweep.on_interrupted`` hook, if any (ltr-bench marks their MLflow runs KILLED). SIGTERM keeps
an app's own handler; without one it ends the process by SIGTERM once the running trials are
marked. An enqueued point whose trial was interrupted or stopped by a config error is enqueued
again on resume.

Config errors (``fatal_errors``) and more failures than ``max_failure_rate`` abort the sweep.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import signal
import threading
import time
import warnings
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from ltr_bench.confutil import plain
from ltr_bench.errors import UserError

log = logging.getLogger(__name__)

RESULTS_FILE = "optimization_results.yaml"
DEFAULT_N_TRIALS = 20
MAX_ENUMERATED_POINTS = 100_000  # finite spaces up to this size get a free point queued on repeats
TRIAL_NUMBER_KEY = "sweep.trial_number"
REEVALUATION_KEY = "sweep.reevaluation"
STUDY_NAME_KEY = "sweep.study_name"


class TooManyFailures(RuntimeError):
    """More trials failed than ``hydra.sweeper.max_failure_rate`` allows."""


class Terminated(KeyboardInterrupt):
    """SIGTERM during a batch, in an app that installed no SIGTERM handler of its own."""


@contextlib.contextmanager
def _sigterm_raises_interrupt() -> Iterator[None]:
    """Make SIGTERM raise in the main thread, so that running trials are marked before exiting.

    An app's own SIGTERM handler is kept (``ltr-bench`` raises ``RunTerminated``, ends its MLflow
    runs KILLED and exits 143); without one, SIGTERM raises :class:`Terminated`, and
    :meth:`OptunaSweeperImpl.sweep` ends the process by SIGTERM once the trials are marked.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if callable(previous):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Silence Optuna's warning that heartbeats are meant for ``Study.optimize`` (we beat ourselves)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Heartbeat of storage.*")
        yield


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
        self.params = plain(params) or {}
        self.pruner_cfg = plain(pruner) or {}
        self.progress = bool(progress)
        self._url = ""  # the current study's storage URL, told to jobs when a pruner is active
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher = None
        self.job_idx = 0
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
        self._write_results(sweep_dir, results)
        return results

    def _sampler_choice(self) -> str:
        assert self.config is not None
        choice = OmegaConf.select(self.config, "hydra.runtime.choices", default={}).get(
            "hydra/sweeper/sampler"
        )
        if choice:
            return str(choice)
        return str(self.sampler_cfg.get("_target_", "sampler")).rsplit(".", 1)[-1].lower()

    def _base_study_name(self, cli_fixed: Sequence[str]) -> str:
        from ltr_bench.sweeper.storage import default_study_name

        if self.study_name:
            return str(self.study_name)
        assert self.config is not None
        job_name = str(OmegaConf.select(self.config, "hydra.job.name", default="app"))
        return default_study_name(job_name, cli_fixed, self._sampler_choice())

    def _points_to_enqueue(self, space: Any) -> list[dict[str, Any]]:
        """The config's defaults (``enqueue_defaults``) and the ``enqueue_trials``, as Optuna params."""
        points = []
        if self.enqueue_defaults:
            point = self._default_point(space)
            if point:
                points.append(point)
        for i, values in enumerate(self.enqueue_trials):
            points.append(space.point(values, f"hydra.sweeper.enqueue_trials[{i}]"))
        return points

    def _default_point(self, space: Any) -> dict[str, Any]:
        """Each swept parameter's value in the composed config: the chosen option of a config
        group, else the value at its key; one outside the search space is left to the sampler."""
        assert self.config is not None
        choices = OmegaConf.select(self.config, "hydra.runtime.choices", default={}) or {}
        point: dict[str, Any] = {}
        for name in space.params:
            if name in choices:
                value = choices[name]
            else:
                node = OmegaConf.select(self.config, name, default=None, throw_on_missing=False)
                value = (
                    OmegaConf.to_container(node, resolve=True)
                    if OmegaConf.is_config(node)
                    else node
                )
            try:
                point.update(space.point({name: value}, "hydra.sweeper.enqueue_defaults"))
            except UserError as e:
                log.info("Not enqueued as a default (the sampler chooses it): %s", e)
        return point

    def _make_sampler(self, space: Any, n_existing: int) -> Any:
        import optuna
        from hydra.utils import get_class, instantiate

        from ltr_bench.sweeper.grid import GridSearchSampler

        cfg = dict(plain(self.sampler_cfg) or {})  # a copy: the seed is changed below
        if not cfg or "_target_" not in cfg:
            raise UserError(
                "hydra.sweeper.sampler needs a _target_ (use hydra/sweeper/sampler=tpe|random|grid)."
            )
        cls = get_class(cfg["_target_"])
        if issubclass(cls, (GridSearchSampler, optuna.samplers.GridSampler)):
            return instantiate(cfg, search_space=space.grid_values())
        if "constant_liar" in cfg and cfg["constant_liar"] is None:
            # parallel proposals (a batch of n_jobs, or workers sharing a storage) would otherwise
            # sample alike: the running trials are told to TPE as if they had a bad value
            cfg["constant_liar"] = self.n_jobs > 1 or self.storage is not None
        if cfg.get("seed") is not None:
            # A resumed study must not replay the first run's random stream (it would re-propose the
            # finished points); a shared storage salts per process so workers explore differently.
            salt = 0 if self.storage is None else zlib.crc32(repr(self._identity()).encode())
            cfg["seed"] = (int(cfg["seed"]) + n_existing + salt) % (2**31)
        return instantiate(cfg)

    @staticmethod
    def _identity() -> dict[str, Any]:
        from ltr_bench.sweeper.trials import worker_identity

        return worker_identity()

    def _budget(self, sampler: Any) -> int:
        from ltr_bench.sweeper.grid import GridSearchSampler

        if isinstance(sampler, GridSearchSampler):
            size = sampler.grid_size
            if self.n_trials is not None and int(self.n_trials) > size:
                log.warning(
                    "hydra.sweeper.n_trials=%s exceeds the grid size %d.", self.n_trials, size
                )
            return size if self.n_trials is None else min(int(self.n_trials), size)
        return DEFAULT_N_TRIALS if self.n_trials is None else int(self.n_trials)

    # ------------------------------------------------------------------ one study
    def _run_study(
        self,
        study_name: str,
        space: Any,
        variant: list[str],
        sweep_dir: Path,
        done: list[dict[str, Any]],
    ) -> dict[str, Any]:
        from ltr_bench.sweeper import claims as cl
        from ltr_bench.sweeper.progress import StudyProgress
        from ltr_bench.sweeper.pruning import make_pruner
        from ltr_bench.sweeper.storage import default_storage_url, open_storage, open_study, redact
        from ltr_bench.sweeper.trials import Heartbeat, fail_interrupted_trials, needs_enqueueing

        assert self.config is not None
        if self.storage:
            url = str(self.storage)
        else:
            base = OmegaConf.select(self.config, "hydra.runtime.cwd", default=None) or Path.cwd()
            url = default_storage_url(self.storage_dir, study_name, base)
        rdb = open_storage(url, self.heartbeat_interval, self.grace_period)
        study = open_study(rdb, study_name, self.direction)
        fail_interrupted_trials(study, rdb, self.grace_period)
        claims = None
        if self.reevaluate_top_k > 0:
            claims = cl.open_claims(rdb, study)
            fail_interrupted_trials(claims, rdb, self.grace_period)
        self._report_interrupted(study, claims)
        n_existing = len(
            study.get_trials(deepcopy=False)
        )  # before enqueueing: a fresh study keeps its seed
        for point in self._points_to_enqueue(space):
            if needs_enqueueing(study.get_trials(deepcopy=False), point):
                study.enqueue_trial(point)
        study.sampler = self._make_sampler(space, n_existing)
        study.pruner = make_pruner(self.pruner_cfg)
        self._url = url
        budget = self._budget(study.sampler)
        log.info(
            "Study '%s' in %s: sampler %s, %s, n_trials=%d, %d trial(s) already stored.",
            study_name,
            redact(url),
            type(study.sampler).__name__,
            self.direction,
            budget,
            n_existing,
        )
        heartbeat = Heartbeat(rdb, self.heartbeat_interval)
        progress = StudyProgress(study_name, budget, self.direction, enabled=self.progress)
        try:
            progress.update(study)
            while True:
                while True:
                    if fail_interrupted_trials(study, rdb, self.grace_period):
                        self._report_interrupted(study, claims)
                    remaining = self._remaining(study, space, budget)
                    if remaining <= 0:
                        break
                    batch = self._ask_batch(
                        study, space, min(self.n_jobs, remaining), budget, heartbeat
                    )
                    if not batch:
                        break
                    self._run_batch(study, space, variant, batch, heartbeat)
                    progress.update(study)
                    self._write_results(
                        sweep_dir, [*done, self._summary(study, budget, url, space, variant)]
                    )
                if claims is None:
                    break
                # The top trials are known once the search's last trials (of any worker) are told;
                # a trial of a worker that is gone meanwhile frees its budget: search on.
                self._wait_for_running_trials(study, rdb, claims)
                if self._remaining(study, space, budget) > 0:
                    continue
                self._reevaluate(study, space, variant, rdb, claims, heartbeat)
                break
        finally:
            progress.close()
            heartbeat.close()
        self._report_interrupted(study, claims)  # e.g. of another worker that died meanwhile
        summary = self._summary(study, budget, url, space, variant)
        if summary["best_trial"] is not None:
            log.info(
                "Best trial %d: value %s%s, params %s",
                summary["best_trial"],
                summary["best_value"],
                " (pooled with its re-evaluation)" if summary.get("reevaluated") else "",
                summary["best_params"],
            )
            if "n_within_one_se" in summary:
                log.info(
                    "The search's best has standard error %.4g; %d of %d completed trials lie "
                    "within one SE of it (the objective cannot tell them apart).",
                    summary.get("search_best_value_se", summary.get("best_value_se")),
                    summary["n_within_one_se"],
                    summary["n_complete"],
                )
        self._finish_study(study, summary, sweep_dir)
        return summary

    def _report_interrupted(self, study: Any, claims: Any) -> None:
        """Hand the study's interrupted trials and re-evaluations to the app's
        ``sweep.on_interrupted`` hook (dotted path; ltr-bench marks their MLflow runs KILLED).

        Called with every interrupted trial number and, per re-evaluated trial, when its latest
        interrupted claim was failed (epoch seconds), so the hook may be repeated safely; a failing
        hook is logged as a warning.
        """
        from hydra.utils import get_method

        from ltr_bench.sweeper import claims as cl
        from ltr_bench.sweeper.trials import ATTR_FAIL, FAIL_INTERRUPTED

        assert self.config is not None
        hook = OmegaConf.select(self.config, "sweep.on_interrupted", default=None)
        if not hook:
            return
        trials = sorted(
            t.number
            for t in study.get_trials(deepcopy=False, states=(_fail_state(),))
            if t.user_attrs.get(ATTR_FAIL) == FAIL_INTERRUPTED
        )
        reevaluations = cl.interrupted(claims) if claims is not None else {}
        if not trials and not reevaluations:
            return
        try:
            get_method(str(hook))(self.config, study.study_name, trials, reevaluations)
        except Exception as e:  # noqa: BLE001 - bookkeeping elsewhere must not stop the sweep
            log.warning(
                "sweep.on_interrupted=%s failed for study '%s': %s", hook, study.study_name, e
            )

    def _finish_study(self, study: Any, summary: dict[str, Any], sweep_dir: Path) -> None:
        """Write the study's plots and trials table under ``<sweep dir>/studies/<study>/`` and hand
        them to the app's ``sweep.on_study_end`` hook (dotted path, e.g. MLflow logging), if any.
        Neither may break a finished sweep: failures are logged as warnings."""
        from hydra.utils import get_method

        from ltr_bench.sweeper.plots import write_study_artifacts
        from ltr_bench.sweeper.storage import file_stem

        out = sweep_dir / "studies" / file_stem(study.study_name)
        files = write_study_artifacts(study, out)
        summary["artifacts_dir"] = str(out)
        assert self.config is not None
        hook = OmegaConf.select(self.config, "sweep.on_study_end", default=None)
        if not hook:
            return
        try:
            get_method(str(hook))(self.config, study.study_name, summary, files)
        except Exception as e:  # noqa: BLE001 - reporting must not fail a finished study
            log.warning(
                "sweep.on_study_end=%s failed for study '%s': %s", hook, study.study_name, e
            )

    def _remaining(self, study: Any, space: Any, budget: int) -> int:
        from ltr_bench.sweeper.trials import (
            ATTR_FAIL,
            COUNTED_FAIL_REASONS,
            counts_toward_budget,
            taken_points,
        )

        trials = study.get_trials(deepcopy=False)
        used = sum(counts_toward_budget(t) for t in trials)
        failed = sum(
            t.state.name == "FAIL" and t.user_attrs.get(ATTR_FAIL) in COUNTED_FAIL_REASONS
            for t in trials
        )
        if failed > self.max_failure_rate * budget:
            raise TooManyFailures(
                f"{failed} of n_trials={budget} trials of study '{study.study_name}' failed, more than "
                f"hydra.sweeper.max_failure_rate={self.max_failure_rate}; see the job logs."
            )
        size = space.size()
        if (
            size is not None
            and len(taken_points(trials, list(space.params))) >= size
            and budget - used > 0
        ):
            log.info(
                "Search space of study '%s' exhausted after %d distinct points.",
                study.study_name,
                size,
            )
            return 0
        if budget - used <= 0:
            log.info("Study '%s' has used its n_trials=%d.", study.study_name, budget)
        return budget - used

    def _ask_batch(self, study: Any, space: Any, n: int, budget: int, heartbeat: Any) -> list[Any]:
        batch: list[Any] = []
        try:
            for _ in range(n):
                trial = self._ask_one(study, space, budget, heartbeat)
                if trial is None:
                    break
                batch.append(trial)
        except BaseException:
            self._fail_all(study, batch, heartbeat, reason="interrupted")
            raise
        return batch

    def _ask_one(self, study: Any, space: Any, budget: int, heartbeat: Any) -> Any:
        """Ask one new trial; None when the study's budget is used up by other trials."""
        from ltr_bench.sweeper.trials import (
            ATTR_WORKER,
            FAIL_DUPLICATE,
            FAIL_SURPLUS,
            counts_toward_budget,
            params_key,
            settled_others,
            taken_points,
        )

        names = list(space.params)
        distributions = space.distributions()
        identity = self._identity()
        for attempt in range(self.max_duplicate_retries + 1):
            with _quiet_optuna():
                trial = study.ask(distributions)
            heartbeat.add(trial._trial_id)
            trial.set_user_attr(ATTR_WORKER, identity)
            others = settled_others(study, trial.number, names)  # no half-asked rival
            earlier = [t for t in others if t.number < trial.number and counts_toward_budget(t)]
            if len(earlier) >= budget:
                self._reject(study, trial, FAIL_SURPLUS, heartbeat)
                return None
            key = params_key(trial.params, names)
            rivals = [
                t
                for t in others
                if counts_toward_budget(t) and (t.number < trial.number or t.state.is_finished())
            ]
            if key is None or key not in taken_points(rivals, names):
                return trial
            size = space.size()
            enumerable = size is not None and size <= MAX_ENUMERATED_POINTS
            if attempt == self.max_duplicate_retries and not enumerable:
                log.warning(
                    "Trial %d repeats evaluated params %s; running it anyway.",
                    trial.number,
                    trial.params,
                )
                return trial
            self._reject(study, trial, FAIL_DUPLICATE, heartbeat)
            if enumerable and attempt >= self.max_duplicate_retries // 2:
                self._enqueue_free_point(study, space, trial.number)
        log.warning(
            "No new parameters after %d proposals; ending study '%s'.",
            self.max_duplicate_retries + 1,
            study.study_name,
        )
        return None

    def _enqueue_free_point(self, study: Any, space: Any, seed: int) -> None:
        """Queue a random not-yet-evaluated point of a finite space (when the sampler keeps repeating)."""
        from ltr_bench.sweeper.trials import taken_points

        names = list(space.params)
        taken = taken_points(study.get_trials(deepcopy=False), names)
        free = [p for p in space.grid_points() if tuple(p[n] for n in names) not in taken]
        if free:
            study.enqueue_trial(random.Random(seed).choice(free))

    def _reject(self, study: Any, trial: Any, reason: str, heartbeat: Any) -> None:
        from ltr_bench.sweeper.trials import ATTR_FAIL

        trial.set_user_attr(ATTR_FAIL, reason)
        study.tell(trial, state=_fail_state(), skip_if_finished=True)
        heartbeat.discard(trial._trial_id)

    def _fail_all(
        self,
        study: Any,
        trials: Sequence[Any],
        heartbeat: Any,
        reason: str,
        error: str | None = None,
    ) -> None:
        from ltr_bench.sweeper.trials import ATTR_ERROR

        for trial in trials:
            with contextlib.suppress(Exception):
                if error:
                    trial.set_user_attr(ATTR_ERROR, error[:2000])
                self._reject(study, trial, reason, heartbeat)

    @staticmethod
    def _job_overrides(
        study: Any,
        space: Any,
        variant: list[str],
        params: dict[str, Any],
        number: int,
        extra: Sequence[str] = (),
    ) -> list[str]:
        """A job's overrides: the trial's parameters, the study's own overrides, ``extra``, and
        the trial number and study name the job is told."""
        from ltr_bench.sweeper.search_space import format_value

        return [
            *space.job_overrides(params),
            *variant,
            *extra,
            f"++{TRIAL_NUMBER_KEY}={number}",
            f"++{STUDY_NAME_KEY}={format_value(study.study_name)}",
        ]

    def _run_batch(
        self, study: Any, space: Any, variant: list[str], batch: list[Any], heartbeat: Any
    ) -> None:
        from ltr_bench.sweeper.pruning import job_overrides
        from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_INTERRUPTED

        racing = job_overrides(self._url, self.pruner_cfg)  # [] without a pruner
        jobs = [
            self._job_overrides(study, space, variant, t.params, t.number, racing) for t in batch
        ]
        for t, overrides in zip(batch, jobs):
            log.info("Trial %d of study '%s': %s", t.number, study.study_name, " ".join(overrides))
        try:
            if (
                len(jobs) > 1
            ):  # compose all first, so that one bad config cannot waste the others' runs
                self.validate_batch_is_legal(jobs)
            with _sigterm_raises_interrupt():
                returns = self.launcher.launch(jobs, initial_job_idx=self.job_idx)
        except Exception as e:  # launchers compose each job's config before running it
            self._fail_all(study, batch, heartbeat, FAIL_CONFIG, error=f"{type(e).__name__}: {e}")
            raise
        except BaseException:
            self._fail_all(study, batch, heartbeat, FAIL_INTERRUPTED)
            raise
        self.job_idx += len(batch)
        fatal: BaseException | None = None
        for trial, ret in zip(batch, returns):
            error = self._tell(study, trial, ret, heartbeat)
            if error is not None and fatal is None:
                fatal = error
        if fatal is not None:
            raise fatal

    def _is_fatal(self, error: Any) -> bool:
        """A config error, also when wrapped (Hydra's ``instantiate`` raises
        ``InstantiationException`` from the ``UserError`` of a constructor, e.g. a missing
        data folder): every other trial would fail the same way."""
        seen: set[int] = set()
        while isinstance(error, BaseException) and id(error) not in seen:
            if isinstance(error, self.fatal_errors):
                return True
            seen.add(id(error))
            error = error.__cause__ or error.__context__
        return False

    def _tell(self, study: Any, trial: Any, ret: JobReturn, heartbeat: Any) -> BaseException | None:
        """Tell Optuna one job's outcome; return the exception when it is fatal."""
        from ltr_bench.sweeper import pruning
        from ltr_bench.sweeper.objective import user_attrs_of
        from ltr_bench.sweeper.trials import ATTR_ERROR, FAIL_CONFIG, FAIL_EXCEPTION, FAIL_NAN

        if ret.status == JobStatus.COMPLETED:
            value = ret._return_value
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if math.isfinite(number):
                for key, attr in user_attrs_of(value).items():  # e.g. the objective's SE
                    trial.set_user_attr(key, attr)
                frozen = study.tell(trial, number, skip_if_finished=True)
                heartbeat.discard(trial._trial_id)
                if frozen.state.name == "COMPLETE":
                    log.info("Trial %d finished with value %s.", trial.number, number)
                else:  # another worker failed it as stale (e.g. heartbeats blocked for too long)
                    log.warning(
                        "Trial %d was already %s; its value %s is not recorded.",
                        trial.number,
                        frozen.state.name,
                        number,
                    )
                return None
            log.warning("Trial %d returned %r; recorded as FAIL.", trial.number, value)
            trial.set_user_attr(ATTR_ERROR, f"returned {value!r}"[:2000])
            self._reject(study, trial, FAIL_NAN, heartbeat)
            return None
        error = ret._return_value
        if pruning.is_pruned(error):
            self._tell_pruned(study, trial, heartbeat)
            return None
        is_fatal = self._is_fatal(error)
        log.error(
            "Trial %d failed (%s): %s: %s",
            trial.number,
            "aborting the sweep" if is_fatal else "recorded as FAIL, sweep goes on",
            type(error).__name__,
            error,
            # a config error is one sentence (the CLI repeats it), not a traceback
            exc_info=(type(error), error, error.__traceback__)
            if isinstance(error, BaseException) and not is_fatal
            else None,
        )
        trial.set_user_attr(ATTR_ERROR, f"{type(error).__name__}: {error}"[:2000])
        self._reject(study, trial, FAIL_CONFIG if is_fatal else FAIL_EXCEPTION, heartbeat)
        return error if is_fatal and isinstance(error, BaseException) else None

    def _tell_pruned(self, study: Any, trial: Any, heartbeat: Any) -> None:
        """Record a job that stopped because the pruner said so: PRUNED, with the last value it
        reported into the study (Optuna's rule), which the job wrote from its own process."""
        from optuna.trial import TrialState

        from ltr_bench.sweeper.pruning import last_reported

        step, value = last_reported(study._storage.get_trial(trial._trial_id))
        frozen = study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
        heartbeat.discard(trial._trial_id)
        log.info(
            "Trial %d pruned after step %s with value %s (%s).",
            trial.number,
            step,
            value,
            frozen.state.name,
        )

    # ------------------------------------------------------------------ re-evaluation
    def _reevaluate(
        self, study: Any, space: Any, variant: list[str], rdb: Any, claims: Any, heartbeat: Any
    ) -> None:
        """Run the ``reevaluate.top_k`` best trials not yet re-evaluated once more as
        ``++sweep.reevaluation=true`` jobs (``n_jobs`` at a time) and store each pooled record in
        the study. Each re-evaluation is claimed through the storage first
        (:mod:`~ltr_bench.sweeper.claims`), so workers sharing the study run each once; a worker
        waits for the search's running trials and for re-evaluations other workers hold. A failing
        re-evaluation is logged and leaves its trial out of the selection; a config error aborts,
        as for trials."""
        from ltr_bench.sweeper import claims as cl
        from ltr_bench.sweeper import reevaluation as rv
        from ltr_bench.sweeper.trials import fail_interrupted_trials

        maximize = self.direction == "maximize"
        settle = 0.0 if rdb.engine.dialect.name == "sqlite" else cl.SETTLE_S
        identity = self._identity()
        waited = False
        while True:
            found = fail_interrupted_trials(study, rdb, self.grace_period)
            found += fail_interrupted_trials(claims, rdb, self.grace_period)
            if found:
                self._report_interrupted(study, claims)
            trials = study.get_trials(deepcopy=False)
            done = rv.stored(study)
            todo = [
                t
                for t in rv.top_trials(trials, self.reevaluate_top_k, maximize)
                if t.number not in done and not cl.is_done(claims, t.number)
            ]
            if not todo:
                return
            batch: list[tuple[Any, int]] = []
            for t in todo:
                if len(batch) == self.n_jobs:
                    break
                claim_id = cl.claim(claims, t.number, identity, heartbeat, settle)
                if claim_id is not None:
                    batch.append((t, claim_id))
            if not batch:  # all held by other workers: wait for them (or to find them gone)
                if not waited:
                    log.info(
                        "Waiting for the re-evaluation(s) other workers run: trial(s) %s.",
                        [t.number for t in todo],
                    )
                    waited = True
                time.sleep(self._pause())
                continue
            self._run_reevaluations(study, space, variant, claims, batch, heartbeat)

    def _pause(self) -> float:
        """How long to wait before looking at other workers' trials or claims again."""
        return min(float(self.heartbeat_interval), 2.0)

    def _wait_for_running_trials(self, study: Any, rdb: Any, claims: Any) -> None:
        """Wait until no trial of the study is RUNNING (other workers' last trials are told, or
        their workers are found gone and the trials failed as interrupted)."""
        from ltr_bench.sweeper.trials import fail_interrupted_trials

        announced = False
        while True:
            if fail_interrupted_trials(study, rdb, self.grace_period):
                self._report_interrupted(study, claims)
            running = [
                t.number for t in study.get_trials(deepcopy=False) if t.state.name == "RUNNING"
            ]
            if not running:
                return
            if not announced:
                log.info("Waiting for trial(s) %s of other workers before re-evaluating.", running)
                announced = True
            time.sleep(self._pause())

    def _run_reevaluations(
        self,
        study: Any,
        space: Any,
        variant: list[str],
        claims: Any,
        batch: list[tuple[Any, int]],
        heartbeat: Any,
    ) -> None:
        """Launch one batch of claimed re-evaluations; store each record, then finish its claim."""
        from ltr_bench.sweeper import claims as cl
        from ltr_bench.sweeper import reevaluation as rv
        from ltr_bench.sweeper.objective import is_finite, user_attrs_of
        from ltr_bench.sweeper.trials import FAIL_CONFIG, FAIL_EXCEPTION, FAIL_INTERRUPTED

        extra = [*self.reevaluate_overrides, f"++{REEVALUATION_KEY}=true"]
        jobs = [
            self._job_overrides(study, space, variant, t.params, t.number, extra) for t, _ in batch
        ]
        log.info(
            "Re-evaluating trial(s) %s of study '%s'.",
            ", ".join(str(t.number) for t, _ in batch),
            study.study_name,
        )
        for overrides in jobs:
            log.info("Re-evaluation of study '%s': %s", study.study_name, " ".join(overrides))
        try:
            if len(jobs) > 1:
                self.validate_batch_is_legal(jobs)
            with _sigterm_raises_interrupt():
                returns = self.launcher.launch(jobs, initial_job_idx=self.job_idx)
        except Exception:
            for _, claim_id in batch:
                cl.release(claims, claim_id, FAIL_CONFIG, heartbeat)
            raise
        except BaseException:
            for _, claim_id in batch:
                cl.release(claims, claim_id, FAIL_INTERRUPTED, heartbeat)
            raise
        self.job_idx += len(jobs)
        fatal: BaseException | None = None
        for (trial, claim_id), ret in zip(batch, returns):
            value = ret._return_value
            if ret.status == JobStatus.COMPLETED and is_finite(value):
                record = rv.make_record(trial, float(value), user_attrs_of(value))
                rv.store(study, record)
                cl.finish(claims, claim_id, record.reevaluation_value, heartbeat)
                log.info(
                    "Trial %d re-evaluated: %.6g (search %.6g, pooled %.6g).",
                    trial.number,
                    record.reevaluation_value,
                    record.search_value,
                    record.value,
                )
            elif self._is_fatal(value):
                cl.release(claims, claim_id, FAIL_CONFIG, heartbeat)
                fatal = fatal or value
            else:
                cl.release(claims, claim_id, FAIL_EXCEPTION, heartbeat)
                log.warning(
                    "Re-evaluation of trial %d failed (%r); it is left out of the selection.",
                    trial.number,
                    value,
                )
        if fatal is not None:
            raise fatal

    # ------------------------------------------------------------------ results
    def _summary(
        self, study: Any, budget: int, url: str, space: Any, variant: list[str]
    ) -> dict[str, Any]:
        from optuna.trial import TrialState

        from ltr_bench.sweeper.objective import ATTR_SE, within_one_se
        from ltr_bench.sweeper.storage import redact
        from ltr_bench.sweeper.trials import ATTR_FAIL, COUNTED_FAIL_REASONS

        trials = study.get_trials(deepcopy=False)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        summary: dict[str, Any] = {
            "name": "ltr_optuna",
            "study_name": study.study_name,
            "storage": redact(url),
            "direction": self.direction,
            "sampler": type(study.sampler).__name__,
            "n_trials": budget,
            "n_complete": len(complete),
            "n_failed": sum(
                t.state == TrialState.FAIL and t.user_attrs.get(ATTR_FAIL) in COUNTED_FAIL_REASONS
                for t in trials
            ),
            "n_running": sum(t.state == TrialState.RUNNING for t in trials),
            "n_pruned": sum(t.state == TrialState.PRUNED for t in trials),
            "pruner": type(study.pruner).__name__,
            "best_trial": None,
            "best_value": None,
            "best_params": None,
            "best_overrides": None,
            "study_overrides": list(variant),
        }
        if complete:
            best = study.best_trial
            summary.update(
                best_trial=best.number,
                best_value=float(best.value),
                best_params=dict(best.params),
                best_overrides=[
                    p.override(best.params[n]) for n, p in space.params.items() if n in best.params
                ],
            )
            se = best.user_attrs.get(ATTR_SE)
            if se is not None:
                # How many trials the objective cannot tell from the best: the choice among them is noise.
                summary.update(
                    best_value_se=float(se),
                    n_within_one_se=within_one_se(
                        [float(t.value) for t in complete],
                        float(best.value),
                        float(se),
                        self.direction == "maximize",
                    ),
                )
            self._select_reevaluated(study, space, summary)
        return summary

    def _select_reevaluated(self, study: Any, space: Any, summary: dict[str, Any]) -> None:
        """With re-evaluations stored, the best trial is the re-evaluated one with the best pooled
        value; the search's own best stays in ``search_best_trial``/``search_best_value``."""
        from ltr_bench.sweeper import reevaluation as rv

        records = rv.stored(study)
        chosen = rv.select(records, self.direction == "maximize")
        if chosen is None:
            return
        trial = study.get_trials(deepcopy=False)[chosen.trial]  # numbers are list positions
        if "best_value_se" in summary:
            summary["search_best_value_se"] = summary.pop("best_value_se")
        summary.update(
            search_best_trial=summary["best_trial"],
            search_best_value=summary["best_value"],
            best_trial=chosen.trial,
            best_value=chosen.value,
            best_params=dict(trial.params),
            best_overrides=[
                p.override(trial.params[n]) for n, p in space.params.items() if n in trial.params
            ],
            reevaluated=[r.to_dict() for r in sorted(records.values(), key=lambda r: r.trial)],
        )
        if chosen.se is not None:
            summary["best_value_se"] = chosen.se

    @staticmethod
    def _write_results(sweep_dir: Path, results: list[dict[str, Any]]) -> None:
        content: Any = (
            results[0] if len(results) == 1 else {"name": "ltr_optuna", "studies": results}
        )
        OmegaConf.save(OmegaConf.create(content), sweep_dir / RESULTS_FILE)


def _fail_state() -> Any:
    from optuna.trial import TrialState

    return TrialState.FAIL


__all__ = [
    "OptunaSweeperImpl",
    "TooManyFailures",
    "RESULTS_FILE",
    "TRIAL_NUMBER_KEY",
    "STUDY_NAME_KEY",
]
