"""A model's sweep time on the leaderboard: the wall time of the sweep command, or, for a sweep
that resumed an interrupted one, the time its finished trials ran over every run (the wall time
of the run that finished it would count only its last part)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState, create_trial

from ltr_bench.experiments.sweep_clock import SweepClock, finished_intervals, union_seconds

LONG_AGO = dt.datetime(2026, 11, 26, 9, 0, 0)


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _store(
    url: str,
    study: str,
    spans: list[tuple[float, float]],
    state=TrialState.COMPLETE,
    t0: dt.datetime = LONG_AGO,
) -> None:
    """Trials of ``study`` that ran from ``t0 + a`` to ``t0 + b`` seconds."""
    s = optuna.create_study(study_name=study, storage=url, load_if_exists=True)
    for a, b in spans:
        trial = create_trial(state=state, value=0.5 if state == TrialState.COMPLETE else None)
        trial.datetime_start = t0 + dt.timedelta(seconds=a)
        trial.datetime_complete = t0 + dt.timedelta(seconds=b)
        s.add_trial(trial)


def _results(sweep_dir: Path, studies: list[tuple[str, str]]) -> None:
    entries = [{"name": "ltr_optuna", "storage": u, "study_name": n} for u, n in studies]
    (sweep_dir / "optimization_results.yaml").write_text(
        yaml.safe_dump({"name": "ltr_optuna", "studies": entries})
    )


def test_the_union_of_finished_trials_of_the_swept_studies_and_their_locks(tmp_path: Path) -> None:
    one, two = f"sqlite:///{tmp_path}/fold1.db", f"sqlite:///{tmp_path}/fold2.db"
    _store(one, "fold1", [(0, 100), (50, 120)])  # two workers: overlapping trials
    _store(one, "fold1:reevaluations", [(120, 150)])  # its re-evaluation locks
    _store(one, "fold1-abandoned", [(500, 5000)])  # another study in the same storage
    _store(two, "fold2", [(200, 260)], TrialState.PRUNED)
    _store(two, "fold2", [(260, 90_000)], TrialState.FAIL)  # lost, found failed a day later
    intervals = finished_intervals([(one, "fold1"), (two, "fold2")])
    assert union_seconds(intervals) == pytest.approx(120 + 30 + 60)


def test_a_resumed_sweep_is_timed_over_every_run_not_only_the_last(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fold1.db"
    _store(url, "earlier-config", [(0, 7200)])  # stored beside it, never swept here
    fresh = SweepClock(tmp_path)
    _store(url, "fold1", [(0, 1)], t0=dt.datetime.now())  # this run's own trials
    _results(tmp_path, [(url, "fold1")])
    fresh.stop()
    assert fresh.cell()["sweep_resumed"] is False
    assert fresh.cell()["time_sweep_s"] < 60  # this test's seconds, not the stored studies'

    url = f"sqlite:///{tmp_path}/fold2.db"
    _store(url, "fold2", [(0, 1800)])  # the first, interrupted run's trials
    resumed = SweepClock(tmp_path)  # a later run finds the study and finishes it
    _store(url, "fold2", [(0, 600)], t0=dt.datetime.now())
    _results(tmp_path, [(url, "fold2")])
    resumed.stop()
    assert resumed.cell() == {"time_sweep_s": pytest.approx(2400.0, abs=0.1), "sweep_resumed": True}


def test_the_clock_must_be_stopped(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="stop"):
        SweepClock(tmp_path).cell()


def test_a_storage_that_cannot_be_read_back_leaves_the_wall_time(tmp_path: Path) -> None:
    """Results files hide a server's password, so such a storage cannot be opened again."""
    clock = SweepClock(tmp_path)
    _results(tmp_path, [("postgresql://user:***@127.0.0.1:1/none", "fold1")])
    clock.stop()
    cell = clock.cell()
    assert cell["sweep_resumed"] is False
    assert cell["time_sweep_s"] < 60
