"""Waiting on events in tests: a marker file, a state in a store, a process ending.

A test waits for the event itself, never for a span of time. The limits below are only last
guards against a hang: generous enough that a loaded 2-core machine never reaches them, so they
never decide a verdict.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable

HANG_GUARD_S = 600.0  # one wait this long means the event will not come
TEST_GUARD_S = 1200  # pytest-timeout for tests that wait on processes


def wait_until(
    happened: Callable[[], bool],
    what: str,
    proc: subprocess.Popen | None = None,
    guard_s: float = HANG_GUARD_S,
    every_s: float = 0.1,
) -> None:
    """Return once ``happened()``; fail at once if ``proc`` exits first, or after ``guard_s``."""
    deadline = time.monotonic() + guard_s
    while not happened():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no sign of {what} after {guard_s:.0f} s: it hangs")
        time.sleep(every_s)


def stop_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM to the process group ``proc`` leads (started with a new session), then SIGKILL
    if ``proc`` is still there after ``grace_s``; once ``proc`` has ended, SIGKILL to what is
    left of its group (a child that outlived it, or one it forked as the SIGTERM came)."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the group is gone already
            return
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
