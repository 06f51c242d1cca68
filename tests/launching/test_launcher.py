"""The ``ltr_pool`` launcher (ltr_bench.launching.launcher): Hydra finds it, a batch of any sweeper
runs through Hydra's own ``run_job`` in its worker processes, and its workers start with their
thread pools capped, are ended by ``abort`` (their jobs with them) and by ``shutdown``."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher

from ltr_bench.errors import UserError
from ltr_bench.launching import worker
from ltr_bench.launching.launcher import LAUNCHER_TARGET, PoolLauncher
from tests.sweeper.toy import TOY_APP
from tests.waiting import TEST_GUARD_S, wait_until

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

TOY_CONF = TOY_APP.parent / "conf"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _environment(name: str) -> str | None:
    """A worker's environment variable (called in the worker)."""
    return os.environ.get(name)


def _die() -> None:
    """A call whose worker process dies (killed, out of memory)."""
    os.kill(os.getpid(), signal.SIGKILL)


def test_the_launcher_is_a_plugin_hydra_finds_and_composes() -> None:
    names = {f"{p.__module__}.{p.__name__}" for p in Plugins.instance().discover(Launcher)}
    assert LAUNCHER_TARGET in names
    with initialize_config_dir(version_base="1.3", config_dir=str(TOY_CONF)):
        cfg = compose("config", overrides=["hydra/launcher=ltr_pool"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_ == LAUNCHER_TARGET and cfg.hydra.launcher.n_jobs == -1


def test_a_launcher_without_workers_is_refused() -> None:
    with pytest.raises(UserError, match="hydra.launcher.n_jobs=0 starts no job"):
        PoolLauncher(n_jobs=0).setup(hydra_context=None, task_function=print, config=None)  # type: ignore[arg-type]
    assert PoolLauncher(n_jobs=-1).n_workers == (os.cpu_count() or 1)
    assert PoolLauncher(n_jobs=3).n_workers == 3


def test_a_batch_of_another_sweeper_runs_each_job_through_hydras_run_job(tmp_path: Path) -> None:
    """Hydra's basic sweeper hands the launcher one batch: each job runs in a worker process (not
    the app's), in its own output folder with the ``.hydra`` files Hydra writes, its job number
    in its config; a failing job fails alone."""
    cmd = [
        sys.executable,
        str(Path(__file__).parent / "batch_app.py"),
        "--multirun",
        "hydra/launcher=ltr_pool",
        "hydra.launcher.n_jobs=2",
        "hydra.sweep.dir=multirun/sweep",
        f"+calls_file={tmp_path / 'calls.jsonl'}",
        "+fail_x=2",
        "+x=0,1,2",
    ]
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _, err = proc.communicate(timeout=TEST_GUARD_S)
    assert proc.returncode == 1 and "batch failure for x=2" in err  # Hydra reports it
    lines = (tmp_path / "calls.jsonl").read_text().splitlines()
    records = [yaml.safe_load(line) for line in lines]
    assert sorted(r["x"] for r in records) == [0, 1, 2]
    workers = {r["pid"] for r in records}
    assert len(workers) <= 2 and proc.pid not in workers
    for num in range(3):
        job = tmp_path / "multirun" / "sweep" / str(num) / ".hydra"
        assert {p.name for p in job.iterdir()} == {"config.yaml", "hydra.yaml", "overrides.yaml"}
        hydra_cfg = yaml.safe_load((job / "hydra.yaml").read_text())["hydra"]
        assert hydra_cfg["job"]["num"] == num and hydra_cfg["job"]["id"] == f"batch_app_{num}"
        assert yaml.safe_load((job / "overrides.yaml").read_text())[-1] == f"+x={num}"


def test_workers_start_capped_and_end_on_abort_and_on_shutdown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BLIS_NUM_THREADS", raising=False)
    launcher = PoolLauncher(n_jobs=2)
    cap = str(max(1, (os.cpu_count() or 1) // 2))
    try:
        assert launcher.call(_environment, "BLIS_NUM_THREADS").result() == cap
        assert "BLIS_NUM_THREADS" not in os.environ  # the sweeper's own environment is left alone
        hanging = launcher.call(time.sleep, 3600)
        pids = {launcher.call(worker.ready).result()}
        wait_until(lambda: hanging.running(), "a worker running the hanging call")
        launcher.abort()
        assert hanging.done()  # ended with its worker, not after an hour
        wait_until(lambda: not any(_alive(pid) for pid in pids), "the aborted workers ended")
        fresh = launcher.call(worker.ready).result()
        assert fresh not in pids
        launcher.shutdown()
        wait_until(lambda: not _alive(fresh), "the idle workers ended")
    finally:
        launcher.abort()


def test_a_worker_warms_up_once_and_a_failing_name_is_left_to_the_job(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(worker.gc, "freeze", lambda: None)  # keep this process's collector
    probe = f"warm_probe_{os.getpid()}_{tmp_path.name}".replace("-", "_")
    (tmp_path / f"{probe}.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # a module no other test has imported
    monkeypatch.delitem(sys.modules, probe, raising=False)
    pids: queue.SimpleQueue = queue.SimpleQueue()
    # a failing hook is a warning, a name that does not import is left to the job
    worker.start(pids, "no.such.hook", [probe, "no.such.module"])
    assert pids.get_nowait() == os.getpid() and probe in sys.modules


def test_a_worker_that_died_breaks_its_pool_and_the_next_job_gets_a_fresh_one() -> None:
    from concurrent.futures.process import BrokenProcessPool

    launcher = PoolLauncher(n_jobs=1)
    try:
        first = launcher.call(worker.ready).result()
        dying = launcher.call(_die)
        assert launcher.wait([dying], every=True) == {dying}
        assert isinstance(dying.exception(), BrokenProcessPool)
        assert launcher.call(worker.ready).result() != first
    finally:
        launcher.abort()


def test_workers_share_the_visible_gpus_round_robin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker takes its GPU and memory share into its environment as it starts (the
    sweep's own environment is left alone); without a GPU it takes nothing."""
    from ltr_bench.machine.gpu_share import SHARE_VAR

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    launcher = PoolLauncher(n_jobs=3, gpu_memory_headroom=0.2)  # two on one GPU
    try:
        launcher.start_workers()
        seen = {
            (
                launcher.call(_environment, "CUDA_VISIBLE_DEVICES").result(),
                launcher.call(_environment, SHARE_VAR).result(),
            )
            for _ in range(6)
        }
        assert {gpu for gpu, _ in seen} <= {"3", "5"} and {s for _, s in seen} == {repr(0.4)}
        assert SHARE_VAR not in os.environ
    finally:
        launcher.abort()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    launcher = PoolLauncher(n_jobs=1)
    try:
        assert launcher.call(_environment, SHARE_VAR).result() is None
    finally:
        launcher.abort()
