"""ltr_bench.machine.accelerators: GPU requests granted, refused (exit 2) or said to run on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf

from ltr_bench.errors import UserError
from ltr_bench.machine import accelerators
from tests.inprocess import run_ltr_bench

pytestmark = pytest.mark.skipif(
    accelerators.available() != {"cpu": 1}, reason="refusals are tested on a machine without GPUs"
)


def _compose(*overrides: str) -> DictConfig:
    from hydra import compose, initialize_config_dir

    from ltr_bench.cli.main import config_dir

    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    OmegaConf.set_struct(cfg, False)
    return cfg


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend the machine has one CUDA device (nothing here runs on it)."""
    monkeypatch.setattr(accelerators, "available", lambda: {"cpu": 1, "cuda": 1})
    accelerators._said.clear()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["trainer.accelerator=gpu"], "trainer.accelerator=gpu asks for a GPU, but this machine"),
        (["trainer=gpu"], "trainer.accelerator=gpu asks for a GPU"),
        (["trainer.accelerator=cuda", "trainer.devices=2"], "trainer.accelerator=cuda asks for"),
        (["model=lambdamart", "trainer.accelerator=gpu"], "trainer.accelerator=gpu asks for"),
        (["trainer.accelerator=quantum"], "trainer.accelerator=quantum is not an accelerator"),
    ],
)
def test_a_missing_accelerator_is_one_sentence_and_exit_2(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    proc = run_ltr_bench(*args, "dataset=mq2008", "dataset.root=/no/such/dir", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("ltr-bench: error: ") and needle in lines[0]
    assert "available: cpu" in lines[0] or "choose one of" in lines[0]
    # refused before any data: the missing dataset root would have been the error otherwise
    assert "dataset.root" not in lines[0] and not (tmp_path / "mlflow.db").exists()


def test_fewer_devices_than_asked_for_is_refused(one_gpu: None) -> None:
    assert accelerators.check_request("gpu", 1) == "cuda"
    assert accelerators.check_request("cuda", "auto") == "cuda"
    for devices in (2, "2", [0, 1], "0,1"):
        with pytest.raises(UserError, match=r"trainer.devices=.* but this machine has 1 "):
            accelerators.check_request("cuda", devices)
    with pytest.raises(UserError, match="trainer.accelerator=mps asks for a GPU"):
        accelerators.check_request("mps", 1)


def test_cpu_and_auto_are_granted_without_asking_the_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom() -> None:
        raise AssertionError("asked the machine")

    monkeypatch.setattr(accelerators, "available", boom)
    assert accelerators.check_request("cpu", 4) == "cpu"
    assert accelerators.check_request("auto", 2) == "auto"


def test_models_without_a_gpu_path_say_so_and_run_on_the_cpu(
    one_gpu: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented rule (docs/guides/scaling-out.md): one line on stderr, then the CPU; the config then
    records the device really used."""
    for model in ("adarank", "sortnet"):
        cfg = _compose(f"model={model}", "trainer=gpu")
        assert accelerators.resolve(cfg) == "cpu" and cfg.trainer.accelerator == "cpu"
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"ltr-bench: model={model} has no GPU path here (trainer.accelerator=gpu); "
            "it runs on the CPU"
        ]
    # said once per process (a sweep's jobs repeat it), not per run
    accelerators.resolve(_compose("model=adarank", "trainer=gpu"))
    assert capsys.readouterr().err == ""
    # a neural ranker keeps the request; Lightning places it
    cfg = _compose("trainer=gpu")
    assert accelerators.resolve(cfg) == "cuda" and cfg.trainer.accelerator == "gpu"
    assert capsys.readouterr().err == ""


def test_lambdamart_passes_a_gpu_request_to_lightgbm_when_built_for_it(
    one_gpu: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hydra.utils import instantiate

    monkeypatch.setattr(accelerators, "lightgbm_build", lambda device: device == "gpu")
    cfg = _compose("model=lambdamart", "trainer=gpu")
    assert accelerators.resolve(cfg) == "gpu" and capsys.readouterr().err == ""
    assert instantiate(cfg.model).device_type == "gpu"

    monkeypatch.setattr(accelerators, "lightgbm_build", lambda device: False)
    cfg = _compose("model=lambdamart", "trainer=gpu")
    assert accelerators.resolve(cfg) == "cpu" and instantiate(cfg.model).device_type == "cpu"
    assert "model=lambdamart has no GPU path here" in capsys.readouterr().err
    # no request, no probe: a CPU run never asks LightGBM about GPUs
    monkeypatch.setattr(accelerators, "lightgbm_build", None)
    assert accelerators.resolve(_compose("model=lambdamart")) == "cpu"


def test_lightgbm_build_is_known_without_a_gpu_and_device_type_reaches_lightgbm() -> None:
    """On this machine (no GPU): the probe answers, and a LambdaMART told to use a device its
    LightGBM was built for really asks LightGBM for it (which finds no device and says so)."""
    import lightgbm as lgb

    from ltr_bench.data.synthetic import make_synthetic
    from ltr_bench.models import LambdaMART

    builds = {d: accelerators.lightgbm_build(d) for d in accelerators.LIGHTGBM_GPU_DEVICES}
    assert all(isinstance(b, bool) for b in builds.values())
    data = make_synthetic(40, n_features=3, docs_per_query=10, seed=0)
    assert np.isfinite(LambdaMART(n_estimators=2).fit(data).score(data)).all()
    for device, built in builds.items():
        if built:
            with pytest.raises(lgb.basic.LightGBMError):
                LambdaMART(n_estimators=2, device_type=device).fit(data)
