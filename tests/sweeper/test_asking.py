"""Asking trials within one budget when several workers share a study, and a queued trial
(enqueued default or free point) is taken late: in-process, with the interleaving forced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from ltr_bench.sweeper.search.loop import ask_one


class _NoBeat:
    def add(self, trial_id: int) -> None:
        pass

    def discard(self, trial_id: int) -> None:
        pass


class _Space:
    """The part of a search space that :func:`ask_one` reads: one integer parameter."""

    params = {"x": None}

    def distributions(self) -> dict[str, Any]:
        return {"x": IntDistribution(0, 1000)}

    def size(self) -> int:
        return 1001

    def grid_points(self) -> list[dict[str, int]]:
        return [{"x": x} for x in range(1001)]


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
    accepted = [ask_one(a, _Space(), budget, _NoBeat(), 0)]
    a.enqueue_trial({"x": 500})  # number 1, WAITING (e.g. a free point after repeats)
    _blind_to_queue(b, monkeypatch)
    accepted += [ask_one(b, _Space(), budget, _NoBeat(), 0) for _ in range(2)]  # numbers 2, 3
    accepted.append(ask_one(a, _Space(), budget, _NoBeat(), 0))  # takes the queued number 1
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
    ask_one(b, _Space(), 10, _NoBeat(), 0)  # number 1 proposes x=7 while number 0 waits
    ask_one(a, _Space(), 10, _NoBeat(), 0)  # takes number 0: x=7
    running = [t.params["x"] for t in a.get_trials() if t.state == TrialState.RUNNING]
    assert running.count(7) == 1, running
