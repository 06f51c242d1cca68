"""One headless chromium run that ends when its output is complete, not when chromium exits.

Headless chromium sometimes writes its screenshot (or DOM) and then never exits: a child process
keeps running and the main one waits on it. Waiting for the exit (or for the end of its stdout
pipe) then hangs the test until the last guard. So the run waits for the event that matters, the
complete output in a file (``</html>`` closing the dumped DOM; chromium's ``N bytes written to
file`` line after a screenshot), then stops chromium's whole process group.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from tests.waiting import HANG_GUARD_S, stop_group, wait_until

SCREENSHOT_WRITTEN = "bytes written to file"  # chromium's stderr line once the PNG is on disk


def _complete(out: Path, err: Path, what: tuple[str, ...]) -> bool:
    """Whether the output asked for by ``what`` is all there."""
    if "--dump-dom" in what:
        return out.read_text(errors="replace").rstrip().endswith("</html>")
    return SCREENSHOT_WRITTEN in err.read_text(errors="replace")


def run_headless(binary: str, url: str, work: Path, height: int, *what: str) -> str:
    """Run ``binary`` (chromium) headless on ``url`` with the options ``what`` (``--dump-dom`` or
    ``--screenshot=PATH``) in a new empty profile; return its stdout (the DOM for ``--dump-dom``).

    Returns once the output is complete or chromium exits by itself, whichever comes first; fails
    if chromium exits without completing it, or if neither happens within the hang guard.
    """
    profile = Path(tempfile.mkdtemp(dir=work, prefix="chromium-"))
    out, err = profile / "stdout.txt", profile / "stderr.txt"
    args = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size=1900,{height}",
        "--virtual-time-budget=15000",
        *what,
        url,
    ]
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(args, stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        wait_until(
            lambda: _complete(out, err, what) or proc.poll() is not None,
            f"chromium's complete output for {' '.join(what)}",
            guard_s=HANG_GUARD_S,
        )
    finally:
        stop_group(proc)
    assert _complete(out, err, what), (
        f"chromium exited ({proc.returncode}) without its output for {' '.join(what)}:\n"
        + err.read_text(errors="replace")[-3000:]
    )
    return out.read_text(errors="replace")
