"""The measurements of ``benchmarks/gpu_check.py``: generated folds of a real data set's shape,
epochs per second of the neural rankers and LambdaMART's trees, fits of MQ2008's size, and a
small sweep whose runs must carry system metrics. Each returns plain rows for the page.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MSLR_LABEL_FREQ = [0.52, 0.32, 0.13, 0.02, 0.01]  # MSLR-WEB10K/30K grades 0..4, rounded
MQ2008_LABEL_FREQ = [0.77, 0.15, 0.08]  # MQ2008 grades 0..2, rounded


def shaped_fold(
    n_docs: int,
    n_features: int,
    mean_length: float,
    max_length: int,
    label_freq: list[float],
    seed: int,
) -> Any:
    """A generated :class:`QuerySet` of a LETOR set's shape: query lengths log-normal around
    ``mean_length`` (1 .. ``max_length``), standard-normal features, grades with ``label_freq``
    cut from a noisy linear score (so the rankers have something to learn)."""
    from ltr_bench.data.queryset import QuerySet

    rng = np.random.default_rng(seed)
    sigma = 0.8
    drawn = rng.lognormal(math.log(mean_length) - sigma**2 / 2, sigma, n_docs // 2 + 2)
    lengths = np.clip(np.rint(drawn), 1, max_length).astype(np.int64)
    ends = np.cumsum(lengths)
    n_queries = int(np.searchsorted(ends, n_docs)) + 1
    lengths = lengths[:n_queries]
    lengths[-1] = n_docs - (int(ends[n_queries - 2]) if n_queries > 1 else 0)
    x = rng.standard_normal((n_docs, n_features), dtype=np.float32)
    w = rng.standard_normal(n_features).astype(np.float32) / np.float32(math.sqrt(n_features))
    latent = x @ w + np.float32(0.7) * rng.standard_normal(n_docs, dtype=np.float32)
    labels = np.digitize(latent, np.quantile(latent, np.cumsum(label_freq)[:-1]))
    return QuerySet.from_arrays(x, labels, np.repeat(np.arange(n_queries), lengths))


def mslr_fold(n_docs: int, seed: int = 0) -> Any:
    """MSLR-WEB30K's shape: 136 features, ~120 documents per query (at most 1251), grades 0-4."""
    return shaped_fold(n_docs, 136, 120.0, 1251, MSLR_LABEL_FREQ, seed)


def mq2008_fold(n_docs: int, seed: int = 0) -> Any:
    """MQ2008's shape: 46 features, ~19 documents per query (at most 121), grades 0-2."""
    return shaped_fold(n_docs, 46, 19.0, 121, MQ2008_LABEL_FREQ, seed)


def build(model: str, accelerator: str, *overrides: str) -> Any:
    """The ranker of ``conf/model/<model>.yaml`` on ``accelerator`` (the project's own config)."""
    from ltr_bench.experiments.common import compose_run_config
    from ltr_bench.runner.pipeline import build_ranker

    cfg = compose_run_config(
        [
            f"model={model}",
            f"trainer.accelerator={accelerator}",
            "trainer.enable_progress_bar=false",
            *overrides,
        ]
    )
    return build_ranker(cfg)


def _gpu_peak_reset() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _gpu_peak_gib(accelerator: str) -> float | None:
    import torch

    if accelerator == "cpu" or not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_allocated() / 2**30


def _time_boxed(ranker: Any, seconds: float) -> list[int]:
    """Make ``ranker``'s fits end each epoch after ``seconds`` of steps (a LightningModule's
    ``on_train_batch_start`` returning -1 ends the epoch); returns the steps of each epoch."""
    steps: list[int] = []
    base = type(ranker)

    class TimeBoxed(base):  # type: ignore[misc, valid-type]
        def build_module(self, *args: Any) -> Any:
            module = super().build_module(*args)
            own_hook, began = module.on_train_batch_start, [0.0]

            def hook(batch: Any, batch_idx: int) -> Any:
                if batch_idx == 0:
                    began[0] = time.perf_counter()
                    steps.append(0)
                elif time.perf_counter() - began[0] > seconds:
                    return -1
                steps[-1] += 1
                return own_hook(batch, batch_idx)

            module.on_train_batch_start = hook
            return module

    ranker.__class__ = TimeBoxed
    return steps


