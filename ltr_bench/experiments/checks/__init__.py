"""Verdict rules of the claims ledger: a few generic checks over an experiment's output tables.

A claim in ``conf/experiment/claims.yaml`` names one of these functions as ``_target_`` with its
arguments; the ledger calls it with ``tables`` (the experiment's CSVs by file name, loaded on
first use) and gets an :class:`Outcome`: whether the statement holds (``None`` when the tables
hold no rows to judge, e.g. a grid point a ``scale=quick`` run leaves out), the measured value
as text, and how the verdict was reached.

Every check selects rows with ``where`` (``{column: value}``, ``{column: [v1, v2]}`` or
``{column: {min: a, max: b}}``) and estimates a value as mean and standard error over the selected
rows (folds, repetitions); a single row of a pre-aggregated table (``summary.csv``) keeps its own
``<column>_se``. Differences are measured in the papers' sigma: the combined standard error of two
means, ``sqrt(se_a^2 + se_b^2)`` (ECML Sect. 5.1's "0.54 sigma" is that). ``column`` may be a
list: the claim then holds only if it holds for every column.

One module per job: :mod:`.estimates` (selecting rows, mean and standard error, sigma, the
outcome type), :mod:`.kinds` (the rules) and :mod:`.best` (a model against the best of a field). A claim's ``_target_`` names a rule through this
package, e.g. ``ltr_bench.experiments.checks.within_se``.
"""

from __future__ import annotations

from ltr_bench.experiments.checks.best import equivalent_to_best
from ltr_bench.experiments.checks.estimates import (
    CheckError,
    Outcome,
    Tables,
    Where,
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
from ltr_bench.experiments.checks.kinds import (
    above,
    below,
    change,
    equivalent,
    exceeds,
    gap,
    ratio,
    threshold,
    trend,
    within_se,
)
from ltr_bench.stats import format_mean_se, mean_se

__all__ = [
    "CheckError",
    "Outcome",
    "Tables",
    "Where",
    "above",
    "below",
    "change",
    "equivalent",
    "equivalent_to_best",
    "estimate",
    "exceeds",
    "fmt",
    "format_mean_se",
    "gap",
    "group_estimates",
    "groups",
    "mean_se",
    "parse_mean_se",
    "per_column",
    "ratio",
    "select",
    "sigma",
    "table",
    "threshold",
    "trend",
    "within_se",
]
