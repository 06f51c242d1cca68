"""ltr_bench.machine.system_metrics: tracking.system_metrics=true samples MLflow's system metrics on the
runs that do work (fold, trial), including runs shorter than the sampling interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltr_bench import tracking_keys as keys
from ltr_bench.errors import UserError
from ltr_bench.machine.system_metrics import interval_from_config
from ltr_bench.tracking import Tracker
from tests.inprocess import run_ltr_bench
from tests.waiting import wait_until

CPU = "system/cpu_utilization_percentage"


def _tracker(tmp: Path, interval: float) -> Tracker:
    return Tracker.from_config(
        {
            "tracking_uri": "sqlite:///mlflow.db",
            "experiment_name": "t",
            "system_metrics": True,
            "system_metrics_interval_s": interval,
        },
        tmp,
    )


def test_the_switch_and_its_interval() -> None:
    assert interval_from_config({}) is None
    assert interval_from_config({"system_metrics": False}) is None
    assert interval_from_config({"system_metrics": True}) == 10
    assert interval_from_config({"system_metrics": True, "system_metrics_interval_s": 2}) == 2
    with pytest.raises(UserError, match="tracking.system_metrics_interval_s must be"):
        interval_from_config({"system_metrics": True, "system_metrics_interval_s": 0})


def test_fold_runs_are_sampled_while_they_run_and_once_at_the_end(tmp_path: Path) -> None:
    tracker = _tracker(tmp_path, 0.05)
    client = tracker.client
    with tracker.run("fold", {keys.TAG_ROLE: keys.ROLE_FOLD}) as rid:
        # the sampling thread's first logged sample (a state in the store)
        wait_until(lambda: CPU in client.get_run(rid).data.metrics, "a system metric", every_s=0.05)
        during = len(client.get_metric_history(rid, CPU))
    after = client.get_metric_history(rid, CPU)
    assert during >= 1 and len(after) >= during + 1  # the last sample, as the run ended
    assert all(0 <= m.value <= 100 for m in after)
    assert "system/system_memory_usage_megabytes" in client.get_run(rid).data.metrics


def test_a_run_shorter_than_the_interval_still_has_a_sample_and_containers_have_none(
    tmp_path: Path,
) -> None:
    tracker = _tracker(tmp_path, 3600)
    with tracker.run("protocol", {keys.TAG_ROLE: keys.ROLE_PROTOCOL}) as parent:
        with tracker.run("trial", {keys.TAG_ROLE: keys.ROLE_TRIAL}, parent_id=parent) as rid:
            pass
    assert CPU in tracker.client.get_run(rid).data.metrics
    assert not any(k.startswith("system/") for k in tracker.client.get_run(parent).data.metrics)


def test_a_default_run_with_the_switch_logs_system_metrics_on_its_fold_run(tmp_path: Path) -> None:
    import mlflow

    from tests.test_machine import TINY

    proc = run_ltr_bench(*TINY, "tracking.system_metrics=true", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("ltr_bench")
    runs = {r.data.tags[keys.TAG_ROLE]: r for r in client.search_runs([exp.experiment_id])}
    assert CPU in runs[keys.ROLE_FOLD].data.metrics
    assert not any(k.startswith("system/") for k in runs[keys.ROLE_PROTOCOL].data.metrics)
