"""A sweep job in a joblib worker, run with one copy of the config's ``hydra`` node, not three.

Hydra's joblib launcher hands ``HydraConfig`` the job's config once composed, and Hydra's
``run_job`` hands it the same config again, twice: before it reads the job's output folder and
after writing that folder into ``hydra.runtime.output_dir``. Each time ``HydraConfig`` deep-copies
the ``hydra`` node (~140 nodes), and ``run_job`` deep-copies the whole config once more to give
the task its part without ``hydra``. :func:`execute_job` and :func:`run_job` are those two
functions of Hydra 1.3 with the copies left out: ``HydraConfig`` keeps the copy it was given
first, the output folder is written into that copy as into the config, and the task's part is
copied without the ``hydra`` node. The rest is Hydra's code in Hydra's order, so the task, its
``HydraConfig``, the files in ``.hydra`` and the ``JobReturn`` are those Hydra makes
(``tests/launching/test_job_run.py`` compares them); another Hydra runs its own functions.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from textwrap import dedent
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ltr_bench.launching import hydra_private

#: the Hydra releases whose ``run_job`` and joblib ``execute_job`` these functions follow
FOLLOWS_HYDRA = "1.3."


def job_runner() -> Any:
    """The function that runs one job in a joblib worker: :func:`execute_job` under the Hydra it
    follows, else the joblib launcher's own."""
    import hydra

    if hydra.__version__.startswith(FOLLOWS_HYDRA):
        return execute_job
    return hydra_private.joblib_execute_job()


def execute_job(
    idx: int,
    overrides: Sequence[str],
    hydra_context: Any,
    config: DictConfig,
    task_function: Any,
    singleton_state: dict[Any, Any],
) -> Any:
    """The joblib launcher's ``execute_job``: compose the job's config, then :func:`run_job`."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import setup_globals

    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        config=sweep_config,
        task_function=task_function,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def run_job(
    task_function: Any,
    config: DictConfig,
    job_dir_key: str,
    job_subdir_key: str | None,
    hydra_context: Any,
    configure_logging: bool = True,
) -> Any:
    """Hydra's ``run_job`` for a ``config`` that ``HydraConfig`` holds already (set by
    :func:`execute_job`). Left behind, ``HydraConfig`` holds the job's config with its output
    folder (Hydra's puts back the copy made before the folder was written)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.utils import JobReturn, JobRuntime, JobStatus, configure_log, env_override

    _check_hydra_context, _save_config, _flush_loggers, _ = hydra_private.run_job_helpers()

    _check_hydra_context(hydra_context)
    callbacks = hydra_context.callbacks

    old_cwd = os.getcwd()
    held = HydraConfig.instance().cfg  # the job's, set by execute_job

    output_dir = _output_dir(config, job_dir_key, job_subdir_key)
    for runtime in (config.hydra.runtime, held.hydra.runtime):  # type: ignore[union-attr]
        with read_write(runtime), open_dict(runtime):
            runtime.output_dir = os.path.abspath(output_dir)

    _chdir = None
    try:
        ret = JobReturn()
        task_cfg = _without_hydra(config)
        ret.cfg = task_cfg
        hydra_cfg = copy.deepcopy(HydraConfig.instance().cfg)
        assert isinstance(hydra_cfg, DictConfig)
        ret.hydra_cfg = hydra_cfg
        overrides = OmegaConf.to_container(config.hydra.overrides.task)
        assert isinstance(overrides, list)
        ret.overrides = overrides
        Path(str(output_dir)).mkdir(parents=True, exist_ok=True)

        _chdir = _changes_dir(hydra_cfg.hydra.job.chdir)
        if _chdir:
            os.chdir(output_dir)
            ret.working_dir = output_dir
        else:
            ret.working_dir = os.getcwd()

        if configure_logging:
            configure_log(config.hydra.job_logging, config.hydra.verbose)

        if config.hydra.output_subdir is not None:
            hydra_output = Path(config.hydra.runtime.output_dir) / Path(config.hydra.output_subdir)
            _save_config(task_cfg, "config.yaml", hydra_output)
            _save_config(hydra_cfg, "hydra.yaml", hydra_output)
            _save_config(config.hydra.overrides.task, "overrides.yaml", hydra_output)

        with env_override(hydra_cfg.hydra.job.env_set):
            callbacks.on_job_start(config=config, task_function=task_function)
            try:
                ret.return_value = task_function(task_cfg)
                ret.status = JobStatus.COMPLETED
            except Exception as e:  # noqa: BLE001 - Hydra's: a failed task is the job's return
                ret.return_value = e
                ret.status = JobStatus.FAILED

        ret.task_name = JobRuntime.instance().get("name")

        _flush_loggers()

        callbacks.on_job_end(config=config, job_return=ret)

        return ret
    finally:
        HydraConfig.instance().cfg = held
        if _chdir:
            os.chdir(old_cwd)


def _without_hydra(config: DictConfig) -> DictConfig:
    """``copy.deepcopy(config)`` less its ``hydra`` node, which is not copied (Hydra copies the
    whole config, then deletes the copy's ``hydra``): the copy's ``hydra`` is a stand-in,
    deleted as Hydra deletes it."""
    stand_in = OmegaConf.create({})
    memo = {id(config._get_node("hydra")): stand_in}
    task_cfg = copy.deepcopy(config, memo)
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]
    return task_cfg


def _output_dir(config: DictConfig, job_dir_key: str, job_subdir_key: str | None) -> str:
    """The job's output folder (``hydra.sweep.dir``/``hydra.sweep.subdir``), as Hydra reads it."""
    output_dir = str(OmegaConf.select(config, job_dir_key))
    if job_subdir_key is not None:
        subdir = str(OmegaConf.select(config, job_subdir_key))
        output_dir = os.path.join(output_dir, subdir)
    return output_dir


def _changes_dir(chdir: bool | None) -> bool:
    """Whether the job runs in its output folder (``hydra.job.chdir``; unset: Hydra's default for
    the app's ``version_base``, with Hydra's warning before 1.2)."""
    from hydra import version

    deprecation_warning = hydra_private.run_job_helpers()[3]
    if chdir is None and version.base_at_least("1.2"):
        chdir = False
    if chdir is None:
        url = "https://hydra.cc/docs/1.2/upgrades/1.1_to_1.2/changes_to_job_working_dir/"
        deprecation_warning(
            message=dedent(
                f"""\
                Future Hydra versions will no longer change working directory at job runtime by default.
                See {url} for more information."""
            ),
            stacklevel=3,
        )
        chdir = True
    return bool(chdir)
