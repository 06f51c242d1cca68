"""The headless-browser runner returns once the output is complete, even when chromium never exits.

A stand-in ``chromium`` (a shell script) starts a child that holds its stdout and stderr, writes
what chromium writes and then waits forever on that child, as a chromium whose child process
hangs after the screenshot does; the runner must return the output, and none of the stand-in's
processes may stay (they end once the runner has stopped its process group).
No real browser is needed.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.browser.headless import SCREENSHOT_WRITTEN, run_headless
from tests.waiting import wait_until

HANGS_AFTER_OUTPUT = """#!/bin/sh
echo $$ > "{pids}"
sleep 100000 &
echo $! >> "{pids}"
for arg in "$@"; do
  case "$arg" in
    --dump-dom) echo '<html><head></head><body><p>runs</p></body></html>' ;;
    --screenshot=*) echo "123 {written} ${{arg#--screenshot=}}" >&2 ;;
  esac
done
wait
"""

EXITS_WITHOUT_OUTPUT = """#!/bin/sh
echo 'cannot open display' >&2
exit 1
"""


def _fake(tmp_path: Path, script: str) -> tuple[str, Path]:
    pids = tmp_path / "pids"
    path = tmp_path / "chromium"
    path.write_text(script.format(pids=pids, written=SCREENSHOT_WRITTEN))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path), pids


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.parametrize("what", ["--dump-dom", "--screenshot=/tmp/page.png"])
def test_output_comes_back_and_no_process_stays_when_chromium_never_exits(
    tmp_path: Path, what: str
) -> None:
    binary, pids = _fake(tmp_path, HANGS_AFTER_OUTPUT)
    out = run_headless(binary, "http://127.0.0.1:1/", tmp_path, 600, what)
    if what == "--dump-dom":
        assert out.strip() == "<html><head></head><body><p>runs</p></body></html>"
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2  # the script and its hanging child, started before the output
    wait_until(lambda: not [pid for pid in started if _alive(pid)], "the stand-in's processes gone")


def test_chromium_exiting_without_its_output_fails_with_its_stderr(tmp_path: Path) -> None:
    binary, _ = _fake(tmp_path, EXITS_WITHOUT_OUTPUT)
    with pytest.raises(AssertionError, match="cannot open display"):
        run_headless(binary, "http://127.0.0.1:1/", tmp_path, 600, "--dump-dom")
