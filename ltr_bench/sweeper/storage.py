"""Where a study lives: study names, the default SQLite path, opening RDB storages (Optuna loads
only then: a job opens its trial's storage)."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
import time
import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from ltr_bench.errors import UserError

if TYPE_CHECKING:
    import optuna

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+@-]+")


@dataclass(frozen=True)
class StudyNames:
    """A study's name, the name an earlier version gave it (found when resuming its sweep), and
    the name of the default SQLite file it shares with its sweep's other studies."""

    study: str
    earlier: str
    file: str


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def command_study_name(job_name: str, task_overrides: Sequence[str], sampler_name: str) -> str:
    """``<job>[-<override>...]-<sampler>``: the sorted fixed overrides but ``hydra``/``sweep``
    (the name earlier versions gave a study; still found, so that their sweeps resume)."""
    kept = sorted(o for o in task_overrides if not o.lstrip("+~").startswith(("hydra.", "sweep.")))
    return "-".join([job_name, *kept, sampler_name])


def default_study_name(
    job_name: str, task_overrides: Sequence[str], sampler_name: str, groups: Collection[str]
) -> str:
    """``<job>[-<group>=<option>...]-<sampler>[-<hash>]``: the config groups chosen on the
    command line (``groups``: model, dataset, ...) say what the study is; the other fixed
    overrides (but ``hydra.``/``sweep.`` keys and the launcher, which decide no result) are one
    short hash of them, so that two commands differing there keep separate studies."""
    kept = sorted(
        o
        for o in task_overrides
        if not o.lstrip("+~").startswith(("hydra.", "sweep.", "hydra/launcher="))
    )
    readable = [o for o in kept if _key(o) in groups and not _key(o).startswith("hydra/")]
    rest = [o for o in kept if o not in readable]
    parts = [job_name, *readable, sampler_name]
    if rest:
        parts.append(hashlib.sha1("\n".join(rest).encode()).hexdigest()[:8])
    return "-".join(parts)


def dashboard_command(url: str) -> str:
    """The command that opens the studies stored at ``url`` in optuna-dashboard (which serves
    them on http://127.0.0.1:8080 unless given ``--host``/``--port``); a password is hidden."""
    import shlex

    return f"optuna-dashboard {shlex.quote(redact(url))}"


def file_stem(study_name: str, max_len: int = 120) -> str:
    """A file-name-safe stem for ``study_name``; a short hash keeps altered names unique."""
    safe = _UNSAFE.sub("_", study_name).strip("._") or "study"
    if safe == study_name and len(safe) <= max_len:
        return safe
    digest = hashlib.sha1(study_name.encode()).hexdigest()[:8]
    return f"{safe[: max_len - 9]}-{digest}"


def default_storage_url(storage_dir: str | Path, study_name: str, base_dir: str | Path) -> str:
    """``sqlite:///<base_dir>/<storage_dir>/<stem>.db`` (``storage_dir`` may be absolute)."""
    directory = Path(base_dir) / Path(storage_dir).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(directory / f'{file_stem(study_name)}.db').resolve()}"


def study_storage_url(
    storage_dir: str | Path, file_name: str, study_name: str, earlier: str, base_dir: str | Path
) -> str:
    """The default storage of a study: ``<storage_dir>/<file_name>.db``, one SQLite file for
    all the studies of a sweep (one dashboard shows them); the file of its own that an earlier
    version gave the study (named after ``earlier``, its name then) while that file exists."""
    url = default_storage_url(storage_dir, file_name, base_dir)
    for name in dict.fromkeys((earlier, study_name)):
        own = default_storage_url(storage_dir, name, base_dir)
        db = sqlite_file(own)
        if own != url and db is not None and db.is_file():
            return own
    return url


def sqlite_file(url: str) -> Path | None:
    """The database file of a ``sqlite:///`` URL (``~`` expanded), None for other databases."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :].split("?", 1)[0]
    return None if path in ("", ":memory:") else Path(path).expanduser()


def redact(url: str) -> str:
    """The URL with any password hidden, for logs and result files."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # not a URL, or a bad port: nothing to hide
        return url
    return url if parsed.password is None else parsed.render_as_string(hide_password=True)


