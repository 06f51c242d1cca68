"""Where and how a job runs: Hydra's job context, threads, seeds and run-time bookkeeping."""

from __future__ import annotations

import os
import random
import sys
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


def resolve_threads(cfg: DictConfig) -> int:
    """Write the job's thread count into ``threads``, so ``${threads}`` in model configs (LightGBM
    ``n_jobs``) resolves to it. ``threads=null`` means all cores, shared among the jobs a parallel
    launcher runs at once."""
    n = cfg.get("threads") or max(1, (os.cpu_count() or 1) // parallel_jobs())
    with open_dict(cfg):
        cfg.threads = int(n)
    return int(n)


def configure_threads(cfg: DictConfig) -> int:
    """:func:`resolve_threads`, and set torch's thread count to it."""
    import torch

    n = resolve_threads(cfg)
    torch.set_num_threads(n)
    return n


def seed_everything(seed: int, *, torch_too: bool = True) -> None:
    """Seed Python, NumPy and (``torch_too``) torch (LightGBM gets ``seed`` through its model
    config)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if torch_too:
        import torch

        torch.manual_seed(seed)


def configure_loaded_torch(cfg: DictConfig) -> None:
    """Torch's thread count (``threads``) and seed (``seed``), where the job has loaded torch.

    A job calls this once its ranker is built: a neural ranker's module loads torch, and gets
    both before any torch work; a ranker without torch (LambdaMART, AdaRank, ...) never loads it,
    so its run skips torch's import.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(int(cfg.threads))
        torch.manual_seed(int(cfg.seed))


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
