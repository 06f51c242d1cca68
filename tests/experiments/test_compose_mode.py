"""The experiment tests compose through the cache alone (tests/experiments/conftest.py), their
module-scoped fixtures too: those run each module's experiments once."""

from __future__ import annotations

import os

import pytest

from ltr_bench.launching.composing import CACHE_ENV


@pytest.fixture(scope="module")
def mode_of_a_module_fixture() -> str | None:
    return os.environ.get(CACHE_ENV)


def test_a_module_scoped_fixture_composes_through_the_cache_alone(
    mode_of_a_module_fixture: str | None,
) -> None:
    assert mode_of_a_module_fixture == "on"
    assert os.environ.get(CACHE_ENV) == "on"
