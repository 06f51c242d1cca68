"""A re-evaluation's record: a top trial's search value, its re-evaluation and the two pooled
(the winner has the best mean over the folds of its search and its re-evaluation: a noisy
objective's best is mostly the luckiest). A finished lock trial of ``<study>:reevaluations`` holds
its record as flat user attributes (``ltr_sweeper.pooled_value``, ...) beside its value, so that
resuming repeats none and optuna-dashboard shows each as one row of numbers; a study an older
sweep wrote keeps its records as study attributes ``reevaluation:<trial>``, still read."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from ltr_bench.sweeper import job
from ltr_bench.sweeper.optuna_private import study_storage
from ltr_bench.sweeper.reevaluation.racing import ATTR_SEARCH_N, ATTR_SEARCH_VALUE
from ltr_bench.sweeper.trials import ATTR_REEVALUATES

ATTR_KEY_PREFIX = "reevaluation:"
ATTR_N_FOLDS = job.ATTR_PREFIX + "n_folds"


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

    def to_attrs(self) -> dict[str, Any]:
        """The record as its lock trial's user attributes: one number (or null) each."""
        return {RECORD_ATTRS[k]: v for k, v in self.to_dict().items()}

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> Reevaluation | None:
        """The record a lock trial holds (None: a lock finished without one)."""
        if any(name not in attrs for name in RECORD_ATTRS.values()):
            return None
        return cls(**{k: attrs[name] for k, name in RECORD_ATTRS.items()})


#: Each record field's user attribute on the lock trial (``value``/``se`` are the pooled ones).
RECORD_ATTRS = {
    "trial": ATTR_REEVALUATES,
    "search_value": ATTR_SEARCH_VALUE,
    "search_se": "ltr_sweeper.search_se",
    "search_n": ATTR_SEARCH_N,
    "reevaluation_value": "ltr_sweeper.reevaluation_value",
    "reevaluation_se": "ltr_sweeper.reevaluation_se",
    "reevaluation_n": "ltr_sweeper.reevaluation_n",
    "value": "ltr_sweeper.pooled_value",
    "se": "ltr_sweeper.pooled_se",
    "dropped_after": "ltr_sweeper.dropped_after_folds",
}


def top_trials(trials: Sequence[Any], k: int, maximize: bool) -> list[Any]:
    """The ``k`` best COMPLETE trials by search value (ties: the earlier trial first)."""
    done = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    done.sort(key=lambda t: ((-t.value if maximize else t.value), t.number))
    return done[: max(int(k), 0)]


def pooled_mean_se(parts: Sequence[tuple[float, float | None, int]]) -> tuple[float, float | None]:
    """Mean and SE of the union of ``(mean, se, n)`` parts (SE None when a part lacks one)."""
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
    """Pool ``trial``'s search value with a re-evaluation ``value`` (attributes ``attrs``)."""
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
    se = attrs.get(job.ATTR_SE)
    n = attrs.get(ATTR_N_FOLDS)
    return (None if se is None else float(se)), (int(n) if n is not None and n >= 1 else 1)


def stored(study: Any, locks: optuna.Study | None) -> dict[int, Reevaluation]:
    """The re-evaluations recorded so far, by trial number: those the finished locks of
    ``locks`` hold, and those an older sweep kept in ``study``'s attributes."""
    out: dict[int, Reevaluation] = {}
    for key, value in study.user_attrs.items():  # an older sweep's records
        if key.startswith(ATTR_KEY_PREFIX) and isinstance(value, Mapping):
            rec = Reevaluation(**value)
            out[rec.trial] = rec
    finished = (TrialState.COMPLETE, TrialState.PRUNED)
    for t in [] if locks is None else locks.get_trials(deepcopy=False, states=finished):
        found = Reevaluation.from_attrs(t.user_attrs)
        if found is not None:
            out[found.trial] = found
    return out


def store(locks: optuna.Study, lock_id: int, record: Reevaluation) -> None:
    """Write ``record`` onto its (still running) lock trial, before the lock is closed."""
    storage = study_storage(locks)
    for key, value in record.to_attrs().items():
        storage.set_trial_user_attr(lock_id, key, value)


def select(records: Mapping[int, Reevaluation], maximize: bool) -> Reevaluation | None:
    """The re-evaluated trial with the best pooled value (ties: the earlier), not a dropped one."""
    finished = [r for r in records.values() if r.dropped_after is None]
    if not finished:
        return None
    return min(finished, key=lambda r: ((-r.value if maximize else r.value), r.trial))