def with_installed_driver(url: str) -> str:
    """``postgresql://`` -> ``postgresql+psycopg2://`` when only psycopg2 is installed."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("postgresql", "postgres"):
        if (
            importlib.util.find_spec("psycopg") is None
            and importlib.util.find_spec("psycopg2") is not None
        ):
            return f"postgresql+psycopg2://{rest}"
    return url


def open_storage(
    url: str, heartbeat_interval: int | None, grace_period: int | None, existing: bool = False
) -> optuna.storages.RDBStorage:
    """Open (create) an RDB storage whose calls hold Ctrl-C/SIGTERM until they return: SQLite
    waits 60 s when busy; a lost race creating the tables or a busy database is retried briefly.
    ``existing``: the sweeper has created it and checked its schema (a job's storage), so
    neither is done again."""
    import optuna
    from sqlalchemy import exc

    from ltr_bench.sweeper.signal_safe_storage import SignalSafeRDBStorage

    url = with_installed_driver(url)
    where = f"hydra.sweeper.storage={redact(url)}"
    db = sqlite_file(url)
    if db is not None and not db.parent.is_dir():
        # as for tracking.tracking_uri, a folder you name must exist (storage_dir is created)
        raise UserError(
            f"{where}: folder {db.parent} does not exist; create it or point hydra.sweeper.storage elsewhere"
        )
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return SignalSafeRDBStorage(
                    url,
                    engine_kwargs=engine_kwargs,
                    heartbeat_interval=heartbeat_interval,
                    grace_period=grace_period,
                    skip_compatibility_check=existing,
                    skip_table_creation=existing,
                )
        except exc.ArgumentError as e:
            raise UserError(
                f"hydra.sweeper.storage: '{redact(url)}' is not a database URL ({e})."
            ) from e
        except ImportError as e:
            raise UserError(
                f"hydra.sweeper.storage: no database driver installed for '{redact(url)}' ({e})."
            ) from e
        except (exc.OperationalError, exc.IntegrityError, exc.ProgrammingError) as e:
            lost_race = not isinstance(e, exc.ProgrammingError) or "already exists" in str(e.orig)
            if not lost_race or attempt == 4:
                raise UserError(
                    f"hydra.sweeper.storage: cannot open '{redact(url)}': {e.orig}."
                ) from e
            log.info("Storage busy (%s); retrying.", e.orig)
            time.sleep(0.5 * (attempt + 1))
        except exc.DatabaseError as e:  # e.g. "file is not a database"
            what = (
                f"{db} is not a SQLite database" if db else f"cannot open the database ({e.orig})"
            )
            raise UserError(
                f"{where}: {what}; move it away or point hydra.sweeper.storage elsewhere"
            ) from None
    raise AssertionError("unreachable")


def resumed_name(storage: optuna.storages.BaseStorage, study_name: str, earlier: str) -> str:
    """``study_name``, or ``earlier`` (the name an earlier version gave the same study) when the
    storage holds a study of that name and none of the new one: its sweep resumes there."""
    if earlier == study_name:
        return study_name
    stored = {s.study_name for s in storage.get_all_studies()}
    return earlier if earlier in stored and study_name not in stored else study_name


def open_study(
    storage: optuna.storages.RDBStorage, study_name: str, direction: str
) -> optuna.Study:
    """Create the study or load it; a stored study with another direction is a UserError."""
    import optuna
    from sqlalchemy import exc

    for attempt in range(5):
        try:
            study = optuna.create_study(
                storage=storage,
                study_name=study_name,
                direction=cast(Literal["minimize", "maximize"], direction),
                load_if_exists=True,
                sampler=optuna.samplers.RandomSampler(),  # replaced by the sweeper
            )
            break
        except (exc.OperationalError, exc.IntegrityError):
            if attempt == 4:
                raise
            time.sleep(0.5 * (attempt + 1))
    stored = study.direction.name.lower()
    if stored != direction:
        raise UserError(
            f"hydra.sweeper.direction is {direction} but study '{study_name}' was created with "
            f"{stored}; set hydra.sweeper.study_name to start a new study."
        )
    return study
