"""ltr_bench.launching.job_run: a worker's job run with one copy of the ``hydra`` node is the job
Hydra runs: the same task config, ``HydraConfig`` in the task, environment, working folder,
``.hydra`` files and ``JobReturn``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from ltr_bench.config_tree import config_dir
from ltr_bench.launching import composing, hydra_private, job_run

ENV_KEY = "LTR_JOB_RUN_TEST"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, DictConfig, Path]]:
    """Hydra's context for the app's configs, a sweep's master config and its sweep folder."""
    from hydra import initialize_config_dir
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import HydraContext, RunMode

    root = tmp_path_factory.mktemp("job_run")
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        args = ["hydra/launcher=joblib", "hydra/sweeper=ltr_optuna", f"hydra.sweep.dir={root}/sw"]
        master = loader.load_configuration("config", args, RunMode.MULTIRUN)
        yield HydraContext(config_loader=loader, callbacks=Callbacks(master)), master, root / "sw"


@pytest.fixture(autouse=True)
def _hydra_state_kept() -> Iterator[None]:
    """Hydra's singletons as they were (a job leaves ``HydraConfig`` set: other tests in this
    process expect it unset)."""
    from hydra.core.singleton import Singleton

    state = Singleton.get_state()
    yield
    Singleton.set_state(state)


class Seen:
    """What a task saw: its config, ``HydraConfig``, working folder and environment."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.cfg: Any = None
        self.hydra: Any = None
        self.cwd = ""
        self.env: str | None = None
        self.resolved = ""

    def __call__(self, cfg: DictConfig) -> float:
        from hydra.core.hydra_config import HydraConfig

        self.cfg, self.hydra = cfg, HydraConfig.instance().cfg
        self.cwd, self.env = os.getcwd(), os.environ.get(ENV_KEY)
        self.resolved = OmegaConf.to_yaml(HydraConfig.get().job, resolve=True)
        if self.fail:
            raise ValueError("the task failed")
        return 0.25


def _run(
    runner: Any, sweep: tuple[Any, DictConfig, Path], overrides: list[str], fail: bool
) -> tuple[Any, Seen, dict[str, str]]:
    """One job of ``runner`` (Hydra's or ours) in a fresh sweep folder: its return, what its task
    saw, and its ``.hydra`` files."""
    from hydra.core.singleton import Singleton

    context, master, folder = sweep
    shutil.rmtree(folder, ignore_errors=True)
    seen = Seen(fail)
    cwd = os.getcwd()
    ret = runner(3, overrides, context, master, seen, Singleton.get_state())
    assert os.getcwd() == cwd  # the working folder is given back
    files = {p.name: p.read_text() for p in sorted((folder / "3" / ".hydra").iterdir())}
    return ret, seen, files


@pytest.mark.parametrize("chdir", [False, True])
@pytest.mark.parametrize("fail", [False, True])
def test_a_job_run_with_one_copy_is_the_job_hydra_runs(
    sweep: tuple[Any, DictConfig, Path], chdir: bool, fail: bool
) -> None:
    overrides = [
        "optimizer.lr=0.003",
        "seed=7",
        "sweep.trial_number=3",
        f"hydra.job.chdir={str(chdir).lower()}",
        f"+hydra.job.env_set.{ENV_KEY}=yes",
    ]
    hydras, seen_hydra, files_hydra = _run(
        hydra_private.joblib_execute_job(), sweep, overrides, fail
    )
    ours, seen_ours, files_ours = _run(job_run.execute_job, sweep, overrides, fail)

    assert composing.difference(seen_ours.cfg, seen_hydra.cfg) is None
    assert "hydra" not in seen_ours.cfg and seen_ours.cfg.seed == 7
    assert composing.difference(seen_ours.hydra, seen_hydra.hydra) is None
    assert seen_ours.hydra.hydra._get_parent() is not None  # interpolations reach the job's config
    assert seen_ours.resolved == seen_hydra.resolved
    assert seen_ours.hydra.hydra.runtime.output_dir == str(sweep[2] / "3")
    assert (seen_ours.cwd, seen_ours.env) == (seen_hydra.cwd, seen_hydra.env)
    assert seen_ours.env == "yes" and (seen_ours.cwd == str(sweep[2] / "3")) == chdir
    assert os.environ.get(ENV_KEY) is None  # and the environment
    assert files_ours == files_hydra
    assert set(files_ours) == {"config.yaml", "hydra.yaml", "overrides.yaml"}
    assert (ours.status, ours.overrides, ours.working_dir, ours.task_name) == (
        hydras.status,
        hydras.overrides,
        hydras.working_dir,
        hydras.task_name,
    )
    if fail:  # (reading a failed job's return_value raises its exception)
        assert type(ours._return_value) is type(hydras._return_value) is ValueError
    else:
        assert ours.return_value == hydras.return_value == 0.25
    assert composing.difference(ours.cfg, hydras.cfg) is None
    assert composing.difference(ours.hydra_cfg, hydras.hydra_cfg) is None


def test_the_task_config_is_a_copy_and_the_jobs_config_keeps_its_hydra_node(
    sweep: tuple[Any, DictConfig, Path],
) -> None:
    from hydra.core.hydra_config import HydraConfig

    ret, seen, _ = _run(job_run.execute_job, sweep, ["optimizer.lr=0.004"], fail=False)
    job_config = HydraConfig.instance().cfg.hydra._get_parent()  # the job's composed config
    assert "hydra" in job_config and job_config.hydra.runtime.output_dir.endswith("3")
    assert seen.cfg is ret.cfg and seen.cfg is not job_config
    seen.cfg.optimizer.lr = 0.5  # the task's copy shares no node with the job's config
    assert job_config.optimizer.lr == 0.004


def test_another_hydra_runs_its_own_job_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    import hydra

    assert job_run.job_runner() is job_run.execute_job  # the Hydra it follows
    monkeypatch.setattr(hydra, "__version__", "1.4.0")
    assert job_run.job_runner() is hydra_private.joblib_execute_job()
