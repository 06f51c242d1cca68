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


def test_a_job_seeds_torch_only_where_it_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """``configure_loaded_torch`` gives a loaded torch the job's threads and seed, and imports
    nothing where torch is absent; ``seed_everything(torch_too=False)`` leaves torch alone."""
    import sys

    import torch
    from omegaconf import OmegaConf

    from ltr_bench.runner.context import configure_loaded_torch, seed_everything

    cfg = OmegaConf.create({"threads": 1, "seed": 5})
    threads = torch.get_num_threads()
    try:
        configure_loaded_torch(cfg)
        assert torch.get_num_threads() == 1 and torch.initial_seed() == 5
        torch.manual_seed(9)
        seed_everything(5, torch_too=False)
        assert torch.initial_seed() == 9
        monkeypatch.delitem(sys.modules, "torch")
        configure_loaded_torch(cfg)  # no torch loaded: nothing to configure, nothing imported
        assert "torch" not in sys.modules
    finally:
        torch.set_num_threads(threads)
