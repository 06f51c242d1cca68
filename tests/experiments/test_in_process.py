"""An experiment invocation run inside the calling process: same outputs as its own ``ltr-bench``
process would write, the caller's Hydra job config put back, errors as exit codes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ltr_bench.experiments.ledger.in_process import EXIT_USER_ERROR, run_in_process

TINY_FIG2C = [
    "experiment=fig2c",
    "scale=quick",
    "experiment.values=[0.0]",
    "experiment.repetitions=1",
    "experiment.data.n_train=200",
    "experiment.data.n_test=200",
    "experiment.model_params.epochs=1",
    "threads=1",
    "tracking=none",
    "seed=0",
]


def test_a_user_error_is_exit_2_with_its_sentence_in_the_log(tmp_path: Path) -> None:
    from hydra.core.hydra_config import HydraConfig

    before = HydraConfig.initialized()
    with open(tmp_path / "run.log", "w") as log:
        code = run_in_process(["experiment=fig2c", "scale=nosuch"], tmp_path / "out", log)
    assert code == EXIT_USER_ERROR
    text = (tmp_path / "run.log").read_text()
    assert "scale=nosuch is not a scale of this experiment" in text
    assert "Traceback" not in text
    assert HydraConfig.initialized() == before  # the caller's job config put back


def test_an_experiment_runs_into_its_folder_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hydra.core.hydra_config import HydraConfig

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    out = tmp_path / "runs" / "fig2c"
    with open(tmp_path / "fig2c.log", "w") as log:
        code = run_in_process([*TINY_FIG2C, f"hydra.run.dir={out}"], out, log)
    text = (tmp_path / "fig2c.log").read_text()
    assert code == 0, text
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["sigma"]) == [0.0] and summary["repetitions"].tolist() == [1]
    assert f"outputs: {out}" in text  # printed into the log, not the caller's output
    assert (out / "experiment.yaml").is_file()
    assert not HydraConfig.initialized()
