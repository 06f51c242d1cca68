"""One live progress line per study: trials done / n_trials, pruned, failed, best (SE), elapsed, ETA.

On a terminal it is a tqdm line that updates in place; otherwise (a log file, a batch job) each
update is one plain ``INFO`` log line, so a log shows how far a sweep is without escape codes.
Counts are read from the study itself, so trials of other workers sharing the storage count too;
the ETA extrapolates from the trials this process has seen finish since it started.
"""

from __future__ import annotations

import logging
import math
import shutil
import sys
import time
from typing import Any, TextIO

from optuna.trial import TrialState

from ltr_bench.sweeper.job import ATTR_SE
from ltr_bench.sweeper.trials import is_counted_failure

log = logging.getLogger(__name__)


def format_duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(round(max(seconds, 0.0)))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def study_counts(study: Any, maximize: bool) -> dict[str, Any]:
    """Finished, complete, pruned and counted-failed trials and the best value with its SE."""
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    pruned = sum(t.state == TrialState.PRUNED for t in trials)
    failed = sum(is_counted_failure(t) for t in trials)
    best = None
    if complete:
        best = (max if maximize else min)(complete, key=lambda t: t.value)
    return {
        "done": len(complete) + pruned + failed,
        "complete": len(complete),
        "pruned": pruned,
        "failed": failed,
        "best": None if best is None else float(best.value),
        "best_se": None if best is None else best.user_attrs.get(ATTR_SE),
        "best_trial": None if best is None else best.number,
    }


class StudyProgress:
    """The progress line of one study; :meth:`update` after every batch, :meth:`close` at the end."""

    def __init__(
        self,
        study_name: str,
        budget: int,
        direction: str = "maximize",
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.name = study_name
        self.budget = int(budget)
        self.maximize = direction == "maximize"
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.monotonic()
        self._done0: int | None = None  # trials already finished when this process started
        self._bar: Any = None
        if enabled and _is_terminal(self.stream):
            from tqdm.auto import tqdm

            cols = shutil.get_terminal_size((160, 20)).columns or 160  # 0 in some pseudo-terminals
            self._bar = tqdm(
                total=self.budget,
                desc=_short(study_name),
                file=self.stream,
                leave=True,
                ncols=cols,
                bar_format="{desc}{postfix}",
            )  # "<study>, 3/30 trials, ..."

    def line(self, counts: dict[str, Any]) -> str:
        """The text of one update (also the tqdm postfix)."""
        elapsed = time.monotonic() - self.t0
        done = counts["done"]
        if self._done0 is None:
            self._done0 = done
        new = done - self._done0
        eta = elapsed / new * max(self.budget - done, 0) if new > 0 else None
        if done >= self.budget:
            eta = 0.0
        best = "-" if counts["best"] is None else f"{counts['best']:.4f}"
        if counts["best"] is not None and counts["best_se"] is not None:
            best += f" (SE {counts['best_se']:.4f}, trial {counts['best_trial']})"
        elif counts["best"] is not None:
            best += f" (trial {counts['best_trial']})"
        return (
            f"{done}/{self.budget} trials, {counts['pruned']} pruned, {counts['failed']} failed, "
            f"best {best}, elapsed {format_duration(elapsed)}, ETA {format_duration(eta)}"
        )

    def update(self, study: Any) -> str:
        """Re-read the study's counts and show them; returns the line."""
        counts = study_counts(study, self.maximize)
        text = self.line(counts)
        if not self.enabled:
            return text
        if self._bar is not None:
            self._bar.n = min(counts["done"], self.budget)
            self._bar.set_postfix_str(text, refresh=True)
        else:
            log.info("Study '%s': %s", self.name, text)
        return text

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3) :]
