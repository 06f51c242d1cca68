"""Fixtures shared by the whole suite.

``cli``: ``ltr-bench`` run *in this process* (see :mod:`tests.inprocess`), for tests where the
process itself is not what is tested.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two pytest workers on two cores: one thread each, or they slow each other
    # down many times over (two jobs with 2 torch threads each ran 12x slower than one here).
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[_var] = "1"
    import torch

    torch.set_num_threads(1)

from tests.inprocess import CliResult, run_ltr_bench

CliRunner = Callable[..., CliResult]


@pytest.fixture
def cli() -> CliRunner:
    """``cli(*args, cwd=path)`` -> :class:`~tests.inprocess.CliResult`."""
    return run_ltr_bench
