"""Budget counting, the exhaustive grid sampler and interrupted-trial detection (in-process)."""

from __future__ import annotations

import datetime
import itertools
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from ltr_bench.launching.processes import is_dead_local_worker, worker_identity
from ltr_bench.sweeper.liveness import fail_interrupted_trials
from ltr_bench.sweeper.search.grid import GridSearchSampler
from ltr_bench.sweeper.trials import ATTR_FAIL, ATTR_WORKER, counts_toward_budget, settled_others

SPACE = {"x": [0, 1, 2], "y": ["a", "b"]}
DISTS = {"x": IntDistribution(0, 2), "y": CategoricalDistribution(["a", "b"])}


def _trial(state: TrialState, reason: str | None = None, **params):
    attrs = {ATTR_FAIL: reason} if reason else {}
    value = 1.0 if state == TrialState.COMPLETE else None
    return create_trial(
        state=state,
        value=value,
        params=params,
        distributions={k: DISTS[k] for k in params},
        user_attrs=attrs,
    )


@pytest.mark.parametrize(
    ("state", "reason", "counts"),
    [
        (TrialState.COMPLETE, None, True),
        (TrialState.PRUNED, None, True),
        (TrialState.RUNNING, None, True),
        (TrialState.WAITING, None, False),
        (TrialState.FAIL, "exception", True),
        (TrialState.FAIL, "nan", True),
        (TrialState.FAIL, "interrupted", False),
        (TrialState.FAIL, "config_error", False),
        (TrialState.FAIL, "duplicate", False),
        (TrialState.FAIL, "surplus", False),
        (TrialState.FAIL, None, False),  # failed by Optuna's heartbeat or another tool
    ],
)
def test_counts_toward_budget(state: TrialState, reason: str | None, counts: bool) -> None:
    assert counts_toward_budget(_trial(state, reason, x=0)) is counts


def _ask_all(study: optuna.Study, n: int) -> list[tuple]:
    points = []
    for _ in range(n):
        trial = study.ask(DISTS)
        points.append((trial.params["x"], trial.params["y"]))
        study.tell(trial, 0.0)
    return points


def test_grid_sampler_walks_the_product_and_skips_taken_points() -> None:
    study = optuna.create_study(sampler=GridSearchSampler(SPACE))
    study.add_trial(_trial(TrialState.COMPLETE, x=0, y="b"))
    study.add_trial(_trial(TrialState.FAIL, "exception", x=1, y="a"))  # evaluated: not redone
    study.add_trial(_trial(TrialState.FAIL, "interrupted", x=2, y="a"))  # interrupted: redone
    product = list(itertools.product(SPACE["x"], SPACE["y"]))
    assert _ask_all(study, 4) == [p for p in product if p not in {(0, "b"), (1, "a")}]
    assert study.sampler.free_points(study) == []


def test_grid_sampler_seed_shuffles_the_walk() -> None:
    walks = []
    for seed in (None, 3, 3):
        study = optuna.create_study(sampler=GridSearchSampler(SPACE, seed=seed))
        walks.append(_ask_all(study, 6))
    assert walks[0] == list(itertools.product(SPACE["x"], SPACE["y"]))
    assert sorted(walks[1]) == sorted(walks[0]) and walks[1] == walks[2]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_worker_identity_and_dead_process_detection() -> None:
    me = worker_identity()
    assert not is_dead_local_worker(me)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        alive = {
            **me,
            "pid": child.pid,
            "start": open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[19],
        }
        assert not is_dead_local_worker(alive)
    finally:
        child.kill()
        child.wait()
    assert is_dead_local_worker(alive)
    assert not is_dead_local_worker(
        {**alive, "host": "another-host"}
    )  # only its heartbeat can tell


def test_fail_interrupted_trials(tmp_path) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    mine = study.ask(DISTS)
    mine.set_user_attr(ATTR_WORKER, worker_identity())
    dead = study.ask(DISTS)
    dead.set_user_attr(ATTR_WORKER, {**worker_identity(), "pid": 2**22 + 1, "start": "0"})
    remote = study.ask(DISTS)  # another host, no heartbeat configured: left alone
    remote.set_user_attr(ATTR_WORKER, {**worker_identity(), "host": "another-host"})
    foreign = study.ask(DISTS)  # no owner attribute
    assert fail_interrupted_trials(study, storage, grace_period_s=3600) == [dead.number]
    later = datetime.datetime.now() + datetime.timedelta(hours=2)  # a fake clock, no waiting
    assert fail_interrupted_trials(study, storage, 3600, now=lambda: later) == [foreign.number]
    states = {t.number: (t.state, t.user_attrs.get(ATTR_FAIL)) for t in study.get_trials()}
    assert states[dead.number] == (TrialState.FAIL, "interrupted")
    assert states[foreign.number] == (TrialState.FAIL, "interrupted")
    assert states[mine.number][0] == states[remote.number][0] == TrialState.RUNNING


def test_settled_others_reads_an_earlier_trial_once_its_ask_has_written_every_param(
    tmp_path,
) -> None:
    """Another worker between its ask and its last parameter write must not look like a free
    point (two workers then ran the same grid point)."""
    import threading

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    half = study.ask()  # the other worker's trial: created, no params written yet
    half.suggest_int("x", 0, 2)
    mine = study.ask(DISTS)
    finishing = threading.Thread(target=half.suggest_categorical, args=("y", ["a", "b"]))
    finishing.start()  # its last write may land before or during the call: the same result
    (seen,) = settled_others(study, mine.number, ["x", "y"], wait_s=600)
    finishing.join()
    assert set(seen.params) == {"x", "y"}
    gone = study.ask()  # a worker that died mid-ask: the wait for it is bounded
    later = study.ask(DISTS)
    others = settled_others(study, later.number, ["x", "y"], wait_s=0)
    assert [t.number for t in others] == [half.number, mine.number, gone.number]
