"""The cluster path: a racing sweep through Hydra's submitit launcher (``submitit_local``).

Submitit's local executor starts each job as a process of its own and pickles the task to it, as
SLURM would: each job reports its folds into its trial from there, and returns its result to the
sweeper through submitit's result file. Every trial completes or is pruned, the study and MLflow
hold them, and ``refit_best`` reads the sweep.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ltr_bench import tracking_keys as keys
from tests.scale.cli import LTR_BENCH, TINY, env
from tests.sweeper.pruners import PRUNE_ODD, pythonpath_with_repo
from tests.waiting import HANG_GUARD_S, TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="hydra-submitit-launcher")

N_TRIALS = 4


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``ltr-bench <args>`` in ``cwd``; the sweep's jobs import the test pruner from the checkout."""
    return subprocess.run(
        [LTR_BENCH, *args],
        cwd=cwd,
        env=env(PYTHONPATH=pythonpath_with_repo()),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


@pytest.mark.heavy
def test_a_racing_sweep_through_submitit_local_then_refit_best(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    common = [
        "model=lambdamart",
        "threads=1",
        "protocol.inner_cv=2",
        *(o for o in TINY if not o.startswith("model.")),
    ]
    proc = _run(
        tmp_path,
        "-m",
        "search=lambdamart",
        "hydra/launcher=submitit_local",
        f"hydra.sweeper.n_trials={N_TRIALS}",
        "hydra.sweeper.reevaluate.top_k=0",
        # a deterministic race: odd trials are stopped after their first inner fold
        *PRUNE_ODD,
        f"hydra.sweep.dir={sweep_dir}",
        *common,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    launcher = yaml.safe_load((sweep_dir / "multirun.yaml").read_text())["hydra"]["launcher"]
    assert launcher["_target_"].endswith("LocalLauncher")

    # Each job ran as its own process (submitit's job id is the local process's id).
    job_ids = {p.name for p in (sweep_dir / ".submitit").iterdir() if p.name.isdigit()}
    assert len(job_ids) == N_TRIALS and str(os.getpid()) not in job_ids

    # Every trial completed or was pruned (with its first fold's running mean); none failed.
    summary = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert (summary["n_complete"], summary["n_pruned"], summary["n_failed"]) == (2, 2, 0)
    study = optuna.load_study(study_name=summary["study_name"], storage=summary["storage"])
    states = {t.number: t.state for t in study.trials}
    assert states == {
        n: TrialState.PRUNED if n % 2 else TrialState.COMPLETE for n in range(N_TRIALS)
    }
    for t in study.trials:
        assert sorted(t.intermediate_values) == ([1] if t.number % 2 else [1, 2])

    # MLflow holds the sweep run and one run per trial, the pruned ones tagged so.
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ltr_bench")
    runs = client.search_runs([exp.experiment_id])
    trials = {
        int(r.data.tags[keys.TAG_TRIAL]): r
        for r in runs
        if r.data.tags[keys.TAG_ROLE] == keys.ROLE_TRIAL
    }
    assert sorted(trials) == list(range(N_TRIALS))
    assert {n for n, r in trials.items() if r.data.tags.get(keys.TAG_PRUNED) == "true"} == {1, 3}
    assert {r.data.tags[keys.TAG_STUDY] for r in trials.values()} == {summary["study_name"]}
    (sweep_run,) = [r for r in runs if r.data.tags[keys.TAG_ROLE] == keys.ROLE_SWEEP]

    # refit_best reads the sweep: the best trial's config, refit and tested once.
    proc = _run(tmp_path, f"refit_best={sweep_dir}", "seed=0", "refit_jobs=1", *common)
    assert proc.returncode == 0, proc.stderr[-3000:]
    refits = [
        r
        for r in client.search_runs([exp.experiment_id])
        if r.data.tags.get(keys.TAG_REFIT) == "true"
    ]
    assert len(refits) == 1
    (refit,) = refits
    assert refit.data.tags[keys.MLFLOW_PARENT] == sweep_run.info.run_id
    for key, value in summary["best_params"].items():
        assert refit.data.params[key] == str(value), key
    assert 0 < refit.data.metrics["test/ndcg_at_10"] <= 1
