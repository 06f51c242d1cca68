"""Helpers for running the toy Hydra app as a real subprocess and reading its study back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tests.inprocess import CliResult
from tests.waiting import HANG_GUARD_S, wait_until

TOY_APP = Path(__file__).parent / "toy_app" / "toy_app.py"
FAIL_REASON = "ltr_sweeper.fail_reason"


def toy_command(workdir: Path, *overrides: str) -> list[str]:
    """``python toy_app.py --multirun hydra/sweeper=ltr_optuna calls_file=... <overrides>``."""
    return [
        sys.executable,
        str(TOY_APP),
        "--multirun",
        "hydra/sweeper=ltr_optuna",
        f"calls_file={workdir / 'calls.jsonl'}",
        *overrides,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "1"}


def run_toy(workdir: Path, *overrides: str, timeout: float = HANG_GUARD_S) -> CliResult:
    """Run one sweep to the end (cwd = ``workdir``, so default paths land there), in this process
    (a sweep's own process is not what these tests check; :func:`start_toy` starts real ones for
    kills and parallel workers). An exception out of the app is exit code 1 with its traceback on
    stderr, as in a subprocess under ``HYDRA_FULL_ERROR=1``."""
    import contextlib
    import io
    import traceback

    from tests.inprocess import restored

    if any(o.startswith("hydra/launcher=") for o in overrides):
        # A launcher's worker processes import the task function by its module: the toy app
        # loaded from a file path in this process cannot be found there, so run a real process.
        proc = subprocess.run(
            toy_command(workdir, *overrides),
            cwd=workdir,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)
    app = _toy_module()
    out, err = io.StringIO(), io.StringIO()
    code = 0
    # HYDRA_MAIN_MODULE: resolve config_path="conf" next to toy_app.py, as when run as a script
    env = {
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "HYDRA_FULL_ERROR": "1",
        "HYDRA_MAIN_MODULE": "__main__",
    }
    argv = toy_command(workdir, *overrides)[1:]
    with (
        restored(workdir, env, argv),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            app.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001 - a crashed process, as the subprocess would report it
            traceback.print_exc()
            code = 1
    return CliResult(code, out.getvalue(), err.getvalue())


def _toy_module() -> Any:
    import importlib.util

    if "_ltr_toy_app" not in sys.modules:
        spec = importlib.util.spec_from_file_location("_ltr_toy_app", TOY_APP)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["_ltr_toy_app"] = module
        spec.loader.exec_module(module)
    return sys.modules["_ltr_toy_app"]


def start_toy(workdir: Path, *overrides: str, log_name: str = "sweep.log") -> subprocess.Popen:
    """Start a sweep in the background; output goes to ``workdir/log_name``."""
    log = open(workdir / log_name, "w")
    return subprocess.Popen(
        toy_command(workdir, *overrides),
        cwd=workdir,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def wait_for_file(path: Path, proc: subprocess.Popen) -> None:
    """Return once ``path`` exists (the event a job signals); fail at once if ``proc`` exits."""
    wait_until(path.exists, f"{path} appeared", proc)


def both_workers_run(workdir: Path, n: int = 2) -> list[str]:
    """Overrides making every job wait until ``n`` worker processes have started one (so that
    each worker is sure to run trials, however slowly the others start)."""
    return [f"workers_dir={workdir / 'workers'}", f"wait_for_workers={n}"]


def calls(workdir: Path) -> list[dict[str, Any]]:
    """One record per executed job, in execution order."""
    path = workdir / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def load(url: str, name: str) -> list[FrozenTrial]:
    return optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)


def complete(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    return [t for t in trials if t.state == TrialState.COMPLETE]


def reasons(trials: list[FrozenTrial]) -> dict[int, str | None]:
    """Trial number -> fail reason, for FAIL trials."""
    return {t.number: t.user_attrs.get(FAIL_REASON) for t in trials if t.state == TrialState.FAIL}


def point(t: FrozenTrial | dict, names: tuple[str, ...] = ("x", "y")) -> tuple:
    params = t if isinstance(t, dict) else t.params
    return tuple(params[n] for n in names)
