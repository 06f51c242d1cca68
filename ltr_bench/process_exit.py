"""Ending a command's process without tearing its interpreter down.

A tiny ``ltr-bench`` run ends with ~0.3 s of interpreter finalization: clearing the modules of
torch, Lightning and MLflow frees millions of objects one by one, memory the operating system
takes back at once when the process ends. :func:`run_then_exit` runs a console command
(``ltr-bench``, ``ltr-bench-report``, ``ltr-bench-predict``); once every exit handler has run
(threads joined, MLflow's runs ended, logging shut down, temporary folders removed) the process
ends with the command's exit status and skips that teardown.

The handler is registered when this module is imported, before the libraries register theirs
(the console commands import it first), so it runs after them: exit handlers run last
registered, first run. It only acts in a process whose console command ran through
:func:`run_then_exit`; a program that imports ``ltr_bench`` (the tests, a notebook) ends as
usual. What it skips: finalizing objects still alive at exit, so everything the commands write
is flushed and closed explicitly (files in ``with`` blocks, the stores' connections committed);
``LTR_FULL_EXIT=1`` ends the process the usual way.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

FULL_EXIT_ENV = "LTR_FULL_EXIT"

_status: list[int] = []  # the console command's exit status, once it has returned or raised


def exit_status(code: Any) -> int:
    """The process's exit status for ``SystemExit(code)``, as the interpreter computes it
    (``None`` is 0, an integer itself, anything else was printed and is 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def run_then_exit(command: Callable[[], Any]) -> Any:
    """Run a console command and return what it returns (the console script exits with it);
    when the interpreter exits, end the process once the exit handlers have run. A
    KeyboardInterrupt that escapes ``command`` keeps Python's own ending (the signal's status)."""
    try:
        result = command()
    except SystemExit as exc:
        _status.append(exit_status(exc.code))
        raise
    except KeyboardInterrupt:
        raise
    except BaseException:
        _status.append(1)  # the traceback is printed before the exit handlers run
        raise
    _status.append(exit_status(result))
    return result


def _end_process() -> None:
    if not _status or os.environ.get(FULL_EXIT_ENV, "").strip() not in ("", "0"):
        return
    logging.shutdown()  # registered before this handler, so it would run after it
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to write
            pass
    os._exit(_status[-1])


atexit.register(_end_process)
