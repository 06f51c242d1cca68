"""Where and how a job runs: Hydra's job context, threads, seeds and run-time bookkeeping."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

from ltr_bench.seeding import derive_seed


@dataclass
class JobContext:
    """Where the job runs: Hydra output dir, original working dir, chosen config options."""

    output_dir: Path | None
    cwd: Path
    choices: dict[str, str]


def job_context(output_dir: str | os.PathLike[str] | None = None) -> JobContext:
    """The Hydra job's context, or the current directory outside Hydra (tests, notebooks)."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        hc = HydraConfig.get()
        out = Path(output_dir or hc.runtime.output_dir)
        choices = {k: str(v) for k, v in hc.runtime.choices.items() if not k.startswith("hydra")}
        return JobContext(out, Path(hc.runtime.cwd), choices)
    return JobContext(Path(output_dir) if output_dir else None, Path.cwd(), {})


def parallel_jobs() -> int:
    """How many jobs of this multirun run at once (the launcher's ``n_jobs``; 1 otherwise)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return 1
    hydra_cfg: Any = HydraConfig.get()  # a DictConfig at run time
    n = OmegaConf.select(hydra_cfg, "launcher.n_jobs", default=None)
    if not isinstance(n, int) or n == 0:
        return 1
    cores = os.cpu_count() or 1
    return cores if n < 0 else min(n, cores)  # joblib: -1 = one job per core


def configure_threads(cfg: DictConfig) -> int:
    """Set torch's thread count from ``threads`` and write the number back, so ``${threads}`` in
    model configs (LightGBM ``n_jobs``) resolves to the same count. ``threads=null`` means all
    cores, shared among the jobs a parallel launcher runs at once."""
    import torch

    n = cfg.get("threads") or max(1, (os.cpu_count() or 1) // parallel_jobs())
    torch.set_num_threads(int(n))
    with open_dict(cfg):
        cfg.threads = int(n)
    return int(n)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (LightGBM gets ``seed`` through its model config)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def seed_for_repeat(seed: int, repeat: int) -> int:
    """The model seed of inner-CV repeat ``repeat``: ``seed`` itself for the first, then seeds
    derived from ``(seed, repeat)``, so repeats also average over training randomness."""
    if repeat == 0:
        return seed
    return derive_seed(seed, repeat, bits=31)


@contextmanager
def timer(times: dict[str, float], key: str) -> Iterator[None]:
    """Add the seconds the block takes to ``times[key]``."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        times[key] = times.get(key, 0.0) + time.perf_counter() - t0
