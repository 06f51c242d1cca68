"""Optuna history / importance plots as PNG files, robust for tiny studies."""

from __future__ import annotations

import optuna
import pytest

from ltr_bench.sweeper.results import write_study_plots

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
