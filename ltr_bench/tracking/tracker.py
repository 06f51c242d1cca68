"""The Tracker: the runs of one experiment in one MLflow store.

One :class:`Tracker` per job talks to MLflow through an explicit ``MlflowClient`` and run ids
(no global "active run"), so parent and child runs can be open at the same time and a run is
always ended by the ``with tracker.run(...)`` block that opened it: FINISHED on success, FAILED
on an error, KILLED on Ctrl-C / SIGTERM (see :mod:`ltr_bench.tracking.signals`).
:func:`Tracker.from_config` gives a :class:`~ltr_bench.tracking.run_tracker.NullTracker` instead
when tracking is off or the process is not DDP rank 0; code that logs takes either as a
:class:`~ltr_bench.tracking.run_tracker.RunTracker`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

from ltr_bench import tracking_keys as keys
from ltr_bench.errors import UserError
from ltr_bench.held_signals import SignalSafe, signals_deferred
from ltr_bench.machine import system_metrics
from ltr_bench.tracking.lightning_logger import run_logger
from ltr_bench.tracking.links import format_links
from ltr_bench.tracking.model_logging import PyfuncModel, log_pyfunc_model
from ltr_bench.tracking.names import MAX_PARAM_LEN, MAX_TAG_LEN, curve_key, sanitize_key
from ltr_bench.tracking.run_tracker import MetricRow, NullTracker, RunTracker
from ltr_bench.tracking.signals import RunTerminated
from ltr_bench.tracking.store import (
    ensure_experiment,
    log_inputs_past_rival_inserts,
    resolve_tracking_uri,
)
from ltr_bench.tracking.tags import command_line, context_tags, invocation_id

log = logging.getLogger(__package__)

_STEP_KEYS = ("epoch", "round", "iteration", "step")  # the x-axis of a ranker's history
_GIVEN_NAMES: dict[tuple[str, str], str] = {}  # (store, run id) -> the name given here


class Tracker:
    """Runs of one experiment in one MLflow store; every method takes an explicit ``run_id``."""

    enabled = True
    system_metrics_interval_s: float | None = None  # tracking.system_metrics: None = off

    def __init__(
        self,
        tracking_uri: str,
        experiment_name: str,
        *,
        artifact_location: str | None = None,
        log_model: bool = True,
        log_artifacts: bool = True,
        register_model: str | None = None,
        system_metrics_interval_s: float | None = None,
    ) -> None:
        import mlflow

        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.log_model_enabled = log_model
        self.log_artifacts_enabled = log_artifacts
        self.register_model = str(register_model) if register_model else None
        self.system_metrics_interval_s = system_metrics_interval_s
        self.experiment_id = ensure_experiment(tracking_uri, experiment_name, artifact_location)
        self.client = SignalSafe(mlflow.MlflowClient(tracking_uri))

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_config(
        tracking: DictConfig | Mapping[str, Any], base_dir: str | os.PathLike[str]
    ) -> RunTracker:
        """A Tracker for the ``tracking`` config group, or a no-op one when disabled / not rank 0."""
        if not tracking.get("enabled", True) or not is_rank_zero():
            return NullTracker()
        uri = resolve_tracking_uri(tracking.get("tracking_uri"), base_dir)
        if not uri:
            raise UserError("tracking.tracking_uri is empty; set it or use tracking=none")
        return Tracker(
            uri,
            str(tracking.get("experiment_name") or "ltr_bench"),
            artifact_location=tracking.get("artifact_location"),
            log_model=bool(tracking.get("log_model", True)),
            log_artifacts=bool(tracking.get("log_artifacts", True)),
            register_model=tracking.get("register_model"),
            system_metrics_interval_s=system_metrics.interval_from_config(tracking),
        )

    # ------------------------------------------------------------------ runs
    def start_run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> str:
        """Create a RUNNING run (nested under ``parent_id`` if given); return its id.

        The run gets MLflow's standard fields (user, source, git commit: :func:`context_tags`),
        the command line as its description and the ``ltr.invocation`` tag, then ``tags``.
        """
        all_tags = {
            **context_tags(),
            keys.MLFLOW_DESCRIPTION: description or command_line(),
            keys.TAG_INVOCATION: invocation_id(),
        }
        all_tags.update({k: str(v)[:MAX_TAG_LEN] for k, v in tags.items() if v is not None})
        if parent_id:
            all_tags[keys.MLFLOW_PARENT] = parent_id
        run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=name)
        return run.info.run_id

    def rename(self, run_id: str, name: str) -> None:
        """Give a run its final name (known once its data is read). A name this process already
        gave the run is not written again: each trial a worker runs names its study's sweep run
        alike, and MLflow's rename reads the run first (~9 ms a trial)."""
        key = (self.tracking_uri, run_id)
        if _GIVEN_NAMES.get(key) == name:
            return
        self.client.update_run(run_id, name=name)
        _GIVEN_NAMES[key] = name

    def extend(self, run_id: str) -> None:
        """Move a finished container run's end time to now (a sweep run spans its trials)."""
        import time

        self.client.set_terminated(run_id, "FINISHED", end_time=int(time.time() * 1000))

    def log_inputs(self, run_id: str, inputs: Sequence[Mapping[str, Any]]) -> None:
        """Dataset inputs (MLflow's Dataset column and filter): each ``{"name": "mq2008/Fold1",
        "digest": <fingerprint>, "context": "train" | "vali" | "test", "source": {...},
        "profile": {...}}``."""
        from mlflow.entities import Dataset, DatasetInput, InputTag

        items = []
        for i in inputs:
            ds = Dataset(
                name=str(i["name"]),
                digest=str(i["digest"])[:36],
                source_type=str(i.get("source_type", "local")),
                source=json.dumps(i.get("source") or {}, default=str),
                profile=json.dumps(i["profile"], default=str) if i.get("profile") else None,
            )
            items.append(
                DatasetInput(ds, [InputTag(keys.MLFLOW_DATASET_CONTEXT, str(i["context"]))])
            )
        if items:
            log_inputs_past_rival_inserts(self.client, run_id, items)

    def experiment_link(self, search_filter: str, what: str, run_id: str | None = None) -> str:
        """The printed lines that open ``search_filter``'s runs in the UI (see :func:`format_links`)."""
        return format_links(self.tracking_uri, self.experiment_id, search_filter, what, run_id)

    def describe_run(self, run_id: str) -> str:
        """The printed line that says where run ``run_id`` is tracked."""
        return f"MLflow run {run_id} in {self.tracking_uri} (experiment '{self.experiment_name}')"

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status=status)

    @contextlib.contextmanager
    def run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> Iterator[str]:
        """``with tracker.run(...) as run_id:`` — ends FINISHED, FAILED (error) or KILLED (signal)."""
        run_id = self.start_run(name, tags, parent_id, description)
        status = "FAILED"
        try:
            interval = self.system_metrics_interval_s
            with system_metrics.monitored(self.tracking_uri, run_id, interval, tags):
                yield run_id
            status = "FINISHED"
        except (KeyboardInterrupt, RunTerminated, SystemExit):
            status = "KILLED"
            raise
        finally:
            with signals_deferred():
                try:
                    self.end_run(run_id, status)
                except Exception as exc:  # noqa: BLE001 - never mask the run's own error
                    log.warning("could not end MLflow run %s as %s: %s", run_id, status, exc)

    def find_or_create_sweep_run(
        self, study_name: str, tags: Mapping[str, Any], name: str | None = None
    ) -> str:
        """The ``sweep`` run of an Optuna study (tag ``ltr.study``), created on first use.

        Created FINISHED (it is a container; trials and the refit nest under it) so that no
        sweep run is ever left RUNNING; its end time moves with every trial (:meth:`extend`), so
        start to end spans the sweep. ``name``: its name when created here. A process finds it
        once (:mod:`ltr_bench.tracking.sweep_runs`).
        """
        from ltr_bench.tracking.sweep_runs import find_or_create_sweep_run

        return find_or_create_sweep_run(self, study_name, tags, name)

    # ------------------------------------------------------------------ logging
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Log params; one that the run already holds with another value (MLflow params never
        change, e.g. a resumed sweep with a new ``n_trials``) is kept and a warning logged."""
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException

        items = [Param(sanitize_key(str(k)), str(v)[:MAX_PARAM_LEN]) for k, v in params.items()]
        if not items:
            return
        try:
            self.client.log_batch(run_id, params=items)
        except MlflowException:
            held = self.client.get_run(run_id).data.params
            new = [p for p in items if p.key not in held]
            for p in items:
                if p.key in held and held[p.key] != p.value:
                    log.warning(
                        "param %s of run %s stays %r (not %r)", p.key, run_id, held[p.key], p.value
                    )
            if new:
                self.client.log_batch(run_id, params=new)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:MAX_TAG_LEN]) for k, v in tags.items() if v is not None]
        if items:
            self.client.log_batch(run_id, tags=items)

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float | None], step: int | None = None
    ) -> None:
        """Log finite values (NaN/inf, e.g. the SE of one fold, are skipped)."""
        import time

        self.log_metric_rows(run_id, [MetricRow(metrics, int(step or 0), int(time.time() * 1000))])

    def log_metric_rows(self, run_id: str, rows: Sequence[MetricRow]) -> None:
        """Log several steps' metrics (each with the time it was measured) in one store call;
        non-finite values are skipped as in :meth:`log_metrics`."""
        from mlflow.entities import Metric

        items = []
        for row in rows:
            for k, v in row.metrics.items():
                if v is None:
                    continue
                v = float(v)
                if not math.isfinite(v):
                    log.debug("metric %s = %s not logged", k, v)
                    continue
                items.append(Metric(sanitize_key(k), v, row.timestamp_ms, row.step))
        if items:
            self.client.log_batch(run_id, metrics=items)

    def log_history(self, run_id: str, history: Sequence[Mapping[str, Any]]) -> None:
        """Per-epoch records as step metrics (step = ``epoch``/``round``; keys via
        :func:`curve_key`), except keys already logged (a Lightning ranker that logged through
        :meth:`lightning_logger`)."""
        if not history:
            return
        import time

        from mlflow.entities import Metric

        logged = set(self.client.get_run(run_id).data.metrics)
        now = int(time.time() * 1000)
        items = []
        for i, rec in enumerate(history):
            step = int(next((rec[s] for s in _STEP_KEYS if s in rec), i))
            for k, v in rec.items():
                key = curve_key(k)
                if k in _STEP_KEYS or key in logged or not isinstance(v, (int, float)):
                    continue
                if math.isfinite(float(v)):
                    items.append(Metric(key, float(v), now + i, step))
        if items:
            self.client.log_batch(run_id, metrics=items)

    def log_artifact(
        self, run_id: str, path: str | os.PathLike[str], artifact_path: str | None = None
    ) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, text, artifact_file)

    def log_model(self, run_id: str, model: PyfuncModel) -> str | None:
        """A saved model as the MLflow ``pyfunc`` model ``model`` of the run (registered under
        ``tracking.register_model`` when set); returns its model id, None if it could not be
        logged (a warning; the run keeps its results)."""
        if not self.log_model_enabled:
            return None
        try:
            return log_pyfunc_model(
                self.client, self.experiment_id, run_id, model, self.register_model
            )
        except Exception as exc:  # noqa: BLE001 - a model that cannot be logged keeps its run
            log.warning("no model logged: %s", exc)
            return None

    def lightning_logger(self, run_id: str) -> Any:
        """A Lightning ``MLFlowLogger`` writing per-epoch metrics into the run ``run_id``."""
        return run_logger(
            experiment_name=self.experiment_name,
            tracking_uri=self.tracking_uri,
            run_id=run_id,
        )


def is_rank_zero() -> bool:
    """False inside a DDP worker process other than rank 0 (only rank 0 tracks and writes).

    The variables Lightning reads a rank from: its own launcher and torchrun set ``RANK`` /
    ``LOCAL_RANK`` / ``NODE_RANK``, SLURM sets ``SLURM_PROCID`` for each task of ``srun``.
    """
    for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "0") not in ("", "0"):
            return False
    return True
