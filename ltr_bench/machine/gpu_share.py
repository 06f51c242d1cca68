"""Several trials on one GPU: each worker process of a sweep gets a GPU and a share of its memory.

One trial's steps leave a GPU mostly idle, so a sweep runs more workers than there are GPUs
(``hydra.launcher.n_jobs=4 trainer=gpu``). The launcher places worker ``i`` on GPU ``i mod
n_gpus`` and hands each worker its GPU and memory share in its environment
(:func:`worker_environment`); a run that trains on CUDA caps its process at that share
(``torch.cuda.set_per_process_memory_fraction``), so one trial cannot take the memory of the
others, and running out of it is one sentence (:func:`out_of_memory_message`), not a trace.

Pure functions of counts and the environment; nothing here touches CUDA.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

from ltr_bench.errors import UserError

#: the worker's share of its GPU's memory (a fraction in (0, 1])
SHARE_VAR = "LTR_BENCH_GPU_MEMORY_SHARE"
#: how many workers share the worker's GPU (for the sentence when the share runs out)
WORKERS_VAR = "LTR_BENCH_GPU_WORKERS"
SHARE_KEY = "hydra.launcher.gpu_memory_share"


def visible_gpus(environ: Mapping[str, str], counted: int) -> list[str]:
    """The GPUs this process may hand out: ``CUDA_VISIBLE_DEVICES`` when set (empty: none),
    else ``0 .. counted - 1`` (``counted``: what ``nvidia-smi`` lists)."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1"]
    return [str(i) for i in range(max(0, counted))]


def gpu_of_worker(index: int, n_gpus: int) -> int:
    """The GPU of worker ``index``: round robin, so the workers spread evenly."""
    return index % n_gpus


def workers_per_gpu(n_workers: int, n_gpus: int) -> int:
    """The most workers any GPU holds (round robin: the first GPUs hold one more)."""
    return math.ceil(n_workers / n_gpus) if n_gpus else 0


def memory_share(n_workers: int, n_gpus: int, share: float | None, headroom: float) -> float:
    """Each worker's share of its GPU's memory: ``share`` when given, else an equal part of what
    ``headroom`` leaves (CUDA contexts and the driver take memory outside the allocator's cap).

    >>> memory_share(4, 1, None, 0.1)
    0.225
    """
    if share is not None:
        if not 0 < float(share) <= 1:
            raise UserError(f"{SHARE_KEY}={share} must be in (0, 1], or null for an equal share")
        return float(share)
    if not 0 <= float(headroom) < 1:
        raise UserError(f"hydra.launcher.gpu_memory_headroom={headroom} must be in [0, 1)")
    return (1.0 - float(headroom)) / max(1, workers_per_gpu(n_workers, n_gpus))


def worker_environment(
    index: int, n_workers: int, gpus: Sequence[str], share: float | None, headroom: float
) -> dict[str, str]:
    """What worker ``index`` of ``n_workers`` adds to its environment before it imports CUDA:
    its GPU (``CUDA_VISIBLE_DEVICES``, when there are several to spread over), its memory share
    and how many workers share its GPU. Nothing without a GPU."""
    if not gpus:
        return {}
    env = {
        SHARE_VAR: repr(memory_share(n_workers, len(gpus), share, headroom)),
        WORKERS_VAR: str(workers_per_gpu(n_workers, len(gpus))),
    }
    if len(gpus) > 1:
        env["CUDA_VISIBLE_DEVICES"] = gpus[gpu_of_worker(index, len(gpus))]
    return env


def share_from_environment(environ: Mapping[str, str] | None = None) -> tuple[float, int] | None:
    """``(share, workers on the GPU)`` a launcher gave this process, or None (a run of its own
    has the whole GPU)."""
    environ = os.environ if environ is None else environ
    if SHARE_VAR not in environ:
        return None
    return float(environ[SHARE_VAR]), int(environ.get(WORKERS_VAR, "1"))


def out_of_memory_message(share: float | None, total_gib: float | None, workers: int) -> str:
    """The one sentence for a run that ran out of GPU memory, with what to change."""
    if share is None:
        return (
            "the GPU ran out of memory; lower model.batch_size (or the model's size), or free "
            "the GPU of other processes"
        )
    of = f" of {total_gib:.1f} GiB" if total_gib else ""
    return (
        f"the GPU ran out of this worker's memory share ({100 * share:.0f} %{of}, {workers} "
        f"workers on the GPU); run fewer workers per GPU (hydra.launcher.n_jobs), give each a "
        f"larger share ({SHARE_KEY}) or lower model.batch_size"
    )
