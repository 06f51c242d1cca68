"""Hardware and software facts of the machine a run executes on, so run times can be compared.

Every run records them as tags (``ltr.hw.*``, ``ltr.sw.*``, and the one-line summary
``ltr.hardware`` the report groups times by) and in ``results.json``. Collection is cheap and
cached per process: CPU facts come from ``/proc`` and psutil, versions from package metadata,
GPU facts from ``torch.cuda`` only when the run itself uses CUDA; otherwise from ``nvidia-smi``
when it exists (a subprocess), so a CPU run never initialises CUDA in its own process.
Imports nothing of ltr_bench: every layer may use it.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

NONE = "none"
PACKAGES = ("torch", "lightning", "lightgbm", "optuna", "mlflow")
CUDA_ACCELERATORS = ("gpu", "cuda")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else the platform's processor string)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def physical_cores() -> int | None:
    """Physical cores (psutil; else distinct (socket, core) pairs in ``/proc/cpuinfo``)."""
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
        if n:
            return int(n)
    except ImportError:
        pass
    cores: set[tuple[str, str]] = set()
    socket = core = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    socket = value.strip()
                elif key == "core id":
                    core = value.strip()
                    cores.add((socket, core))
    except OSError:
        return None
    return len(cores) or None


def memory_bytes() -> int | None:
    """Total physical memory in bytes."""
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


@functools.cache
def package_versions() -> dict[str, str]:
    """Python's and the heavy libraries' versions (from package metadata, nothing imported)."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = NONE
    return out


def _gpus_from_torch() -> dict[str, Any]:
    """GPU facts through ``torch.cuda`` (initialises CUDA: only for runs that use it)."""
    import torch

    if not torch.cuda.is_available():
        return {}
    n = torch.cuda.device_count()
    props = [torch.cuda.get_device_properties(i) for i in range(n)]
    return {
        "gpu_count": n,
        "gpu_model": ", ".join(sorted({p.name for p in props})) or NONE,
        "gpu_memory_gib": round(sum(p.total_memory for p in props) / n / 2**30, 1) if n else 0,
    }


def _gpus_from_nvidia_smi() -> dict[str, Any]:
    """GPU facts from ``nvidia-smi`` (another process; nothing of CUDA in this one)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    query = "--query-gpu=name,memory.total,driver_version"
    try:
        out = subprocess.run(
            [exe, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    rows = [r for r in rows if len(r) == 3]
    if not rows:
        return {}
    memory = [float(r[1]) for r in rows if r[1].replace(".", "", 1).isdigit()]
    return {
        "gpu_count": len(rows),
        "gpu_model": ", ".join(sorted({r[0] for r in rows})),
        "gpu_memory_gib": round(sum(memory) / len(memory) / 1024, 1) if memory else NONE,
        "cuda_driver": rows[0][2],
    }


def torch_cuda_version() -> str | None:
    """The CUDA version the installed torch was built for (``torch.version.cuda``; None: a CPU
    build or no torch). Read from ``torch/version.py`` where the process has not loaded torch,
    so a run without torch (LambdaMART, AdaRank) does not import it for this fact."""
    if "torch" in sys.modules:
        return sys.modules["torch"].version.cuda
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    try:
        value = _assigned_literal(folder / "version.py", "cuda")
    except (OSError, SyntaxError, ValueError):
        return None
    return str(value) if value else None


def _assigned_literal(path: Path, name: str) -> Any:
    """The literal a Python file assigns to ``name`` at its top level (None if it does not)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return ast.literal_eval(value)
    return None


@functools.cache
def gpu_facts(use_cuda: bool = False) -> dict[str, Any]:
    """GPU model, count, memory (GiB per GPU), driver and torch's CUDA version; "none"/0 without.

    ``use_cuda``: the run asked for a CUDA device, so ``torch.cuda`` may be asked; it is
    initialised (device properties) only where ``nvidia-smi`` is missing.
    """
    facts: dict[str, Any] = {"gpu_count": 0, "gpu_model": NONE, "gpu_memory_gib": 0}
    facts["cuda"] = torch_cuda_version() or NONE
    facts["cuda_driver"] = NONE
    smi = _gpus_from_nvidia_smi()
    facts.update(smi)
    if not use_cuda:
        return facts
    import torch

    if not smi:
        facts.update(_gpus_from_torch())
    elif torch.cuda.is_available():
        # the GPUs this process may use (CUDA_VISIBLE_DEVICES), counted without a CUDA context
        facts["gpu_count"] = torch.cuda.device_count()
    return facts


@functools.cache
def _static_facts() -> dict[str, Any]:
    memory = memory_bytes()
    return {
        "host": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu_model": cpu_model(),
        "cpus_logical": os.cpu_count() or 0,
        "cpus_physical": physical_cores() or 0,
        "memory_gib": round(memory / 2**30, 1) if memory else 0,
    }


def facts(accelerator: str | None = None, threads: int | None = None) -> dict[str, Any]:
    """All facts of this machine for a run on ``accelerator`` with ``threads`` (torch's count).

    Keys: host, os, cpu_model, cpus_logical, cpus_physical, memory_gib, threads, accelerator,
    gpu_count, gpu_model, gpu_memory_gib, cuda, cuda_driver, versions (a dict), hardware (the
    one-line summary).
    """
    if threads is None:
        import torch

        threads = torch.get_num_threads()  # the caller's count where it has one: no import
    out = dict(_static_facts())
    out["threads"] = int(threads)
    out["accelerator"] = str(accelerator or "cpu")
    out.update(gpu_facts(str(accelerator or "cpu").lower() in CUDA_ACCELERATORS))
    out["versions"] = dict(package_versions())
    out["hardware"] = hardware_summary(out)
    return out


def hardware_summary(f: dict[str, Any]) -> str:
    """One line naming what decides a run time: CPU, cores, memory, GPUs (and threads used).

    E.g. ``AMD EPYC, 2 logical/2 physical cores, 23.5 GiB, no GPU, 2 threads, on cpu``. Runs with
    different summaries have times that must not be averaged together.
    """
    gpu = (
        f"{f['gpu_count']} x {f['gpu_model']} ({f['gpu_memory_gib']} GiB)"
        if int(f.get("gpu_count") or 0)
        else "no GPU"
    )
    return (
        f"{f['cpu_model']}, {f['cpus_logical']} logical/{f['cpus_physical']} physical cores, "
        f"{f['memory_gib']} GiB, {gpu}, {f['threads']} threads, on {f.get('accelerator', 'cpu')}"
    )
