"""What the guard tests of private library names share (tests/sweeper/test_private_names.py and
the others): each ``(owner, attribute)`` pair of a module's ``PRIVATE_NAMES`` is looked up in
the installed releases."""

from __future__ import annotations

import importlib


def resolve(dotted: str) -> object:
    """The module, class or function a dotted name names."""
    module, _, name = dotted.rpartition(".")
    try:
        return importlib.import_module(dotted)
    except ImportError:
        return getattr(importlib.import_module(module), name)


def assert_still_there(owner: str, attr: str) -> None:
    """Fail naming ``owner.attr`` when the installed release no longer has it."""
    assert hasattr(resolve(owner), attr), f"{owner}.{attr} is gone from this release"
