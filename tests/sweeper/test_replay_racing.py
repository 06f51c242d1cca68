"""benchmarks/replay_racing.py: a sweep recorded without racing, replayed under racing rules,
on hand-made records whose outcome is known."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.benchmark_modules import import_benchmark

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def replay() -> Any:
    spec = importlib.util.spec_from_file_location(
        "replay_racing", REPO / "benchmarks" / "replay_racing.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["replay_racing"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _study(replay: Any) -> Any:
    """12 trials, 5 search folds each; trials 0-3 are good, the others clearly worse from their
    first fold on; the top 5 have 10 re-evaluation folds, trial 2 best once re-evaluated."""
    study = replay.RecordedStudy("toy")
    for n in range(12):
        level = 0.70 + 0.01 * n if n < 4 else 0.40 + 0.001 * n
        study.search[n] = [level + 0.002 * k for k in range(5)]
    for n, level in {3: 0.70, 2: 0.76, 1: 0.69, 0: 0.68, 11: 0.30}.items():
        study.reevaluation[n] = [level + 0.001 * k for k in range(10)]
    return study


def test_without_racing_every_fold_is_fitted_and_the_best_pooled_trial_chosen(replay: Any) -> None:
    study = _study(replay)
    out = replay.replay(study, replay.Rule(0, -1.0, 3), top_k=5, workers=2, fixed=0.5)
    assert out.search_folds == 12 * 5 and out.folds == 12 * 5 + 5 * 10
    assert out.jobs == 12 + 5 and not out.unknown
    best = max(study.reevaluation, key=study.pooled)
    assert out.chosen == best == 2


def test_successive_halving_stops_the_clearly_worse_trials_and_keeps_the_choice(
    replay: Any,
) -> None:
    study = _study(replay)
    out = replay.replay(study, replay.Rule(4, 2.0, 3), top_k=5, workers=2, fixed=0.5)
    # the 8 worse trials, asked after the 4 good ones, stop after their first fold ...
    assert out.search_folds == 4 * 5 + 8 * 1
    # ... so only the 4 good ones are re-evaluated, and the race drops the hopeless ones early
    assert out.jobs == 12 + 4 and out.folds - out.search_folds < 4 * 10
    assert out.chosen == 2 and not out.unknown


def test_a_candidate_the_record_never_re_evaluated_is_replayed_from_its_search_folds(
    replay: Any,
) -> None:
    study = _study(replay)
    del study.reevaluation[1]
    out = replay.replay(study, replay.Rule(0, -1.0, 3), top_k=5, workers=2, fixed=0.5)
    assert out.unknown and out.chosen == 2 and out.folds == 12 * 5 + 5 * 10


def test_a_recorded_store_is_read_per_study_and_trial(replay: Any, tmp_path: Path) -> None:
    """The two MLflow tables the replay reads: tags (study, trial, role) and per-fold metrics."""
    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.execute("create table tags (key text, value text, run_uuid text)")
    con.execute("create table metrics (key text, value real, step int, run_uuid text)")
    runs = {"a": ("0", "false"), "b": ("1", "false"), "c": ("0", "true"), "sweep": ("", "")}
    for run, (trial, reevaluation) in runs.items():
        role = "sweep" if run == "sweep" else "trial"
        con.executemany(
            "insert into tags values (?, ?, ?)",
            [
                ("ltr.study", "s", run),
                ("ltr.role", role, run),
                ("ltr.trial_number", trial, run),
                ("ltr.reevaluation", reevaluation, run),
            ],
        )
        for step in range(3 if run != "c" else 2):
            con.execute(
                "insert into metrics values (?, ?, ?, ?)",
                ("cv_fold/ndcg_at_10", 0.5 + 0.1 * step, step, run),
            )
    con.commit()
    con.close()
    (study,) = replay.load(db, "ndcg_at_10")
    assert study.search == {0: [0.5, 0.6, 0.7], 1: [0.5, 0.6, 0.7]}
    assert study.reevaluation == {0: [0.5, 0.6]}
    assert study.pooled(0) == pytest.approx(sum([0.5, 0.6, 0.7, 0.5, 0.6]) / 5)


def _mlflow_store(
    db: Path,
    runs: list[tuple[str, int, int]],
    roles: list[tuple[str, str]],
    metrics: list[tuple[str, float, str]],
) -> Path:
    """The tables of an MLflow store that the benchmarks read: ``runs`` (id, start and end in
    ms), ``roles`` (``ltr.role`` value, run id) and ``metrics`` (key, value, run id)."""
    con = sqlite3.connect(db)
    con.execute("create table runs (run_uuid text, start_time int, end_time int)")
    con.execute("create table tags (key text, value text, run_uuid text)")
    con.execute("create table metrics (key text, value real, step int, run_uuid text)")
    con.executemany("insert into runs values (?, ?, ?)", runs)
    con.executemany("insert into tags values ('ltr.role', ?, ?)", roles)
    con.executemany("insert into metrics values (?, ?, 0, ?)", metrics)
    con.commit()
    con.close()
    return db


def test_the_budget_bench_splits_the_workers_time_from_the_trial_runs(tmp_path: Path) -> None:
    """bench_sweep_budget.worker_time on two trial runs of one worker pair: 10 s of span, runs
    of 4 s and 5 s with 3 s and 2 s timed: 4 s of the runs untimed, 11 s between jobs."""
    bench = import_benchmark("bench_sweep_budget")
    db = _mlflow_store(
        tmp_path / "mlflow.db",
        runs=[("a", 0, 4000), ("b", 5000, 10000), ("sweep", 0, 20000)],
        roles=[("trial", "a"), ("trial", "b"), ("sweep", "sweep")],
        metrics=[("time_fit_s", 2.5, "a"), ("time_eval_s", 0.5, "a"), ("time_fit_s", 2.0, "b")],
    )
    split = bench.worker_time(db, workers=2)
    assert split == pytest.approx(
        {"jobs": 2, "span_s": 10.0, "fitting_s": 5.0, "rest_of_runs_s": 4.0, "between_s": 11.0}
    )


def test_table1_timing_splits_a_runs_worker_seconds_into_its_fits_floor_and_the_rest(
    tmp_path: Path,
) -> None:
    """table1_timing.worker_budget on a 10 s run of 2 workers: two sweep jobs (runs of 4 s and 5 s,
    3 s and 2 s timed) and one refit fold (a 3 s run, 2 s timed; its parent protocol run and the
    sweep's run are not counted): 7 s of fitting, a floor of 3.5 s, 5 s of the runs untimed and 8 s
    of the 20 worker-seconds outside runs."""
    table1_timing = import_benchmark("table1_timing")
    db = _mlflow_store(
        tmp_path / "mlflow.db",
        runs=[
            ("a", 0, 4000),
            ("b", 1000, 6000),
            ("sweep", 0, 7000),
            ("r", 7000, 10000),
            ("p", 7000, 10000),
        ],
        roles=[
            ("trial", "a"),
            ("trial", "b"),
            ("sweep", "sweep"),
            ("fold", "r"),
            ("protocol", "p"),
        ],
        metrics=[
            ("time_fit_s", 2.5, "a"),
            ("time_eval_s", 0.5, "a"),
            ("time_fit_s", 2.0, "b"),
            ("time_read_s", 0.5, "r"),
            ("time_fit_s", 1.5, "r"),
            ("time_total_s", 3.0, "r"),
            ("time_fit_s", 2.0, "p"),
        ],
    )
    budget = table1_timing.worker_budget(db, wall_s=10.0, workers=2)
    assert {k: budget[k] for k in ("trial_runs", "fold_runs")} == {"trial_runs": 2, "fold_runs": 1}
    assert {
        k: budget[k] for k in ("fitting_s", "floor_s", "rest_of_runs_s", "outside_runs_s")
    } == pytest.approx(
        {"fitting_s": 7.0, "floor_s": 3.5, "rest_of_runs_s": 5.0, "outside_runs_s": 8.0}
    )
