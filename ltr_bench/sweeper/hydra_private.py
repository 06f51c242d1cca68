"""Every private Hydra name the project needs, each with why no public API does
(``tests/sweeper/test_private_names.py`` fails naming the one a release removes or changes)."""

from __future__ import annotations

from typing import Any

# Hydra quotes and escapes override values with it; no public function does (search.space)
from hydra._internal.grammar.utils import escape_special_characters as escape_special_characters

#: (object kind, attribute) pairs read here; the test checks each against the installed release
PRIVATE_NAMES = (
    ("hydra._internal.grammar.utils", "escape_special_characters"),
    # a failed job's exception: the public ``return_value`` raises it after printing "Error
    # executing job" on stderr, a line per failed or pruned trial
    ("hydra.core.utils.JobReturn", "_return_value"),
)


def job_error(ret: Any) -> Any:
    """A finished job's exception when it failed, else its return value (never raised)."""
    return ret._return_value
