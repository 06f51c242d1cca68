"""A run's tags: machine facts, dataset facts and MLflow's standard fields.

Facts about where and how a run ran are tags, not params (params are the config's choices, see
:mod:`ltr_bench.tracking.params`): the host and machine keys (:func:`machine_tags`), a dataset's
description (:func:`data_tags`), MLflow's run context with the git commit (:func:`context_tags`),
the command line (:func:`command_line`, a run's description) and the id one ``ltr-bench`` command
shares across its jobs (:func:`invocation_id`).
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.tracking.params import flatten_config

log = logging.getLogger(__package__)


def _package_checkout() -> Path | None:
    """The folder holding the package, if it is a git checkout itself (has ``.git``), so an
    installed wheel inside some other repository tags no foreign commit."""
    repo_dir = Path(__file__).resolve().parents[2]
    return repo_dir if (repo_dir / ".git").exists() else None


def _git(repo_dir: str | os.PathLike[str], *args: str) -> str | None:
    """The stripped output of ``git -C repo_dir <args>``, or None (no git, or git failed)."""
    try:
        res = subprocess.run(
            ["git", "-C", str(repo_dir), *args], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


_CHECKOUT: dict[tuple[str, ...], str | None] = {}  # git's answers about the package's checkout


def _checkout_fact(*args: str) -> str | None:
    """``git <args>`` in the package's checkout, asked once per process: the code a process runs
    is the code it imported, so every run it tags names the same commit, in ``ltr.git_commit``
    and in MLflow's ``mlflow.source.git.commit`` alike, though the checkout moves on meanwhile
    (and a sweep worker's jobs start no ``git`` each)."""
    if args not in _CHECKOUT:
        repo_dir = _package_checkout()
        _CHECKOUT[args] = None if repo_dir is None else _git(repo_dir, *args)
    return _CHECKOUT[args]


def git_commit(repo_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The checked-out git commit of ``repo_dir``, or None; by default the package's checkout's,
    as this process first read it (:func:`_checkout_fact`)."""
    if repo_dir is None:
        return _checkout_fact("rev-parse", "HEAD")
    return _git(repo_dir, "rev-parse", "HEAD")


def git_branch(repo_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The checked-out branch of ``repo_dir`` (default: the package's checkout, as this process
    first read it); None when detached or outside git."""
    args = ("symbolic-ref", "--short", "-q", "HEAD")
    return _checkout_fact(*args) if repo_dir is None else _git(repo_dir, *args)


def machine_tags(cfg: DictConfig) -> dict[str, str]:
    """Facts about the machine rather than choices (threads, data paths, host name, hardware and
    software versions: :func:`ltr_bench.machine.facts.facts`), as tags."""
    import socket

    from ltr_bench.machine import facts as machine

    accelerator = OmegaConf.select(cfg, "trainer.accelerator", default=None)
    out = keys.fact_tags(machine.facts(accelerator, cfg.get("threads")))
    out[keys.TAG_HOST] = socket.gethostname()
    for key in keys.MACHINE_KEYS:
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        if value is not None:
            out[keys.TAG_MACHINE_PREFIX + key] = str(value)
    return out


def data_tags(facts: Mapping[str, Any]) -> dict[str, str]:
    """A dataset's description (sizes, paths, generator settings) as ``ltr.data.*`` tags."""
    return {keys.TAG_DATA_PREFIX + k: v for k, v in flatten_config(facts).items()}


# ------------------------------------------------------------------------- MLflow's own fields
def command_line() -> str:
    """The command that reproduces this job: ``ltr-bench <overrides>``; for a job of a multirun,
    its own overrides, followed by the command that started the multirun."""
    import shlex
    import sys

    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if prog in ("cli.py", "__main__.py", "-c", "-m"):
        prog = "ltr-bench"
    started = " ".join([prog, *map(shlex.quote, sys.argv[1:])])
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
            job = [o for o in HydraConfig.get().overrides.task]
            return f"{prog} {' '.join(map(shlex.quote, job))}\n\n(a job of: {started})"
    except Exception:  # noqa: BLE001 - a description is never worth failing a run
        pass
    return started


_CONTEXT: dict[str, str] | None = None


def context_tags() -> dict[str, str]:
    """MLflow's standard run tags from its run-context registry (``mlflow.user``,
    ``mlflow.source.name`` / ``.type``, plus any installed context-provider plugin), computed
    once per process, and the git commit and branch of the package's checkout.

    MLflow's own git provider is left out: it imports GitPython (half a second or more per
    process) to read what two ``git`` calls give, and it looks at the console script, which lives
    in a virtual environment that git ignores, so it found nothing for ``ltr-bench`` anyway."""
    global _CONTEXT
    if _CONTEXT is None:
        from mlflow.tracking.context.git_context import GitRunContext
        from mlflow.tracking.context.registry import resolve_tags

        try:
            skip: list[Any] = [
                GitRunContext
            ]  # classes, as MLflow's code wants (its hint: instances)
            tags = {k: str(v) for k, v in resolve_tags({}, ignore=skip).items()}
        except Exception as exc:  # noqa: BLE001 - context is a convenience
            log.debug("MLflow run context not resolved: %s", exc)
            tags = {}
        for key, value in (
            (keys.MLFLOW_GIT_COMMIT, git_commit()),
            (keys.MLFLOW_GIT_BRANCH, git_branch()),
        ):
            if value:
                tags[key] = value
        _CONTEXT = tags
    return dict(_CONTEXT)


def invocation_id() -> str:
    """One id per ``ltr-bench`` command: every job of a multirun (also in launcher worker
    processes) shares it, as they share Hydra's sweep folder. Filter on it to see what one
    command made (tag ``ltr.invocation``)."""
    import hashlib

    root = None
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.initialized():
            hc = HydraConfig.get()
            root = hc.sweep.dir if hc.mode == RunMode.MULTIRUN else hc.run.dir
            root = str(Path(hc.runtime.cwd) / str(root))
    except Exception:  # noqa: BLE001
        root = None
    if root is None:
        root = os.environ.setdefault("LTR_BENCH_INVOCATION", f"{os.getpid()}-{os.urandom(4).hex()}")
    return hashlib.sha1(root.encode()).hexdigest()[:10]
