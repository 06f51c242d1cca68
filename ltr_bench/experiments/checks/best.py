"""A verdict rule against the best of a field: one model within the ROPE of the best of the others."""

from __future__ import annotations

from collections.abc import Sequence

from ltr_bench.experiments.checks.estimates import (
    Outcome,
    Tables,
    Where,
    _nothing,
    fmt,
    group_estimates,
    per_column,
    select,
    table,
)
from ltr_bench.experiments.checks.kinds import equivalent


@per_column
def equivalent_to_best(
    tables: Tables,
    file: str,
    column: str,
    by: str,
    a: str,
    others: Sequence[str],
    test_train_ratio: float,
    pair_on: str = "fold",
    rope: float = 0.01,
    where: Where = None,
    at_least: float = 0.5,
) -> Outcome:
    """``a`` is practically equivalent to the best of ``others`` (the label with the highest mean
    of ``column``): :func:`~ltr_bench.experiments.checks.equivalent` against that one label, so
    at least ``at_least`` of the Bayesian correlated t-test's posterior lies within ``rope``.
    Every label of ``others`` must have rows (the field is judged whole or not at all)."""
    rows = select(table(tables, file), where)
    est = group_estimates(rows, column, by)
    missing = [str(o) for o in others if str(o) not in est]
    if missing or a not in est:
        return _nothing(file, where, f"rows of {by}={[a, *missing] if a not in est else missing}")
    best = max((str(o) for o in others), key=lambda o: est[o][0])
    pair = equivalent(
        tables,
        file=file,
        column=column,
        by=by,
        a=a,
        others=[best],
        test_train_ratio=test_train_ratio,
        pair_on=pair_on,
        rope=rope,
        where=where,
        at_least=at_least,
    )
    head = f"best of {len(others)}: {best} {fmt(est[best])}, {a} {fmt(est[a])}; "
    return Outcome(
        pair.holds,
        head + pair.ours,
        f"the best by mean {column}; {pair.detail}",
    )
