"""Racing the re-evaluation (``hydra.sweeper.reevaluate.pruner``): the paired race's rule, and a
toy sweep whose hopeless candidates are dropped while the selection stays the pooled best."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ltr_bench.sweeper.job import ATTR_N_STEPS
from ltr_bench.sweeper.reevaluation.racing import (
    Candidate,
    PairedRacePruner,
    cannot_catch_up,
    fold_values,
    lock_attrs,
)
from ltr_bench.sweeper.trials import ATTR_REEVALUATES
from tests.sweeper.toy import calls, load, run_toy
from tests.waiting import TEST_GUARD_S

RACE = (
    "hydra.sweeper.reevaluate.pruner={_target_:"
    "ltr_bench.sweeper.reevaluation.racing.PairedRacePruner,min_folds:2}"
)


def _lock(study: optuna.Study, number: int, search: float, folds: list[float], n: int) -> None:
    """A lock trial of ``study`` re-evaluating trial ``number``: its running means reported."""
    trial = study.ask()
    for key, value in {**lock_attrs(search, 5), ATTR_REEVALUATES: number, ATTR_N_STEPS: n}.items():
        trial.set_user_attr(key, value)
    for k in range(1, len(folds) + 1):
        trial.report(sum(folds[:k]) / k, k)
    if len(folds) == n:
        study.tell(trial, sum(folds) / n)


def test_fold_values_undo_the_running_means() -> None:
    study = optuna.create_study()
    _lock(study, 0, 0.5, [0.6, 0.4, 0.8], 10)
    (frozen,) = study.get_trials(deepcopy=False)
    assert fold_values(frozen) == pytest.approx([0.6, 0.4, 0.8])
    assert Candidate.of(frozen) == Candidate(0, 0.5, 5, pytest.approx([0.6, 0.4, 0.8]))


def test_a_candidate_is_dropped_only_when_its_optimistic_pooled_value_stays_behind() -> None:
    ahead = Candidate(0, 0.70, 5, [0.70, 0.72, 0.68, 0.71])
    # behind on every fold by 0.03 with little spread: even optimistically it cannot catch up
    behind = Candidate(1, 0.71, 5, [0.67, 0.69, 0.65, 0.68])
    assert cannot_catch_up(behind, ahead, 3, 10, 2.0, 1.0)
    # the same deficit, but folds that disagree: the bound covers it -> it races on
    noisy = Candidate(2, 0.71, 5, [0.62, 0.78, 0.62, 0.68])
    assert not cannot_catch_up(noisy, ahead, 3, 10, 2.0, 1.0)
    # a search value far ahead makes up for the re-evaluation deficit
    lucky = Candidate(3, 0.80, 5, [0.67, 0.69, 0.65, 0.68])
    assert not cannot_catch_up(lucky, ahead, 3, 10, 2.0, 1.0)
    # never at its last fold, never before two paired folds, never against fewer folds
    assert not cannot_catch_up(behind, ahead, 10, 10, 2.0, 1.0)
    assert not cannot_catch_up(behind, ahead, 1, 10, 2.0, 1.0)
    short = Candidate(0, 0.70, 5, [0.70, 0.72])
    assert not cannot_catch_up(behind, short, 3, 10, 2.0, 1.0)
    # minimising: lower is better, so the same numbers put 'behind' ahead
    assert not cannot_catch_up(behind, ahead, 3, 10, 2.0, -1.0)
    assert cannot_catch_up(ahead, behind, 3, 10, 2.0, -1.0)


def test_the_bound_is_the_prediction_interval_of_the_folds_to_come() -> None:
    """At j of n folds the final mean difference is at most d + z s sqrt((n-j)/(j n)): dropped
    exactly when that optimistic pooled value is below the rival's pooled value."""
    theirs = Candidate(0, 0.5, 5, [0.5, 0.5, 0.5])
    mine = Candidate(1, 0.5, 5, [0.48, 0.47, 0.49])
    d = [-0.02, -0.03, -0.01]
    s = math.sqrt(sum((x + 0.02) ** 2 for x in d) / 2)
    for z in (0.5, 1.0, 2.0, 4.0, 5.0):
        bound = -0.02 + z * s * math.sqrt(7 / 30)
        optimistic = (5 * 0.5 + 10 * (0.5 + bound)) / 15
        assert cannot_catch_up(mine, theirs, 3, 10, z, 1.0) == (optimistic < 0.5)
    assert cannot_catch_up(mine, theirs, 3, 10, 0.5, 1.0)
    assert not cannot_catch_up(mine, theirs, 3, 10, 5.0, 1.0)


