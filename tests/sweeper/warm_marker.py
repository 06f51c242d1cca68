"""Imported by a sweep's warm-up in a worker: leaves ``<$LTR_TEST_WARM_DIR>/<pid>``; with
``LTR_TEST_HOOK`` set, only after the ``sweep.on_worker_start`` hook (:mod:`.worker_hook`) ran."""

from __future__ import annotations

import os
from pathlib import Path

MARK = Path(os.environ["LTR_TEST_WARM_DIR"]) / str(os.getpid())
if not os.environ.get("LTR_TEST_HOOK") or (MARK.parent / f"{os.getpid()}.started").exists():
    MARK.touch()
