"""Fixtures shared by the whole suite.

``cli``: runs ``ltr-bench`` *in this process* (``ltr_bench.cli.main``), for tests where the
process itself is not what is tested: no 6-7 s of importing torch, Lightning and MLflow per run.
Tests of the process (exit codes under signals, ``--help`` without heavy imports, the console
script) keep real subprocesses.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest


@dataclass
class CliResult:
    """Exit code and captured output of one in-process ``ltr-bench`` run."""

    returncode: int
    stdout: str
    stderr: str


CliRunner = Callable[..., CliResult]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> CliRunner:
    """``cli(*args, cwd=path)``: ``ltr-bench <args>`` in ``cwd``, in-process; returns a
    :class:`CliResult` (SystemExit codes become ``returncode``)."""

    def run(*args: str, cwd: Path) -> CliResult:
        from hydra.core.global_hydra import GlobalHydra

        from ltr_bench import cli as cli_module

        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "argv", ["ltr-bench"])
        monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        capfd.readouterr()
        code = 0
        try:
            cli_module.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            GlobalHydra.instance().clear()
            cli_module._deferred.clear()
            for s, h in handlers.items():
                signal.signal(s, h)
        out = capfd.readouterr()
        return CliResult(code, out.out, out.err)

    return run
