"""The private Lightning names of ltr_bench.models.lightning_private still exist: a failure names
the one a new release removed or renamed; fix it there (or drop it for a public API)."""

from __future__ import annotations

import pytest

from ltr_bench.models import lightning_private as lp
from tests.private_names import assert_still_there


@pytest.mark.parametrize(("owner", "attr"), lp.PRIVATE_NAMES)
def test_each_private_name_is_still_there(owner: str, attr: str) -> None:
    assert_still_there(owner, attr)


def test_the_precisions_include_lightnings_usual_values() -> None:
    allowed = lp.precisions()
    assert {"32-true", "bf16-mixed", 32, 16} <= set(allowed)
