"""Racing trials (``hydra.sweeper.pruner``): the toy app and the real app, end to end.

A pruned trial is PRUNED in the study with the running value it was stopped at, counts toward
``n_trials``, shows in trials.csv and the results' ``n_pruned``, is never the best and never
re-evaluated; jobs report through their trial from any process (joblib workers, other sweepers).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.sweeper.pruners import PRUNE_ODD, pythonpath_with_repo
from tests.sweeper.toy import FAIL_REASON, both_workers_run, calls, load, run_toy, start_toy
from tests.waiting import HANG_GUARD_S, TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

RACE = ["steps=3", "hydra/sweeper/pruner=median", "hydra.sweeper.pruner.n_startup_trials=2"]


def _ok(proc) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]


def _study(tmp_path: Path) -> tuple[str, list[optuna.trial.FrozenTrial]]:
    (db,) = (tmp_path / "multirun" / "optuna").glob("*.db")
    url = f"sqlite:///{db}"
    # the sweep's study; with re-evaluation also its claims study '<name>:reevaluations'
    (summary,) = [
        s
        for s in optuna.get_all_study_summaries(url)
        if not s.study_name.endswith(":reevaluations")
    ]
    return url, load(url, summary.study_name)


def _by_state(trials, state) -> list[optuna.trial.FrozenTrial]:
    return [t for t in trials if t.state == state]


def _check_pruned(trials, records, steps: int = 3) -> None:
    """Every pruned trial stopped early with its last running value as its value."""
    steps_of = {r["trial"]: r["steps"] for r in records if not r["reevaluation"]}
    for t in _by_state(trials, TrialState.PRUNED):
        assert t.intermediate_values, t
        last = max(t.intermediate_values)
        assert last == steps_of[t.number] < steps
        assert t.value == t.intermediate_values[last]
    for t in _by_state(trials, TrialState.COMPLETE):
        assert steps_of[t.number] == steps and sorted(t.intermediate_values) == list(
            range(1, steps + 1)
        )


def test_median_pruner_races_toy_trials_and_never_picks_or_reevaluates_a_pruned_one(
    tmp_path: Path,
) -> None:
    proc = run_toy(tmp_path, *RACE, "hydra.sweeper.n_trials=8", "hydra.sweeper.reevaluate.top_k=2")
    _ok(proc)
    url, trials = _study(tmp_path)
    pruned, complete = _by_state(trials, TrialState.PRUNED), _by_state(trials, TrialState.COMPLETE)
    # the study's progress line, as log lines (not a terminal), ends at the full budget
    assert f"8/8 trials, {len(pruned)} pruned, 0 failed, best " in proc.stdout + proc.stderr
    records = calls(tmp_path)
    assert pruned and len(pruned) + len(complete) == 8  # pruned trials use the budget
    _check_pruned(trials, records)
    # Median rule: a pruned trial was worse than the median of the trials completed before it.
    for t in pruned:
        before = [c.value for c in complete if c.datetime_complete < t.datetime_start]
        assert len(before) >= 2 and t.value < sorted(before)[len(before) // 2] + 1e-12
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert results["n_pruned"] == len(pruned) and results["n_complete"] == len(complete)
    assert results["pruner"] == "MedianPruner"
    assert results["best_trial"] in {t.number for t in complete}
    assert {r["trial"] for r in results["reevaluated"]} <= {t.number for t in complete}
    reevaluations = [r for r in records if r["reevaluation"]]
    assert len(reevaluations) == 2 and all(r["steps"] == 3 for r in reevaluations)  # never raced
    with open(tmp_path / results["artifacts_dir"] / "trials.csv") as f:
        rows = {int(r["number"]): r for r in csv.DictReader(f)}
    assert {n for n, r in rows.items() if r["state"] == "PRUNED"} == {t.number for t in pruned}


def test_a_resumed_sweep_with_pruned_trials_keeps_exact_counts(tmp_path: Path) -> None:
    _ok(run_toy(tmp_path, *RACE, "hydra.sweeper.n_trials=6"))
    _, first = _study(tmp_path)
    counted = _by_state(first, TrialState.PRUNED) + _by_state(first, TrialState.COMPLETE)
    assert len(counted) == 6
    _ok(run_toy(tmp_path, *RACE, "hydra.sweeper.n_trials=6"))  # nothing left to do
    assert len([r for r in calls(tmp_path)]) == 6
    _ok(run_toy(tmp_path, *RACE, "hydra.sweeper.n_trials=10"))
    _, trials = _study(tmp_path)
    pruned, complete = _by_state(trials, TrialState.PRUNED), _by_state(trials, TrialState.COMPLETE)
    assert len(pruned) + len(complete) == 10 and len(calls(tmp_path)) == 10
    assert {t.number for t in _by_state(first, TrialState.PRUNED)} <= {t.number for t in pruned}
    _check_pruned(trials, calls(tmp_path))
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert (results["n_pruned"], results["n_complete"]) == (len(pruned), len(complete))


def test_hyperband_races_with_tpe(tmp_path: Path) -> None:
    _ok(
        run_toy(
            tmp_path,
            "steps=5",
            "hydra/sweeper/pruner=hyperband",
            "hydra.sweeper.n_trials=8",
            "x=range(0,8)",
            "y=range(0,6)",
        )
    )
    _, trials = _study(tmp_path)
    assert (
        len(_by_state(trials, TrialState.PRUNED)) + len(_by_state(trials, TrialState.COMPLETE)) == 8
    )
    _check_pruned(trials, calls(tmp_path), steps=5)


def test_joblib_workers_report_into_their_trials(tmp_path: Path) -> None:
    _ok(
        run_toy(
            tmp_path,
            *RACE,
            "hydra.sweeper.n_trials=8",
            "hydra.sweeper.n_jobs=2",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            *both_workers_run(tmp_path),
        )
    )
    _, trials = _study(tmp_path)
    records = calls(tmp_path)
    assert len({r["pid"] for r in records}) >= 2  # jobs ran in worker processes
    assert (
        len(_by_state(trials, TrialState.PRUNED)) + len(_by_state(trials, TrialState.COMPLETE)) == 8
    )
    _check_pruned(trials, records)


@pytest.mark.parametrize("pruner", ["median", "odd"])
def test_two_sweepers_sharing_one_sqlite_study_race_within_one_budget(
    tmp_path: Path, pruner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    # "odd": a deterministic pruner (odd trial numbers stop after step 1), so that this test can
    # require pruned trials whatever the interleaving; "median": Optuna's, as users run it.
    race = RACE if pruner == "median" else ["steps=3", *PRUNE_ODD]
    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    shared = [
        *race,
        f"hydra.sweeper.storage={url}",
        "hydra.sweeper.study_name=shared",
        "hydra.sweeper.n_trials=10",
        "sleep_s=0.2",
        *both_workers_run(tmp_path),
    ]
    procs = [
        start_toy(tmp_path, *shared, f"hydra.sweep.dir=multirun/w{i}", log_name=f"w{i}.log")
        for i in range(2)
    ]
    for i, p in enumerate(procs):
        assert p.wait(timeout=HANG_GUARD_S) == 0, (tmp_path / f"w{i}.log").read_text()[-3000:]
    trials = load(url, "shared")
    records = calls(tmp_path)
    assert len({r["pid"] for r in records}) == 2
    pruned, complete = _by_state(trials, TrialState.PRUNED), _by_state(trials, TrialState.COMPLETE)
    # on failure: every trial's state and fail reason, every job's trial, process and steps
    seen = [(t.number, t.state.name, t.user_attrs.get(FAIL_REASON)) for t in trials]
    ran = [(r["trial"], r["pid"], r["steps"]) for r in records]
    logs = [(tmp_path / f"w{i}.log").read_text() for i in range(2)]
    warned = [line for log in logs for line in log.splitlines() if "WARNING" in line]
    assert len(pruned) + len(complete) == 10 and len(records) == 10, (seen, ran, warned)
    # Whether the median pruner stops a trial here depends on how the two processes interleave
    # (a trial is compared with those finished before its steps): the budget and the consistency
    # of whatever was pruned are what this test checks; the single-process tests above assert
    # that pruning happens.
    _check_pruned(trials, records)
    if pruner == "odd":
        assert {t.number for t in pruned} == {r["trial"] for r in records if r["trial"] % 2 == 1}
        assert pruned and all(t.number % 2 == 0 for t in complete)


def test_tpe_constant_liar_is_on_for_parallel_trials_unless_set() -> None:
    from ltr_bench.sweeper.state import make_sampler

    tpe = {"_target_": "optuna.samplers.TPESampler", "seed": 0, "constant_liar": None}

    def liar(sampler: dict = tpe, n_jobs: int = 1, storage: str | None = None) -> bool:
        return make_sampler(dict(sampler), None, 0, n_jobs, storage is not None)._constant_liar

    assert liar() is False
    assert liar(n_jobs=2) is True
    assert liar(storage="sqlite:///x.db") is True
    assert liar(n_jobs=2, sampler={**tpe, "constant_liar": False}) is False


def test_a_bad_pruner_option_is_one_config_error() -> None:
    from ltr_bench.errors import UserError
    from ltr_bench.sweeper.job import make_pruner
    from ltr_bench.sweeper.search.pruning import job_overrides

    with pytest.raises(UserError, match="hydra.sweeper.pruner"):
        make_pruner({"_target_": "optuna.pruners.MedianPruner", "n_startup_trials": -1})
    assert job_overrides("sqlite:///x.db", {"_target_": "optuna.pruners.NopPruner"}) == []
    assert isinstance(make_pruner(None), optuna.pruners.NopPruner)


# ------------------------------------------------------------------------------ the real app
def test_real_app_prunes_trials_marks_their_runs_and_shares_preprocessing(tmp_path: Path) -> None:
    import subprocess

    from ltr_bench.tracking_keys import TAG_FOLDS_DONE, TAG_PRUNED, TAG_REEVALUATION, TAG_TRIAL
    from tests.sweeper.test_app_sweep import COMMON, learnable_letor_folder
    from tests.test_e2e import LTR_BENCH, _client, _env, _runs

    data = learnable_letor_folder(tmp_path / "data", n_folds=1)
    sweep_dir = tmp_path / "sweep"
    cache = tmp_path / "cache"
    env = {**_env(), "PYTHONPATH": pythonpath_with_repo(), "LTR_CACHE": str(cache)}
    proc = subprocess.run(
        [
            LTR_BENCH,
            "-m",
            "search=direct_ranker",
            "dataset=letor",
            f"dataset.path={data}",
            "protocol=single",
            "dataset.fold=1",
            "hydra.sweeper.n_trials=4",
            "hydra.sweeper.reevaluate.top_k=1",
            *PRUNE_ODD,
            f"hydra.sweep.dir={sweep_dir}",
            *COMMON[:-1],
            "protocol.inner_cv=3",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert (results["n_complete"], results["n_pruned"]) == (2, 2)
    assert results["best_trial"] % 2 == 0
    assert all(r["trial"] % 2 == 0 for r in results["reevaluated"])
    (db,) = (tmp_path / "multirun" / "optuna").glob("*.db")
    trials = load(f"sqlite:///{db}", results["study_name"])
    for t in trials:
        if t.number % 2:
            assert t.state == TrialState.PRUNED and list(t.intermediate_values) == [1]
            assert t.value == t.intermediate_values[1]
        else:
            assert t.state == TrialState.COMPLETE and sorted(t.intermediate_values) == [1, 2, 3]
            assert t.value == pytest.approx(t.intermediate_values[3])  # the running mean at the end
    # the re-evaluation raced too (search=<model> sets reevaluate.pruner): it planned and
    # reported its 2 repeats x 3 inner folds into its lock trial
    (lock,) = load(f"sqlite:///{db}", results["study_name"] + ":reevaluations")
    assert lock.state == TrialState.COMPLETE and lock.user_attrs["ltr_sweeper.n_steps"] == 6
    assert sorted(lock.intermediate_values) == [1, 2, 3, 4, 5, 6]
    assert results["reevaluated"][0]["dropped_after"] is None
    runs = _runs(_client(tmp_path))
    search = [r for r in runs["trial"] if r.data.tags.get(TAG_REEVALUATION) != "true"]
    marked = {
        int(r.data.tags[TAG_TRIAL]): r for r in search if r.data.tags.get(TAG_PRUNED) == "true"
    }
    assert set(marked) == {1, 3}
    assert all(
        r.data.tags[TAG_FOLDS_DONE] == "1" and r.info.status == "FINISHED" for r in marked.values()
    )
    assert all(
        "sweep.storage" not in r.data.params or "@" not in r.data.params["sweep.storage"]
        for r in search
    )
    # Preprocessing was fitted once per distinct split: 3 inner folds of the search plus 2 repeats
    # x 3 folds of the re-evaluation, however many trials ran them.
    entries = [p for p in (cache / "prepared").iterdir() if not p.name.startswith(".")]
    assert len(entries) == 3 + 6


@pytest.mark.skipif(sys.platform != "linux", reason="progress line format only")
def test_progress_line_counts_trials_of_the_study(tmp_path: Path) -> None:
    import io

    from ltr_bench.sweeper.results import StudyProgress

    study = optuna.create_study(direction="maximize")
    for v in (0.5, 0.7):
        t = study.ask()
        t.set_user_attr("objective_se", 0.01)
        study.tell(t, v)
    t = study.ask()
    t.report(0.1, 1)
    study.tell(t, state=TrialState.PRUNED)
    t = study.ask()
    t.set_user_attr("ltr_sweeper.fail_reason", "exception")
    study.tell(t, state=TrialState.FAIL)
    stream = io.StringIO()
    progress = StudyProgress("s", 10, "maximize", stream=stream)
    line = progress.update(study)
    assert line.startswith("4/10 trials, 1 pruned, 1 failed, best 0.7000 (SE 0.0100, trial 1)")
    assert "ETA ?" in line and stream.getvalue() == ""  # not a terminal: a log line, no bar
