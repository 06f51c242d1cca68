"""Pooling and selection of re-evaluated top trials (ltr_bench.sweeper.reevaluation)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optuna.trial import TrialState

from ltr_bench.sweeper.reevaluation.records import (
    Reevaluation,
    make_record,
    pooled_mean_se,
    select,
    store,
    stored,
    top_trials,
)


def _mean_se(x: np.ndarray) -> tuple[float, float, int]:
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))), len(x)


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(st.floats(-1, 1), min_size=2, max_size=12),
    b=st.lists(st.floats(-1, 1), min_size=2, max_size=12),
)
def test_pooled_mean_and_se_equal_those_of_the_concatenated_values(
    a: list[float], b: list[float]
) -> None:
    xa, xb = np.array(a), np.array(b)
    mean, se = pooled_mean_se([_mean_se(xa), _mean_se(xb)])
    both = np.concatenate([xa, xb])
    assert mean == pytest.approx(both.mean(), abs=1e-12)
    assert se == pytest.approx(both.std(ddof=1) / np.sqrt(len(both)), abs=1e-12)


def test_pooling_without_se_weights_by_counts_and_gives_no_se() -> None:
    assert pooled_mean_se([(1.0, None, 1), (0.0, None, 3)]) == (0.25, None)
    assert pooled_mean_se([(0.7, 0.1, 1)]) == (0.7, None)
    with pytest.raises(ValueError):
        pooled_mean_se([])


def _trial(
    number: int, value: float | None, state: str = "COMPLETE", **attrs: float
) -> SimpleNamespace:
    return SimpleNamespace(
        number=number, value=value, state=SimpleNamespace(name=state), user_attrs=attrs
    )


def test_top_trials_are_the_best_complete_ones_earlier_first_on_ties() -> None:
    trials = [
        _trial(0, 0.5),
        _trial(1, 0.7),
        _trial(2, None, "FAIL"),
        _trial(3, 0.7),
        _trial(4, 0.1),
    ]
    assert [t.number for t in top_trials(trials, 3, maximize=True)] == [1, 3, 0]
    assert [t.number for t in top_trials(trials, 2, maximize=False)] == [4, 0]
    assert top_trials(trials, 0, maximize=True) == []


def test_a_record_pools_the_search_and_the_reevaluation_by_their_fold_counts() -> None:
    trial = _trial(7, 0.74, objective_se=0.01, objective_n_folds=5)
    rec = make_record(trial, 0.71, {"objective_se": 0.01, "objective_n_folds": 10})
    assert rec.trial == 7 and rec.search_n == 5 and rec.reevaluation_n == 10
    assert rec.value == pytest.approx((5 * 0.74 + 10 * 0.71) / 15)
    plain = make_record(_trial(1, 2.0), 1.0, {})  # plain floats: one value each, no SE
    assert (plain.value, plain.se, plain.search_n) == (1.5, None, 1)


def test_select_takes_the_best_pooled_value() -> None:
    def rec(n: int, v: float) -> Reevaluation:
        return Reevaluation(n, v, None, 1, v, None, 1, v, None)

    records = {1: rec(1, 0.3), 4: rec(4, 0.6), 6: rec(6, 0.6)}
    assert select(records, maximize=True).trial == 4
    assert select(records, maximize=False).trial == 1
    assert select({}, maximize=True) is None


def _record(trial: int, value: float, dropped_after: int | None = None) -> Reevaluation:
    return Reevaluation(trial, 0.5, 0.1, 5, value, None, 5, (0.5 + value) / 2, None, dropped_after)


def test_records_live_on_their_lock_trials_as_numbers_and_older_study_records_are_still_read() -> (
    None
):
    """A finished lock holds its record as flat numbers (what optuna-dashboard shows as one row
    each, not a JSON string); a study written by an older sweep keeps its records as study
    attributes, and both are read on resume. An unfinished lock's attributes do not count."""
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    locks = optuna.create_study(study_name="s:reevaluations", storage=storage)
    study.set_user_attr("reevaluation:0", _record(0, -1.0).to_dict())  # an older sweep's record
    for trial, state in ((1, TrialState.COMPLETE), (2, TrialState.PRUNED), (3, TrialState.FAIL)):
        lock_id = storage.create_new_trial(
            storage.get_study_id_from_name("s:reevaluations"),
            template_trial=optuna.trial.create_trial(state=TrialState.RUNNING),
        )
        store(locks, lock_id, _record(trial, 0.25, dropped_after=2 if trial == 2 else None))
        storage.set_trial_state_values(lock_id, state, None if state == TrialState.FAIL else [0.25])
    (held, *_) = locks.get_trials(states=(TrialState.COMPLETE,))
    assert all(v is None or isinstance(v, (int, float)) for v in held.user_attrs.values())
    assert held.user_attrs["ltr_sweeper.pooled_value"] == 0.375
    records = stored(study, locks)
    assert records == {0: _record(0, -1.0), 1: _record(1, 0.25), 2: _record(2, 0.25, 2)}
    assert stored(study, None) == {0: _record(0, -1.0)}
    assert select(records, maximize=True) == _record(1, 0.25)  # the dropped one is left out
