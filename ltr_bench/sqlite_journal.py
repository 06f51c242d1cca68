"""Local SQLite stores (Optuna studies, the MLflow store) in write-ahead-log mode.

In SQLite's default rollback-journal mode every commit waits for the disk (an fsync), and a sweep
commits a few dozen times per trial: Optuna stores each sampled parameter, each reported fold
and the result in its own transaction, and MLflow creates, logs and ends the trial's run. On a
virtual machine's disk each commit takes milliseconds, a share of every trial that racing cannot
remove. In write-ahead-log mode (``journal_mode=WAL``) with ``synchronous=NORMAL`` a commit
appends to the log without waiting for the disk. A process that dies or is killed loses nothing it
committed; only a crash of the operating system or a power cut can lose the last transactions,
never the database's consistency. Readers and a writer also no longer block each other.

:func:`install` registers, once per process, a SQLAlchemy listener that sets both on every new
connection to a SQLite file; Optuna's and MLflow's engines are made after it. WAL needs a file
on a local disk: set ``LTR_SQLITE_JOURNAL=delete`` (SQLite's default) when a store lives on a
network file system.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import Any

log = logging.getLogger(__name__)

ENV = "LTR_SQLITE_JOURNAL"  # "wal" (default) or "delete": SQLite's own default
_installed = False


def mode() -> str:
    """The journal mode asked for by ``LTR_SQLITE_JOURNAL`` (``wal`` or ``delete``)."""
    value = os.environ.get(ENV, "wal").strip().lower() or "wal"
    if value not in ("wal", "delete"):
        from ltr_bench.errors import UserError

        raise UserError(f"{ENV}={value!r}: choose 'wal' (the default) or 'delete'.")
    return value


def install() -> None:
    """Set the journal mode on every SQLite file connection SQLAlchemy opens from now on
    (idempotent; nothing to do for ``delete``)."""
    global _installed
    if _installed or mode() != "wal":
        return
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "connect", _on_connect)
    _installed = True


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    if not isinstance(dbapi_connection, sqlite3.Connection):
        return
    cursor = dbapi_connection.cursor()
    try:
        files = [row[2] for row in cursor.execute("PRAGMA database_list") if row[1] == "main"]
        if not files or not files[0]:
            return  # an in-memory or temporary database
        (journal,) = cursor.execute("PRAGMA journal_mode=WAL").fetchone()
        if str(journal).lower() != "wal":
            log.warning("%s stays in journal mode %s (WAL refused)", files[0], journal)
            return
        cursor.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.OperationalError as e:  # locked by another process's long write: keep going
        log.debug("journal mode of a SQLite store not changed: %s", e)
    finally:
        cursor.close()
