"""Import torchmetrics, which Lightning loads in every neural run, without ``scipy.signal``.

torchmetrics' ``__init__`` and its two audio packages import ``scipy.signal`` for one line: an
alias ``scipy.signal.hamming`` that a third-party audio package (SRMRpy) expects. Lightning
imports torchmetrics at its own import (a version check, its ``Metric`` type), so every neural
run paid for ``scipy.signal`` and the ``scipy.stats`` it pulls in: 1-1.5 s of a run's ~8 s of
imports on a 2-core machine, for a module no code of a run uses.

Importing this module first (the modules that import Lightning do) lets torchmetrics find a
stand-in ``scipy.signal`` that already has ``hamming``, then takes the stand-in away: a later
``import scipy.signal`` loads the real module. Nothing changes when ``scipy.signal`` or torchmetrics
is already loaded, or when SciPy is not installed. The one difference a program sees is the
missing ``scipy.signal.hamming`` alias (SciPy's own is ``scipy.signal.windows.hamming``).
"""

from __future__ import annotations

import sys
import types


def import_torchmetrics_without_scipy_signal() -> None:
    """Import torchmetrics with a stand-in ``scipy.signal`` in ``sys.modules`` while it runs."""
    if "torchmetrics" in sys.modules or "scipy.signal" in sys.modules:
        return
    try:
        import scipy
    except ImportError:  # torchmetrics imports no scipy.signal either
        import torchmetrics

        return
    stand_in = types.ModuleType("scipy.signal", "Stand-in while torchmetrics is imported.")
    stand_in.hamming = None  # type: ignore[attr-defined]  # the alias torchmetrics checks for
    sys.modules["scipy.signal"] = stand_in
    try:
        import torchmetrics  # noqa: F401
    finally:
        if sys.modules.get("scipy.signal") is stand_in:
            del sys.modules["scipy.signal"]
        if vars(scipy).get("signal") is stand_in:
            delattr(scipy, "signal")


import_torchmetrics_without_scipy_signal()
