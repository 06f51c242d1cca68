"""Run ``ltr-bench`` inside the test process (``ltr_bench.cli.main.main``).

A subprocess pays 6-7 s importing torch, Lightning and MLflow before it does anything; in-process
runs pay that once per session. Used wherever the process itself is not what a test checks (exit
codes under signals, ``--help`` without heavy imports and the console script keep subprocesses).
Everything a run changes in the process is put back, as for the package's own in-process
commands (:mod:`ltr_bench.experiments.command_in_process`).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CliResult:
    """Exit code and output of one in-process ``ltr-bench`` run (like ``CompletedProcess``)."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def restored(
    cwd: Path, env: dict[str, str | None], argv: list[str] | None = None
) -> Iterator[None]:
    """Run a Hydra app in ``cwd`` with ``env`` changes (None: unset) and ``sys.argv = argv``; put
    back everything it may change (:func:`ltr_bench.experiments.command_in_process.process_state_kept`).
    A library's log handler made during the run keeps the stream it was given (the test's
    capture of stderr, which outlives the run; pytest's own capture stream may not)."""
    import torch  # noqa: F401 - loaded before the app, so its thread count is put back too

    from ltr_bench.cli import main as cli
    from ltr_bench.experiments.command_in_process import process_state_kept

    with process_state_kept():
        os.chdir(cwd)
        sys.argv = list(argv) if argv is not None else ["ltr-bench"]
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        try:
            yield
        finally:
            cli._deferred.clear()


def run_ltr_bench(*args: str, cwd: Path) -> CliResult:
    """``ltr-bench <args>`` in ``cwd``, in this process; SystemExit codes become ``returncode``."""
    from ltr_bench.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    env = {"OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": None, "HYDRA_FULL_ERROR": None}
    code = 0
    with (
        restored(Path(cwd), env),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            cli.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())
