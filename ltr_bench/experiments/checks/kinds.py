"""The verdict rules a claim names as ``check._target_``: each judges one statement over an
experiment's tables and returns an :class:`~ltr_bench.experiments.checks.estimates.Outcome`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ltr_bench.experiments.checks.estimates import (
    CheckError,
    Outcome,
    Tables,
    Where,
    _bounds,
    _fmt_x,
    _nothing,
    estimate,
    fmt,
    group_estimates,
    groups,
    parse_mean_se,
    per_column,
    select,
    sigma,
    table,
)


@per_column
def threshold(
    tables: Tables,
    file: str,
    column: str,
    where: Where = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> Outcome:
    """The mean of ``column`` over the selected rows is ``>= at_least`` (and/or ``<= at_most``)."""
    rows = select(table(tables, file), where)
    est = estimate(rows, column) if len(rows) else (math.nan, math.nan, 0)
    if not len(rows) or math.isnan(est[0]):
        return _nothing(file, where)
    ok, rule = _bounds(est[0], at_least, at_most)
    return Outcome(ok, fmt(est), f"{column} {est[0]:.4f} {rule}")


def within_se(
    tables: Tables,
    file: str,
    paper: Mapping[str, Any],
    where: Where = None,
    by: str | None = None,
    n_se: float = 1.0,
) -> Outcome:
    """Our value lies within ``n_se`` combined standard errors of the paper's.

    ``paper``: ``{column: "0.720(12)"}``, or with ``by`` ``{label: {column: "0.720(12)"}}`` (one
    entry per model, say). Holds if every (label, column) is within.
    """
    rows = select(table(tables, file), where)
    wanted = paper if by else {"": paper}
    shown, worst, ok, missing = [], 0.0, True, []
    for label, values in wanted.items():
        part = select(rows, {by: label}) if by else rows
        for column, text in values.items():
            ref = parse_mean_se(text)
            est = estimate(part, column) if len(part) else (math.nan, math.nan, 0)
            if math.isnan(est[0]):
                missing.append(f"{by}={label} {column}" if by else column)
                continue
            z = abs(sigma(est, (ref[0], ref[1], 0)))
            worst = max(worst, z)
            ok &= z <= n_se
            shown.append(f"{label + ' ' if label else ''}{column} {fmt(est)} ({z:.1f}σ)")
    if missing:
        cond = ", ".join(f"{k}={v}" for k, v in (where or {}).items())
        return Outcome(
            None,
            "; ".join(shown) or "–",
            f"no rows for {', '.join(missing)} in {file}" + (f" where {cond}" if cond else ""),
        )
    return Outcome(bool(ok), "; ".join(shown), f"largest distance {worst:.2f}σ, allowed {n_se:g}σ")


def _above(
    tables: Tables,
    file: str,
    column: str,
    by: str,
    top: Sequence[str],
    others: Sequence[str] | None,
    where: Where,
    per: str | None,
    tolerance: float,
    min_share: float,
    lower: bool,
) -> Outcome:
    rows = select(table(tables, file), where)
    top = [str(t) for t in top]
    passed, judged, closest = 0, 0, None
    notes: list[str] = []
    for label, g in groups(rows, per):
        est = group_estimates(g, column, by)
        rest = [str(o) for o in others] if others is not None else [k for k in est if k not in top]
        if not all(k in est for k in [*top, *rest]) or not rest:
            continue
        judged += 1
        ok = True
        for t in top:
            for o in rest:
                margin = (est[o][0] - est[t][0]) if lower else (est[t][0] - est[o][0])
                ok &= margin > -tolerance
                if closest is None or margin < closest[0]:
                    closest = (margin, t, o, label)
        passed += ok
        if len(notes) < 3 and not ok:
            notes.append(
                f"not at {label or 'all'}: "
                + ", ".join(f"{k} {est[k][0]:.4f}" for k in [*top, *rest])
            )
    if judged == 0:
        return _nothing(file, where, f"rows with {by} in {[*top, *(others or [])]}")
    share = passed / judged
    word = "below" if lower else "above"
    rest_txt = "/".join(map(str, others)) if others is not None else "the others"
    ours = f"{'/'.join(top)} {word} {rest_txt}" + (
        f" at {passed}/{judged} {per}" if per else f": {'yes' if passed else 'no'}"
    )
    if closest is not None:
        m, t, o, lab = closest
        ours += (
            f" (closest: {t} vs {o} {'+' if m >= 0 else ''}{m:.4f}{' at ' + lab if lab else ''})"
        )
    detail = f"needs {min_share:.0%} of {per or 'the table'}" + (
        f"; {'; '.join(notes)}" if notes else ""
    )
    return Outcome(share >= min_share, ours, detail)


@per_column
def above(
    tables: Tables,
    file: str,
    column: str,
    by: str,
    top: Sequence[str],
    others: Sequence[str] | None = None,
    where: Where = None,
    per: str | None = None,
    tolerance: float = 0.0,
    min_share: float = 1.0,
) -> Outcome:
    """Every label in ``top`` has a higher mean than every label in ``others`` (default: all other
    labels of ``by``) — in each group of ``per`` (at least ``min_share`` of them) or overall.
    ``tolerance``: a deficit smaller than this still counts (ties at a ceiling)."""
    return _above(tables, file, column, by, top, others, where, per, tolerance, min_share, False)


@per_column
def below(
    tables: Tables,
    file: str,
    column: str,
    by: str,
    top: Sequence[str],
    others: Sequence[str] | None = None,
    where: Where = None,
    per: str | None = None,
    tolerance: float = 0.0,
    min_share: float = 1.0,
) -> Outcome:
    """As :func:`above` with lower values winning (run times)."""
    return _above(tables, file, column, by, top, others, where, per, tolerance, min_share, True)


@per_column
def equivalent(
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
    """``a`` is practically equivalent to each of ``others``: the Bayesian correlated t-test
    (Corani & Benavoli 2015) on their per-split values, paired by ``pair_on``, puts at least
    ``at_least`` of the posterior within ``rope`` of no difference. ``test_train_ratio`` is the
    splits' n_test / n_train (the correlation correction; ``1 / (k - 1)`` for k folds)."""
    from ltr_bench.stats import bayesian_correlated_ttest

    rows = select(table(tables, file), where)
    for name in (by, pair_on, column):
        if name not in rows:
            raise CheckError(f"no column {name!r} in {file}")
    wide = rows.pivot_table(index=pair_on, columns=by, values=column, aggfunc="mean")
    shown, ok = [], True
    for b in others:
        pair = wide[[a, b]].dropna() if a in wide and b in wide else wide.iloc[:0]
        if len(pair) < 2:
            continue
        r = bayesian_correlated_ttest(
            pair[a], pair[b], test_train_ratio=float(test_train_ratio), rope=float(rope)
        )
        ok &= r.p_equivalent >= at_least
        shown.append(
            f"{b}: P(within ±{rope:g}) {r.p_equivalent:.2f}, P({a} better) {r.p_a_better:.2f}, "
            f"P({b} better) {r.p_b_better:.2f} ({a} − {b} {r.mean_diff:+.4f}, {r.n} splits)"
        )
    if not shown:
        return _nothing(file, where, f"paired rows of {by}={a} and {list(others)}")
    return Outcome(
        bool(ok),
        "; ".join(shown),
        f"P(within ±{rope:g}) at least {at_least:g} against each (Bayesian correlated t-test)",
    )


