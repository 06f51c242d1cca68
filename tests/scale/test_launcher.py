"""Local parallel trials through the project's ``ltr_pool`` launcher, chosen by config alone.

A real ``ltr-bench -m`` Optuna sweep whose two trials the launcher keeps in flight in its worker
processes: both succeed, each job's torch threads are capped at cores / n_jobs (``threads=null``),
and both log to the one SQLite MLflow store the parallel jobs create together.
"""

from __future__ import annotations

import os
from pathlib import Path

import optuna
import pytest
import yaml

from ltr_bench import tracking_keys as keys
from tests.scale.cli import TINY, ltr_bench, results
from tests.waiting import TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)


@pytest.mark.heavy
def test_the_pool_launcher_runs_two_trials_in_parallel_with_threads_capped(tmp_path: Path) -> None:
    proc = ltr_bench(
        tmp_path,
        "-m",
        "hydra/sweeper=ltr_optuna",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.study_name=pool",
        "hydra.sweeper.n_jobs=2",
        "hydra/launcher=ltr_pool",
        "hydra.launcher.n_jobs=2",
        "model.dropout=choice(0.0,0.2)",
        "protocol.inner_cv=2",
        *TINY,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    (record,) = (tmp_path / "multirun").glob("*/*/multirun.yaml")
    launcher = yaml.safe_load(record.read_text())["hydra"]["launcher"]
    assert launcher["_target_"].endswith("LtrPoolLauncher") and launcher["n_jobs"] == 2

    # Both trials complete, each grid point once.
    study = optuna.load_study(
        study_name="pool", storage=f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'pool.db'}"
    )
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(t.params["model.dropout"] for t in done) == [0.0, 0.2]

    # threads=null resolved per job to the cores divided by the launcher's n_jobs.
    jobs = results(tmp_path)
    assert sorted(r["config"]["sweep"]["trial_number"] for r in jobs) == [0, 1]
    expected = max(1, (os.cpu_count() or 1) // 2)
    assert [r["config"]["threads"] for r in jobs] == [expected, expected]
    assert {r["objective"] for r in jobs} == {t.value for t in done}

    # Both parallel jobs logged into the one store they created together.
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ltr_bench")
    runs = client.search_runs([exp.experiment_id])
    trials = [r for r in runs if r.data.tags[keys.TAG_ROLE] == keys.ROLE_TRIAL]
    assert len(trials) == 2 and {r.info.status for r in trials} == {"FINISHED"}
    assert {r.data.tags["ltr.threads"] for r in trials} == {str(expected)}  # a machine fact: a tag
