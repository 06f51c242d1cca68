"""Fixtures shared by the whole suite.

``cli``: ``ltr-bench`` run *in this process* (see :mod:`tests.inprocess`), for tests where the
process itself is not what is tested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.inprocess import CliResult, run_ltr_bench

CliRunner = Callable[..., CliResult]


@pytest.fixture
def cli() -> CliRunner:
    """``cli(*args, cwd=path)`` -> :class:`~tests.inprocess.CliResult`."""
    return run_ltr_bench
