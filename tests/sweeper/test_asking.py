"""Asking trials within one budget when several workers share a study, and a queued trial
(enqueued default or free point) is taken late: in-process, with the interleaving forced."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ltr_bench.sweeper.search.loop import ask_one
from tests.sweeper.asking_fakes import NoBeat, OneIntSpace


def _workers(tmp_path: Path) -> tuple[optuna.Study, optuna.Study]:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    sampler = optuna.samplers.RandomSampler(seed=0)
    a = optuna.create_study(storage=url, study_name="shared", sampler=sampler)
    b = optuna.load_study(storage=url, study_name="shared", sampler=sampler)
    return a, b


def _blind_to_queue(study: optuna.Study, monkeypatch: pytest.MonkeyPatch) -> None:
    """This worker read the queue before the other worker enqueued (its ``ask`` creates a new
    trial, numbered after the queued one, instead of taking it)."""
    monkeypatch.setattr(study, "_pop_waiting_trial_id", lambda *a, **k: None)


def test_a_queued_trial_taken_late_cannot_overrun_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _workers(tmp_path)
    budget = 3
    accepted = [ask_one(a, OneIntSpace(), budget, NoBeat(), 0)]
    a.enqueue_trial({"x": 500})  # number 1, WAITING (e.g. a free point after repeats)
    _blind_to_queue(b, monkeypatch)
    accepted += [ask_one(b, OneIntSpace(), budget, NoBeat(), 0) for _ in range(2)]  # numbers 2, 3
    accepted.append(ask_one(a, OneIntSpace(), budget, NoBeat(), 0))  # takes the queued number 1
    running = [t for t in a.get_trials() if t.state == TrialState.RUNNING]
    assert len(running) == len([t for t in accepted if t is not None]) <= budget
    assert 1 in {t.number for t in running}  # the queued point still runs


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_queued_point_is_not_run_twice_by_a_worker_that_read_the_queue_too_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = _workers(tmp_path)
    fixed = optuna.samplers.PartialFixedSampler({"x": 7}, optuna.samplers.RandomSampler(seed=1))
    b = optuna.load_study(storage=a._storage, study_name="shared", sampler=fixed)
    a.enqueue_trial({"x": 7})  # number 0, WAITING
    _blind_to_queue(b, monkeypatch)
    ask_one(b, OneIntSpace(), 10, NoBeat(), 0)  # number 1 proposes x=7 while number 0 waits
    ask_one(a, OneIntSpace(), 10, NoBeat(), 0)  # takes number 0: x=7
    running = [t.params["x"] for t in a.get_trials() if t.state == TrialState.RUNNING]
    assert running.count(7) == 1, running
