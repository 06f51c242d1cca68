"""Packages that export names lazily list them all in ``dir()`` (and so in IPython's completion)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import ltr_bench

_ROOT = Path(ltr_bench.__file__).parent


def _lazy_packages() -> list[str]:
    """Every package of ltr_bench whose ``__init__.py`` uses :mod:`ltr_bench.lazy_exports`."""
    found = []
    for init in sorted(_ROOT.rglob("__init__.py")):
        if "ltr_bench.lazy_exports import" in init.read_text(encoding="utf-8"):
            parts = init.parent.relative_to(_ROOT.parent).parts
            found.append(".".join(parts))
    return found


def test_the_known_lazy_packages_are_found() -> None:
    assert {"ltr_bench.stats", "ltr_bench.metrics", "ltr_bench.models"} <= set(_lazy_packages())


def test_dir_of_stats_lists_its_tests_and_notation() -> None:
    import ltr_bench.stats

    names = dir(ltr_bench.stats)
    assert "format_mean_se" in names
    assert "corrected_resampled_ttest" in names


@pytest.mark.parametrize("package", _lazy_packages())
def test_dir_lists_every_public_name(package: str) -> None:
    module = importlib.import_module(package)
    assert callable(vars(module).get("__dir__")), f"{package} defines no __dir__"
    names = dir(module)
    assert names == sorted(names)
    missing = sorted(set(module.__all__) - set(names))
    assert not missing, f"dir({package}) lacks {missing}"
    # Names already imported (eager exports, submodules) stay listed too.
    assert set(vars(module)) <= set(names)