def epochs_per_s(
    model: str, train: Any, accelerator: str, seconds: float, *overrides: str, epochs: int = 2
) -> dict[str, Any]:
    """Training speed of ``model`` (with config ``overrides``): ``epochs`` epochs cut after
    ``seconds`` of steps each; the last one's time per step, times the steps of a whole epoch, is
    the epoch time (extrapolated when the cut came first). The first epoch pays the warm-up
    (CUDA context, kernels, caches; with ``model.compile=step`` the compilation, and a list
    batch's second shape may compile in the second)."""
    fixed = (f"model.epochs={epochs}", "model.early_stopping_patience=null")
    ranker = build(model, accelerator, *fixed, *overrides)
    steps = _time_boxed(ranker, seconds)
    _gpu_peak_reset()
    start = time.perf_counter()
    ranker.fit(train)
    wall = time.perf_counter() - start
    per_epoch = len(ranker.module_.train_batches(0, 1))
    per_step = ranker.history[-1]["time_train_s"] / steps[-1]
    return {
        "model": model,
        "device": accelerator,
        "steps_timed": steps[-1],
        "steps_per_epoch": per_epoch,
        "ms_per_step": 1e3 * per_step,
        "epochs_per_s": 1.0 / (per_step * per_epoch),
        "fit_wall_s": wall,
        "gpu_peak_gib": _gpu_peak_gib(accelerator),
    }


def captured_steps(
    model: str, train: Any, accelerator: str, seconds: float, first: int = 30
) -> dict[str, Any]:
    """``model.compile=step``: its first ``first`` steps one by one (the device waited for after
    each, outside the step; on CUDA each step runs under ``torch.cuda.set_sync_debug_mode
    ("error")``, so a step that waits for the device fails the fit), then two epochs cut after
    ``seconds`` of steps for its speed (:func:`epochs_per_s`'s, from the last). The steps that
    pay for the capture: those slower than twice the median of the last ten first steps."""
    import torch

    cuda = accelerator != "cpu" and torch.cuda.is_available()
    times: list[float] = []
    fixed = ("model.epochs=3", "model.early_stopping_patience=null", "model.compile=step")
    ranker = build(model, accelerator, *fixed)
    steps = _time_boxed(ranker, seconds)
    timed = type(ranker)

    class FirstSteps(timed):  # type: ignore[misc, valid-type]
        def build_module(self, *args: Any) -> Any:
            module = super().build_module(*args)
            boxed = module.on_train_batch_start
            # end the first epoch before its last step (the debug mode must be off at its end)
            limit = min(first, max(1, len(module.step_batches(0, 1)) - 1))

            def hook(batch: Any, batch_idx: int) -> Any:
                if module.current_epoch > 0:
                    return boxed(batch, batch_idx)
                if cuda:
                    torch.cuda.set_sync_debug_mode(0)
                    torch.cuda.synchronize()
                times.append(time.perf_counter())
                if batch_idx >= limit:
                    return -1  # the first epoch ends here (sync debug mode off)
                if cuda:
                    torch.cuda.set_sync_debug_mode("error")
                return None

            module.on_train_batch_start = hook
            return module

    ranker.__class__ = FirstSteps
    row: dict[str, Any] = {"model": model, "device": accelerator, "sync_error": None}
    start = time.perf_counter()
    try:
        ranker.fit(train)
    except RuntimeError as err:  # a host sync under the debug mode, or a compile failure
        row["sync_error"] = " ".join(str(err).split())[:300]
        return row
    finally:
        if cuda:
            torch.cuda.set_sync_debug_mode(0)
    step_s = np.diff(times)
    steady = float(np.median(step_s[-10:])) if len(step_s) else math.nan
    slow = step_s > 2 * steady
    per_step = ranker.history[-1]["time_train_s"] / steps[-1]
    return {
        **row,
        "fit_wall_s": time.perf_counter() - start,
        "first_steps_ms": [round(1e3 * t, 3) for t in step_s],
        "capture_steps": int(slow.sum()),
        "capture_s": float((step_s[slow] - steady).sum()),
        "ms_per_step": 1e3 * per_step,
        "steps_timed": steps[-1],
        "steps_per_epoch": len(ranker.module_.step_batches(0, 1)),
        "epochs_per_s": 1.0 / (per_step * len(ranker.module_.step_batches(0, 1))),
    }


def lambdamart_trees(train: Any, device_type: str, trees: int, threads: int) -> dict[str, Any]:
    """LambdaMART's ``trees`` boosting rounds on ``device_type`` (LightGBM's cpu, gpu or cuda),
    the data's binning included; an error (no GPU build, no OpenCL device) is the row's note."""
    from ltr_bench.models.lambdamart import LambdaMART

    ranker = LambdaMART(
        n_estimators=trees,
        early_stopping_rounds=None,
        n_jobs=threads,
        device_type=device_type,
        seed=0,
    )
    start = time.perf_counter()
    try:
        ranker.fit(train)
    except Exception as exc:  # noqa: BLE001 - a GPU build without a usable device: say so, go on
        return {"device": device_type, "note": " ".join(str(exc).split())[:160]}
    wall = time.perf_counter() - start
    return {"device": device_type, "trees": trees, "fit_s": wall, "trees_per_s": trees / wall}


