"""End-to-end: the ltr_optuna sweeper driving the toy Hydra app in real subprocesses."""

from __future__ import annotations

import itertools
import re
import signal
import sqlite3
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, IntDistribution

from tests.sweeper.toy import (
    both_workers_run,
    calls,
    complete,
    load,
    point,
    reasons,
    run_toy,
    start_toy,
    wait_for_file,
)
from tests.waiting import HANG_GUARD_S, TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)


def _ok(proc) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_four_trial_sweep_end_to_end_and_same_command_resumes(tmp_path: Path) -> None:
    proc = run_toy(tmp_path)
    _ok(proc)
    # Default storage: one SQLite file per sweep under multirun/optuna, holding the study named
    # after the command (its fixed override calls_file=..., no config group, as a short hash).
    (db,) = (tmp_path / "multirun" / "optuna").glob("*.db")
    url = f"sqlite:///{db}"
    (name,) = optuna.get_all_study_names(url)
    assert re.fullmatch(r"toy_app-tpe-[0-9a-f]{8}", name) and db.name == f"{name}.db"
    trials = load(url, name)
    done = complete(trials)
    assert len(done) == 4
    assert len({point(t) for t in done}) == 4  # no parameter set evaluated twice
    # Each job was told its Optuna trial number and study name, and ran exactly those params.
    records = calls(tmp_path)
    assert sorted(r["trial"] for r in records) == sorted(t.number for t in done)
    by_number = {t.number: t for t in done}
    for r in records:
        assert r["study"] == name
        assert point(by_number[r["trial"]]) == (r["x"], r["y"])
        assert by_number[r["trial"]].value == -((r["x"] - 1) ** 2) - (r["y"] - 2) ** 2
        assert (tmp_path / "multirun" / "sweep" / f"trial_{r['trial']}").is_dir()
    best = max(done, key=lambda t: t.value)
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert results["best_value"] == best.value and results["best_params"] == best.params
    assert results["n_complete"] == 4 and results["study_name"] == name

    # The same command again: the study is complete, nothing runs.
    _ok(run_toy(tmp_path))
    assert len(calls(tmp_path)) == 4
    # A larger budget on the same command continues the same study with exactly the difference.
    _ok(run_toy(tmp_path, "hydra.sweeper.n_trials=6"))
    assert len(calls(tmp_path)) == 6
    done = complete(load(url, name))
    assert len(done) == 6 and len({point(t) for t in done}) == 6


