"""Local SQLite stores in write-ahead-log mode: the Optuna study and the MLflow store a run opens
are in WAL with synchronous=NORMAL; in-memory databases are left alone; LTR_SQLITE_JOURNAL=delete
keeps SQLite's default; anything else is one sentence naming the variable."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy import event
from sqlalchemy.engine import Engine

from ltr_bench import sqlite_journal
from ltr_bench.errors import UserError


@pytest.fixture
def fresh() -> Iterator[None]:
    """No listener during the test; the process's own state (installed or not) afterwards."""
    was = sqlite_journal._installed
    if was:
        event.remove(Engine, "connect", sqlite_journal._on_connect)
    sqlite_journal._installed = False
    yield
    if sqlite_journal._installed:
        event.remove(Engine, "connect", sqlite_journal._on_connect)
    if was:
        event.listen(Engine, "connect", sqlite_journal._on_connect)
    sqlite_journal._installed = was


def _journal(path: Path) -> str:
    with sqlite3.connect(path) as con:
        return str(con.execute("PRAGMA journal_mode").fetchone()[0])


def test_a_file_store_opened_after_install_is_in_wal_with_normal_sync(
    tmp_path: Path, fresh: None
) -> None:
    sqlite_journal.install()
    sqlite_journal.install()  # idempotent: one listener
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with engine.connect() as con:
        assert con.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert con.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
    engine.dispose()
    assert _journal(tmp_path / "a.db") == "wal"  # persistent: every later reader sees WAL
    memory = sqlalchemy.create_engine("sqlite://")
    with memory.connect() as con:
        assert con.exec_driver_sql("PRAGMA journal_mode").scalar() == "memory"


def test_delete_keeps_sqlites_default_and_other_values_are_refused(
    tmp_path: Path, fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sqlite_journal.ENV, "delete")
    sqlite_journal.install()
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'b.db'}")
    with engine.connect() as con:
        assert con.exec_driver_sql("PRAGMA journal_mode").scalar() == "delete"
    engine.dispose()
    monkeypatch.setenv(sqlite_journal.ENV, "truncate")
    with pytest.raises(UserError, match=r"LTR_SQLITE_JOURNAL='truncate': choose 'wal'"):
        sqlite_journal.install()


def test_the_sweeps_study_and_the_mlflow_store_are_in_wal(tmp_path: Path, fresh: None) -> None:
    from ltr_bench.sweeper.storage import open_storage
    from ltr_bench.tracking.store import ensure_experiment

    study = tmp_path / "study.db"
    storage = open_storage(f"sqlite:///{study}", None, None)
    storage.engine.dispose()
    store = tmp_path / "mlflow.db"
    ensure_experiment(f"sqlite:///{store}", "wal")
    assert _journal(study) == "wal" and _journal(store) == "wal"