@per_column
def trend(
    tables: Tables,
    file: str,
    column: str,
    x: str,
    direction: str,
    where: Where = None,
    per: str | None = None,
    min_rho: float = 0.8,
) -> Outcome:
    """The mean of ``column`` rises (``direction: increasing``) or falls (``decreasing``) with
    ``x``: Spearman's rho over the points at least ``min_rho`` in that direction and the last
    point beyond the first, in every group of ``per``."""
    from scipy.stats import spearmanr

    if direction not in ("increasing", "decreasing"):
        raise CheckError(f"direction must be increasing or decreasing, got {direction!r}")
    sign = 1.0 if direction == "increasing" else -1.0
    rows = select(table(tables, file), where)
    shown, ok, judged = [], True, 0
    for label, g in groups(rows, per):
        est = group_estimates(g, column, x)
        if len(est) < 2:
            continue
        xs = np.array([float(k) for k in est])
        order = np.argsort(xs)
        means = np.array([v[0] for v in est.values()])[order]
        rho = (
            float(spearmanr(xs[order], means).statistic)
            if len(est) > 2
            else float(np.sign(means[-1] - means[0]))
        )
        good = sign * rho >= min_rho and sign * (means[-1] - means[0]) > 0
        ok &= good
        judged += 1
        shown.append(
            f"{label + ': ' if label else ''}rho {rho:+.2f}, {means[0]:.4f} -> {means[-1]:.4f} "
            f"({_fmt_x(xs[order][0])} -> {_fmt_x(xs[order][-1])})"
        )
    if not judged:
        return _nothing(file, where, f"two or more values of {x}")
    return Outcome(
        bool(ok),
        "; ".join(shown),
        f"{direction}: rho {'>=' if sign > 0 else '<='} "
        f"{sign * min_rho:+g} and last point beyond the first",
    )


