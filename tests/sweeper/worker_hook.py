"""A ``sweep.on_worker_start`` hook for tests: leaves ``<$LTR_TEST_WARM_DIR>/<pid>.started``."""

from __future__ import annotations

import os
from pathlib import Path


def started() -> None:
    (Path(os.environ["LTR_TEST_WARM_DIR"]) / f"{os.getpid()}.started").touch()
