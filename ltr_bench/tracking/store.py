"""The MLflow store: its URI, its creation (under an inter-process lock) and opening a client.

The SQLite store and the experiment are created under an inter-process file lock (in the temp
dir, keyed by the database path): two processes creating a fresh ``mlflow.db`` at once otherwise
fail with ``duplicate column name: step``. Readers go through :func:`open_client`, never through
the process-wide tracking URI.

A new SQLite store is a copy of an empty, migrated one kept in the cache folder per MLflow version
(:func:`seed_sqlite_store`): MLflow's own creation runs every schema migration, about 4 s, in each
new folder. The copy holds no experiment; MLflow creates its Default experiment on opening, with
the artifact root of the process that opens it, as it does for a store it created itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from ltr_bench.errors import UserError, exception_chain
from ltr_bench.tracking.names import sanitize_key
from ltr_bench.tracking.ui_view import experiment_ui_tags

log = logging.getLogger(__package__)


def resolve_tracking_uri(uri: str | None, base_dir: str | os.PathLike[str]) -> str | None:
    """Make a relative ``sqlite:///relative.db`` absolute against ``base_dir``; other URIs pass."""
    if not uri:
        return uri
    prefix = "sqlite:///"
    if uri.startswith(prefix):
        path = uri[len(prefix) :]
        if path and path != ":memory:" and not os.path.isabs(path):
            return prefix + str((Path(base_dir) / path).resolve())
    return uri


def sqlite_path(uri: str | None) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    if uri and uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :])
    return None


def store_lock(tracking_uri: str | None) -> Any:
    """An exclusive inter-process lock for a SQLite store (a no-op for servers).

    The lock file lives in the temp dir, keyed by the database path, so nothing is written beside
    the user's database.
    """
    db = sqlite_path(tracking_uri)
    if db is None:
        return contextlib.nullcontext()
    import hashlib

    from filelock import FileLock

    digest = hashlib.sha1(str(db.resolve()).encode()).hexdigest()[:16]
    return FileLock(str(Path(tempfile.gettempdir()) / f"ltr_bench-mlflow-{digest}.lock"))


def quiet_mlflow() -> None:
    """Silence MLflow's and alembic's INFO lines (store migrations) in a run's output."""
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def ensure_experiment(tracking_uri: str, name: str, artifact_location: str | None = None) -> str:
    """Create the store (if new) and the experiment ``name`` (if missing); return its id.

    For a SQLite store this happens under an exclusive inter-process file lock, so any
    number of parallel jobs may call it; for a server, a creation race is resolved by re-reading.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    quiet_mlflow()
    db = sqlite_path(tracking_uri)
    if db is not None:
        if not db.parent.exists():
            raise UserError(
                f"tracking.tracking_uri={tracking_uri}: folder {db.parent} does not exist; "
                "create it or point tracking.tracking_uri elsewhere"
            )
        if artifact_location is None:
            artifact_location = str(db.parent / "mlruns" / sanitize_key(name).replace("/", "_"))
    with store_lock(tracking_uri):
        if db is not None and not db.exists():
            seed_sqlite_store(db)
        try:
            client = mlflow.MlflowClient(tracking_uri)  # opens (and migrates) a SQLite store
            exp = client.get_experiment_by_name(name)
        except MlflowException as exc:  # unreachable server, bad URI
            raise UserError(
                f"tracking.tracking_uri={tracking_uri}: cannot reach the MLflow store ({exc}); "
                "start the server or use tracking=mlflow"
            ) from None
        except Exception as exc:
            if db is not None and _is_not_a_database(exc):
                raise UserError(
                    f"tracking.tracking_uri={tracking_uri}: {db} is not a SQLite database; "
                    "move it away or point tracking.tracking_uri elsewhere"
                ) from None
            raise
        ui_tags = experiment_ui_tags()  # the "Machine learning" kind and a view with metric columns
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                client.restore_experiment(exp.experiment_id)
            for key, value in ui_tags.items():
                if key not in (exp.tags or {}):
                    client.set_experiment_tag(exp.experiment_id, key, value)
            return exp.experiment_id
        try:
            return client.create_experiment(name, artifact_location=artifact_location, tags=ui_tags)
        except MlflowException:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id


def seed_sqlite_store(db: Path) -> bool:
    """Copy the cached empty store of this MLflow version to ``db`` (made once per version, in a
    scratch folder, by MLflow itself). False, leaving creation to MLflow, where caching is off
    (``LTR_CACHE=off``) or the cache folder is not writable."""
    import shutil
    import sqlite3

    import mlflow

    from ltr_bench.config.cache_root import resolve_cache_dir

    root = resolve_cache_dir()
    if root is None:
        return False
    template = root / "mlflow" / f"empty-store-{mlflow.__version__}.db"
    try:
        if not template.exists():
            template.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=template.parent) as scratch:
                fresh = Path(scratch) / "mlflow.db"
                mlflow.MlflowClient(f"sqlite:///{fresh}").search_experiments()  # every migration
                with contextlib.closing(sqlite3.connect(fresh)) as con, con:
                    con.execute("DELETE FROM experiments")  # MLflow re-creates Default on opening
                os.replace(fresh, template)  # atomic: a parallel process sees all or nothing
        shutil.copyfile(template, db)
    except OSError as exc:
        log.warning("Not using the cached empty MLflow store (%s); MLflow creates %s.", exc, db)
        return False
    return True


def _is_not_a_database(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps) is SQLite's "file is not a database" (a garbage file)."""
    import sqlalchemy.exc

    return any(
        isinstance(error, sqlalchemy.exc.DatabaseError) and "not a database" in str(error)
        for error in exception_chain(exc)
    )


def open_client(tracking_uri: str) -> Any:
    """An ``MlflowClient`` bound to ``tracking_uri`` (never the process-wide tracking URI)."""
    import mlflow

    quiet_mlflow()
    return mlflow.MlflowClient(tracking_uri)


def log_inputs_past_rival_inserts(
    client: Any, run_id: str, items: list[Any], tries: int = 3
) -> None:
    """``client.log_inputs``, again when a parallel worker inserted the same dataset meanwhile.

    MLflow looks up which datasets of the experiment exist, then inserts the missing ones: two
    workers logging one new dataset at once both insert it, and the later breaks the datasets'
    unique constraint. Tried again, the lookup finds the committed row and only links it.
    """
    import sqlalchemy.exc

    from ltr_bench.errors import find_in_chain

    for attempt in range(tries):
        try:
            client.log_inputs(run_id, datasets=items)
            return
        except Exception as e:
            if attempt == tries - 1 or find_in_chain(e, (sqlalchemy.exc.IntegrityError,)) is None:
                raise
            log.info("A parallel worker logged the same dataset; linking it to run %s.", run_id)
