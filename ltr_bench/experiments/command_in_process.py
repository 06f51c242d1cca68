"""An ``ltr-bench`` command run inside the calling process, for experiments made of small parts.

A new ``ltr-bench`` process pays its imports (torch, Lightning, MLflow: seconds) before any
work, and at an experiment's quick scale each of Table 1's sweeps is mostly that.
:func:`run_command` runs the command's entry point in this process instead, its printed output
into a log file, and puts back what a command changes in its process: Hydra's global state
(the running app's), the logging configuration, the working directory, the environment,
``sys.argv``, the SIGINT/SIGTERM handlers and torch's thread count. The entry point is registered
by :mod:`ltr_bench.cli.main` (which no other module imports). Only for commands cheap to repeat: a
crash or a leak in the command is the caller's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

EXIT_FAILED = 1
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # ltr-bench's exit codes after Ctrl-C and SIGTERM
_entry_point: list[Callable[[Sequence[str]], None]] = []  # ltr_bench.cli.main.main, once registered


def register(main: Callable[[Sequence[str]], None]) -> None:
    """Make ``main`` (``ltr-bench``'s entry point) the command :func:`run_command` runs."""
    _entry_point[:] = [main]


def available() -> bool:
    """Whether the ``ltr-bench`` command can run in this process (its entry point is loaded)."""
    return bool(_entry_point)


def ltr_bench(args: Sequence[str], log: Path, in_process: bool = False) -> int:
    """``ltr-bench <args>`` with its output in ``log``: in a new process, or with ``in_process``
    in this one (:func:`run_command`) when the command is loaded here; its exit code."""
    if in_process and available():
        return run_command(args, log)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        command = [sys.executable, "-m", "ltr_bench.cli.main", *args]
        return subprocess.call(command, stdout=fh, stderr=subprocess.STDOUT)


def run_command(args: Sequence[str], log: Path) -> int:
    """``ltr-bench <args>`` in this process, its printed output into ``log``; the exit code the
    command's own process would have had (a bug's traceback goes to the log, exit code 1).
    Ctrl-C or SIGTERM during the command (its exit codes 130, 143) stop the caller too, as they
    would reach a caller waiting for the command's process: KeyboardInterrupt, RunTerminated."""
    (main,) = _entry_point
    log.parent.mkdir(parents=True, exist_ok=True)
    code = 0
    with open(log, "w") as fh, process_state_kept(fh):
        with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
            try:
                main(list(args))
            except SystemExit as exc:
                code = _exit_code(exc.code)
            except Exception:  # noqa: BLE001 - a bug: its traceback in the log, as a process's
                traceback.print_exc(file=fh)
                code = EXIT_FAILED
    if code == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    if code == EXIT_TERMINATED:
        from ltr_bench.tracking import RunTerminated

        raise RunTerminated(f"`ltr-bench {' '.join(args)}` was terminated")
    return code


def _exit_code(code: object) -> int:
    """The exit status of ``sys.exit(code)``."""
    if code is None:
        return 0
    return code if isinstance(code, int) else EXIT_FAILED


@contextlib.contextmanager
def process_state_kept(log: object = None) -> Iterator[None]:
    """Within the block a Hydra app may run (its own Hydra, logging, directory...); afterwards
    this process's state is as before (see :func:`_restore_logging`; ``log``: the stream its
    output went to)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    saved_hydra, saved_config = GlobalHydra.instance().hydra, HydraConfig.instance().cfg
    loggers = _logging_state()
    cwd, environ, argv = os.getcwd(), dict(os.environ), list(sys.argv)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    GlobalHydra.instance().clear()
    try:
        yield
    finally:
        global_hydra = GlobalHydra.instance()  # Hydra's initialize() may have replaced the object
        global_hydra.clear()
        if saved_hydra is not None:
            global_hydra.initialize(saved_hydra)
        HydraConfig.instance().cfg = saved_config
        _restore_logging(loggers, log)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.argv = argv
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        if threads is not None and torch is not None:
            torch.set_num_threads(threads)


_LoggerState = tuple[int, list[logging.Handler], bool, bool]


def _logging_state() -> dict[str, tuple[logging.Logger, _LoggerState]]:
    """Level, handlers, propagation and the disabled flag of the root and every named logger."""
    found = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return {
        lg.name: (lg, (lg.level, list(lg.handlers), lg.propagate, lg.disabled))
        for lg in found
        if isinstance(lg, logging.Logger)
    }


def _restore_logging(saved: dict[str, tuple[logging.Logger, _LoggerState]], log: object) -> None:
    """Put back the loggers of ``saved`` (:func:`_logging_state`): the root's handlers (Hydra's,
    added by the command, are closed), and every logger's level, propagation and disabled flag.
    A library's own handlers added to its loggers stay, writing to this process's stderr where
    they wrote to the command's ``log``."""
    root = logging.getLogger()
    _, (_, root_handlers, _, _) = saved[root.name]
    for handler in root.handlers:
        if handler not in root_handlers:
            handler.close()
    for logger, (level, _, propagate, disabled) in saved.values():
        logger.setLevel(level)
        logger.propagate = propagate
        logger.disabled = disabled
    root.handlers[:] = root_handlers
    if log is None:  # no stream to re-point (a lazy handler's stream is None too)
        return
    for _, (_, handlers, _, _) in _logging_state().values():
        for handler in handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is log:
                handler.setStream(sys.stderr)
