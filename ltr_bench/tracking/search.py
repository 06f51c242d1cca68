"""Reading tracked runs back: experiments by name, runs as a table or by tags, artifacts.

Used by the report and by drivers that reuse finished runs; every read goes through an explicit
client (:func:`ltr_bench.tracking.store.open_client`), never the process-wide tracking URI.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ltr_bench.tracking.store import open_client
from ltr_bench.tracking.tracker import Tracker


def find_experiment(tracking_uri: str, name: str) -> tuple[str | None, list[str]]:
    """``(id of the experiment called name or None, names of up to 50 experiments)``."""
    client = open_client(tracking_uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id, []
    return None, sorted(e.name for e in client.search_experiments(max_results=50))


def download_run_artifact(
    tracking_uri: str, run_id: str, path: str, dst: str | os.PathLike[str]
) -> Path:
    """The artifact ``path`` of run ``run_id``, downloaded into the folder ``dst``; its local path."""
    client = open_client(tracking_uri)
    Path(dst).mkdir(parents=True, exist_ok=True)
    return Path(client.download_artifacts(run_id, path, str(dst)))


def runs_frame(tracking_uri: str, experiment_id: str, search_filter: str = "") -> Any:
    """Every run of an experiment matching ``search_filter`` as a DataFrame laid out like
    ``mlflow.search_runs``: ``run_id, status, start_time, end_time`` (UTC timestamps) and
    ``tags.<key>``, ``params.<key>``, ``metrics.<key>`` columns (all pages)."""
    import pandas as pd

    client = open_client(tracking_uri)
    rows: list[dict[str, Any]] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], search_filter, max_results=50_000, page_token=token
        )
        for run in page:
            row: dict[str, Any] = {
                "run_id": run.info.run_id,
                "run_name": run.info.run_name,
                "status": run.info.status,
                "start_time": run.info.start_time,
                "end_time": run.info.end_time,
            }
            row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
            row.update({f"params.{k}": v for k, v in run.data.params.items()})
            row.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
            rows.append(row)
        token = page.token
        if not token:
            break
    frame = pd.DataFrame(rows)
    for column in ("start_time", "end_time"):
        if column in frame:
            frame[column] = pd.to_datetime(frame[column], unit="ms", utc=True)
    return frame


def find_runs(tracker: Tracker, tags: Mapping[str, str], status: str = "FINISHED") -> list[Any]:
    """Runs of ``tracker``'s experiment carrying every tag in ``tags`` with ``status``, newest
    first (empty when tracking is off); e.g. a finished experiment run by its ``ltr.experiment_key``."""
    if not tracker.enabled:
        return []
    if any("'" in str(v) for v in tags.values()):
        raise ValueError(f"tag values with quotes cannot be searched: {dict(tags)}")
    conditions = [f"tags.`{k}` = '{v}'" for k, v in tags.items()]
    conditions.append(f"attributes.status = '{status}'")
    return list(
        tracker.client.search_runs(
            [tracker.experiment_id],
            " and ".join(conditions),
            order_by=["attributes.start_time DESC"],
            max_results=1000,
        )
    )
