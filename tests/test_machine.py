"""ltr_bench.machine.facts: hardware and software facts on every run, without touching CUDA on a CPU run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ltr_bench import tracking_keys as keys
from ltr_bench.machine import facts as machine
from tests.inprocess import run_ltr_bench

TINY = [
    "dataset.n_train=100",
    "dataset.n_vali=40",
    "dataset.n_test=40",
    "dataset.n_features=5",
    "dataset.docs_per_query=10",
    "model.epochs=1",
    "trainer.enable_progress_bar=false",
    "threads=1",
]
HW_KEYS = (
    "cpu_model",
    "cpus_logical",
    "cpus_physical",
    "memory_gib",
    "threads",
    "accelerator",
    "gpu_count",
    "gpu_model",
    "gpu_memory_gib",
    "cuda",
    "cuda_driver",
)
SW_KEYS = ("python", "torch", "lightning", "lightgbm", "optuna", "mlflow")


def test_facts_name_cpu_memory_gpus_and_versions() -> None:
    f = machine.facts("cpu", 3)
    assert set(HW_KEYS) <= set(f) and set(f["versions"]) == set(SW_KEYS)
    assert f["threads"] == 3 and f["cpus_logical"] >= 1 and f["memory_gib"] > 0
    assert f["cpu_model"] and f["versions"]["torch"] != machine.NONE
    assert f["hardware"] == machine.hardware_summary(f) and "3 threads, on cpu" in f["hardware"]
    tags = keys.fact_tags(f)
    assert tags[keys.TAG_HARDWARE] == f["hardware"] and tags[keys.TAG_HOST] == f["host"]
    assert tags["ltr.hw.threads"] == "3" and tags["ltr.sw.mlflow"] == f["versions"]["mlflow"]


def test_summary_states_gpus_when_there_are_some() -> None:
    f = dict(machine.facts("cpu", 1), gpu_count=2, gpu_model="NVIDIA A100", gpu_memory_gib=40.0)
    f["accelerator"] = "cuda"
    assert "2 x NVIDIA A100 (40.0 GiB), 1 threads, on cuda" in machine.hardware_summary(f)


def _forbid_cuda(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every torch call that would initialise CUDA or move data to a GPU raise."""
    import torch

    calls: list[str] = []

    def forbidden(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} called on a CPU run")

        return call

    for name in (
        "_lazy_init",
        "init",
        "current_device",
        "set_device",
        "get_device_properties",
        "get_device_name",
        "synchronize",
        "mem_get_info",
        "memory_allocated",
    ):
        monkeypatch.setattr(torch.cuda, name, forbidden(f"torch.cuda.{name}"))
    monkeypatch.setattr(torch.Tensor, "cuda", forbidden("Tensor.cuda"))
    monkeypatch.setattr(torch.nn.Module, "cuda", forbidden("Module.cuda"))
    return calls


def test_default_run_records_the_machine_and_never_touches_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A default run (accelerator=cpu) places its module and tensors through the device paths,
    with every CUDA-initialising call forbidden; its fold run carries the facts as tags."""
    import mlflow
    import torch

    calls = _forbid_cuda(monkeypatch)
    proc = run_ltr_bench(*TINY, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert calls == [] and not torch.cuda.is_initialized()

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("ltr_bench")
    runs = {r.data.tags[keys.TAG_ROLE]: r for r in client.search_runs([exp.experiment_id])}
    expected = machine.facts("cpu", 1)
    for role in (keys.ROLE_FOLD, keys.ROLE_PROTOCOL):
        tags = runs[role].data.tags
        for k in HW_KEYS:
            assert tags[keys.TAG_HW_PREFIX + k] == str(expected[k]), (role, k)
        for k in SW_KEYS:
            assert tags[keys.TAG_SW_PREFIX + k] == expected["versions"][k], (role, k)
        assert tags[keys.TAG_HARDWARE] == expected["hardware"]
        assert tags["ltr.hw.gpu_count"] == "0" or torch.cuda.is_available()
    printed = next(x for x in proc.stdout.splitlines() if x.startswith("results: "))
    results = json.loads(Path(printed.split(" ", 1)[1]).read_text())
    assert results["machine"]["hardware"] == expected["hardware"]
    assert results["machine"]["versions"] == expected["versions"]


def test_gpus_are_read_from_nvidia_smi_without_cuda_in_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess

    out = "NVIDIA A100-SXM4-40GB, 40960, 535.104.05\nNVIDIA A100-SXM4-40GB, 40960, 535.104.05\n"
    monkeypatch.setattr(machine.shutil, "which", lambda exe: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(
        machine.subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=out, stderr=""),
    )
    calls = _forbid_cuda(monkeypatch)
    machine.gpu_facts.cache_clear()
    try:
        f = machine.gpu_facts(False)
    finally:
        machine.gpu_facts.cache_clear()
    assert f["gpu_count"] == 2 and f["gpu_model"] == "NVIDIA A100-SXM4-40GB"
    assert f["gpu_memory_gib"] == 40.0 and f["cuda_driver"] == "535.104.05" and calls == []


def test_torchs_cuda_version_is_read_from_its_file_where_torch_is_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run without torch (LambdaMART) records the same ``cuda`` fact as torch itself gives."""
    import importlib.util
    import sys

    import torch

    assert machine.torch_cuda_version() == torch.version.cuda  # loaded: torch's own
    folder = tmp_path / "torch"
    folder.mkdir()
    spec = importlib.util.spec_from_loader("torch", loader=None, is_package=True)
    assert spec is not None and spec.submodule_search_locations is not None
    spec.submodule_search_locations.append(str(folder))
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    for text, expected in [
        ("from typing import Optional\ncuda: Optional[str] = '12.8'\n", "12.8"),
        ("cuda = None\n", None),
        ("__version__ = '2.0'\n", None),
        ("cuda = (\n", None),  # not Python: no fact rather than a failed run
    ]:
        (folder / "version.py").write_text(text)
        assert machine.torch_cuda_version() == expected, text