def test_an_objective_with_its_se_counts_the_trials_within_one_se(tmp_path: Path) -> None:
    # x = 0..3, y = 2: values -1, 0, -1, -4; best 0 with SE 1.5 -> three trials within one SE.
    # Batches in two joblib workers: the Objective crosses process boundaries with its SE.
    _ok(
        run_toy(
            tmp_path,
            "se=1.5",
            "hydra/sweeper/sampler=grid",
            "hydra.sweeper.n_trials=null",
            "y=choice(2)",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            "hydra.sweeper.n_jobs=2",
        )
    )
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert results["n_complete"] == 4 and results["best_value"] == 0
    assert results["best_value_se"] == 1.5 and results["n_within_one_se"] == 3
    (db,) = (tmp_path / "multirun" / "optuna").glob("*.db")
    trials = complete(load(f"sqlite:///{db}", results["study_name"]))
    assert [t.user_attrs["objective_se"] for t in trials] == [1.5] * 4
    # Without an SE (a plain float, as from any other app) the summary has no such keys.
    (tmp_path / "plain").mkdir()
    _ok(run_toy(tmp_path / "plain"))
    plain = yaml.safe_load(
        (tmp_path / "plain" / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert "best_value_se" not in plain and "n_within_one_se" not in plain


@pytest.mark.parametrize(("sig", "sampler"), [(signal.SIGKILL, "tpe"), (signal.SIGTERM, "grid")])
def test_kill_and_resume_keeps_trial_count_exact(
    tmp_path: Path, sig: signal.Signals, sampler: str
) -> None:
    common = [
        "hydra.sweeper.study_name=killed",
        f"hydra/sweeper/sampler={sampler}",
        "hydra.sweeper.n_trials=5",
    ]
    proc = start_toy(tmp_path, *common, "hang_at_trial=2", f"hang_marker={tmp_path / 'hang'}")
    wait_for_file(tmp_path / "hang", proc)  # two trials done, the third one is running
    proc.send_signal(sig)
    proc.wait(timeout=HANG_GUARD_S)
    killed = int((tmp_path / "hang").read_text())
    url = f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'killed.db'}"
    before = load(url, "killed")
    assert len(complete(before)) == 2
    if sig == signal.SIGTERM:  # graceful: the dying sweep marks its own trial
        assert reasons(before)[killed] == "interrupted"

    _ok(run_toy(tmp_path, *common))  # the same command resumes
    trials = load(url, "killed")
    done = complete(trials)
    assert len(done) == 5
    assert len({point(t) for t in done}) == 5
    assert reasons(trials)[killed] == "interrupted"
    assert [t for t in trials if t.state.name == "RUNNING"] == []
    assert {(r["x"], r["y"]) for r in calls(tmp_path) if r["trial"] != killed} == {
        point(t) for t in done
    }
    if sampler == "grid":  # the grid walks the product in order; the killed point is redone
        expected = list(itertools.product(range(4), range(3)))[:5]
        assert sorted(point(t) for t in done) == expected


def test_failing_and_nan_trials_are_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    base = [
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=null",
        "hydra.sweeper.study_name=fails",
        "y=choice(0,1)",
        "fail_x=3",
        "nan_x=0",
    ]
    proc = run_toy(tmp_path, *base, "hydra.sweeper.max_failure_rate=0.5")
    _ok(proc)
    assert "toy failure for x=3" in proc.stdout + proc.stderr
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'fails.db'}", "fails")
    assert len(trials) == 8  # the whole 4 x 2 grid, nothing skipped, nothing repeated
    assert sorted(point(t) for t in trials) == list(itertools.product(range(4), range(2)))
    failed = reasons(trials)
    assert {trials[n].params["x"] for n, r in failed.items() if r == "exception"} == {3}
    assert {trials[n].params["x"] for n, r in failed.items() if r == "nan"} == {0}
    assert len(failed) == 4 and len(complete(trials)) == 4
    assert (
        "toy failure"
        in next(t for t in trials if t.params["x"] == 3).user_attrs["ltr_sweeper.error"]
    )


def test_too_many_failures_and_config_errors_abort(tmp_path: Path) -> None:
    grid = [
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=null",
        "x=choice(3,1,2)",
        "y=0",
        "fail_x=3",
    ]
    proc = run_toy(
        tmp_path, *grid, "hydra.sweeper.study_name=rate", "hydra.sweeper.max_failure_rate=0.2"
    )
    assert proc.returncode != 0 and "max_failure_rate=0.2" in proc.stderr
    assert len(calls(tmp_path)) == 1  # stopped right after 1 of 3 trials failed (> 0.2 * 3)

    proc = run_toy(tmp_path, *grid, "hydra.sweeper.study_name=usererr", "user_error_x=3")
    assert proc.returncode != 0 and "toy config error for x=3" in proc.stderr
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'usererr.db'}", "usererr")
    assert (
        reasons(trials) == {0: "config_error"} and len(trials) == 1
    )  # not counted: a re-run retries it

    proc = run_toy(tmp_path, *grid, "hydra.sweeper.study_name=badopt", "opt=choice(nope,sgd)")
    assert (
        proc.returncode != 0 and "nope" in proc.stderr
    )  # a config group option that does not exist
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'badopt.db'}", "badopt")
    assert reasons(trials) == {0: "config_error"}
    assert len(calls(tmp_path)) == 2  # no job ran for the bad config


