"""A study's end (plots, trials table, the ``sweep.on_study_end`` hook) where it can run."""

from __future__ import annotations

import json
import os
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
from omegaconf import OmegaConf

from ltr_bench.sweeper.results import finish_study

HOOK = "tests.sweeper.worker_hook.study_ended"


def _state(in_flight: bool, start_in_worker: Any) -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="ending", direction="maximize")
    for x in (0.1, 0.5, 0.9):
        study.enqueue_trial({"x": x})
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    config = OmegaConf.create({"sweep": {"on_study_end": HOOK}})
    jobs = SimpleNamespace(in_flight=in_flight, start_in_worker=start_in_worker)
    settings = SimpleNamespace(plots=["optimization_history", "param_importances"])
    return SimpleNamespace(
        study=study, config=config, jobs=jobs, url="sqlite:///unused.db", settings=settings
    )


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
    finish_study(_state(in_flight, _failing_worker), summary, tmp_path)()
    record = json.loads((tmp_path / "study_end.json").read_text())
    assert record["pid"] == os.getpid() and record["study"] == "ending"
    assert record["files"] == ["optimization_history.png", "param_importances.png", "trials.csv"]
    assert summary["artifacts_dir"] == str(tmp_path / "studies" / "ending")
    failed = [r for r in caplog.records if "finishing it here" in r.getMessage()]
    assert len(failed) == (1 if in_flight else 0)


def test_a_study_ended_in_a_worker_is_waited_for_and_finished_here_if_the_worker_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The study's end is started in a worker and the sweep goes on; the wait returns once the
    worker's end is done, or finishes the study here when the worker's end failed."""
    monkeypatch.setenv("LTR_TEST_WARM_DIR", str(tmp_path))
    started: list[Future] = []

    def start(fn: Any, *args: Any) -> Future:
        started.append(Future())
        return started[-1]

    wait = finish_study(_state(True, start), {}, tmp_path)
    assert len(started) == 1 and not (tmp_path / "study_end.json").exists()  # still in the worker
    started[0].set_result(None)
    wait()
    assert not (tmp_path / "study_end.json").exists()  # the worker's end is the study's end

    wait = finish_study(_state(True, start), {}, tmp_path)
    started[1].set_exception(RuntimeError("the worker died"))
    wait()
    assert json.loads((tmp_path / "study_end.json").read_text())["pid"] == os.getpid()
    assert any("finishing it here" in r.getMessage() for r in caplog.records)
