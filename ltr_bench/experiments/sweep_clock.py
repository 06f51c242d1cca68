"""How long a model's sweep took, also when it resumed an interrupted one.

A sweep's time is the wall time of the command that ran it. A sweep that resumed studies an
interrupted run had begun would count only the run that finished it, so it is timed by its
trials instead: the union of the intervals during which a COMPLETE or PRUNED trial of one of its
studies (search trials and their re-evaluation locks, ``<study>:...``) ran, over every run.
Trials lost to the interruption are left out, and so are the sweeper's start and end (seconds).
The studies are those of the sweep's ``optimization_results.yaml``; other studies stored beside
them (an earlier, abandoned configuration) do not count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ltr_bench.sweeper.job import RESULTS_FILE

log = logging.getLogger(__name__)


def swept_studies(sweep_dir: Path) -> list[tuple[str, str]]:
    """``(storage URL, study name)`` of each study the sweep in ``sweep_dir`` reports."""
    import yaml

    path = Path(sweep_dir) / RESULTS_FILE
    data = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
    entries = data["studies"] if isinstance(data.get("studies"), list) else [data]
    return [(str(e["storage"]), str(e["study_name"])) for e in entries if e.get("study_name")]


def finished_intervals(studies: Iterable[tuple[str, str]]) -> list[tuple[float, float]]:
    """``(start, end)`` epoch seconds of every COMPLETE or PRUNED trial of the studies."""
    import optuna
    from optuna.trial import TrialState

    out = []
    for url, name in studies:
        storage = optuna.storages.RDBStorage(url)
        for stored in optuna.study.get_all_study_names(storage):
            if stored != name and not stored.startswith(name + ":"):
                continue
            study = optuna.load_study(study_name=stored, storage=storage)
            for t in study.get_trials(
                deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)
            ):
                if t.datetime_start is not None and t.datetime_complete is not None:
                    out.append((t.datetime_start.timestamp(), t.datetime_complete.timestamp()))
    return out


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of the intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


class SweepClock:
    """Started before the sweep into ``sweep_dir``, stopped after it: :meth:`cell` gives
    ``time_sweep_s`` and ``sweep_resumed`` (a trial of its studies began before the clock)."""

    def __init__(self, sweep_dir: Path) -> None:
        self.sweep_dir = Path(sweep_dir)
        self.began_at = time.time()
        self.began = time.monotonic()
        self.wall: float | None = None

    def stop(self) -> None:
        self.wall = time.monotonic() - self.began

    def cell(self) -> dict[str, Any]:
        assert self.wall is not None, "stop() the clock when the sweep ends"
        try:
            intervals = finished_intervals(swept_studies(self.sweep_dir))
        except Exception as e:  # noqa: BLE001 - a storage not readable back (a server URL is stored with its password hidden) leaves the wall time
            log.warning(
                "Sweep %s timed by its wall time: its studies cannot be read (%s).",
                self.sweep_dir,
                e,
            )
            intervals = []
        resumed = any(start < self.began_at for start, _ in intervals)
        seconds = union_seconds(intervals) if resumed else self.wall
        return {"time_sweep_s": round(seconds, 1), "sweep_resumed": resumed}