@pytest.mark.parametrize("sampler", [pytest.param("tpe", marks=pytest.mark.slow), "grid"])
def test_two_processes_share_one_sqlite_study(tmp_path: Path, sampler: str) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    args = [
        f"hydra.sweeper.storage={url}",
        "hydra.sweeper.study_name=shared",
        f"hydra/sweeper/sampler={sampler}",
        "hydra.sweeper.n_trials=6",
        "sleep_s=0.4",
        *both_workers_run(tmp_path),
        "kind=a,b",
        "y=choice(0,2)",
    ]
    workers = [
        start_toy(tmp_path, *args, f"hydra.sweep.dir={tmp_path / f'w{i}'}", log_name=f"w{i}.log")
        for i in (0, 1)
    ]
    for w in workers:
        assert w.wait(timeout=HANG_GUARD_S) == 0, (tmp_path / "w0.log").read_text()[-2000:] + (
            tmp_path / "w1.log"
        ).read_text()[-2000:]
    trials = load(url, "shared")
    done = complete(trials)
    records = calls(tmp_path)
    assert len(done) == 6 and len(records) == 6  # exactly n_trials in total, each run exactly once
    assert sorted(r["trial"] for r in records) == sorted(t.number for t in done)
    assert len({r["pid"] for r in records}) == 2  # both workers did trials
    assert len({point(t, ("x", "y", "kind")) for t in done}) == 6
    assert set(reasons(trials).values()) <= {"duplicate", "surplus"}


@pytest.mark.filterwarnings(
    "ignore::optuna.exceptions.ExperimentalWarning", "ignore:Heartbeat of storage"
)
def _an_hour_ago(db: Path, *trial_ids: int) -> None:
    """Move the start time and the last heartbeat of these trials an hour back in the store."""
    marks = ",".join("?" * len(trial_ids))
    with sqlite3.connect(db) as con:
        con.execute(
            f"update trials set datetime_start = datetime(datetime_start, '-1 hour') "
            f"where trial_id in ({marks})",
            trial_ids,
        )
        con.execute(
            f"update trial_heartbeats set heartbeat = datetime(heartbeat, '-1 hour') "
            f"where trial_id in ({marks})",
            trial_ids,
        )


def test_running_trials_of_gone_sweepers_are_marked_failed_on_resume(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'left.db'}"
    storage = optuna.storages.RDBStorage(url, heartbeat_interval=1)
    study = optuna.create_study(storage=storage, study_name="left", direction="maximize")
    space = {"x": IntDistribution(0, 3), "y": CategoricalDistribution([0, 1, 2])}
    foreign = study.ask(space)  # no owner attribute: failed once older than the grace period
    remote = study.ask(space)  # owned by another host: failed once its heartbeat is stale
    remote.set_user_attr(
        "ltr_sweeper.worker", {"host": "elsewhere", "pidns": "", "pid": 1, "start": "1"}
    )
    storage.record_heartbeat(remote._trial_id)
    done_trial = study.ask(space)
    study.tell(done_trial, -1.0)
    # Instead of waiting out the grace period (SQLite's clock ticks in whole seconds, so a short
    # sleep raced it), both trials' clocks are set an hour back in the store.
    _an_hour_ago(tmp_path / "left.db", foreign._trial_id, remote._trial_id)
    _ok(run_toy(tmp_path, f"hydra.sweeper.storage={url}", "hydra.sweeper.study_name=left"))
    trials = load(url, "left")
    failed = reasons(trials)
    assert failed[foreign.number] == "interrupted" and failed[remote.number] == "interrupted"
    assert set(failed.values()) <= {"interrupted", "duplicate"}
    assert len(complete(trials)) == 4 and len(calls(tmp_path)) == 3


def test_grid_enumerates_exactly_the_product(tmp_path: Path) -> None:
    args = [
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=null",
        "x=range(0,3)",
        "y=choice(1,2)",
        "kind=a,b",
    ]
    _ok(run_toy(tmp_path, *args, "hydra.sweeper.study_name=g"))
    records = calls(tmp_path)
    expected = list(
        itertools.product(range(3), [1, 2], ["a", "b"])
    )  # product order, first key slowest
    assert [(r["x"], r["y"], r["kind"]) for r in records] == expected
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert results["n_trials"] == 12 and results["best_params"] == {"x": 1, "y": 2, "kind": "b"}
    assert results["best_value"] == 0.5
    assert results["best_overrides"] == ["x=1", "y=2", "kind=b"]  # ready to pass back to the app


