"""Where a neural ranker computes: the device of its fit, scoring there afterwards, and the
opt-in ``torch.compile`` of its scorer (the captured training step is
:mod:`ltr_bench.models.train_step`).

Lightning moves a module back to the CPU when a fit ends; :func:`scoring_device` and
:func:`place` bring the scorer back to the device it was trained on, so ``score()`` runs there in
large batches (one host-to-device copy of the features, one copy of the scores back). A CPU fit
stays on the CPU and touches nothing of CUDA.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import torch
from torch import nn

from ltr_bench.errors import UserError
from ltr_bench.machine.gpu_share import out_of_memory_message, share_from_environment

#: C++ compilers torch.compile's CPU backend can use (it also needs C for the GPU's launchers)
CXX_COMPILERS = ("c++", "g++", "clang++")


def compile_unavailable() -> str | None:
    """Why ``torch.compile`` cannot run in this process (None when it can).

    Inductor builds C++ kernels on the CPU (and small C launchers for Triton on a GPU), so it
    needs a compiler on ``PATH``; Dynamo itself is missing on some Python versions.
    """
    dynamo_ok = getattr(getattr(torch, "_dynamo", None), "is_dynamo_supported", lambda: True)
    if not dynamo_ok():
        return f"torch.compile does not support this Python with torch {torch.__version__}"
    names = [os.environ.get("CXX", ""), *CXX_COMPILERS]
    if not any(n and shutil.which(n) for n in names):
        return (
            f"torch.compile needs a C++ compiler and none of {', '.join(CXX_COMPILERS)} "
            "(or $CXX) is on PATH"
        )
    return None


def check_compile(mode: str) -> None:
    """A one-sentence :class:`UserError` when ``model.compile`` (``scorer`` for true, or
    ``step``) cannot work here; ``off`` asks for nothing."""
    reason = compile_unavailable() if mode != "off" else None
    if reason is not None:
        value = "true" if mode == "scorer" else mode
        raise UserError(
            f"model.compile={value} cannot work here: {reason}; install a compiler "
            "(e.g. apt-get install g++) or set model.compile=false"
        )


def compile_in_place(module: nn.Module) -> nn.Module:
    """``module.compile()``: its forward runs compiled (built at the first call, per input
    shape and device); its parameters and ``state_dict`` keys are untouched, so saving,
    loading and the best-epoch copy work as without it."""
    module.compile()
    return module


def apply_memory_share(device: torch.device) -> None:
    """Cap this process at the share of its GPU's memory that a sweep's launcher gave it
    (:mod:`ltr_bench.machine.gpu_share`), so the trials sharing the GPU keep theirs; nothing on
    the CPU or in a run of its own."""
    given = share_from_environment()
    if device.type == "cuda" and given is not None:
        torch.cuda.set_per_process_memory_fraction(given[0], device)


def out_of_memory_error(device: torch.device) -> UserError:
    """The one-sentence error for a fit that ran out of GPU memory (its share, if it had one)."""
    given = share_from_environment()
    total = None
    if device.type == "cuda" and torch.cuda.is_available():
        total = torch.cuda.get_device_properties(device).total_memory / 2**30
    share, workers = given if given is not None else (None, 1)
    return UserError(out_of_memory_message(share, total, workers))


def fit_device(trainer: Any) -> torch.device:
    """The device a Lightning ``Trainer`` trained on (its strategy's root device)."""
    return torch.device(trainer.strategy.root_device)


def scoring_device(trained_on: torch.device | None) -> torch.device:
    """Where to score: the device of the fit when this process can still use it, else the CPU.

    Asks CUDA only when the fit ran on CUDA (a CPU run never initialises it)."""
    if trained_on is None or trained_on.type == "cpu":
        return torch.device("cpu")
    if trained_on.type == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu")
    return trained_on


def place(module: nn.Module, device: torch.device) -> nn.Module:
    """Move ``module`` to ``device`` unless it is there already (a no-op on the CPU after a CPU
    fit)."""
    first = next(module.parameters(), None)
    if first is not None and first.device != device:
        module.to(device)
    return module
