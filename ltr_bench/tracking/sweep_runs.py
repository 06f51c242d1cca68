"""The ``sweep`` run of an Optuna study: searched for once per process, then only checked.

Every trial's job nests its run under its study's sweep run (tag ``ltr.study``). Finding it is a
search over the experiment's sweep runs, whose cost grows with the store; a worker process runs
many trials of one study, so the id it found is remembered, keyed by store, experiment and study,
and checked with one ``get_run`` before it is used again (a run deleted or a store replaced
meanwhile fails the check and the search runs again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ltr_bench import tracking_keys as keys
from ltr_bench.tracking.store import store_lock


class SweepRunStore(Protocol):
    """What finding a sweep run needs of a tracker: its store, experiment and client (a
    :class:`~ltr_bench.tracking.tracker.Tracker`; this module does not import it back)."""

    tracking_uri: str
    experiment_id: str
    client: Any

    def start_run(self, name: str, tags: Mapping[str, Any]) -> str: ...
    def end_run(self, run_id: str, status: str = "FINISHED") -> None: ...


_FOUND: dict[tuple[str | None, str | None, str], str] = {}


def find_or_create_sweep_run(
    tracker: SweepRunStore, study_name: str, tags: Mapping[str, Any], name: str | None = None
) -> str:
    """See :meth:`ltr_bench.tracking.tracker.Tracker.find_or_create_sweep_run`."""
    key = (tracker.tracking_uri, tracker.experiment_id, study_name)
    found = _FOUND.get(key)
    if found is not None and _is_sweep_run(tracker, found, study_name):
        return found
    # Filter on the role only and match the study name here: names may hold any character.
    filt = f"tags.`{keys.TAG_ROLE}` = '{keys.ROLE_SWEEP}'"
    with store_lock(tracker.tracking_uri):
        for run in tracker.client.search_runs([tracker.experiment_id], filt, max_results=50_000):
            if run.data.tags.get(keys.TAG_STUDY) == study_name:
                _FOUND[key] = run.info.run_id
                return str(run.info.run_id)
        run_id = tracker.start_run(
            name or f"sweep {study_name}",
            {**tags, keys.TAG_STUDY: study_name, keys.TAG_ROLE: keys.ROLE_SWEEP},
        )
        tracker.end_run(run_id, "FINISHED")
    _FOUND[key] = run_id
    return run_id


def _is_sweep_run(tracker: SweepRunStore, run_id: str, study_name: str) -> bool:
    """Whether ``run_id`` is still the active sweep run of ``study_name`` in the experiment."""
    from mlflow.exceptions import MlflowException

    try:
        run = tracker.client.get_run(run_id)
    except MlflowException:
        return False
    return (
        run.info.lifecycle_stage == "active"
        and run.info.experiment_id == tracker.experiment_id
        and run.data.tags.get(keys.TAG_ROLE) == keys.ROLE_SWEEP
        and run.data.tags.get(keys.TAG_STUDY) == study_name
    )
