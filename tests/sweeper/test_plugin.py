"""Hydra finds the plugin and composes its config surface."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper

from ltr_bench.errors import UserError
from ltr_bench.sweeper.sweeper import OptunaSweeperImpl

REPO = Path(__file__).resolve().parents[2]
TOY_CONF = Path(__file__).parent / "toy_app" / "conf"


def test_plugin_is_discovered_from_the_namespace_package() -> None:
    names = {f"{p.__module__}.{p.__name__}" for p in Plugins.instance().discover(Sweeper)}
    assert "hydra_plugins.ltr_bench_sweeper.LtrOptunaSweeper" in names
    assert not (REPO / "hydra_plugins" / "__init__.py").exists()  # must stay a namespace package


@pytest.mark.parametrize(
    ("sampler", "target"),
    [
        ([], "optuna.samplers.TPESampler"),
        (["hydra/sweeper/sampler=random"], "optuna.samplers.RandomSampler"),
        (["hydra/sweeper/sampler=grid"], "ltr_bench.sweeper.search.grid.GridSearchSampler"),
    ],
)
def test_config_surface(sampler: list[str], target: str) -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(TOY_CONF)):
        cfg = compose(
            "config", overrides=["hydra/sweeper=ltr_optuna", *sampler], return_hydra_config=True
        )
    sw = cfg.hydra.sweeper
    assert sw._target_ == "hydra_plugins.ltr_bench_sweeper.LtrOptunaSweeper"
    assert sw.sampler._target_ == target
    assert sw.direction == "maximize" and sw.storage is None and sw.storage_dir == "multirun/optuna"
    assert sw.n_jobs == 1 and sw.max_failure_rate == 0.5 and list(sw.study_per) == []
    assert dict(sw.params) == {"x": "range(0,4)", "y": "choice(0,1,2)"}
    if not sampler:
        assert sw.sampler.seed == 0


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"direction": "up"}, "direction"),
        ({"n_jobs": 0}, "n_jobs"),
        ({"n_trials": 0}, "n_trials"),
        ({"max_failure_rate": 2.0}, "max_failure_rate"),
    ],
)
def test_bad_sweeper_options_are_user_errors(kwargs: dict, key: str) -> None:
    with pytest.raises(UserError, match=f"hydra.sweeper.{key}"):
        OptunaSweeperImpl(sampler={"_target_": "optuna.samplers.TPESampler"}, **kwargs)


def test_reproducible_with_hyperband_is_refused() -> None:
    hyperband = {"_target_": "optuna.pruners.HyperbandPruner"}
    with pytest.raises(UserError, match="reproducible=true does not hold with .*hyperband"):
        OptunaSweeperImpl(sampler={"_target_": "x"}, reproducible=True, pruner=hyperband)
    OptunaSweeperImpl(sampler={"_target_": "x"}, reproducible=False, pruner=hyperband)


@pytest.mark.parametrize(
    ("workers", "n_jobs", "capacity"),
    [(2, 2, 3), (1, 2, 2), (4, 2, 2), (2, 4, 4)],
)
def test_jobs_in_flight_keep_one_more_queued_while_every_worker_is_busy(
    monkeypatch: pytest.MonkeyPatch, workers: int, n_jobs: int, capacity: int
) -> None:
    """A worker whose job ends finds the next one queued (no wait for the sweeper's tell and
    ask): one more job than workers; fewer workers than n_jobs queue already, and more workers
    would start a queued job at once."""
    from ltr_bench.launching.launcher import PoolLauncher
    from ltr_bench.launching.pools import Jobs

    monkeypatch.setattr(PoolLauncher, "start_workers", lambda self: None)  # no process started
    jobs = Jobs(PoolLauncher(n_jobs=workers), print, n_jobs=n_jobs, in_flight=True)
    assert jobs.in_flight and jobs.pool().capacity == capacity
    batches = Jobs(PoolLauncher(n_jobs=workers), print, n_jobs=n_jobs, in_flight=False)
    assert not batches.in_flight and batches.pool().capacity == n_jobs  # a batch of n_jobs


def test_another_launcher_runs_batches() -> None:
    from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

    from ltr_bench.launching.pools import Jobs

    jobs = Jobs(JoblibLauncher(n_jobs=2), print, n_jobs=2, in_flight=True)
    assert not jobs.in_flight and jobs.pool().capacity == 2
