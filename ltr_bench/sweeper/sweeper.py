"""The ``ltr_optuna`` Hydra sweeper: per study, open it (``state``), search (``search.loop``),
re-evaluate its top trials (``reevaluation.runs``) and write its results; its jobs run through
``ltr_bench.launching``. Light to import (Hydra scans plugins in every app): the modules that need
Optuna load when a sweep starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from ltr_bench.sweeper.config import Settings

if TYPE_CHECKING:
    from ltr_bench.sweeper.storage import StudyNames

log = logging.getLogger(__name__)

#: Where optuna-dashboard serves (it binds to 127.0.0.1 unless given --host).
DASHBOARD = "(then open http://127.0.0.1:8080)"


class OptunaSweeperImpl(Sweeper):
    """Implementation; Hydra instantiates its subclass in ``hydra_plugins.ltr_bench_sweeper``."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.settings = Settings(**options)
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.jobs: Any = None  # the launcher and its job numbers (launching.Jobs), after setup
        self.watched: set[str] = set()  # the storages whose dashboard command was printed

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from hydra.core.plugins import Plugins

        from ltr_bench.launching.pools import Jobs
        from ltr_bench.launching.processes import orphan_guard

        s = self.settings
        self.hydra_context = hydra_context
        self.config = config
        # jobs run by a launcher in other processes stop when this sweeper is gone
        launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context,
            task_function=orphan_guard(task_function, s.orphan_grace_period),
            config=config,
        )
        s.resolve_fatal_errors()
        in_flight = s.asynchronous and not s.reproducible
        self.jobs = Jobs(launcher, self.validate_batch_is_legal, s.n_jobs, in_flight)

    def sweep(self, arguments: list[str]) -> list[dict[str, Any]]:
        from ltr_bench.launching.processes import Terminated, end_by_sigterm
        from ltr_bench.sweeper.results import write_results
        from ltr_bench.sweeper.search.space import (
            build_space,
            collect_overrides,
            discrete_values,
            parse_override,
        )
        from ltr_bench.sweeper.storage import StudyNames

        assert self.config is not None and self.jobs is not None
        per = {k.lstrip("+~") for k in self.settings.study_per}
        overrides = collect_overrides(self.settings.params, arguments)
        variants: list[list[str]] = [[]]
        for key in self.settings.study_per:
            name = key.lstrip("+~")
            if name in overrides:
                values = discrete_values(overrides.pop(name))
                variants = [v + [value] for v in variants for value in values]
        space = build_space(overrides)
        cli_fixed = [
            o
            for o in arguments
            if not parse_override(o).is_sweep_override()
            and parse_override(o).get_key_element().lstrip("+~") not in per
        ]
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        base_name, earlier_base = self._base_study_names(cli_fixed)
        results: list[dict[str, Any]] = []
        ending: list[Callable[[], None]] = []  # the waits for studies' artifacts being written
        try:
            try:
                for variant in variants:
                    names = StudyNames(
                        study="-".join([base_name, *variant]),
                        earlier="-".join([earlier_base, *variant]),
                        file=base_name,
                    )
                    summary, wait = self._run_study(names, space, variant, sweep_dir, results)
                    results.append(summary)
                    ending.append(wait)
            finally:  # every finished study's artifacts are written before the sweep ends
                for wait in ending:
                    wait()
        except Terminated:
            # The trials are marked; end as SIGTERM would have (exit status 143 in a shell).
            log.warning("Terminated by SIGTERM; the running trials are marked interrupted.")
            end_by_sigterm()
            raise
        finally:
            self.jobs.release()  # the workers of jobs in flight end with the sweep
        write_results(sweep_dir, results)
        return results

    def _base_study_names(self, cli_fixed: Sequence[str]) -> tuple[str, str]:
        """``study_name``, else ``<job>[-<group>=<option>...]-<sampler>[-<hash>]`` (storage
        .default_study_name); and the name earlier versions gave the same study."""
        from ltr_bench.sweeper.storage import command_study_name, default_study_name

        if self.settings.study_name:
            return str(self.settings.study_name), str(self.settings.study_name)
        assert self.config is not None
        job_name = str(OmegaConf.select(self.config, "hydra.job.name", default="app"))
        choices = OmegaConf.select(self.config, "hydra.runtime.choices", default={}) or {}
        sampler = str(
            choices.get("hydra/sweeper/sampler")
            or str(self.settings.sampler.get("_target_", "sampler")).rsplit(".", 1)[-1].lower()
        )
        return (
            default_study_name(job_name, cli_fixed, sampler, set(choices)),
            command_study_name(job_name, cli_fixed, sampler),
        )

    def _run_study(
        self, names: StudyNames, space: Any, variant: list[str], sweep_dir: Path, done: list[Any]
    ) -> tuple[dict[str, Any], Callable[[], None]]:
        """Search one study, re-evaluate its top trials, write its summary and start writing its
        artifacts: the summary and the wait for them."""
        from ltr_bench.sweeper import results
        from ltr_bench.sweeper.liveness import report_interrupted
        from ltr_bench.sweeper.reevaluation.runs import (
            reevaluate,
            release_aborted,
            start_early,
            wait_for_running_trials,
        )
        from ltr_bench.sweeper.search.loop import remaining, search
        from ltr_bench.sweeper.state import open_study_state
        from ltr_bench.sweeper.storage import dashboard_command

        assert self.config is not None
        s = self.settings
        state = open_study_state(s, self.config, self.jobs, names, space, variant)
        study = state.study
        name = study.study_name
        if state.url not in self.watched:  # once per storage: one file holds a sweep's studies
            self.watched.add(state.url)
            log.info(f"Watch the sweep live: {dashboard_command(state.url)}   {DASHBOARD}")
        progress = results.StudyProgress(name, state.budget, s.direction, enabled=s.progress)

        def after_tell() -> None:
            trials = study.get_trials(deepcopy=False)  # one read for the line and the summary
            progress.update(study, trials)
            results.write_results(sweep_dir, [*done, results.summarize(state, trials)])

        # With jobs in flight, workers the search's last trials leave free start re-evaluating.
        early = state.jobs.pool() if state.locks is not None and state.jobs.in_flight else None

        def drained(free: int) -> None:
            assert early is not None
            start_early(state, early, free - len(early))

        try:
            progress.update(study)
            while True:
                search(state, after_tell, drained if early is not None else None)
                if state.locks is None:
                    break
                # The top trials are known once the search's last trials (of any worker) are told.
                wait_for_running_trials(state)
                if remaining(study, space, state.budget, s.max_failure_rate) > 0:
                    continue
                reevaluate(state, early)
                break
        except BaseException:
            if early is not None:  # re-evaluations started during the search: free their locks
                release_aborted(state, early)
            raise
        finally:
            progress.close()
            state.heartbeat.close()
        report_interrupted(self.config, study, state.locks)  # e.g. of another worker gone meanwhile
        summary = results.summarize(state)
        results.log_best(summary)
        return summary, results.finish_study(state, summary, sweep_dir)
