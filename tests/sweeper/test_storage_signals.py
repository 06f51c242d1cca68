"""A SIGTERM (or Ctrl-C) that lands while the sweeper talks to its Optuna storage must leave the
storage usable, so that the trials in flight can then be failed as interrupted: no trial stays
RUNNING. The signal is forced to land at the worst place, deterministically (no timing)."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy
from optuna.trial import TrialState

from ltr_bench.launching.processes import Terminated, sigterm_raises_interrupt
from ltr_bench.sweeper import trials
from ltr_bench.sweeper.search.loop import ask_one, fail_all
from ltr_bench.sweeper.storage import open_storage, open_study
from tests.sweeper.asking_fakes import NoBeat, OneIntSpace


@pytest.fixture
def default_sigterm() -> Iterator[None]:
    """SIGTERM's default disposition, so the sweeper installs its own handler."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, previous)


def _study(tmp_path: Path) -> tuple[optuna.Study, Any, Path]:
    """A study in a new SQLite file, opened as the sweeper opens it; its storage; the file."""
    db = tmp_path / "study.db"
    rdb = open_storage(f"sqlite:///{db}", None, None)
    return open_study(rdb, "s", "maximize"), rdb, db


def _writable_by_another_connection(db: Path) -> bool:
    """Whether another connection can write now (timeout 0: a lock held elsewhere fails at once)."""
    con = sqlite3.connect(db, timeout=0)
    try:
        con.execute("update trials set state = state")
        con.commit()
        return True
    except sqlite3.OperationalError as e:
        assert "locked" in str(e)
        return False
    finally:
        con.close()


def test_a_sigterm_inside_a_storage_call_leaves_the_database_unlocked(
    tmp_path: Path, default_sigterm: None
) -> None:
    """Once the signal's exception is handled, the storage is writable again: the trials in
    flight can be failed as interrupted (not stuck RUNNING behind a lock for SQLite's 60 s)."""
    study, rdb, db = _study(tmp_path)
    in_flight = study.ask(OneIntSpace().distributions())
    fired: list[str] = []
    interrupted = False

    def signal_after_a_read(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not fired and statement.lstrip().upper().startswith("SELECT"):
            fired.append(statement)
            # The read's transaction holds SQLite's shared lock: an interrupt here left the
            # connection open with it, and no writer could commit until it was collected.
            signal.raise_signal(signal.SIGTERM)

    sqlalchemy.event.listen(rdb.engine, "after_cursor_execute", signal_after_a_read)
    try:
        with sigterm_raises_interrupt():
            study.ask(OneIntSpace().distributions())
    except Terminated:
        interrupted = True
    finally:
        sqlalchemy.event.remove(rdb.engine, "after_cursor_execute", signal_after_a_read)
    assert fired and interrupted
    assert _writable_by_another_connection(db)
    fail_all(study, [in_flight], NoBeat(), trials.FAIL_INTERRUPTED)
    trial = study.get_trials(deepcopy=False)[in_flight.number]
    assert trial.user_attrs[trials.ATTR_FAIL] == trials.FAIL_INTERRUPTED


class _SignalsWhileSampling(optuna.samplers.RandomSampler):
    """A sampler that is interrupted while it samples (the trial already exists, RUNNING)."""

    def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
        signal.raise_signal(signal.SIGTERM)
        return super().sample_independent(study, trial, name, dist)


def test_a_sigterm_while_a_trial_is_asked_fails_that_trial_as_interrupted(
    tmp_path: Path, default_sigterm: None
) -> None:
    study, _, _ = _study(tmp_path)
    study.sampler = _SignalsWhileSampling(seed=0)
    with pytest.raises(Terminated), sigterm_raises_interrupt():
        ask_one(study, OneIntSpace(), 10, NoBeat(), 0)
    (trial,) = study.get_trials(deepcopy=False)
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs[trials.ATTR_FAIL] == trials.FAIL_INTERRUPTED
