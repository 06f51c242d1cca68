"""The captured training step (``model.compile=step``): each neural ranker's step -- its batch made
from the step's inputs, the forward pass, the loss, the backward pass, the optimiser's step -- as
compiled graphs with static shapes that never wait for the device, so that a GPU replays the
step whole (CUDA graphs) instead of launching its kernels one by one.

- The forward pass and the loss are one ``torch.compile(fullgraph=True)`` region: a graph break
  there is an error, not a silent fallback. ``loss.backward()`` cannot sit inside such a region;
  AOTAutograd compiles the backward pass from the same graph.
- The optimiser's step is compiled on its own, as PyTorch's compiled-optimizer recipe does, with
  its learning rate in a tensor (:func:`tensor_lr`): the epoch's schedule fills the tensor in
  place, so a new rate is not a new graph.
- Random numbers: drawn inside the graph from the default generator (dropout, noise), or drawn
  outside it by the batches and passed in (a ``torch.Generator`` argument would break the graph).
- Inductor's settings come from the config (``model.compile_options``, per device type) through
  ``torch.compile(options=...)``.

Uncompiled (``torch.compiler.set_stance("force_eager")``) the same functions run eagerly: the
reference the compiled step is tested against.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Literal

import torch
from torch import Tensor

from ltr_bench.config.util import Option, plain
from ltr_bench.errors import UserError

CompileMode = Literal["off", "scorer", "step"]
COMPILE_VALUES = "false, true (the scorer) or step (the whole training step)"


def parse_compile(value: Any, key: str = "model.compile") -> CompileMode:
    """``model.compile``: false (eager), true (the scorer's forward) or ``step`` (the step)."""
    text = str(plain(value)).strip().lower()
    if value is None or value is False or text in ("false", "off"):
        return "off"
    if value is True or text in ("true", "scorer"):
        return "scorer"
    if text == "step":
        return "step"
    raise UserError(f"{key}={value!r} must be {COMPILE_VALUES}")


def flat_options(node: Any, prefix: str = "") -> dict[str, Any]:
    """Nested config mappings as inductor's dotted option names (``{triton: {cudagraphs: true}}``
    -> ``{"triton.cudagraphs": True}``), which a command line can override key by key."""
    out: dict[str, Any] = {}
    for key, value in (plain(node) or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_options(value, f"{name}."))
        else:
            out[name] = value
    return out


def step_options(options: Any, device_type: str, key: str = "model.compile_options") -> dict:
    """The inductor options of a step on ``device_type`` from ``model.compile_options`` (a
    mapping of device types to options); a one-sentence :class:`UserError` for another shape."""
    node = plain(options) or {}
    if not isinstance(node, Mapping) or not all(isinstance(v, Mapping) for v in node.values()):
        raise UserError(
            f"{key} must map device types to inductor options, e.g. "
            "{cpu: {}, cuda: {triton: {cudagraphs: true}}}"
        )
    return flat_options(node.get(device_type, {}))


def tensor_lr(option: Option, device: torch.device) -> Option:
    """The optimizer option with its learning rate as a tensor on ``device`` (a compiled step
    recompiles at every new Python float; a tensor the schedule fills in place it does not).

    On CUDA an optimiser that takes ``capturable`` (Adam, AdamW) gets ``capturable=True``: its
    step counter then stays on the device, with no wait for it, compiled or not."""
    params = dict(option.params)
    takes = inspect.signature(option.target).parameters
    lr = float(params.get("lr", takes["lr"].default if "lr" in takes else 1e-3))
    params["lr"] = torch.tensor(lr, dtype=torch.float32, device=device)
    if device.type == "cuda" and "capturable" in takes:
        params["capturable"] = True
    return dataclasses.replace(option, params=params)


class TrainStep:
    """One training step of a module: ``step(inputs)`` runs ``loss_of(inputs)`` (forward and
    loss), the backward pass and ``optimizer``'s step; returns the detached loss.

    The gradients are cleared before the forward pass (where a captured step's outputs are
    still its own), and with CUDA graphs each step is marked as a new one, so a replay never
    reads a buffer that the step before overwrote.
    """

    def __init__(
        self,
        loss_of: Callable[[Any], Tensor],
        optimizer: torch.optim.Optimizer,
        options: Mapping[str, Any],
    ) -> None:
        self.optimizer = optimizer
        self.options = dict(options)
        # static shapes: one graph per batch shape (list batches take two), never a dynamic one
        #: the forward pass and the loss, compiled as one graph
        self.forward_loss = torch.compile(
            loss_of, fullgraph=True, dynamic=False, options=self.options or None
        )

        def optimizer_step() -> None:
            optimizer.step()

        #: the optimiser's step, uncompiled and compiled
        self.optimizer_step_fn = optimizer_step
        self.optimizer_step = torch.compile(optimizer_step, options=self.options or None)
        self._mark_steps = bool(self.options.get("triton.cudagraphs"))

    def __call__(self, inputs: Any) -> Tensor:
        if self._mark_steps:
            torch.compiler.cudagraph_mark_step_begin()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.forward_loss(inputs)
        loss.backward()
        self.optimizer_step()
        return loss.detach()
