"""What a tracker is (:class:`RunTracker`), and the one that records nothing (:class:`NullTracker`).

Code that logs a run takes a :class:`RunTracker`: :class:`~ltr_bench.tracking.tracker.Tracker`
(an MLflow store) or :class:`NullTracker` (``tracking=none``, or a DDP rank other than 0). The
two share no code: a tracker that records nothing is its own small class, not a ``Tracker`` with
every method overridden.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ltr_bench.tracking.model_logging import PyfuncModel


class MetricRow(NamedTuple):
    """One step's metrics and when they were measured, for :meth:`RunTracker.log_metric_rows`."""

    metrics: Mapping[str, float | None]
    step: int
    timestamp_ms: int


@runtime_checkable
class RunTracker(Protocol):
    """The runs of one experiment: every method takes an explicit ``run_id``."""

    @property
    def enabled(self) -> bool: ...
    @property
    def tracking_uri(self) -> str | None: ...
    @property
    def experiment_name(self) -> str | None: ...
    @property
    def experiment_id(self) -> str | None: ...
    @property
    def log_model_enabled(self) -> bool: ...
    @property
    def log_artifacts_enabled(self) -> bool: ...

    def start_run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> str: ...
    def end_run(self, run_id: str, status: str = "FINISHED") -> None: ...
    def run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> contextlib.AbstractContextManager[str]: ...
    def find_or_create_sweep_run(
        self, study_name: str, tags: Mapping[str, Any], name: str | None = None
    ) -> str: ...
    def rename(self, run_id: str, name: str) -> None: ...
    def extend(self, run_id: str) -> None: ...
    def log_inputs(self, run_id: str, inputs: Sequence[Mapping[str, Any]]) -> None: ...
    def experiment_link(self, search_filter: str, what: str, run_id: str | None = None) -> str: ...
    def describe_run(self, run_id: str) -> str: ...
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None: ...
    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None: ...
    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float | None], step: int | None = None
    ) -> None: ...
    def log_metric_rows(self, run_id: str, rows: Sequence[MetricRow]) -> None: ...
    def log_history(self, run_id: str, history: Sequence[Mapping[str, Any]]) -> None: ...
    def log_artifact(self, run_id: str, path: Any, artifact_path: str | None = None) -> None: ...
    def log_text(self, run_id: str, text: str, artifact_file: str) -> None: ...
    def log_model(self, run_id: str, model: PyfuncModel) -> str | None: ...
    def lightning_logger(self, run_id: str) -> Any: ...


class NullTracker:
    """A :class:`RunTracker` that records nothing: runs have the id ``""``, logging is a no-op."""

    enabled = False
    tracking_uri: str | None = None
    experiment_name: str | None = None
    experiment_id: str | None = None
    log_model_enabled = False
    log_artifacts_enabled = False

    def start_run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> str:
        return ""

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        pass

    @contextlib.contextmanager
    def run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> Iterator[str]:
        yield ""

    def find_or_create_sweep_run(
        self, study_name: str, tags: Mapping[str, Any], name: str | None = None
    ) -> str:
        return ""

    def rename(self, run_id: str, name: str) -> None:
        pass

    def extend(self, run_id: str) -> None:
        pass

    def log_inputs(self, run_id: str, inputs: Sequence[Mapping[str, Any]]) -> None:
        pass

    def experiment_link(self, search_filter: str, what: str, run_id: str | None = None) -> str:
        return ""

    def describe_run(self, run_id: str) -> str:
        return ""

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        pass

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        pass

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float | None], step: int | None = None
    ) -> None:
        pass

    def log_metric_rows(self, run_id: str, rows: Sequence[MetricRow]) -> None:
        pass

    def log_history(self, run_id: str, history: Sequence[Mapping[str, Any]]) -> None:
        pass

    def log_artifact(self, run_id: str, path: Any, artifact_path: str | None = None) -> None:
        pass

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        pass

    def log_model(self, run_id: str, model: PyfuncModel) -> str | None:
        return None

    def lightning_logger(self, run_id: str) -> Any:
        return None
