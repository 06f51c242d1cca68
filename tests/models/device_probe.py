"""Probes for the neural rankers' device path, shared by the CPU tests and the ``gpu`` tests.

:class:`Probe` records, at every training step, where the fit's tensors live (data, pair tables,
the batch, the parameters) and whether the data tensors stayed the same objects (copied once per
fit, not per step). It sees each step through the module's own ``on_train_batch_start``, which
both step loops call (Lightning's, and the module's own, :mod:`ltr_bench.models.step_loop`): a
callback with a per-step hook would make every probed fit take Lightning's loop. :func:`host_calls` records the calls by
which code hands a tensor to the host or a host array to torch (``.item()``, ``.cpu()``,
``float(t)``, ``torch.as_tensor``, ...) while the probe says the step loop is running.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch

import ltr_bench

PACKAGE = Path(ltr_bench.__file__).resolve().parent
#: tensor methods that hand a value to the host (a device sync on a GPU)
TO_HOST = ("item", "cpu", "numpy", "tolist", "__bool__", "__int__", "__float__")
#: torch functions that make a tensor from host data (a host-to-device copy for a GPU fit)
FROM_HOST = ("as_tensor", "tensor", "from_numpy")


class Probe(L.Callback):
    """Where the fit's tensors are, step by step; ``active`` is True inside the step loop (from
    the second step of an epoch to its validation, so the epoch's set-up is not counted).
    A callback for the epoch's edges; :func:`probed` calls :meth:`step` at every step."""

    def __init__(self) -> None:
        self.devices: set[torch.device] = set()
        self.fit_device: torch.device | None = None
        self.data_ptrs: dict[str, set[int]] = {}
        self.steps = 0
        self.active = False
        self.on_step: Any = None  # called with (trainer, module, batch) at every step

    def step(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self.fit_device = torch.device(trainer.strategy.root_device)
        tensors = [t for t in batch if isinstance(t, torch.Tensor)]
        tensors += list(pl_module.parameters())
        for name, t in pl_module._tensors.items():
            self.data_ptrs.setdefault(name, set()).add(t.data_ptr())
            tensors.append(t)
        sampler = getattr(pl_module, "sampler", None)
        if sampler is not None:
            tensors += list(sampler._t.values())
        self.devices |= {t.device for t in tensors}
        self.steps += 1
        self.active = batch_idx >= 1
        if self.on_step is not None:
            self.on_step(trainer, pl_module, batch)

    def on_validation_start(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.active = False  # validation ends the epoch's steps (once per epoch)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        self.active = False


def probed(cls: type, probe: Probe) -> type:
    """A subclass of the ranker class ``cls`` whose fits run with ``probe`` among the callbacks
    and its module's ``on_train_batch_start`` reporting every step to ``probe``."""

    class Probed(cls):  # type: ignore[misc, valid-type]
        def _trainer_kwargs(self, callbacks: list[Any], *args: Any) -> dict[str, Any]:
            return super()._trainer_kwargs([*callbacks, probe], *args)

        def build_module(self, *args: Any) -> Any:
            module = super().build_module(*args)
            hook = module.on_train_batch_start

            def on_train_batch_start(batch: Any, batch_idx: int) -> Any:
                probe.step(module.trainer, module, batch, batch_idx)
                return hook(batch, batch_idx)

            module.on_train_batch_start = on_train_batch_start
            return module

    Probed.__name__ = f"Probed{cls.__name__}"
    return Probed


def _caller_file() -> str:
    frame = sys._getframe(2)  # 0: this function, 1: the wrapper, 2: the code that called it
    return frame.f_code.co_filename


@contextlib.contextmanager
def host_calls(probe: Probe, calls: list[tuple[str, str]]) -> Iterator[None]:
    """Record ``(what, file)`` of every :data:`TO_HOST` / :data:`FROM_HOST` call made while
    ``probe.active``, by code of the ltr_bench package (relative path)."""
    saved: list[tuple[Any, str, Any, bool]] = []

    def wrap(owner: Any, name: str) -> None:
        original = getattr(owner, name)
        own = name in vars(owner)  # else inherited: deleted again afterwards

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if probe.active:
                where = Path(_caller_file()).resolve()
                if where.is_relative_to(PACKAGE):
                    calls.append((name, str(where.relative_to(PACKAGE))))
            return original(*args, **kwargs)

        saved.append((owner, name, original, own))
        setattr(owner, name, wrapper)

    for name in TO_HOST:
        wrap(torch.Tensor, name)
    for name in FROM_HOST:
        wrap(torch, name)
    try:
        yield
    finally:
        for owner, name, original, own in reversed(saved):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
