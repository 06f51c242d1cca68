"""A study's end (plots, trials table, the ``sweep.on_study_end`` hook) where it can run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
from omegaconf import OmegaConf

from ltr_bench.sweeper.results import finish_study

HOOK = "tests.sweeper.worker_hook.study_ended"


def _state(in_flight: bool, run_in_worker: Any) -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="ending", direction="maximize")
    for x in (0.1, 0.5, 0.9):
        study.enqueue_trial({"x": x})
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    config = OmegaConf.create({"sweep": {"on_study_end": HOOK}})
    jobs = SimpleNamespace(in_flight=in_flight, run_in_worker=run_in_worker)
    return SimpleNamespace(study=study, config=config, jobs=jobs, url="sqlite:///unused.db")


def _failing_worker(fn: Any, *args: Any) -> Any:
    raise RuntimeError("the worker could not open the storage")


@pytest.mark.parametrize("in_flight", [False, True])
def test_the_study_ends_here_without_a_worker_or_when_the_worker_fails(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    in_flight: bool,
) -> None:
    monkeypatch.setenv("LTR_TEST_WARM_DIR", str(tmp_path))
    summary: dict[str, Any] = {}
    finish_study(_state(in_flight, _failing_worker), summary, tmp_path)
    record = json.loads((tmp_path / "study_end.json").read_text())
    assert record["pid"] == os.getpid() and record["study"] == "ending"
    assert record["files"] == ["optimization_history.png", "param_importances.png", "trials.csv"]
    assert summary["artifacts_dir"] == str(tmp_path / "studies" / "ending")
    failed = [r for r in caplog.records if "finishing it here" in r.getMessage()]
    assert len(failed) == (1 if in_flight else 0)