def test_the_pruner_races_against_candidates_still_in_the_race() -> None:
    study = optuna.create_study(direction="maximize")
    _lock(study, 7, 0.70, [0.70] * 5, 10)  # running, 5 folds done
    _lock(study, 8, 0.70, [0.60] * 3, 10)  # running, far behind on the 3 folds both ran
    pruner = PairedRacePruner(z=2.0, min_folds=3)
    first, second = study.get_trials(deepcopy=False)
    assert pruner.prune(study, second)
    assert not pruner.prune(study, first)  # ahead
    assert not PairedRacePruner(min_folds=4).prune(study, second)  # too early
    # a rival dropped itself is out of the race: nobody is left to drop trial 8
    study.tell(first.number, state=TrialState.PRUNED)
    assert not pruner.prune(study, study.get_trials(deepcopy=False)[1])
    with pytest.raises(ValueError):
        PairedRacePruner(min_folds=1)
    with pytest.raises(ValueError):
        PairedRacePruner(z=-1)


@pytest.mark.timeout(TEST_GUARD_S)
def test_a_raced_reevaluation_drops_hopeless_candidates_and_keeps_the_pooled_choice(
    tmp_path: Path,
) -> None:
    """Grid order gives true values -5, -2, -1, -4, -1, 0; x=0 looks 1.5 better in the search
    (lucky), so the top three are trial 2 (0.5), 5 (0) and 1 (-0.5), re-evaluated in that order
    on 4 steps of their true values -1, 0 and -2 (each part counts 4 folds). Trial 2 races alone
    and finishes (pooled -0.25); trial 5 is ahead of it and finishes (0); trial 1 is 1 behind
    trial 2 on every fold, so after its second fold it cannot catch up: dropped (its record pools
    the 2 folds it ran: -1). The choice is trial 5, as without the race."""
    proc = run_toy(
        tmp_path,
        "hydra.sweeper.study_name=race",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=6",
        "hydra.sweeper.reevaluate.top_k=3",
        RACE,
        "steps=4",
        "lucky_x=0",
        "lucky_bonus=1.5",
        "se=0.1",
        "n_folds=4",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    records = {r["trial"]: r for r in results["reevaluated"]}
    assert {k: r["dropped_after"] for k, r in records.items()} == {2: None, 5: None, 1: 2}
    assert records[1]["reevaluation_n"] == 2 and records[1]["value"] == pytest.approx(-1.0)
    assert results["best_trial"] == 5 and results["best_value"] == pytest.approx(0.0)
    assert records[2]["value"] == pytest.approx(-0.25)
    again = {r["trial"]: r["steps"] for r in calls(tmp_path) if r["reevaluation"]}
    assert again == {2: 4, 5: 4, 1: 2}
    url = f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'race.db'}"
    locks = {t.user_attrs[ATTR_REEVALUATES]: t for t in load(url, "race:reevaluations")}
    assert {k: t.state for k, t in locks.items()} == {
        2: TrialState.COMPLETE,
        5: TrialState.COMPLETE,
        1: TrialState.PRUNED,
    }
    assert locks[1].user_attrs[ATTR_N_STEPS] == 4 and sorted(locks[1].intermediate_values) == [1, 2]
    # the same command again: the dropped re-evaluation is done, nothing runs again
    before = len(calls(tmp_path))
    again_proc = run_toy(
        tmp_path,
        "hydra.sweeper.study_name=race",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=6",
        "hydra.sweeper.reevaluate.top_k=3",
        RACE,
        "steps=4",
        "lucky_x=0",
        "lucky_bonus=1.5",
        "se=0.1",
        "n_folds=4",
    )
    assert again_proc.returncode == 0, again_proc.stderr[-3000:]
    assert len(calls(tmp_path)) == before


def test_a_bad_race_option_is_one_config_error(tmp_path: Path) -> None:
    proc = run_toy(
        tmp_path,
        "hydra.sweeper.reevaluate.top_k=2",
        "hydra.sweeper.reevaluate.pruner={_target_:"
        "ltr_bench.sweeper.reevaluation.racing.PairedRacePruner,min_folds:1}",
    )
    assert proc.returncode != 0
    assert "hydra.sweeper.reevaluate.pruner" in proc.stderr
    assert calls(tmp_path) == []
