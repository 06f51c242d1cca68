"""Imported by a sweep's warm-up in a joblib worker: leaves ``<$LTR_TEST_WARM_DIR>/<pid>``."""

from __future__ import annotations

import os
from pathlib import Path

MARK = Path(os.environ["LTR_TEST_WARM_DIR"]) / str(os.getpid())
MARK.touch()
