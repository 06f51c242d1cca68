"""Every private Lightning name the project reads, each with why no public API does
(``tests/models/test_lightning_private.py`` fails naming the one a release removes or changes)."""

from __future__ import annotations

from typing import Any, get_args

#: (owner, attribute) pairs read here; the test checks each against the installed release.
#: Lightning publishes no list of the ``precision`` values its ``Trainer`` takes: its own type
#: aliases are that list, and reading them lets a wrong ``trainer.precision`` fail before any
#: data is read, naming the choices, instead of inside ``fit``.
PRIVATE_NAMES = (
    ("lightning.fabric.plugins.precision.precision", "_PRECISION_INPUT_STR"),
    ("lightning.fabric.plugins.precision.precision", "_PRECISION_INPUT_STR_ALIAS"),
    ("lightning.fabric.plugins.precision.precision", "_PRECISION_INPUT_INT"),
)


def precisions() -> tuple[Any, ...]:
    """The ``precision`` values Lightning's ``Trainer`` takes (its own list)."""
    from lightning.fabric.plugins.precision import precision as p

    return (
        get_args(p._PRECISION_INPUT_STR)
        + get_args(p._PRECISION_INPUT_STR_ALIAS)
        + get_args(p._PRECISION_INPUT_INT)
    )