@per_column
def change(
    tables: Tables,
    file: str,
    column: str,
    x: str,
    start: Any,
    end: Any,
    where: Where = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> Outcome:
    """``value(x = end) - value(x = start)`` is within the bounds (e.g. a drop of at most 0.02:
    ``at_least: -0.02``)."""
    rows = select(table(tables, file), where)
    a, b = select(rows, {x: start}), select(rows, {x: end})
    if not len(a) or not len(b):
        return _nothing(file, {**(where or {}), x: [start, end]})
    ea, eb = estimate(a, column), estimate(b, column)
    diff = eb[0] - ea[0]
    ok, rule = _bounds(diff, at_least, at_most)
    return Outcome(
        ok,
        f"{fmt(ea)} -> {fmt(eb)} ({diff:+.4f}, {sigma(eb, ea):+.1f}σ)",
        f"change from {x}={_fmt_x(start)} to {_fmt_x(end)} {rule}",
    )


@per_column
def ratio(
    tables: Tables,
    file: str,
    column: str,
    by: str,
    numerator: str | None = None,
    denominator: str | None = None,
    where: Where = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> Outcome:
    """``mean(numerator) / mean(denominator)`` over the labels of ``by`` is within the bounds;
    a missing numerator is the largest mean, a missing denominator the smallest (the spread)."""
    est = group_estimates(select(table(tables, file), where), column, by)
    if not est:
        return _nothing(file, where)
    num = str(numerator) if numerator is not None else max(est, key=lambda k: est[k][0])
    den = str(denominator) if denominator is not None else min(est, key=lambda k: est[k][0])
    if num not in est or den not in est:
        return _nothing(file, where, f"rows with {by} in {[num, den]}")
    value = est[num][0] / est[den][0]
    ok, rule = _bounds(value, at_least, at_most)
    return Outcome(
        ok, f"{num} {fmt(est[num])} / {den} {fmt(est[den])} = {value:.3g}", f"ratio {rule}"
    )


@per_column
def gap(
    tables: Tables,
    file: str,
    column: str,
    by: str,
    a: str | None = None,
    b: str | None = None,
    where: Where = None,
    per: str | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> Outcome:
    """``(mean(a) - mean(b))`` in combined SEs (sigma) is within the bounds; a missing ``a`` is the
    best label, a missing ``b`` the worst (ECML's "0.54 sigma between best and worst")."""
    rows = select(table(tables, file), where)
    shown, ok, judged = [], True, 0
    for label, g in groups(rows, per):
        est = group_estimates(g, column, by)
        hi = str(a) if a is not None else max(est, key=lambda k: est[k][0]) if est else None
        lo = str(b) if b is not None else min(est, key=lambda k: est[k][0]) if est else None
        if hi not in est or lo not in est:
            continue
        z = sigma(est[hi], est[lo])
        good, rule = _bounds(z, at_least, at_most)
        ok &= good
        judged += 1
        shown.append(
            f"{label + ': ' if label else ''}{z:.2f}σ ({hi} {fmt(est[hi])} vs {lo} {fmt(est[lo])})"
        )
    if not judged:
        return _nothing(file, where, f"rows with {by} in {[a, b]}")
    return Outcome(bool(ok), "; ".join(shown), f"gap in sigma {rule}")


@per_column
def exceeds(
    tables: Tables, file: str, column: str, other: str, where: Where = None, margin: float = 0.0
) -> Outcome:
    """``mean(column) - mean(other)`` over the same rows is at least ``margin`` (negative: within
    that much below)."""
    rows = select(table(tables, file), where)
    if not len(rows):
        return _nothing(file, where)
    ea, eb = estimate(rows, column), estimate(rows, other)
    diff = ea[0] - eb[0]
    return Outcome(
        bool(diff >= margin),
        f"{column} {fmt(ea)} vs {other} {fmt(eb)} ({diff:+.4f})",
        f"difference >= {margin:g}",
    )
