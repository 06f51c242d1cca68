"""Study names, the default SQLite path and opening storages."""

from __future__ import annotations

import re

import optuna
import pytest

from ltr_bench.errors import UserError
from ltr_bench.sweeper.storage import (
    command_study_name,
    dashboard_command,
    default_storage_url,
    default_study_name,
    file_stem,
    open_storage,
    open_study,
    redact,
    resumed_name,
    study_storage_url,
)

GROUPS = {"model", "dataset", "protocol", "hydra/launcher"}


def test_default_study_name_is_stable_and_ignores_hydra_and_sweep_keys() -> None:
    a = default_study_name(
        "cli", ["model=direct_ranker", "dataset=mq2008", "hydra.verbose=true"], "tpe", GROUPS
    )
    b = default_study_name(
        "cli",
        ["+sweep.trial_number=3", "dataset=mq2008", "model=direct_ranker", "hydra/launcher=x"],
        "tpe",
        GROUPS,
    )
    assert a == b == "cli-dataset=mq2008-model=direct_ranker-tpe"
    assert default_study_name("cli", [], "grid", GROUPS) == "cli-grid"


def test_a_study_name_shows_the_groups_and_hashes_the_other_overrides() -> None:
    fixed = ["model=lambdamart", "dataset=mq2008", "dataset.n_train=300", "experiment_name=e"]
    name = default_study_name("ltr-bench", fixed, "tpe", GROUPS)
    assert re.fullmatch(r"ltr-bench-dataset=mq2008-model=lambdamart-tpe-[0-9a-f]{8}", name)
    other = default_study_name("ltr-bench", [*fixed[:2], "dataset.n_train=400"], "tpe", GROUPS)
    assert other != name and other.startswith(name[:-8])
    assert default_study_name("ltr-bench", list(reversed(fixed)), "tpe", GROUPS) == name
    # the name earlier versions gave the same study: every fixed override, in full
    assert command_study_name("ltr-bench", fixed, "tpe") == (
        "ltr-bench-dataset.n_train=300-dataset=mq2008-experiment_name=e-model=lambdamart-tpe"
    )


def test_a_sweep_resumes_a_study_stored_under_its_earlier_name_and_file(tmp_path) -> None:
    earlier, new = "cli-x=1-tpe-kind=a", "cli-tpe-1a2b3c4d-kind=a"
    # today: one file per sweep, holding each of its studies
    fresh = study_storage_url("optuna", "cli-tpe-1a2b3c4d", new, earlier, tmp_path)
    assert fresh.endswith("/optuna/cli-tpe-1a2b3c4d.db")
    # an earlier version's file of the study's own is used while it exists
    old_url = default_storage_url("optuna", earlier, tmp_path)
    storage = open_storage(old_url, heartbeat_interval=5, grace_period=None)
    assert resumed_name(storage, new, earlier) == new  # nothing stored yet: the new name
    open_study(storage, earlier, "maximize")
    assert study_storage_url("optuna", "cli-tpe-1a2b3c4d", new, earlier, tmp_path) == old_url
    assert resumed_name(storage, new, earlier) == earlier
    open_study(storage, new, "maximize")
    assert resumed_name(storage, new, earlier) == new


def test_the_dashboard_command_names_the_storage_and_hides_a_password() -> None:
    assert dashboard_command("sqlite:////tmp/a b.db") == "optuna-dashboard 'sqlite:////tmp/a b.db'"
    assert dashboard_command("postgresql://bob:secret@db/optuna") == (
        "optuna-dashboard 'postgresql://bob:***@db/optuna'"
    )


def test_file_stem_is_safe_and_unique() -> None:
    assert file_stem("cli-dataset=mq2008-tpe") == "cli-dataset=mq2008-tpe"
    a, b = file_stem("x-path=/a/b"), file_stem("x-path=_a_b")
    assert "/" not in a and a != b and a.startswith("x-path=_a_b-")
    assert len(file_stem("m" * 500)) <= 120


def test_default_storage_url_is_under_the_start_directory(tmp_path) -> None:
    url = default_storage_url("multirun/optuna", "cli-tpe", tmp_path)
    assert url == f"sqlite:///{tmp_path.resolve()}/multirun/optuna/cli-tpe.db"
    assert (tmp_path / "multirun" / "optuna").is_dir()


def test_redact_hides_passwords() -> None:
    assert redact("postgresql://bob:secret@db:5432/optuna") == "postgresql://bob:***@db:5432/optuna"
    assert redact("sqlite:////tmp/a=b.db") == "sqlite:////tmp/a=b.db"


def test_open_study_rejects_a_changed_direction(tmp_path) -> None:
    storage = open_storage(
        f"sqlite:///{tmp_path / 's.db'}", heartbeat_interval=5, grace_period=None
    )
    study = open_study(storage, "s", "maximize")
    assert open_study(storage, "s", "maximize")._study_id == study._study_id
    with pytest.raises(UserError, match="hydra.sweeper.direction"):
        open_study(storage, "s", "minimize")
    assert isinstance(storage, optuna.storages.RDBStorage) and storage.get_heartbeat_interval() == 5


def test_open_storage_rejects_a_bad_url() -> None:
    with pytest.raises(UserError, match="hydra.sweeper.storage"):
        open_storage("not a url", heartbeat_interval=None, grace_period=None)


class _DuplicateTable(Exception):
    """Stands in for psycopg2's DuplicateTable (the driver error SQLAlchemy wraps)."""


def test_schema_creation_race_is_retried_and_other_programming_errors_are_not(
    tmp_path, monkeypatch
) -> None:
    import sqlalchemy.exc

    from ltr_bench.sweeper import signal_safe_storage, storage

    real = signal_safe_storage.SignalSafeRDBStorage
    calls: list[str] = []

    def racing(url, **kwargs):  # the first call loses the race to another worker
        calls.append(url)
        if len(calls) == 1:
            raise sqlalchemy.exc.ProgrammingError(
                "CREATE TABLE studies", {}, _DuplicateTable('relation "studies" already exists')
            )
        return real(url, **kwargs)

    monkeypatch.setattr(storage.time, "sleep", lambda s: None)
    monkeypatch.setattr(signal_safe_storage, "SignalSafeRDBStorage", racing)
    opened = open_storage(f"sqlite:///{tmp_path / 'race.db'}", None, None)
    assert isinstance(opened, real) and len(calls) == 2

    def denied(url, **kwargs):
        raise sqlalchemy.exc.ProgrammingError(
            "SELECT", {}, _DuplicateTable("permission denied for table studies")
        )

    monkeypatch.setattr(signal_safe_storage, "SignalSafeRDBStorage", denied)
    with pytest.raises(UserError, match="permission denied"):
        open_storage(f"sqlite:///{tmp_path / 'denied.db'}", None, None)
