"""MLflow's system metrics (CPU, memory, disk, network; GPU through NVIDIA's NVML where present)
sampled over the lifetime of the runs that do the work.

``tracking.system_metrics=true`` switches it on: each ``fold`` and ``trial`` run gets a sampling
thread (MLflow's ``SystemMetricsMonitor``, psutil; ``pynvml`` for GPUs) that logs
``system/cpu_utilization_percentage``, ``system/system_memory_usage_megabytes``, ... every
``tracking.system_metrics_interval_s`` seconds, plus one last sample when the run ends, so a run
shorter than the interval still has a value. The MLflow UI shows them on a run's "System metrics"
tab. Protocol and sweep runs only contain those runs and are not sampled twice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from ltr_bench import tracking_keys as keys
from ltr_bench.errors import UserError

SAMPLED_ROLES = (keys.ROLE_FOLD, keys.ROLE_TRIAL)
log = logging.getLogger(__name__)


def interval_from_config(tracking: Mapping[str, Any]) -> float | None:
    """The sampling interval in seconds when ``tracking.system_metrics`` is on, else None."""
    if not tracking.get("system_metrics", False):
        return None
    interval = tracking.get("system_metrics_interval_s", 10)
    try:
        seconds = float(interval)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise UserError(
            f"tracking.system_metrics_interval_s must be a number of seconds > 0, got {interval!r}"
        )
    if importlib.util.find_spec("psutil") is None:  # MLflow's monitor needs it
        raise UserError(
            "tracking.system_metrics=true needs psutil; install it (pip install psutil) or set "
            "tracking.system_metrics=false"
        )
    return seconds


@contextlib.contextmanager
def monitored(
    tracking_uri: str | None, run_id: str, interval_s: float | None, tags: Mapping[str, Any]
) -> Iterator[None]:
    """Sample system metrics into ``run_id`` while the block runs, if ``interval_s`` is set and
    the run's role (``tags``) is one that does work; a failing monitor never fails the run."""
    if interval_s is None or tags.get(keys.TAG_ROLE) not in SAMPLED_ROLES:
        yield
        return
    monitor = _start(tracking_uri, run_id, interval_s)
    try:
        yield
    finally:
        if monitor is not None:
            _finish(monitor)


def _start(tracking_uri: str | None, run_id: str, interval_s: float) -> Any:
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    try:
        monitor = SystemMetricsMonitor(
            run_id, sampling_interval=interval_s, tracking_uri=tracking_uri
        )
        monitor.start()
    except Exception as exc:  # noqa: BLE001 - the run's numbers matter more than its CPU curve
        log.warning("system metrics are not logged for run %s: %s", run_id, exc)
        return None
    return monitor


def _finish(monitor: Any) -> None:
    """Stop the sampling thread, then log one last sample (the run's tail) and flush."""
    try:
        monitor.finish()
        monitor.collect_metrics()
        monitor.publish_metrics(monitor.aggregate_metrics())
        monitor.mlflow_logger.flush()
    except Exception as exc:  # noqa: BLE001 - nor more than the curve's last sample
        log.warning("the last system-metrics sample was not logged: %s", exc)
