"""Optuna history / importance plots as PNG files, robust for tiny studies."""

from __future__ import annotations

import optuna
import pytest

from ltr_bench.errors import UserError
from ltr_bench.sweeper.config import STUDY_PLOTS, Settings
from ltr_bench.sweeper.results import write_study_artifacts, write_study_plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _study(n: int, vary: bool = True) -> optuna.Study:
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    for i in range(n):
        trial = study.ask()
        x = trial.suggest_float("x", 0, 1) if vary else trial.suggest_float("x", 0.5, 0.5)
        trial.suggest_categorical("c", ["a", "b"] if vary else ["a"])
        study.tell(trial, -((x - 0.3) ** 2) + 0.01 * i)
    return study


def test_no_complete_trial_writes_nothing(tmp_path) -> None:
    study = _study(0)
    study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
    assert write_study_plots(study, tmp_path) == []


@pytest.mark.parametrize(
    ("n", "vary", "expected"),
    [
        (1, True, ["optimization_history.png"]),
        (5, False, ["optimization_history.png"]),  # nothing varies: no importances
        (6, True, ["optimization_history.png", "param_importances.png"]),
    ],
)
def test_plots_written_when_drawable(tmp_path, n: int, vary: bool, expected: list[str]) -> None:
    written = write_study_plots(_study(n, vary), tmp_path / "plots")
    assert [p.name for p in written] == expected
    for path in written:
        assert path.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(
    ("plots", "expected"),
    [
        (["param_importances"], ["param_importances.png", "trials.csv"]),
        (
            ["param_importances", "optimization_history"],
            [*(f"{p}.png" for p in STUDY_PLOTS), "trials.csv"],
        ),
        ([], ["trials.csv"]),
    ],
)
def test_a_study_leaves_the_plots_chosen_in_their_order_and_its_trials_table(
    tmp_path, plots: list[str], expected: list[str]
) -> None:
    written = write_study_artifacts(_study(6), tmp_path / "new" / "study", plots)
    assert [p.name for p in written] == expected
    assert sorted(p.name for p in (tmp_path / "new" / "study").iterdir()) == sorted(expected)


def test_the_default_plots_are_every_plot_and_an_unknown_one_is_named() -> None:
    assert Settings().plots == list(STUDY_PLOTS)
    assert Settings(plots=[]).plots == []
    with pytest.raises(UserError, match="unknown plot 'contour'; choose from optimization_history"):
        Settings(plots=["optimization_history", "contour"])
