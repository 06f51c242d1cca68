"""Seeds derived from other integers: the one way ltr_bench turns (seed, fold, repeat, epoch, ...)
into a new seed, through NumPy's ``SeedSequence`` (well mixed, reproducible across platforms)."""

from __future__ import annotations

import numpy as np

__all__ = ["derive_seed"]


def derive_seed(*parts: int, bits: int = 32) -> int:
    """A ``bits``-bit seed (1..32, or 63) from non-negative integers such as
    ``(seed, repeat)`` or ``(seed, epoch, rank)``; the same parts always give the same seed.

    32 bits suit NumPy and LightGBM, 31 bits (``bits=31``) anything that wants a positive int32,
    63 bits torch generators.
    """
    seq = np.random.SeedSequence([int(p) for p in parts])
    if bits == 63:
        return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))
    if not 1 <= bits <= 32:
        raise ValueError(f"bits must be 1..32 or 63, got {bits}")
    return int(seq.generate_state(1)[0]) % (1 << bits)