def test_study_per_runs_one_study_per_value(tmp_path: Path) -> None:
    proc = run_toy(
        tmp_path,
        "hydra.sweeper.study_name=per",
        "hydra.sweeper.study_per=[kind]",
        "kind=a,b",
        "hydra.sweeper.n_trials=3",
        "hydra.sweep.subdir=${hydra.job.num}",
    )
    _ok(proc)
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert [s["study_name"] for s in results["studies"]] == ["per-kind=a", "per-kind=b"]
    assert [s["study_overrides"] for s in results["studies"]] == [["kind=a"], ["kind=b"]]
    records = calls(tmp_path)
    assert len(records) == 6
    for kind in "ab":
        mine = [r for r in records if r["study"] == f"per-kind={kind}"]
        assert len(mine) == 3 and {r["kind"] for r in mine} == {kind}
        # both studies in the sweep's one storage file, which one dashboard shows
        db = tmp_path / "multirun" / "optuna" / "per.db"
        assert len(complete(load(f"sqlite:///{db}", f"per-kind={kind}"))) == 3
    assert [p.name for p in (tmp_path / "multirun" / "optuna").glob("*.db")] == ["per.db"]
    assert results["studies"][0]["dashboard"] == f"optuna-dashboard sqlite:///{db.resolve()}"


def test_defaults_and_given_points_are_evaluated_first(tmp_path: Path) -> None:
    # Config defaults: x=0, y=0, kind=a, opt=sgd (a config group); all four swept here.
    proc = run_toy(
        tmp_path,
        "hydra.sweeper.study_name=seeded",
        "kind=choice(b,a)",
        "opt=choice(adam,sgd)",
        "hydra.sweeper.enqueue_defaults=true",
        "hydra.sweeper.enqueue_trials=[{x:3,y:1,kind:b}]",
    )
    _ok(proc)
    url = f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'seeded.db'}"
    trials = sorted(load(url, "seeded"), key=lambda t: t.number)
    assert len(complete(trials)) == 4
    assert trials[0].params == {"x": 0, "y": 0, "kind": "a", "opt": "sgd"}
    assert {k: trials[1].params[k] for k in ("x", "y", "kind")} == {"x": 3, "y": 1, "kind": "b"}
    first = calls(tmp_path)[:2]
    assert [(r["x"], r["y"], r["kind"]) for r in first] == [(0, 0, "a"), (3, 1, "b")]
    # Resuming with a larger budget does not enqueue (or run) them again.
    _ok(
        run_toy(
            tmp_path,
            "hydra.sweeper.study_name=seeded",
            "kind=choice(b,a)",
            "opt=choice(adam,sgd)",
            "hydra.sweeper.enqueue_defaults=true",
            "hydra.sweeper.enqueue_trials=[{x:3,y:1,kind:b}]",
            "hydra.sweeper.n_trials=6",
        )
    )
    everything = load(url, "seeded")
    assert [t.number for t in everything if "fixed_params" in t.system_attrs] == [0, 1]
    trials = complete(everything)
    assert (
        len(trials) == 6
        and len({point(t) + (t.params["kind"], t.params["opt"]) for t in trials}) == 6
    )


def test_an_enqueued_point_outside_the_space_stops_before_any_job(tmp_path: Path) -> None:
    proc = run_toy(tmp_path, "hydra.sweeper.enqueue_trials=[{x:7}]")
    assert proc.returncode != 0
    assert "hydra.sweeper.enqueue_trials[0]: x=7 is outside its range [0, 3]" in proc.stderr
    assert calls(tmp_path) == []


