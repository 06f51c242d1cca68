"""One seed derivation (ltr_bench.seeding) gives exactly the seeds of the five hand-written ones it
replaced, so runs keep their data splits, inner folds and batches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ltr_bench.seeding import derive_seed

parts_st = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=4)


@given(parts_st)
def test_same_seeds_as_before(parts: list[int]) -> None:
    uint32 = int(np.random.SeedSequence(parts).generate_state(1)[0])
    assert derive_seed(*parts) == uint32  # data folds, protocol splits
    assert derive_seed(*parts, bits=31) == uint32 % 2**31  # inner-CV repeats' model seeds
    old63 = np.random.SeedSequence([p & 0xFFFFFFFF for p in parts]).generate_state(1, np.uint64)[0]
    assert derive_seed(*parts, bits=63) == int(old63 >> np.uint64(1))  # batch generators


def test_bad_width() -> None:
    with pytest.raises(ValueError):
        derive_seed(1, bits=40)
