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
