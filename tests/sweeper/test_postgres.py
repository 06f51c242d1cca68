"""Two sweep workers share one study on a real, throw-away PostgreSQL server.

The server (Debian's ``postgresql`` package) is started on 127.0.0.1 with a free port and a
temporary data directory; the test is skipped, with the reason, where that is impossible.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sweeper.toy import both_workers_run, calls, complete, load, point, reasons, start_toy
from tests.waiting import HANG_GUARD_S, TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)


def _bindir() -> Path | None:
    for candidate in [
        shutil.which("initdb"),
        *sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True),
    ]:
        if candidate and Path(candidate).with_name("postgres").exists():
            return Path(candidate).resolve().parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """``postgresql://postgres@127.0.0.1:<port>/postgres`` of a server living for this module."""
    bindir = _bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, postgres) not found; apt-get install postgresql"
        )
    pytest.importorskip(
        "psycopg2", reason="psycopg2 (the dev extra) is needed to talk to PostgreSQL"
    )
    run_as: dict = {}
    if os.geteuid() == 0:  # the server refuses to run as root: drop to the package's user
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        run_as = {"user": "postgres", "group": "postgres", "extra_groups": []}
    root = Path(tempfile.mkdtemp(prefix="ltr-pg-"))
    root.chmod(0o755)
    if run_as:
        shutil.chown(root, user="postgres", group="postgres")
    port = _free_port()
    init = subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(root / "data"),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
        capture_output=True,
        text=True,
        cwd=root,
        **run_as,
    )
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"initdb failed: {init.stderr.strip()[-300:]}")
    server = subprocess.Popen(
        [
            str(bindir / "postgres"),
            "-D",
            str(root / "data"),
            "-k",
            str(root),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-c",
            "fsync=off",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=root,
        **run_as,
    )
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    try:
        import psycopg2

        deadline = time.monotonic() + HANG_GUARD_S  # a last guard; start-up is the event
        while True:
            try:
                psycopg2.connect(
                    host="127.0.0.1", port=port, user="postgres", dbname="postgres"
                ).close()
                break
            except psycopg2.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("the temporary PostgreSQL server did not start")
                time.sleep(0.2)
        yield url
    finally:
        server.send_signal(signal.SIGINT)  # fast shutdown
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)


def test_two_workers_run_one_postgresql_study_to_completion(
    tmp_path: Path, postgres_url: str
) -> None:
    args = [
        f"hydra.sweeper.storage={postgres_url}",
        "hydra.sweeper.study_name=pg",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=null",
        "x=range(0,3)",
        "y=choice(1,2)",
        "sleep_s=0.3",
        *both_workers_run(tmp_path),
    ]
    workers = [
        start_toy(tmp_path, *args, f"hydra.sweep.dir={tmp_path / f'w{i}'}", log_name=f"w{i}.log")
        for i in (0, 1)
    ]
    for i, w in enumerate(workers):
        assert w.wait(timeout=HANG_GUARD_S) == 0, (tmp_path / f"w{i}.log").read_text()[-3000:]
    trials = load(postgres_url.replace("postgresql://", "postgresql+psycopg2://"), "pg")
    done = complete(trials)
    records = calls(tmp_path)
    assert len(done) == 6 and len(records) == 6  # the 3 x 2 grid, every trial exactly once
    assert sorted(point(t) for t in done) == [(x, y) for x in range(3) for y in (1, 2)]
    assert sorted(r["trial"] for r in records) == sorted(t.number for t in done)
    assert len({r["pid"] for r in records}) == 2  # both workers took trials
    assert set(reasons(trials).values()) <= {"duplicate", "surplus"}


def test_two_workers_race_trials_in_one_postgresql_study(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning through a PostgreSQL study: each job reports into its own trial in the server, and
    the pruned trials count toward the shared budget. The pruner is deterministic (odd trial
    numbers stop after their first step), so what is pruned does not depend on interleaving."""
    from optuna.trial import TrialState

    from tests.sweeper.pruners import PRUNE_ODD, pythonpath_with_repo
    from tests.sweeper.test_pruning import _check_pruned

    monkeypatch.setenv("PYTHONPATH", pythonpath_with_repo())
    args = [
        f"hydra.sweeper.storage={postgres_url}",
        "hydra.sweeper.study_name=pg_race",
        "steps=3",
        *PRUNE_ODD,
        "hydra.sweeper.n_trials=8",
        "sleep_s=0.2",
        *both_workers_run(tmp_path),
    ]
    workers = [
        start_toy(tmp_path, *args, f"hydra.sweep.dir={tmp_path / f'w{i}'}", log_name=f"w{i}.log")
        for i in (0, 1)
    ]
    for i, w in enumerate(workers):
        assert w.wait(timeout=HANG_GUARD_S) == 0, (tmp_path / f"w{i}.log").read_text()[-3000:]
    trials = load(postgres_url.replace("postgresql://", "postgresql+psycopg2://"), "pg_race")
    records = calls(tmp_path)
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    done = complete(trials)
    assert len(pruned) + len(done) == 8 and len(records) == 8  # the budget, each trial run once
    assert (
        pruned and all(t.number % 2 == 1 for t in pruned) and all(t.number % 2 == 0 for t in done)
    )
    assert len({r["pid"] for r in records}) == 2  # both workers took trials
    _check_pruned(trials, records)
    assert set(reasons(trials).values()) <= {"duplicate", "surplus"}
