"""Running the real ``ltr-bench`` command in a subprocess for the scale-out tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.waiting import HANG_GUARD_S

LTR_BENCH = str(Path(sys.executable).parent / "ltr-bench")
# Tiny synthetic data, one thread: each run costs little more than process start-up.
TINY = [
    "dataset.n_train=300",
    "dataset.n_vali=100",
    "dataset.n_test=200",
    "dataset.n_features=10",
    "dataset.docs_per_query=20",
    "model.epochs=2",
    "trainer.enable_progress_bar=false",
]


def env(**extra: str) -> dict[str, str]:
    """The test's environment with one BLAS thread and no inherited MLflow/Hydra settings."""
    out = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for var in (
        "HYDRA_FULL_ERROR",
        "MLFLOW_TRACKING_URI",
        "LOCAL_RANK",
        "RANK",
        "NODE_RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
    ):
        out.pop(var, None)
    out.update(extra)
    return out


def ltr_bench(cwd: Path, *args: str, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    """``ltr-bench <args>`` run in ``cwd`` (outputs/, multirun/ and mlflow.db land there)."""
    return subprocess.run(
        [LTR_BENCH, *args], cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout
    )


def results(root: Path) -> list[dict[str, Any]]:
    """Every ``results.json`` of an output folder below ``root`` (not MLflow's artifact copies)."""
    paths = sorted(p for p in root.rglob("results.json") if "mlruns" not in p.parts)
    return [json.loads(p.read_text()) for p in paths]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