def small_fit(model: str, train: Any, vali: Any, accelerator: str, epochs: int) -> dict[str, Any]:
    """A whole fit of ``epochs`` epochs with validation on a small fold: its wall time and the
    part of it that is not the epochs themselves (start-up, data placement, scoring set-up)."""
    ranker = build(
        model, accelerator, f"model.epochs={epochs}", "model.early_stopping_patience=null"
    )
    start = time.perf_counter()
    ranker.fit(train, vali)
    wall = time.perf_counter() - start
    in_epochs = sum(h["time_epoch_s"] for h in ranker.history)
    return {
        "model": model,
        "device": accelerator,
        "epochs": len(ranker.history),
        "fit_s": wall,
        "epoch_s": in_epochs / max(len(ranker.history), 1),
        "fixed_s": wall - in_epochs,
    }


def sweep_data(n_train: int, epochs: int) -> list[str]:
    """The sweep's synthetic data (MQ2008's feature count) and model size."""
    return [
        f"dataset.n_train={n_train}",
        f"dataset.n_vali={n_train // 5}",
        f"dataset.n_test={n_train // 5}",
        "dataset.n_features=46",
        "dataset.docs_per_query=20",
        "dataset.sigma=0.5",
        "model.hidden_sizes=[32]",
        f"model.epochs={epochs}",
        "protocol.inner_cv=2",
    ]


def sweep_with_system_metrics(
    accelerator: str, trials: int, workers: int, data: list[str], interval_s: float = 1.0
) -> dict[str, Any]:
    """``ltr-bench -m`` with ``workers`` ltr_pool workers and ``trials`` trials on ``accelerator``,
    ``tracking.system_metrics=true``; then which system metrics each trial run carries."""
    cwd = Path(tempfile.mkdtemp(prefix="gpu_check_sweep_"))
    trainer = "gpu" if accelerator != "cpu" else "cpu"
    cmd = [sys.executable, "-m", "ltr_bench.cli.main", "-m", "hydra/sweeper=ltr_optuna"]
    cmd += [f"hydra.sweeper.n_trials={trials}", "optimizer.lr=interval(0.0005,0.01)"]
    cmd += [*data, f"trainer={trainer}", "trainer.enable_progress_bar=false"]
    cmd += ["hydra/launcher=ltr_pool", f"hydra.launcher.n_jobs={workers}"]
    cmd += [f"hydra.sweeper.n_jobs={workers}", "tracking.system_metrics=true"]
    cmd += [f"tracking.system_metrics_interval_s={interval_s}", "hydra.sweep.dir=sweep"]
    cmd += ["hydra.job_logging.root.level=WARNING", "hydra.hydra_logging.root.level=WARNING"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), _pythonpath()])))
    env.pop("MLFLOW_TRACKING_URI", None)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    out: dict[str, Any] = {
        "wall_s": wall,
        "returncode": proc.returncode,
        "folder": str(cwd),
        "workers": workers,
    }
    if proc.returncode != 0:
        out["error"] = proc.stderr[-2000:]
        return out
    out.update(_system_metrics(cwd / "mlflow.db"))
    out["trials_per_hour"] = 3600.0 * out["trial_runs"] / wall if wall > 0 else None
    return out


def _pythonpath() -> str:
    return os.environ.get("PYTHONPATH", "")


def _system_metrics(store: Path) -> dict[str, Any]:
    """Per trial run: which ``system/*`` metrics it has, and the highest GPU use and memory."""
    import mlflow

    from ltr_bench import tracking_keys as keys

    client = mlflow.MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("ltr_bench")
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    trials = [r for r in runs if r.data.tags.get(keys.TAG_ROLE) == keys.ROLE_TRIAL]
    gpu_keys = ("system/gpu_0_utilization_percentage", "system/gpu_0_memory_usage_megabytes")
    cpu_keys = ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes")

    def highest(run: Any, key: str) -> float | None:
        values = [m.value for m in client.get_metric_history(run.info.run_id, key)]
        return max(values) if values else None

    with_gpu = [r for r in trials if all(k in r.data.metrics for k in gpu_keys)]
    with_cpu = [r for r in trials if all(k in r.data.metrics for k in cpu_keys)]
    util = [v for r in with_gpu if (v := highest(r, gpu_keys[0])) is not None]
    memory = [v for r in with_gpu if (v := highest(r, gpu_keys[1])) is not None]
    return {
        "trial_runs": len(trials),
        "with_cpu_metrics": len(with_cpu),
        "with_gpu_metrics": len(with_gpu),
        "gpu_util_max_pct": max(util) if util else None,
        "gpu_memory_max_mb": max(memory) if memory else None,
    }
