"""Pooling and selecting re-evaluated top trials: the winner is not chosen on the noise that
made it win.

With a noisy objective (an inner-CV mean over a few hundred queries) the best of many trials is
mostly the luckiest: its value is biased upwards ("winner's curse"). After the search the sweeper
runs the ``top_k`` trials once more as *re-evaluation* jobs (``++sweep.reevaluation=true``; the
app scores the same config on fresh splits or seeds, ltr_bench ``protocol.reevaluation_repeats``
new inner-CV repeats) and selects the trial with the best **pooled** value: the mean over all the
folds the search and the re-evaluation scored, weighted by their counts (an
:class:`~ltr_bench.sweeper.job.Objective`'s ``n_folds``; 1 for a plain float). A candidate the
race dropped (:mod:`~ltr_bench.sweeper.reevaluation.racing`) keeps the folds it ran
(``dropped_after``) and is never selected.

Records live in the study's user attributes (``reevaluation:<trial number>``), so a resumed or
shared sweep neither repeats a re-evaluation nor loses one; the trials keep their search values
(the sampler's view of the space is the search's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ltr_bench.sweeper.job import ATTR_PREFIX, ATTR_SE

ATTR_KEY_PREFIX = "reevaluation:"
ATTR_N_FOLDS = ATTR_PREFIX + "n_folds"


@dataclass(frozen=True)
class Reevaluation:
    """One top trial's search value, its re-evaluation and the two pooled."""

    trial: int
    search_value: float
    search_se: float | None
    search_n: int
    reevaluation_value: float
    reevaluation_se: float | None
    reevaluation_n: int
    value: float  # pooled mean over search_n + reevaluation_n folds
    se: float | None  # SE of the pooled mean (None when either part has no SE)
    dropped_after: int | None = None  # re-evaluation folds run before the race dropped it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def top_trials(trials: Sequence[Any], k: int, maximize: bool) -> list[Any]:
    """The ``k`` best COMPLETE trials by search value (ties: the earlier trial first)."""
    done = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    done.sort(key=lambda t: ((-t.value if maximize else t.value), t.number))
    return done[: max(int(k), 0)]


def pooled_mean_se(parts: Sequence[tuple[float, float | None, int]]) -> tuple[float, float | None]:
    """Mean and standard error of the union of samples given as ``(mean, se, n)`` parts: the
    mean weighted by ``n``, the SE of the mean of all ``sum(n)`` values (within-part spread
    ``se * sqrt(n)`` plus the spread between part means); None when a part lacks one or fewer
    than two values are pooled."""
    total = sum(n for _, _, n in parts)
    if total <= 0:
        raise ValueError("pooled_mean_se needs at least one value")
    mean = sum(m * n for m, _, n in parts) / total
    if total < 2 or any(se is None or not math.isfinite(se) for _, se, _ in parts):
        return mean, None
    # squared deviations from the pooled mean: within-part + between-part (every se is finite)
    ss = sum(
        (n - 1) * (float(se or 0.0) * math.sqrt(n)) ** 2 + n * (m - mean) ** 2 for m, se, n in parts
    )
    return mean, math.sqrt(ss / (total - 1) / total)


def make_record(
    trial: Any, value: float, attrs: Mapping[str, float], dropped_after: int | None = None
) -> Reevaluation:
    """Pool ``trial``'s search value (user attributes ``objective_se``/``objective_n_folds``)
    with a re-evaluation ``value`` whose attributes are ``attrs`` (same keys); a dropped
    re-evaluation's ``value`` is its running mean over its ``dropped_after`` folds."""
    s_se, s_n = _se_n(trial.user_attrs)
    r_se, r_n = _se_n(attrs)
    if dropped_after is not None:
        r_se, r_n = None, max(int(dropped_after), 1)
    mean, se = pooled_mean_se([(float(trial.value), s_se, s_n), (float(value), r_se, r_n)])
    return Reevaluation(
        trial.number,
        float(trial.value),
        s_se,
        s_n,
        float(value),
        r_se,
        r_n,
        mean,
        se,
        dropped_after,
    )


def search_n(trial: Any) -> int:
    """How many folds a trial's search value pooled (its ``objective_n_folds``; 1 without)."""
    return _se_n(trial.user_attrs)[1]


def _se_n(attrs: Mapping[str, Any]) -> tuple[float | None, int]:
    se = attrs.get(ATTR_SE)
    n = attrs.get(ATTR_N_FOLDS)
    return (None if se is None else float(se)), (int(n) if n is not None and n >= 1 else 1)


def stored(study: Any) -> dict[int, Reevaluation]:
    """The re-evaluations recorded in ``study`` so far, by trial number."""
    out: dict[int, Reevaluation] = {}
    for key, value in study.user_attrs.items():
        if key.startswith(ATTR_KEY_PREFIX) and isinstance(value, Mapping):
            rec = Reevaluation(**value)
            out[rec.trial] = rec
    return out


def store(study: Any, record: Reevaluation) -> None:
    study.set_user_attr(f"{ATTR_KEY_PREFIX}{record.trial}", record.to_dict())


def select(records: Mapping[int, Reevaluation], maximize: bool) -> Reevaluation | None:
    """The re-evaluated trial with the best pooled value (ties: the earlier trial); a dropped
    one is never chosen."""
    finished = [r for r in records.values() if r.dropped_after is None]
    if not finished:
        return None
    return min(finished, key=lambda r: ((-r.value if maximize else r.value), r.trial))
