"""Progress lines on stderr while a big LETOR file is parsed (a tqdm bar on a terminal)."""

from __future__ import annotations

import sys
import time
from pathlib import Path


class Progress:
    """One stderr line for a big file; a tqdm bar when stderr is a terminal."""

    def __init__(self, path: Path) -> None:
        self.size = file_size(path)
        self.start = time.perf_counter()
        self.path = path
        say(f"parsing {path} ({human(self.size)}) ... (cached afterwards)")
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.size,
                unit="B",
                unit_scale=True,
                file=sys.stderr,
                desc=path.name,
                leave=False,
            )
        self.done = 0

    def update(self, position: int) -> None:
        if self.bar is not None:
            self.bar.update(max(0, position - self.done))
        self.done = position

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        dt = time.perf_counter() - self.start
        say(f"parsed {self.path.name} in {dt:.1f} s ({self.size / 1e6 / max(dt, 1e-9):.0f} MB/s)")


def say(text: str) -> None:
    """One ``ltr-bench: ...`` line on stderr, flushed at once."""
    print(f"ltr-bench: {text}", file=sys.stderr, flush=True)


def human(n: float) -> str:
    """A byte count for people: ``"12.3 MB"``."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


def file_size(path: Path) -> int:
    """The size of ``path`` in bytes (0 if it cannot be read)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
