"""The papers' ``0.720(12)`` notation for a mean and its standard error."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from numpy.typing import ArrayLike

MISSING = "–"  # shown for a missing value in every table


# --------------------------------------------------------------------------- mean(SE) notation


def mean_se(values: ArrayLike) -> tuple[float, float, int]:
    """Mean, standard error (``std(ddof=1) / sqrt(n)``) and count of the non-NaN values.

    The SE is NaN for fewer than two values; the mean is NaN for none.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    se = float(x.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return float(x.mean()), se, n


def _round_half_up(x: float, decimals: int) -> Decimal:
    """``x`` rounded half-up to ``decimals`` places (textbook rounding; no "-0.000")."""
    value = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return value.copy_abs() if value.is_zero() else value


def format_mean_se(mean: float, se: float, digits: int = 2, zero_decimals: int = 3) -> str:
    """``mean`` and standard error ``se`` in the papers' notation: ``(0.7200, 0.0121) -> "0.720(12)"``.

    The SE keeps ``digits`` significant digits, written in units of the last digit shown of the
    mean. The mean is never rounded to coarser than whole units, so a large SE is written in full:
    ``(2215, 351) -> "2215(351)"``, ``(67.3, 6.2) -> "67.3(62)"``. ``se == 0`` (or below
    ``1e-10 * |mean|``, float noise) gives ``zero_decimals`` decimals and ``(0)``; a NaN SE (one
    fold) gives the mean alone; a NaN mean gives ``"–"``. ``digits=1`` gives the style of the
    paper's Table 3, ``(67.2, 6.1) -> "67(6)"``.
    """
    if mean is None or not math.isfinite(mean):
        return MISSING
    if se is None or math.isnan(se):
        return f"{_round_half_up(mean, zero_decimals):f}"
    if se < 0 or math.isinf(se):
        raise ValueError(f"standard error must be finite and >= 0, got {se}")
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits}")
    if se <= 1e-10 * abs(mean):  # zero, or float noise of identical values (std = 4e-17)
        return f"{_round_half_up(mean, zero_decimals):f}(0)"
    exponent = math.floor(math.log10(se))
    decimals = digits - 1 - exponent
    # Rounding can carry into a new digit (0.0996 -> 0.10): then show one decimal fewer.
    if _round_half_up(se, decimals) >= Decimal(10) ** (exponent + 1):
        decimals -= 1
    decimals = max(decimals, 0)
    se_units = int(Decimal(repr(float(se))).scaleb(decimals).quantize(Decimal(1), ROUND_HALF_UP))
    return f"{_round_half_up(mean, decimals):f}({se_units})"
