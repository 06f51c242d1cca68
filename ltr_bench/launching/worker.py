"""What runs inside a worker process of :class:`~ltr_bench.launching.launcher.PoolLauncher`: its
warm-up when it starts, and each job, run as Hydra's own launchers run one (Hydra's example
launcher plugin, the joblib launcher): Hydra's globals and singletons, the job's config composed
by Hydra's config loader, its job number, then Hydra's ``run_job``."""

from __future__ import annotations

import gc
import logging
import os
import pickle
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)


def start(
    pids: Any,
    on_start: str | None,
    names: Sequence[str],
    slots: Any = None,
    share: tuple[int, Sequence[str], float | None, float] | None = None,
) -> None:
    """A worker's initializer: report its pid (``pids``, a queue: the launcher ends its workers
    by pid), take its number from ``slots`` and with it its GPU and memory share (``share``:
    workers, GPUs, share, headroom; :func:`~ltr_bench.machine.gpu_share.worker_environment`),
    call the app's ``on_start`` hook, then import each object or module of ``names`` (a name
    that does not import is left for the job to report). The objects alive then (the
    libraries, for the worker's life) are frozen out of garbage collection, so the collector's
    passes during the jobs do not traverse them all."""
    from hydra.utils import get_method, get_object

    from ltr_bench.machine.gpu_share import worker_environment

    pids.put(os.getpid())
    if slots is not None and share is not None:
        os.environ.update(worker_environment(slots.get(), *share))
    try:
        if on_start:
            get_method(on_start)()
    except Exception as e:  # noqa: BLE001 - a warm-up only saves time; the job reports errors
        log.warning("sweep.on_worker_start=%s failed: %s", on_start, e)
    for name in names:
        try:
            get_object(name)
        except Exception as e:  # noqa: BLE001 - a warm-up only saves time; the job reports errors
            log.debug("warm-up import of %s failed: %s", name, e)
    gc.freeze()


def ready() -> int:
    """A no-op call that starts a worker (and its warm-up) ahead of the first job; its pid."""
    return os.getpid()


def run(idx: int, overrides: Sequence[str], payload: bytes) -> Any:
    """Run one job; its ``JobReturn``, without the job's two configs (Hydra wrote them into the
    job's ``.hydra`` folder; once Hydra has searched for its plugins again in this process, their
    structured configs' classes are not the ones pickle finds). ``payload``: the launcher's Hydra
    context, sweep config and task function, and Hydra's singleton state, pickled once for every
    job of the launcher."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals
    from omegaconf import open_dict

    hydra_context, config, task_function, singleton_state = pickle.loads(payload)
    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    ret = run_job(
        hydra_context=hydra_context,
        config=sweep_config,
        task_function=task_function,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )
    ret.cfg = ret.hydra_cfg = None
    return ret
