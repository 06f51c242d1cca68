"""Edges of the command line found by probing it: each is one sentence naming the key, exit 2, no
traceback, and nothing run or tracked (in-process ``ltr-bench``, see tests/inprocess.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltr_bench.models.lightning_private import precisions

SMALL = [
    "dataset.n_train=300",
    "dataset.n_vali=100",
    "dataset.n_test=100",
    "dataset.docs_per_query=20",
    "threads=1",
    "trainer.enable_progress_bar=false",
]
SWEEP = [
    "-m",
    "search=direct_ranker",
    "hydra.sweeper.n_trials=2",
    "model.epochs=1",
    "protocol.inner_cv=2",
]


def one_sentence(result, *needles: str) -> str:
    """The one ``ltr-bench: error:`` line of a refused run, which names every needle."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ltr-bench: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


@pytest.mark.parametrize("devices", ["0", "-3", "[]", "many"])
def test_a_device_count_lightning_refuses_is_one_sentence(tmp_path: Path, cli, devices) -> None:
    result = cli(f"trainer.devices={devices}", *SMALL, cwd=tmp_path)
    one_sentence(result, f"trainer.devices={devices} is not a device request", "-1 (all), auto")
    assert not (tmp_path / "mlflow.db").exists()  # refused before any run was tracked


def test_a_precision_lightning_does_not_know_names_the_allowed_values(tmp_path: Path, cli) -> None:
    line = one_sentence(cli("trainer.precision=13", *SMALL, cwd=tmp_path), "trainer.precision=13")
    assert "choose one of [" in line and "32-true" in line and "bf16-mixed" in line
    assert not (tmp_path / "mlflow.db").exists()


def test_the_precision_list_is_lightnings_own() -> None:
    """A Lightning upgrade that renames its list fails here, not in every run."""
    allowed = precisions()
    assert {"32-true", "16-mixed", "bf16-mixed", "64-true", 32, "bf16"} <= set(allowed)
    assert 13 not in allowed


def test_a_launcher_without_jobs_is_one_sentence(tmp_path: Path, cli) -> None:
    result = cli(
        *SWEEP,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=0",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "tracking=none",
        *SMALL,
        cwd=tmp_path,
    )
    one_sentence(result, "hydra.launcher.n_jobs=0")
    assert not (tmp_path / "sweep" / "0").exists()  # no trial ran


def test_reproducible_with_hyperband_is_refused(tmp_path: Path, cli) -> None:
    result = cli(
        *SWEEP,
        "hydra/sweeper/pruner=hyperband",
        "hydra.sweeper.reproducible=true",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "tracking=none",
        *SMALL,
        cwd=tmp_path,
    )
    one_sentence(result, "hydra.sweeper.reproducible=true", "hyperband")
    assert not (tmp_path / "sweep" / "0").exists()
