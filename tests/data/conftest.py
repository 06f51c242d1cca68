"""Shared fixtures of the data-layer tests: a private cache dir and the real-data root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ltr_bench.data.datasets import resolve_data_root


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test caches into its own temporary dir (never ~/.cache)."""
    monkeypatch.setenv("LTR_CACHE", str(tmp_path_factory.mktemp("ltr_cache")))
    monkeypatch.delenv("LTR_CACHE_VERIFY", raising=False)


@pytest.fixture
def real_root() -> Path:
    """The shared LETOR data root; skips the test when it is absent."""
    root = resolve_data_root(os.environ.get("LTR_DATA"))
    if not (root / "MQ2008" / "Fold1" / "train.txt").is_file():
        pytest.skip(f"real LETOR data not found under {root} (set LTR_DATA)")
    return root
