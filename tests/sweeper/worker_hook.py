"""Sweep hooks for tests, each leaving a file in ``$LTR_TEST_WARM_DIR``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def started() -> None:
    """A ``sweep.on_worker_start`` hook: leaves ``<pid>.started``."""
    (Path(os.environ["LTR_TEST_WARM_DIR"]) / f"{os.getpid()}.started").touch()


def study_ended(config: Any, study_name: str, summary: Any, files: list[Path]) -> None:
    """A ``sweep.on_study_end`` hook: leaves ``study_end.json`` (its process, the study, files)."""
    record = {"pid": os.getpid(), "study": study_name, "files": sorted(p.name for p in files)}
    (Path(os.environ["LTR_TEST_WARM_DIR"]) / "study_end.json").write_text(json.dumps(record))


def study_ended_once_next_runs(
    config: Any, study_name: str, summary: Any, files: list[Path]
) -> None:
    """A ``sweep.on_study_end`` hook for ``study_per=[kind]`` with ``kind=a,b``: study ``kind=a``'s
    end waits until a job of study ``kind=b`` has run (``calls_file`` of the toy app), then leaves
    ``study_end-<study>.json``; it returns only if the sweep goes on while a study ends."""
    from tests.waiting import wait_until

    if study_name.endswith("kind=a"):
        calls = Path(str(config.calls_file))

        def next_ran() -> bool:
            return calls.exists() and "kind=b" in calls.read_text()

        wait_until(next_ran, "a job of the next study while this one ends")
    record = {"pid": os.getpid(), "study": study_name, "files": sorted(p.name for p in files)}
    out = Path(os.environ["LTR_TEST_WARM_DIR"]) / f"study_end-{study_name}.json"
    out.write_text(json.dumps(record))
