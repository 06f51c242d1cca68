"""Parallel sweeps: trials in flight in warm workers (no batch barrier) and the reproducible mode.

With ``hydra/launcher=ltr_pool`` and ``hydra.sweeper.n_jobs=2`` the sweeper keeps two trials in
flight and starts the next as soon as one ends; ``hydra.sweeper.asynchronous=false`` and any
other launcher (joblib) run batches (the slowest trial of a batch holds its partner's worker). ``hydra.sweeper.reproducible=true``
runs fixed batches whose pruning sees earlier batches only: the same seed gives the same trials
however the jobs are timed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.sweeper.pruners import PRUNE_ODD, pythonpath_with_repo
from tests.sweeper.toy import calls, complete, load, reasons, run_toy
from tests.waiting import TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

IN_FLIGHT = [
    "hydra/launcher=ltr_pool",
    "hydra.launcher.n_jobs=2",
    "hydra.sweeper.n_jobs=2",
]


def _ok(proc) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]


def _url(tmp_path: Path, name: str) -> str:
    return f"sqlite:///{tmp_path / 'multirun' / 'optuna' / f'{name}.db'}"


def test_a_pruned_trial_frees_its_worker_while_its_partner_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial 0 holds its worker until three jobs have run: trial 1 (pruned after its first step)
    and trial 2 on the worker trial 1 freed. A batch of two would wait for trial 0 before asking
    trial 2, so trial 0 would hold for ever (``hydra.sweeper.asynchronous=false``: it fails on the
    toy's hang guard)."""
    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    proc = run_toy(
        tmp_path,
        *IN_FLIGHT,
        "hydra.sweeper.study_name=flight",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=4",
        "steps=3",
        *PRUNE_ODD,
        "hold_trial=0",
        "hold_until_calls=3",
    )
    _ok(proc)
    trials = load(_url(tmp_path, "flight"), "flight")
    states = {t.number: t.state for t in trials}
    assert states == {
        0: TrialState.COMPLETE,
        1: TrialState.PRUNED,
        2: TrialState.COMPLETE,
        3: TrialState.PRUNED,
    }
    records = calls(tmp_path)
    # trial 0 completed, so trials 1 and 2 wrote their records while it held its worker
    assert {r["trial"] for r in records[:3]} == {0, 1, 2}
    assert {r["trial"]: r["steps"] for r in records}[1] == 1
    assert len({r["pid"] for r in records}) == 2  # two workers, not the sweeper
    # trial 1 told as its job ended, and trial 2 asked on the freed worker, before trial 0 ended
    # (whether trial 2 or the released trial 0 is told first is up to the machine: not checked)
    done = {t.number: t.datetime_complete for t in trials}
    started = {t.number: t.datetime_start for t in trials}
    assert done[1] < done[0] and started[2] < done[0]


def test_a_worker_the_last_search_trials_leave_free_starts_re_evaluating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial 2, the search's last, holds its worker until a re-evaluation has run: once trials 0
    and 1 are done, trial 2 can push only one of them out of the top 2, so the other one's
    re-evaluation starts on the free worker (without that, trial 2 would hold for ever)."""
    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    proc = run_toy(
        tmp_path,
        *IN_FLIGHT,
        "hydra.sweeper.study_name=early",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.reevaluate.top_k=2",
        "hold_trial=2",
        "hold_until_calls=4",
    )
    _ok(proc)
    trials = {t.number: t for t in load(_url(tmp_path, "early"), "early")}
    locks = load(_url(tmp_path, "early"), "early:reevaluations")
    assert {t.state for t in trials.values()} == {TrialState.COMPLETE}
    first = min(locks, key=lambda t: t.datetime_start)
    assert first.datetime_start < trials[2].datetime_complete  # while trial 2 held its worker
    records = calls(tmp_path)
    assert [r["reevaluation"] for r in records].count(True) == 2
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert len(results["reevaluated"]) == 2


def _table(url: str, name: str) -> list[tuple]:
    """What a reproducible sweep must repeat: each trial's number, params, state, value, steps."""
    return [
        (t.number, t.params, t.state.name, t.value, dict(t.intermediate_values))
        for t in optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)
    ]


