"""The neural rankers on a CUDA GPU: placement, a step loop that never waits for the device,
bf16-mixed, DDP on one GPU over NCCL, and a model saved from a GPU fit scoring on the CPU.

Marked ``gpu`` and skipped without CUDA (CI has none); ``make gpu-check`` runs them on a GPU
machine (``benchmarks/gpu_check.py``). The CPU versions are ``tests/models/test_device_path.py``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from ltr_bench.models import DirectRanker, LambdaRank, ListNet
from ltr_bench.models.device import compile_unavailable
from tests.models.device_probe import Probe, probed
from tests.models.neural_toy import TINY, ndcg10, random_ndcg10, toy_splits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
RANKERS = [DirectRanker, ListNet, LambdaRank]
GPU = {"accelerator": "gpu", "devices": 1}


def fit(cls: type, *callbacks: L.Callback, **kwargs: Any) -> Any:
    """A fit of ``cls`` on the toy data on the GPU, with ``callbacks`` added to the trainer's
    (a :class:`Probe` through :func:`probed`, which also shows it every step)."""
    train, vali, _ = toy_splits()
    options = dict(TINY, epochs=2, early_stopping_patience=None, seed=0, trainer=GPU)
    options.update(kwargs)
    for probe in [c for c in callbacks if isinstance(c, Probe)]:
        cls = probed(cls, probe)
    callbacks = tuple(c for c in callbacks if not isinstance(c, Probe))

    class WithCallbacks(cls):  # type: ignore[misc, valid-type]
        def _trainer_kwargs(self, given: list[Any], *args: Any) -> dict[str, Any]:
            return super()._trainer_kwargs([*given, *callbacks], *args)

    return WithCallbacks(**options, enable_progress_bar=False).fit(train, vali)


@contextlib.contextmanager
def no_wait() -> Iterator[None]:
    """CUDA's sync debug mode set to raise: any operation that waits for the GPU fails."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


class StepGuard(L.Callback):
    """Runs every training step's forward pass and loss and every batch draw after an epoch's
    first under :func:`no_wait` (the first draw of an epoch copies its plan to the device,
    once), in Lightning's step loop and in the module's own alike."""

    def on_fit_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        loss, batches = pl_module.batch_loss, pl_module.train_batches

        def guarded_loss(*args: Any) -> Any:
            with no_wait():
                return loss(*args)

        def guarded_batches(*args: Any) -> Any:
            return _Guarded(batches(*args))

        pl_module.batch_loss = guarded_loss
        pl_module.train_batches = guarded_batches


class _Guarded:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.inner)
        first = next(it, None)
        if first is None:
            return
        yield first
        while True:
            with no_wait():
                batch = next(it, None)
            if batch is None:
                return
            yield batch


@pytest.mark.parametrize("cls", RANKERS, ids=lambda c: c.__name__)
def test_gpu_fit_tensors_live_on_the_gpu_and_scoring_runs_there(cls: type) -> None:
    probe = Probe()
    ranker = fit(cls, probe)
    assert probe.fit_device is not None and probe.fit_device.type == "cuda"
    assert probe.devices == {probe.fit_device}
    assert all(len(ptrs) == 1 for ptrs in probe.data_ptrs.values())  # one copy per fit
    _, _, test = toy_splits()
    scores = ranker.score(test)
    assert next(ranker.scorer_.parameters()).device == probe.fit_device
    assert ndcg10(scores, test) > random_ndcg10(test) + 0.2


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
@pytest.mark.parametrize("cls", RANKERS, ids=lambda c: c.__name__)
def test_gpu_step_loop_never_waits_for_the_device(cls: type, precision: str) -> None:
    probe = Probe()
    fit(cls, probe, StepGuard(), trainer=dict(GPU, precision=precision))
    assert probe.steps >= 8


def test_gpu_bf16_mixed_ranks_like_full_precision() -> None:
    _, _, test = toy_splits()
    full = fit(DirectRanker, epochs=12).score(test)
    mixed = fit(DirectRanker, epochs=12, trainer=dict(GPU, precision="bf16-mixed")).score(test)
    assert abs(ndcg10(mixed, test) - ndcg10(full, test)) <= 0.03


def test_gpu_ddp_on_one_gpu_runs_on_nccl() -> None:
    backends: list[str] = []
    probe = Probe()
    probe.on_step = lambda *_: backends.append(torch.distributed.get_backend())
    environ = dict(os.environ)
    try:
        ranker = fit(DirectRanker, probe, epochs=6, trainer=dict(GPU, strategy="ddp"))
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        os.environ.clear()
        os.environ.update(environ)
    assert backends and set(backends) == {"nccl"}
    _, _, test = toy_splits()
    assert ndcg10(ranker.score(test), test) > random_ndcg10(test) + 0.2


def test_gpu_saved_model_scores_on_the_cpu_like_on_the_gpu(tmp_path: Path) -> None:
    _, _, test = toy_splits()
    ranker = fit(DirectRanker, epochs=6)
    on_gpu = ranker.score(test)
    assert next(ranker.scorer_.parameters()).device.type == "cuda"
    ranker.save_params(tmp_path)
    loaded = DirectRanker(**TINY, trainer=GPU, seed=0)  # the saved config asked for a GPU
    loaded.load_params(tmp_path, test.n_features)
    on_cpu = loaded.score(test)
    assert next(loaded.scorer_.parameters()).device.type == "cpu"
    np.testing.assert_allclose(on_cpu, on_gpu, rtol=0, atol=1e-5)


@pytest.mark.skipif(compile_unavailable() is not None, reason=str(compile_unavailable()))
def test_gpu_compiled_scorer_ranks_like_eager() -> None:
    _, _, test = toy_splits()
    eager = fit(DirectRanker, compile=False).score(test)
    compiled = fit(DirectRanker, compile=True).score(test)
    np.testing.assert_allclose(compiled, eager, rtol=1e-3, atol=1e-4)
    assert abs(ndcg10(compiled, test) - ndcg10(eager, test)) <= 0.01
