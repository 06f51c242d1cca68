"""A new SQLite store is a copy of a cached empty one, and MLflow cannot tell it from its own."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ltr_bench.tracking.store import ensure_experiment, seed_sqlite_store


def _canonical(sql: str | None) -> tuple[str, ...] | None:
    """A CREATE statement as its sorted lines: MLflow's own migrations write a table's CHECK
    constraints in a different order from one store to the next (two stores it creates in one
    process can differ so), so the order of a statement's lines is not compared."""
    return None if sql is None else tuple(sorted(x.strip().rstrip(",") for x in sql.splitlines()))


def _dump(db: Path) -> dict[str, list[Any]]:
    """Schema, migration head and rows that a new store holds (times left out)."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        rows = con.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
        schema = sorted(((t, n, _canonical(q)) for t, n, q in rows), key=str)
        head = con.execute("SELECT version_num FROM alembic_version").fetchall()
        experiments = con.execute(
            "SELECT experiment_id, name, artifact_location, lifecycle_stage, workspace FROM experiments"
        ).fetchall()
        workspaces = con.execute("SELECT * FROM workspaces").fetchall()
    return {"schema": schema, "head": head, "experiments": experiments, "workspaces": workspaces}


def test_a_seeded_store_is_what_mlflow_creates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    own, seeded = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    mlflow.MlflowClient(f"sqlite:///{own}").search_experiments()
    assert seed_sqlite_store(seeded)
    mlflow.MlflowClient(f"sqlite:///{seeded}").search_experiments()  # MLflow adds Default
    mine, theirs = _dump(seeded), _dump(own)
    for key in mine:  # a set difference names what differs
        only_seeded = set(map(str, mine[key])) - set(map(str, theirs[key]))
        only_own = set(map(str, theirs[key])) - set(map(str, mine[key]))
        assert not only_seeded and not only_own, (key, only_seeded, only_own)
    assert _dump(seeded)["experiments"][0][1] == "Default"


def test_the_template_is_made_once_per_mlflow_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "cache"))
    assert seed_sqlite_store(tmp_path / "one.db")
    (template,) = (tmp_path / "cache" / "mlflow").glob("empty-store-*.db")
    made = template.stat().st_mtime_ns
    assert seed_sqlite_store(tmp_path / "two.db")
    assert template.stat().st_mtime_ns == made
    assert (tmp_path / "two.db").read_bytes() == template.read_bytes()
    assert not [p for p in template.parent.iterdir() if p != template]  # no scratch left behind


def test_caching_off_leaves_creation_to_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LTR_CACHE", "off")
    assert not seed_sqlite_store(tmp_path / "mlflow.db")
    assert not (tmp_path / "mlflow.db").exists()
    experiment = ensure_experiment(f"sqlite:///{tmp_path / 'mlflow.db'}", "plain")
    assert experiment == "1"


def test_ensure_experiment_on_a_new_folder_uses_the_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "cache"))
    db = tmp_path / "mlflow.db"
    experiment = ensure_experiment(f"sqlite:///{db}", "ltr_bench")
    assert list((tmp_path / "cache" / "mlflow").glob("empty-store-*.db"))
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    assert client.get_experiment(experiment).name == "ltr_bench"
    assert client.get_experiment("0").name == "Default"