@pytest.mark.heavy  # two whole sweeps, each job delayed at random: the heavy set (CI) runs it
def test_a_reproducible_two_worker_sweep_repeats_its_trials_and_choice(tmp_path: Path) -> None:
    """The same 2-worker sweep twice, with jobs timed at random (``jitter_s``): successive halving
    over 3 steps and a raced re-evaluation decide on earlier batches only, so both runs hold the
    same trials (params, states, values, reported steps) and choose the same trial."""
    race = [
        "steps=3",
        "hydra/sweeper/pruner=successive_halving",
        "hydra.sweeper.pruner.reduction_factor=2",
        "hydra.sweeper.reevaluate.top_k=3",
        "hydra.sweeper.reevaluate.pruner={_target_:"
        "ltr_bench.sweeper.reevaluation.racing.PairedRacePruner,min_folds:2}",
    ]
    tables, results = [], []
    for run in ("a", "b"):
        folder = tmp_path / run
        folder.mkdir()
        proc = run_toy(
            folder,
            *IN_FLIGHT,
            *race,
            "hydra.sweeper.reproducible=true",
            "hydra.sweeper.study_name=rep",
            "hydra.sweeper.n_trials=10",
            "jitter_s=0.1",
            "lucky_x=0",
            "lucky_bonus=1.5",
        )
        _ok(proc)
        tables.append(_table(_url(folder, "rep"), "rep"))
        tables.append(_table(_url(folder, "rep"), "rep:reevaluations"))
        results.append(
            yaml.safe_load(
                (folder / "multirun" / "sweep" / "optimization_results.yaml").read_text()
            )
        )
    assert tables[0] == tables[2] and tables[1] == tables[3]
    assert {state for _, _, state, _, _ in tables[0]} >= {"COMPLETE", "PRUNED"}
    for key in ("best_trial", "best_value", "reevaluated", "n_pruned", "n_complete"):
        assert results[0][key] == results[1][key], key


def test_the_reproducible_pruner_sees_earlier_batches_only() -> None:
    from ltr_bench.sweeper.optuna_private import earlier_trials
    from ltr_bench.sweeper.search.pruning import EarlierTrialsOnly

    study = optuna.create_study(direction="maximize")
    for value in (0.1, 0.9, 0.5):
        trial = study.ask()
        trial.report(value, 1)
        study.tell(trial, value)
    view = earlier_trials(study, 2)
    assert [t.number for t in view.get_trials(deepcopy=False)] == [0, 1]
    assert [t.number for t in view.trials] == [0, 1]
    assert view.direction == study.direction

    class Remember(optuna.pruners.BasePruner):
        seen: list[int] = []

        def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
            Remember.seen = [t.number for t in study.get_trials(deepcopy=False)]
            return False

    pruner = EarlierTrialsOnly(Remember(), before=1)
    assert pruner.prune(study, study.get_trials(deepcopy=False)[2]) is False
    assert Remember.seen == [0]
    with pytest.raises(TypeError):
        EarlierTrialsOnly("median", before=1)  # type: ignore[arg-type]


def test_job_overrides_wrap_the_pruner_for_the_reproducible_mode() -> None:
    from ltr_bench.sweeper.job import make_pruner
    from ltr_bench.sweeper.search.pruning import EarlierTrialsOnly, job_overrides

    cfg = {"_target_": "optuna.pruners.MedianPruner", "n_startup_trials": 2}
    plain = job_overrides("sqlite:///x.db", cfg)
    assert plain[1] == "++sweep.pruner={_target_:optuna.pruners.MedianPruner,n_startup_trials:2}"
    wrapped = job_overrides("sqlite:///x.db", cfg, before=6)
    assert wrapped[1] == (
        "++sweep.pruner={_target_:ltr_bench.sweeper.search.pruning.EarlierTrialsOnly,before:6,"
        "pruner:{_target_:optuna.pruners.MedianPruner,n_startup_trials:2}}"
    )
    built = make_pruner(
        {
            "_target_": "ltr_bench.sweeper.search.pruning.EarlierTrialsOnly",
            "before": 6,
            "pruner": cfg,
        }
    )
    assert isinstance(built, EarlierTrialsOnly) and built.before == 6
    assert isinstance(built.pruner, optuna.pruners.MedianPruner)


def test_a_config_error_of_a_later_trial_in_flight_aborts_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a pool's first job is composed in the sweeper; a later trial whose config cannot be
    composed (a config group option that does not exist) fails in its worker and is as fatal."""
    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    proc = run_toy(
        tmp_path,
        *IN_FLIGHT,
        "hydra.sweeper.study_name=laterbad",
        "hydra.sweeper.n_trials=4",
        "hydra.sweeper.enqueue_trials=[{opt:sgd},{opt:nope}]",
        "opt=choice(sgd,nope)",
    )
    assert proc.returncode != 0 and "nope" in proc.stderr
    trials = load(_url(tmp_path, "laterbad"), "laterbad")
    assert [t.params["opt"] for t in trials[:2]] == ["sgd", "nope"]
    assert reasons(trials)[1] == "config_error"
    assert 1 not in {c["trial"] for c in calls(tmp_path)}  # no job ran the bad config


def test_the_workers_warm_up_before_their_first_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker calls ``sweep.on_worker_start`` and then imports ``sweep.warm_up`` once, as the
    sweep starts, ahead of the trials that then run in those same workers."""
    warm = tmp_path / "warm"
    warm.mkdir()
    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    monkeypatch.setenv("LTR_TEST_WARM_DIR", str(warm))
    monkeypatch.setenv("LTR_TEST_HOOK", "1")  # the marker is left only after the hook
    proc = run_toy(
        tmp_path,
        *IN_FLIGHT,
        "hydra.sweeper.study_name=warm",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=4",
        "+sweep.on_worker_start=tests.sweeper.worker_hook.started",
        "+sweep.warm_up=[tests.sweeper.warm_marker.MARK,no.such.module]",
    )
    _ok(proc)
    warmed = {int(p.name) for p in warm.iterdir() if p.suffix == ""}
    started = {int(p.stem) for p in warm.iterdir() if p.suffix == ".started"}
    ran = {r["pid"] for r in calls(tmp_path)}
    assert len(warmed) == 2 and started == warmed and ran <= warmed


