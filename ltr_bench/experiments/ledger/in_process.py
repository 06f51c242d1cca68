"""An experiment invocation run inside the calling process instead of a new ``ltr-bench`` one.

A new process pays its imports (Hydra, MLflow, Lightning: seconds) and its MLflow client before
any work; a small run (``scale=quick``) is mostly that. Here the invocation's config is composed
with the running app's Hydra, its Hydra job config (task overrides, output folder) is put in place
for the call -- so the experiment sees the same overrides, invocation key and output folder as in
its own process -- and restored afterwards. Its printed output goes to the invocation's log.

Only for runs that are cheap to repeat: a crash or a leak in one invocation is the caller's, and an
interrupted ledger does not keep a half-run invocation apart from itself.
"""

from __future__ import annotations

import contextlib
import copy
import traceback
from pathlib import Path
from typing import IO

from omegaconf import DictConfig

EXIT_FAILED, EXIT_USER_ERROR = 1, 2


def run_in_process(args: list[str], out: Path, log: IO[str]) -> int:
    """``ltr-bench <args>`` (a single run selecting an experiment) in this process, output folder
    ``out``, printed output into ``log``; returns the exit code the command would have had."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict, read_write

    from ltr_bench.errors import UserError, find_in_chain
    from ltr_bench.experiments.common import run_experiment
    from ltr_bench.runner import job_context

    mine = [a for a in args if not a.lstrip("+~").startswith("hydra.")]
    holder = HydraConfig.instance()
    saved = holder.cfg
    cwd = job_context().cwd
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            cfg = _compose(mine)
            with open_dict(cfg):
                cfg.hydra.runtime.output_dir = str(out)
                cfg.hydra.runtime.cwd = str(cwd)
                cfg.hydra.mode = RunMode.RUN
            holder.set_config(cfg)
            task = copy.deepcopy(cfg)
            with read_write(task), open_dict(task):
                del task["hydra"]
            out.mkdir(parents=True, exist_ok=True)
            run_experiment(task)
            return 0
        except Exception as exc:  # noqa: BLE001 - reported as the process's exit status would be
            found = find_in_chain(exc, UserError)
            if found is not None:
                print(f"ltr-bench: error: {found}", flush=True)
                return EXIT_USER_ERROR
            traceback.print_exc(file=log)
            return EXIT_FAILED
        finally:
            holder.cfg = saved
            log.flush()


def _compose(overrides: list[str]) -> DictConfig:
    """The run config of ``overrides`` with its ``hydra`` node, by the running app's Hydra (or,
    outside one, the project's ``conf/`` tree)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from ltr_bench.config.tree import config_dir

    if GlobalHydra.instance().is_initialized():
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)
