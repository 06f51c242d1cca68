"""Checks shared by the XGBoost and CatBoost ranker tests: toy data, the MLflow model round trip,
the missing-extra message through the CLI, the GPU rule and the no-torch import check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import DictConfig, OmegaConf

from ltr_bench.data.queryset import QuerySet
from ltr_bench.machine import accelerators
from ltr_bench.metrics import evaluate
from tests.inprocess import run_ltr_bench
from tests.models.neural_toy import linear_queries

ON_CPU_ONLY = accelerators.available() == {"cpu": 1}


def toy_splits() -> tuple[QuerySet, QuerySet, QuerySet]:
    """Train, vali and test queries with grades 0..2 of one noisy linear score."""
    cuts = (0.6, 0.95)
    return (
        linear_queries(60, 0, cuts=cuts),
        linear_queries(30, 1, cuts=cuts),
        linear_queries(40, 2, cuts=cuts),
    )


def ndcg10(scores: np.ndarray, data: QuerySet) -> float:
    return float(evaluate(scores, data, names=("ndcg@10",)).means["ndcg@10"])


def random_ndcg10(data: QuerySet) -> float:
    return ndcg10(np.random.default_rng(0).random(data.n_docs), data)


def compose(*overrides: str) -> DictConfig:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ltr_bench.cli.main import config_dir

    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    OmegaConf.set_struct(cfg, False)
    return cfg


def one_line_error(proc: Any, needle: str) -> str:
    """The run stopped with exit 2 and one ``ltr-bench: error:`` line containing ``needle``."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("ltr-bench: error: ") and needle in lines[0], lines[0]
    return str(lines[0])


def missing_extra_stops_the_cli(
    model: str, package: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``package`` unimportable, ``ltr-bench model=<model>`` says which extra to install
    (exit 2, one line) before any run is recorded."""
    monkeypatch.setitem(sys.modules, package, None)  # `import package` raises ImportError
    proc = run_ltr_bench(f"model={model}", "threads=1", cwd=tmp_path)
    line = one_line_error(proc, f"model={model} needs the {package} package")
    assert "pip install 'ltr_bench[gbdt]'" in line
    assert not (tmp_path / "mlflow.db").exists()


def pyfunc_scores_as_the_run(model_overrides: list[str], tmp_path: Path, mp: Any) -> Any:
    """One tracked run on tiny synthetic data; the MLflow pyfunc model of its fold scores the raw
    test documents as the run scored them (to 1e-6). Returns the loaded pyfunc model."""
    import mlflow

    from tests.test_saved_model import compose_cfg, frame, run_capturing_test

    cfg = compose_cfg(tmp_path, *model_overrides)
    result, run_scores, raw_test = run_capturing_test(cfg, mp)
    mlflow.set_tracking_uri(str(cfg.tracking.tracking_uri))
    try:
        model = mlflow.pyfunc.load_model(f"runs:/{result.folds[0].mlflow_run_id}/model")
    finally:
        mlflow.set_tracking_uri(None)
    kept = model._model_impl.pipeline.evaluation_data(raw_test)
    np.testing.assert_allclose(model.predict(frame(kept)), run_scores, rtol=0, atol=1e-6)
    return model


def gpu_rule(
    model: str, monkeypatch: pytest.MonkeyPatch, capsys: Any, build: Any
) -> tuple[Any, Any]:
    """The rule of docs/guides/scaling-out.md with one pretend CUDA device: a GPU request goes to
    the library when ``build(True)`` says it can use it, else one line and the CPU; a CPU run
    never asks. ``build(flag)`` makes the library's GPU probe answer ``flag`` (None: fail if
    asked). Returns the rankers built for the granted and the refused request."""
    from hydra.utils import instantiate

    monkeypatch.setattr(accelerators, "available", lambda: {"cpu": 1, "cuda": 1})
    accelerators._said.clear()
    build(True)
    cfg = compose(f"model={model}", "trainer=gpu")
    assert accelerators.resolve(cfg) == "cuda" and capsys.readouterr().err == ""
    on_gpu = instantiate(cfg.model)
    build(False)
    cfg = compose(f"model={model}", "trainer=gpu")
    assert accelerators.resolve(cfg) == "cpu" and cfg.trainer.accelerator == "cpu"
    assert capsys.readouterr().err.strip().splitlines() == [
        f"ltr-bench: model={model} has no GPU path here (trainer.accelerator=gpu); "
        "it runs on the CPU"
    ]
    on_cpu = instantiate(cfg.model)
    build(None)
    assert accelerators.resolve(compose(f"model={model}")) == "cpu"
    return on_gpu, on_cpu


def refused_without_a_gpu(model: str, tmp_path: Path) -> None:
    """On a machine without GPUs a GPU request stops the run before any data (exit 2)."""
    proc = run_ltr_bench(
        f"model={model}",
        "trainer.accelerator=gpu",
        "dataset=mq2008",
        "dataset.root=/no/such/dir",
        cwd=tmp_path,
    )
    line = one_line_error(proc, "trainer.accelerator=gpu asks for a GPU, but this machine has none")
    assert "dataset.root" not in line


def imports_no_torch(module: str, cls: str, kwargs: str) -> None:
    """Fitting and scoring ``cls`` from ``module`` imports neither torch nor Lightning (the
    models package's own ``__init__`` is bypassed: it lists the neural rankers too)."""
    code = f"""
import pathlib, sys, types
import ltr_bench
pkg = types.ModuleType("ltr_bench.models")
pkg.__path__ = [str(pathlib.Path(ltr_bench.__file__).parent / "models")]
sys.modules["ltr_bench.models"] = pkg
from {module} import {cls}
from ltr_bench.data.synthetic import make_synthetic
data = make_synthetic(200, n_features=4, docs_per_query=10, seed=0)
{cls}({kwargs}).fit(data, data).score(data)
print(sorted(m for m in ("torch", "lightning", "mlflow") if m in sys.modules))
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
