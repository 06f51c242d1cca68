"""Replay a sweep recorded without racing under racing rules: folds saved, choices kept.

A sweep run with ``hydra/sweeper/pruner=none hydra.sweeper.reevaluate.pruner=null`` (the ``none``
variant of ``bench_sweep_budget.py``, which prints this replay for it) fits every inner fold of
every trial and every re-evaluation fold of the top trials, and its MLflow store keeps each
fold's validation value (``cv_fold/<metric>``, one step per fold). This script replays each of
its studies, trial by trial in the order they were asked, on ``--workers`` simulated workers
(one time unit per fold plus ``--fixed`` per job, which orders the pruning decisions as trials
in flight would), under a grid of racing rules:

- the search pruner is Optuna's own ``SuccessiveHalvingPruner`` (``--rungs``: reduction factors),
  fed the running means a raced trial reports;
- the re-evaluation races with :func:`ltr_bench.sweeper.reevaluation.racing.cannot_catch_up`
  (``--z`` x ``--min-folds``) against the candidates that have run at least as many folds;
- the chosen trial is the one with the best pooled value, as the sweeper selects.

Printed per rule: folds fitted (search, re-evaluation), the fold ratio against the replay
without racing (a bound on racing's speed-up: trials cost more than their folds), jobs, how many
studies choose the trial the recorded sweep chose, and the mean loss in the chosen trial's pooled
validation value (search plus re-evaluation folds) against that choice. A study in which a
replayed candidate was never re-evaluated in the record counts under ``approx``: that
candidate's search folds stand in for its re-evaluation.

The replay keeps the recorded trials. A real raced sweep's sampler sees the pruned trials'
partial values and proposes other trials after the first pruning, so a replay measures the
rules on one sequence of trials, not what a raced sweep will fit. Usage::

    .venv/bin/python benchmarks/replay_racing.py <work dir>/none/mlflow.db [more stores]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import sqlite3
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from ltr_bench.sweeper.reevaluation.racing import Candidate, cannot_catch_up

optuna.logging.set_verbosity(optuna.logging.WARNING)


@dataclass
class RecordedStudy:
    """One study of a recorded sweep: per trial its search folds and re-evaluation folds."""

    name: str
    search: dict[int, list[float]] = field(default_factory=dict)
    reevaluation: dict[int, list[float]] = field(default_factory=dict)

    def search_value(self, number: int) -> float:
        return statistics.fmean(self.search[number])

    def pooled(self, number: int) -> float:
        """Search and re-evaluation folds pooled (the search's alone if never re-evaluated)."""
        return statistics.fmean(self.search[number] + self.reevaluation.get(number, []))


def load(db: Path, metric: str) -> list[RecordedStudy]:
    """The studies of one MLflow store (trial runs tagged ``ltr.study`` / ``ltr.trial_number``)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    tags: dict[str, dict[str, str]] = defaultdict(dict)
    for run, key, value in con.execute(
        "select run_uuid, key, value from tags where key in "
        "('ltr.study', 'ltr.trial_number', 'ltr.reevaluation', 'ltr.role')"
    ):
        tags[run][key] = value
    folds: dict[str, dict[int, float]] = defaultdict(dict)
    for run, step, value in con.execute(
        "select run_uuid, step, value from metrics where key = ?", (f"cv_fold/{metric}",)
    ):
        folds[run][int(step)] = float(value)
    studies: dict[str, RecordedStudy] = {}
    for run, t in tags.items():
        if t.get("ltr.role") != "trial" or run not in folds:
            continue
        study = studies.setdefault(t["ltr.study"], RecordedStudy(f"{db.parent}:{t['ltr.study']}"))
        values = [folds[run][k] for k in sorted(folds[run])]
        target = study.reevaluation if t.get("ltr.reevaluation") == "true" else study.search
        target[int(t["ltr.trial_number"])] = values
    return [s for s in studies.values() if s.search and s.reevaluation]


@dataclass(frozen=True)
class Rule:
    """One racing rule: the search's reduction factor (0: no search pruning) and the
    re-evaluation race's ``z`` and ``min_folds`` (z < 0: no re-evaluation race)."""

    reduction_factor: int
    z: float
    min_folds: int

    def __str__(self) -> str:
        search = f"sh{self.reduction_factor}" if self.reduction_factor else "none"
        race = f"z{self.z:g}/m{self.min_folds}" if self.z >= 0 else "full"
        return f"{search} + {race}"


@dataclass
class Outcome:
    folds: int = 0
    search_folds: int = 0
    jobs: int = 0
    makespan: float = 0.0
    chosen: int | None = None
    unknown: bool = False


def simulate(
    queue: list[int],
    workers: int,
    fixed: float,
    t0: float,
    begin: Callable[[int], None],
    fold: Callable[[int], bool],
    out: Outcome,
) -> None:
    """Jobs ``queue`` on ``workers`` simulated workers from time ``t0``: a job starts as a worker
    frees (``begin(number)``), each fold takes one unit (its first also ``fixed``), and after each
    ``fold(number)`` says whether the job goes on. Counts jobs and folds, ends at ``makespan``."""
    events: list[tuple[float, int, int]] = []  # (time a fold ends, tiebreak, job)
    counter = itertools.count()

    def start(now: float) -> None:
        number = queue.pop(0)
        begin(number)
        out.jobs += 1
        heapq.heappush(events, (now + fixed + 1.0, next(counter), number))

    for _ in range(min(workers, len(queue))):
        start(t0)
    while events:
        now, _, number = heapq.heappop(events)
        out.folds += 1
        if fold(number):
            heapq.heappush(events, (now + 1.0, next(counter), number))
            continue
        out.makespan = max(out.makespan, now)
        if queue:
            start(now)


def replay_search(
    study: RecordedStudy, rule: Rule, workers: int, fixed: float
) -> tuple[Outcome, dict[int, float]]:
    """The search under ``rule``: completed trials' values, folds and jobs, simulated time."""
    pruner: optuna.pruners.BasePruner = (
        optuna.pruners.SuccessiveHalvingPruner(reduction_factor=rule.reduction_factor)
        if rule.reduction_factor
        else optuna.pruners.NopPruner()
    )
    sim = optuna.create_study(direction="maximize", pruner=pruner)
    out, complete = Outcome(), {}
    handles: dict[int, optuna.Trial] = {}
    done_folds: dict[int, int] = {}

    def begin(number: int) -> None:
        handles[number] = sim.ask()
        done_folds[number] = 0

    def fold(number: int) -> bool:
        folds = study.search[number]
        done_folds[number] += 1
        k = done_folds[number]
        trial = handles[number]
        trial.report(statistics.fmean(folds[:k]), k)
        if k == len(folds):
            sim.tell(trial, statistics.fmean(folds))
            complete[number] = statistics.fmean(folds)
            return False
        if trial.should_prune():
            sim.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return False
        return True

    simulate(sorted(study.search), workers, fixed, 0.0, begin, fold, out)
    return out, complete


def replay_reevaluation(
    study: RecordedStudy, top: list[int], rule: Rule, workers: int, fixed: float, out: Outcome
) -> None:
    """The re-evaluation of ``top`` under ``rule``; adds to ``out`` and sets its choice."""
    n = max(len(v) for v in study.reevaluation.values())
    folds_of: dict[int, list[float]] = {}
    for number in top:
        if number in study.reevaluation:
            folds_of[number] = study.reevaluation[number]
        else:  # never re-evaluated in the record: its search folds stand in for the repeats
            out.unknown = True
            folds_of[number] = list(itertools.islice(itertools.cycle(study.search[number]), n))
    ran: dict[int, list[float]] = {}
    dropped: set[int] = set()
    finished: set[int] = set()

    def begin(number: int) -> None:
        ran[number] = []

    def candidate(number: int) -> Candidate:
        return Candidate(number, study.search_value(number), len(study.search[number]), ran[number])

    def fold(number: int) -> bool:
        ran[number].append(folds_of[number][len(ran[number])])
        j = len(ran[number])
        if j == n:
            finished.add(number)
            return False
        if (
            rule.z >= 0
            and j >= rule.min_folds
            and any(
                cannot_catch_up(candidate(number), candidate(o), j, n, rule.z, 1.0)
                for o in ran
                if o != number and o not in dropped and len(ran[o]) >= j
            )
        ):
            dropped.add(number)
            return False
        return True

    simulate(list(top), workers, fixed, out.makespan, begin, fold, out)

    def pooled_so_far(number: int) -> float:
        return statistics.fmean(study.search[number] + ran[number])

    out.chosen = min(finished, key=lambda m: (-pooled_so_far(m), m))


def replay(study: RecordedStudy, rule: Rule, top_k: int, workers: int, fixed: float) -> Outcome:
    out, complete = replay_search(study, rule, workers, fixed)
    out.search_folds = out.folds
    top = sorted(complete, key=lambda m: (-complete[m], m))[:top_k]
    replay_reevaluation(study, top, rule, workers, fixed, out)
    return out


def rules_grid(rungs: str, zs: str, min_folds: str) -> list[Rule]:
    """Every combination of reduction factors, ``z`` values and ``min_folds`` (comma lists)."""
    return [
        Rule(rf, z, m)
        for rf in (int(x) for x in rungs.split(","))
        for z in (float(x) for x in zs.split(","))
        for m in ([3] if z < 0 else [int(x) for x in min_folds.split(",")])
    ]


def report(
    studies: list[RecordedStudy], rules: list[Rule], top_k: int, workers: int, fixed: float
) -> None:
    """Print one line per rule against the replayed sweep without racing."""
    base_rule = Rule(0, -1.0, 3)
    base = {s.name: replay(s, base_rule, top_k, workers, fixed) for s in studies}
    base_folds = sum(o.folds for o in base.values())
    print(
        f"{'rule':<18} {'search':>6} {'re-ev.':>6} {'x folds':>8} {'jobs':>5} "
        f"{'same':>5} {'approx':>6} {'loss':>8}"
    )
    for rule in rules:
        outs = {s.name: replay(s, rule, top_k, workers, fixed) for s in studies}
        folds = sum(o.folds for o in outs.values())
        search_folds = sum(o.search_folds for o in outs.values())
        known = [s for s in studies if not outs[s.name].unknown]
        same = sum(outs[s.name].chosen == base[s.name].chosen for s in studies)
        losses = [
            s.pooled(base[s.name].chosen) - s.pooled(outs[s.name].chosen)  # type: ignore[arg-type]
            for s in studies
        ]
        print(
            f"{str(rule):<18} {search_folds:>6} {folds - search_folds:>6} "
            f"{base_folds / folds:>7.2f}x {sum(o.jobs for o in outs.values()):>5} "
            f"{same:>2}/{len(studies):<2} {len(studies) - len(known):>6} "
            f"{statistics.fmean(losses):>+8.4f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("stores", nargs="+", type=Path, help="mlflow.db of recorded sweeps (no racing)")
    ap.add_argument("--metric", default="ndcg_at_10", help="the objective's cv_fold/<metric>")
    ap.add_argument("--top-k", type=int, default=5, help="re-evaluated trials per study")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fixed", type=float, default=0.9, help="a job's fixed cost, in folds")
    ap.add_argument("--rungs", default="0,3,4,8", help="reduction factors (0: no search pruning)")
    ap.add_argument("--z", default="-1,2,1", help="re-evaluation race z (-1: no race)")
    ap.add_argument("--min-folds", default="3", help="re-evaluation race min_folds")
    args = ap.parse_args()
    studies = [s for db in args.stores for s in load(db, args.metric)]
    print(f"{len(studies)} recorded studies from {len(args.stores)} stores")
    report(
        studies,
        rules_grid(args.rungs, args.z, args.min_folds),
        args.top_k,
        args.workers,
        args.fixed,
    )


if __name__ == "__main__":
    main()