@pytest.mark.parametrize("in_flight", [True, False])
def test_a_study_ends_in_a_warm_worker_when_its_jobs_run_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_flight: bool
) -> None:
    """The study's plots, trials table and ``sweep.on_study_end`` hook run in a worker that ran
    its jobs (its libraries are loaded there); without jobs in flight, in the sweeper."""
    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    monkeypatch.setenv("LTR_TEST_WARM_DIR", str(tmp_path))
    launch = IN_FLIGHT if in_flight else []
    proc = run_toy(
        tmp_path,
        *launch,
        "hydra.sweeper.study_name=ends",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.plots=[optimization_history,param_importances]",
        "+sweep.on_study_end=tests.sweeper.worker_hook.study_ended",
    )
    _ok(proc)
    record = json.loads((tmp_path / "study_end.json").read_text())
    assert record["study"] == "ends"
    assert record["files"] == ["optimization_history.png", "param_importances.png", "trials.csv"]
    job_pids = {c["pid"] for c in calls(tmp_path)}
    if in_flight:
        assert record["pid"] in job_pids and record["pid"] != os.getpid()
    else:
        assert record["pid"] == os.getpid()


def _in_workers_with_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *overrides: str
) -> None:
    """Run the toy sweep in two workers to the end; its hooks (tests.sweeper.worker_hook)
    leave their files in ``tmp_path``."""
    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    monkeypatch.setenv("LTR_TEST_WARM_DIR", str(tmp_path))
    _ok(run_toy(tmp_path, *IN_FLIGHT, *overrides))


def test_the_next_study_runs_while_a_study_ends_in_a_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With jobs in flight a study's end (plots, trials table, hook) does not hold the sweep: the
    first study's hook waits until a job of the second study has run, so the sweep ends only if
    that job ran meanwhile; the sweep still ends after both studies' ends."""
    _in_workers_with_hooks(
        tmp_path,
        monkeypatch,
        "hydra.sweeper.study_name=ends",
        "hydra.sweeper.study_per=[kind]",
        "kind=a,b",
        "hydra.sweeper.n_trials=2",
        "+sweep.on_study_end=tests.sweeper.worker_hook.study_ended_once_next_runs",
    )
    for study in ("ends-kind=a", "ends-kind=b"):
        record = json.loads((tmp_path / f"study_end-{study}.json").read_text())
        assert record["files"] == ["trials.csv"]  # the toy app's sweeps draw no plots
        assert record["pid"] != os.getpid()


def test_a_warm_worker_whose_first_job_grows_its_memory_keeps_running_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep's worker grows by hundreds of MB on its first job (data, libraries, the MLflow
    store); it keeps running jobs (a pool that replaced it would import everything again, cold).
    Every job runs in a warmed worker."""
    _in_workers_with_hooks(
        tmp_path,
        monkeypatch,
        "hydra.sweeper.study_name=grows",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=4",
        "grow_mb=400",
        "+sweep.on_worker_start=tests.sweeper.worker_hook.started",
    )
    warmed = {int(p.stem) for p in tmp_path.iterdir() if p.suffix == ".started"}
    ran = {r["pid"] for r in calls(tmp_path)}
    assert len(warmed) == 2 and ran <= warmed


def test_the_launchers_pool_without_warm_up_keys_still_runs(tmp_path: Path) -> None:
    """An app without ``sweep.warm_up`` (the toy) gets no warm-up and the same trials."""
    proc = run_toy(
        tmp_path, *IN_FLIGHT, "hydra.sweeper.study_name=cold", "hydra.sweeper.n_trials=2"
    )
    _ok(proc)
    assert len(load(_url(tmp_path, "cold"), "cold")) == 2


def test_the_joblib_launcher_runs_batches(tmp_path: Path) -> None:
    """Hydra's joblib launcher runs a batch and waits for all of it: the sweeper hands it batches
    of n_jobs and says that ``hydra/launcher=ltr_pool`` keeps trials in flight."""
    joblib = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.sweeper.n_jobs=2"]
    proc = run_toy(tmp_path, *joblib, "hydra.sweeper.study_name=jl", "hydra.sweeper.n_trials=4")
    _ok(proc)
    assert "hydra/launcher=ltr_pool keeps them in flight" in proc.stdout + proc.stderr
    assert len(complete(load(_url(tmp_path, "jl"), "jl"))) == 4
