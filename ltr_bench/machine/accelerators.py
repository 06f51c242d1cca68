"""GPU requests honoured or refused, never ignored: ``trainer.accelerator`` checked before any data.

:func:`resolve` runs at the start of every run. A request for an accelerator this machine lacks
(``trainer.accelerator=gpu`` without a GPU, ``trainer.devices=2`` with one) is a one-sentence
:class:`UserError` naming the key and what is available (exit 2). Otherwise the model's class
says which device it will really train on (``Ranker.device_for``): neural rankers take the
request as is; LambdaMART passes it to LightGBM (``device_type``) when LightGBM was built with
GPU support; a model without a GPU path (AdaRank, SortNet, LightGBM without a GPU build) says so
in one line and runs on the CPU. The device used is written back to ``trainer.accelerator``, so
tags, ``results.json`` and Table 3 state where the times came from.

Nothing here touches CUDA unless the run asks for an accelerator other than the CPU.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, open_dict

from ltr_bench.errors import UserError

GPU_REQUESTS = ("gpu", "cuda", "mps")  # what asks for a graphics processor
LIGHTGBM_GPU_DEVICES = ("cuda", "gpu")  # LightGBM's device_type values, preferred first
_said: set[str] = set()


def _registry() -> dict[str, Any]:
    """Lightning's accelerators by name (cpu, cuda, mps, tpu, ...) -> accelerator class."""
    from lightning.pytorch.accelerators import AcceleratorRegistry

    return {
        n: AcceleratorRegistry[n]["accelerator"]
        for n in AcceleratorRegistry.available_accelerators()
    }


def available() -> dict[str, int]:
    """Accelerators this machine has, with their device counts (``cpu`` always)."""
    out = {"cpu": 1}
    for name, cls in _registry().items():
        if name != "cpu" and cls.is_available():
            out[name] = int(cls.auto_device_count())
    return out


DEVICES_HINT = "a count >= 1, -1 (all), auto, or device indices such as [0,1]"


def _wanted_devices(devices: Any) -> tuple[int, str]:
    """How many devices ``trainer.devices`` needs (a list or "0,1": the highest index + 1;
    -1/auto: 1), and how to name them in a message; a :class:`UserError` for a value Lightning
    refuses (``trainer.devices=0``)."""
    text = str(devices).strip().replace(" ", "")
    if isinstance(devices, (list, tuple)) or "," in text or text.startswith("["):
        items = devices if isinstance(devices, (list, tuple)) else text.strip("[]").split(",")
        items = [str(i).strip() for i in items if str(i).strip()]
        if items and all(i.isdigit() for i in items):
            ids = [int(i) for i in items]
            return max(ids) + 1, f"devices {ids}"
    elif text.lower() == "auto" or text == "-1":
        return 1, "one device"
    elif text.isdigit() and int(text) > 0 and not isinstance(devices, bool):
        return int(text), f"{text} device{'s' if int(text) != 1 else ''}"
    raise UserError(f"trainer.devices={devices} is not a device request; give {DEVICES_HINT}")


def check_request(accelerator: str, devices: Any = 1) -> str:
    """The Lightning accelerator ``accelerator`` names on this machine (``gpu`` -> ``cuda`` or
    ``mps``); a :class:`UserError` when the machine lacks it or has fewer devices, or when
    ``devices`` is no device request at all (``0``).

    ``cpu`` and ``auto`` are always granted and touch nothing of CUDA.
    """
    name = str(accelerator).lower()
    n, what = _wanted_devices(devices)
    if name in ("cpu", "auto"):
        return name
    known = sorted({*_registry(), "gpu", "auto"})
    if name not in known:
        raise UserError(
            f"trainer.accelerator={accelerator} is not an accelerator Lightning knows; "
            f"choose one of [{', '.join(known)}]"
        )
    have = available()
    have_text = ", ".join(k if k == "cpu" else f"{k} x {v}" for k, v in have.items())
    target = name
    if name == "gpu":
        target = next((k for k in ("cuda", "mps") if k in have), "gpu")
    if target not in have:
        raise UserError(
            f"trainer.accelerator={accelerator} asks for "
            f"{'a GPU' if name in GPU_REQUESTS else name}, but this machine has none "
            f"(available: {have_text}); use trainer=cpu or trainer.accelerator=cpu"
        )
    if n > have[target]:
        raise UserError(
            f"trainer.devices={devices} asks for {what} of {target}, but this machine has "
            f"{have[target]} (available: {have_text}); lower trainer.devices"
        )
    return target


def say_once(message: str) -> None:
    """Print ``message`` as one line on stderr, once per process (runs of a sweep repeat it)."""
    if message not in _said:
        _said.add(message)
        print(f"ltr-bench: {message}", file=sys.stderr, flush=True)


def resolve(cfg: DictConfig) -> str:
    """Check the run's accelerator request and write the device it really uses back into
    ``trainer.accelerator`` (see the module docstring); returns it."""
    trainer = cfg.get("trainer")
    if not isinstance(trainer, DictConfig):
        return "cpu"
    requested = str(trainer.get("accelerator", "cpu"))
    granted = check_request(requested, trainer.get("devices", 1))
    device = _model_device(cfg, granted)
    if device != granted:
        if requested.lower() in GPU_REQUESTS and device == "cpu":
            model = cfg.model.get("name", "this model")
            say_once(
                f"model={model} has no GPU path here (trainer.accelerator={requested}); "
                "it runs on the CPU"
            )
        with open_dict(trainer):
            trainer.accelerator = device
    return device


def _model_device(cfg: DictConfig, granted: str) -> str:
    """The device the configured model trains on when ``granted`` is available."""
    target = cfg.get("model", {}).get("_target_")
    if not target:
        return granted
    from hydra.utils import get_class

    device_for = getattr(get_class(str(target)), "device_for", None)
    return str(device_for(granted)) if callable(device_for) else granted


# ------------------------------------------------------------------------------------ LightGBM
@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (LightGBM's C++ ``[Fatal]`` lines) for a probe."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@functools.cache
def lightgbm_build(device_type: str) -> bool:
    """Whether the installed LightGBM was built with ``device_type`` (``cuda`` or ``gpu``).

    Probed by training one tree on a tiny array: a build without it fails with "... was not
    enabled in this build", a build with it but no device fails otherwise (e.g. "No OpenCL device
    found"), so the build is known without a GPU. Cached per process.
    """
    import lightgbm as lgb
    import numpy as np

    x = np.arange(40, dtype=np.float64).reshape(20, 2)
    params = {"device_type": device_type, "verbose": -1, "num_iterations": 1, "num_threads": 1}
    try:
        with _quiet_stderr():
            lgb.train(params, lgb.Dataset(x, np.arange(20.0), params={"verbose": -1}))
    except lgb.basic.LightGBMError as exc:
        return "not enabled" not in str(exc)
    return True


def lightgbm_device(accelerator: str) -> str:
    """LightGBM's ``device_type`` for a granted accelerator: ``cuda`` or ``gpu`` (OpenCL) when a
    GPU was asked for and LightGBM was built with it, else ``cpu``."""
    if str(accelerator).lower() not in GPU_REQUESTS:
        return "cpu"
    return next((d for d in LIGHTGBM_GPU_DEVICES if lightgbm_build(d)), "cpu")