def test_reevaluation_of_the_top_trials_picks_by_pooled_value(tmp_path: Path) -> None:
    # Grid over x = 0..3 with y = 2: true values -1, 0, -1, -4; x = 2 is lucky in the search
    # (+1.5 -> 0.5, the search's best) but not in its re-evaluation (-1). Top 2 re-evaluated:
    # pooled x=2: (0.5 - 1) / 2 = -0.25, x=1: 0 -> x=1 is chosen.
    args = [
        "hydra.sweeper.study_name=lucky",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=null",
        "y=choice(2)",
        "lucky_x=2",
        "lucky_bonus=1.5",
        "se=0.5",
        "n_folds=5",
        "hydra.sweeper.reevaluate.top_k=2",
    ]
    _ok(run_toy(tmp_path, *args))
    records = calls(tmp_path)
    assert [r["reevaluation"] for r in records] == [False] * 4 + [True] * 2
    assert sorted(r["x"] for r in records[4:]) == [1, 2]
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert results["search_best_value"] == 0.5 and results["best_value"] == 0.0
    assert results["best_params"] == {"x": 1, "y": 2} and results["best_overrides"] == [
        "x=1",
        "y=2",
    ]
    by_trial = {r["trial"]: r for r in results["reevaluated"]}
    lucky = by_trial[results["search_best_trial"]]
    assert (lucky["search_value"], lucky["reevaluation_value"], lucky["value"]) == (
        0.5,
        -1.0,
        -0.25,
    )
    assert lucky["search_n"] == lucky["reevaluation_n"] == 5
    # SE of the mean of 10 values: 5 around 0.5 and 5 around -1, each with SE 0.5
    within = 2 * 4 * (0.5 * 5**0.5) ** 2
    between = 5 * 0.75**2 * 2
    assert lucky["se"] == pytest.approx(((within + between) / 9 / 10) ** 0.5)
    # The Optuna trials keep their search values; each record lives on its lock trial, as
    # numbers (what optuna-dashboard shows as one row each), none as a study attribute.
    (db,) = (tmp_path / "multirun" / "optuna").glob("*.db")
    study = optuna.load_study(study_name="lucky", storage=f"sqlite:///{db}")
    assert max(t.value for t in complete(study.trials)) == 0.5
    assert not [k for k in study.user_attrs if k.startswith("reevaluation:")]
    locks = load(f"sqlite:///{db}", "lucky:reevaluations")
    held = {t.user_attrs["ltr_sweeper.reevaluates"]: t for t in complete(locks)}
    assert sorted(held) == sorted(by_trial)
    for number, lock in held.items():
        assert lock.value == by_trial[number]["reevaluation_value"]
        assert lock.user_attrs["ltr_sweeper.pooled_value"] == by_trial[number]["value"]
        numbers = {k: v for k, v in lock.user_attrs.items() if k != "ltr_sweeper.worker"}
        assert all(v is None or isinstance(v, (int, float)) for v in numbers.values()), numbers
    # Resuming the finished sweep neither re-runs trials nor re-evaluations, and selects the same.
    _ok(run_toy(tmp_path, *args))
    assert len(calls(tmp_path)) == 6
    again = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert again["best_params"] == {"x": 1, "y": 2}
    # A larger top_k re-evaluates only the newly included trial.
    _ok(run_toy(tmp_path, *args[:-1], "hydra.sweeper.reevaluate.top_k=3"))
    assert len(calls(tmp_path)) == 7 and calls(tmp_path)[-1]["reevaluation"] is True


def test_a_fatal_reevaluation_keeps_the_outcome_of_its_batch_partner(tmp_path: Path) -> None:
    """Two re-evaluations end in one batch; the first one's config error is fatal to the sweep,
    and the second one, which completed, is still recorded and its lock closed (it was dropped:
    its lock stayed RUNNING and its result was lost)."""
    proc = run_toy(
        tmp_path,
        "hydra.sweeper.study_name=partner",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=null",
        "x=choice(1,2)",
        "y=choice(2)",
        "hydra.sweeper.n_jobs=2",  # one batch of two jobs (Hydra's basic launcher)
        "hydra.sweeper.reevaluate.top_k=2",
        "reevaluation_user_error_x=1",  # the top trial's re-evaluation fails, x=2's completes
    )
    assert proc.returncode != 0 and "re-evaluation of x=1" in proc.stderr
    assert [r["x"] for r in calls(tmp_path) if r["reevaluation"]] == [1, 2]  # one batch
    (db,) = (tmp_path / "multirun" / "optuna").glob("*.db")
    url = f"sqlite:///{db}"
    study = optuna.load_study(study_name="partner", storage=url)
    x2 = next(t.number for t in study.trials if t.params["x"] == 2)
    locks = load(url, "partner:reevaluations")
    assert [t.user_attrs.get("ltr_sweeper.pooled_value") is not None for t in locks] == [
        t.number == x2 for t in locks
    ]
    assert {t.user_attrs["ltr_sweeper.reevaluates"]: t.state.name for t in locks} == {
        study.trials[1 - x2].number: "FAIL",
        x2: "COMPLETE",
    }


def test_reevaluate_top_k_must_be_a_non_negative_integer(tmp_path: Path) -> None:
    proc = run_toy(tmp_path, "hydra.sweeper.reevaluate.top_k=-1")
    assert proc.returncode != 0
    assert "hydra.sweeper.reevaluate.top_k must be an integer >= 0" in proc.stderr
    assert calls(tmp_path) == []
