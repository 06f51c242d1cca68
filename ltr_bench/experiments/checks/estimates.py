"""The pieces every verdict rule shares: the outcome type, row selection by ``where``, mean and
standard error of a column, the papers' sigma, and their text forms."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ltr_bench.stats import format_mean_se, mean_se

Tables = Mapping[str, pd.DataFrame]
Where = Mapping[str, Any] | None


@dataclass(frozen=True)
class Outcome:
    """A check's result: ``holds`` (None = nothing to judge), the measured value, the reasoning."""

    holds: bool | None
    ours: str
    detail: str = ""


class CheckError(ValueError):
    """A check that cannot be evaluated as written (a file or column the experiment does not write)."""


# ------------------------------------------------------------------------------ selection helpers
def table(tables: Tables, file: str) -> pd.DataFrame:
    try:
        return tables[file]
    except KeyError:
        raise CheckError(f"the experiment wrote no {file}") from None


def select(frame: pd.DataFrame, where: Where) -> pd.DataFrame:
    """Rows matching every condition of ``where`` (numbers compared with ``np.isclose``)."""
    mask = np.ones(len(frame), dtype=bool)
    for column, cond in (where or {}).items():
        if column not in frame:
            raise CheckError(
                f"no column {column!r} (columns: {', '.join(map(str, frame.columns))})"
            )
        values = frame[column]
        if isinstance(cond, Mapping):
            num = pd.to_numeric(values, errors="coerce")
            if cond.get("min") is not None:
                mask &= (num >= float(cond["min"])).to_numpy()
            if cond.get("max") is not None:
                mask &= (num <= float(cond["max"])).to_numpy()
        else:
            wanted = list(cond) if isinstance(cond, (list, tuple)) else [cond]
            mask &= np.logical_or.reduce([_equal(values, w) for w in wanted])
    return frame[mask]


def _equal(values: pd.Series, wanted: Any) -> np.ndarray:
    if isinstance(wanted, (int, float)) and not isinstance(wanted, bool):
        num = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
        return np.isclose(num, float(wanted), rtol=1e-9, atol=1e-12)
    return (values.astype(str) == str(wanted)).to_numpy()


def estimate(frame: pd.DataFrame, column: str) -> tuple[float, float, int]:
    """Mean, SE and count of ``column`` over the rows; one row with ``<column>_se`` keeps that SE."""
    if column not in frame:
        raise CheckError(f"no column {column!r} (columns: {', '.join(map(str, frame.columns))})")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    if len(frame) == 1 and f"{column}_se" in frame:
        se = float(pd.to_numeric(frame[f"{column}_se"], errors="coerce").iloc[0])
        return float(values[0]), se, 1
    return mean_se(values)


def group_estimates(
    frame: pd.DataFrame, column: str, by: str
) -> dict[str, tuple[float, float, int]]:
    """:func:`estimate` per value of ``by`` (labels as strings, in order of appearance)."""
    if by not in frame:
        raise CheckError(f"no column {by!r} (columns: {', '.join(map(str, frame.columns))})")
    return {str(k): estimate(g, column) for k, g in frame.groupby(by, sort=False)}


def groups(frame: pd.DataFrame, per: str | None) -> list[tuple[str, pd.DataFrame]]:
    """``[(label, rows)]`` per value of ``per`` (sorted), or the whole frame as one group."""
    if per is None:
        return [("", frame)]
    if per not in frame:
        raise CheckError(f"no column {per!r} (columns: {', '.join(map(str, frame.columns))})")
    return [(f"{per}={_fmt_x(k)}", g) for k, g in frame.groupby(per, sort=True)]


def sigma(a: tuple[float, float, int], b: tuple[float, float, int]) -> float:
    """``(a - b)`` in units of the combined SE (NaN SEs count as 0; inf when both are 0)."""
    se = math.sqrt(_se0(a[1]) ** 2 + _se0(b[1]) ** 2)
    diff = a[0] - b[0]
    if se == 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / se


def _se0(se: float) -> float:
    return 0.0 if se is None or math.isnan(se) else float(se)


def fmt(est: tuple[float, float, int]) -> str:
    """An estimate in the papers' notation, ``0.720(12)``."""
    return format_mean_se(est[0], est[1])


def _fmt_x(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


_MEAN_SE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(?:\(\s*(\d+)\s*\))?\s*$")


def parse_mean_se(text: str | float) -> tuple[float, float]:
    """The papers' ``0.720(12)`` as ``(0.720, 0.012)``; ``2215(351)`` as ``(2215, 351)``; a bare
    number has SE NaN."""
    if isinstance(text, (int, float)):
        return float(text), math.nan
    m = _MEAN_SE.match(str(text))
    if not m:
        raise CheckError(f"{text!r} is not a value in the papers' notation such as 0.720(12)")
    mean_text, se_digits = m.groups()
    decimals = len(mean_text.split(".")[1]) if "." in mean_text else 0
    se = int(se_digits) * 10.0 ** (-decimals) if se_digits is not None else math.nan
    return float(mean_text), se


def _bounds(value: float, at_least: float | None, at_most: float | None) -> tuple[bool, str]:
    ok, parts = True, []
    if at_least is not None:
        ok &= value >= at_least
        parts.append(f">= {at_least:g}")
    if at_most is not None:
        ok &= value <= at_most
        parts.append(f"<= {at_most:g}")
    return bool(ok), " and ".join(parts)


def _nothing(file: str, where: Where, what: str = "rows") -> Outcome:
    cond = ", ".join(f"{k}={v}" for k, v in (where or {}).items())
    return Outcome(None, "–", f"no {what} in {file}" + (f" where {cond}" if cond else ""))


def per_column(check: Callable[..., Outcome]) -> Callable[..., Outcome]:
    """Let ``column`` be a list: evaluate per column; holds only if every column holds."""

    @functools.wraps(check)
    def wrapper(tables: Tables, *args: Any, column: str | Sequence[str], **kwargs: Any) -> Outcome:
        if isinstance(column, str):
            return check(tables, *args, column=column, **kwargs)
        outs = [check(tables, *args, column=c, **kwargs) for c in column]
        holds = None if any(o.holds is None for o in outs) else all(o.holds for o in outs)
        return Outcome(
            holds,
            "; ".join(f"{c}: {o.ours}" for c, o in zip(column, outs)),
            "; ".join(f"{c}: {o.detail}" for c, o in zip(column, outs) if o.detail),
        )

    return wrapper


# ------------------------------------------------------------------------------ the checks
