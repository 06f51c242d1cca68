"""Metric names: ``"ndcg@10"`` and friends parsed into a :class:`MetricSpec`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ltr_bench.errors import UserError

DEFAULT_METRICS: tuple[str, ...] = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map", "mrr")


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name: ``kind`` ("ndcg", "map", "p", "mrr", "wta", "err", "pair_acc")
    and the cut-off ``k`` (None = whole query)."""

    name: str
    kind: str
    k: int | None = None


_WITH_K = ("ndcg", "p", "err")  # "ndcg" and "err" without @k use the whole query
_WITHOUT_K = ("map", "mrr", "wta", "pair_acc")
_VALID_NAMES = (
    "ndcg@k, map, p@k, mrr, wta, err@k, pair_acc (k a positive integer; plain ndcg and err use "
    "the whole query)"
)
_NAME_RE = re.compile(r"^([a-z_]+)(?:@(\d+))?$")


def parse_metric(name: str) -> MetricSpec:
    """Parse a metric name such as ``"ndcg@10"``; raise :class:`UserError` for unknown names."""
    text = str(name).strip().lower()
    match = _NAME_RE.match(text)
    kind, k = (match.group(1), match.group(2)) if match else (None, None)
    ok = match is not None and (
        (kind in _WITH_K and (k is not None or kind != "p")) or (kind in _WITHOUT_K and k is None)
    )
    if not ok or kind is None or (k is not None and int(k) < 1):
        raise UserError(f"unknown metric {name!r}; valid metrics are {_VALID_NAMES}")
    return MetricSpec(name=text, kind=kind, k=int(k) if k is not None else None)
