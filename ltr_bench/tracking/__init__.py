"""MLflow tracking of ltr-bench runs: the one gateway to MLflow (names live in tracking_keys).

Run hierarchy (roles from :mod:`ltr_bench.tracking_keys`):

- ``protocol``: one per ``ltr-bench`` run, with a ``fold`` child per outer fold / hold-out split;
- ``sweep``: one per Optuna study (found or created by the tag ``ltr.study``), with a ``trial``
  child per sweep job (inner-CV objective, no test metrics); the refit run of a study is a
  ``protocol`` run nested under the same sweep run.

One module per job:

- ``run_tracker``: :class:`RunTracker`, what a tracker is (the protocol code that logs takes),
  and :class:`NullTracker`, the one that records nothing (tracking off, or not DDP rank 0);
- ``tracker``: :class:`Tracker` (runs, params, metrics, artifacts of one experiment in an MLflow
  store);
- ``signals``: a run ends KILLED on Ctrl-C / SIGTERM, and no signal lands inside a store call;
- ``store``: the tracking URI, creating the store and experiment under a lock, opening a client;
- ``search``: reading runs back (the report, drivers reusing finished runs), artifacts;
- ``params``: a run's params are its config's choices (:func:`run_params`);
- ``tags``: machine and dataset facts, MLflow's standard fields, the invocation id;
- ``names``: how a name becomes an MLflow key, MLflow's length limits;
- ``links`` / ``ui_view``: the printed links into the UI, and the saved view they open;
- ``model_logging``: a saved model as an MLflow ``pyfunc`` model, the registry;
- ``sweep_runs``: a study's ``sweep`` run, searched for once per process;
- ``sweep_hooks``: the sweeper's ``sweep.on_study_end`` / ``sweep.on_interrupted`` hooks;
- ``lightning_logger``: per-epoch metrics from Lightning into a run the Tracker owns.

This module exports what code outside the package imports; everything else is imported from the
module that defines it.
"""

from __future__ import annotations

from ltr_bench.tracking.links import filter_eq
from ltr_bench.tracking.model_logging import MODEL_NAME, PyfuncModel
from ltr_bench.tracking.params import flatten_config, run_params
from ltr_bench.tracking.run_tracker import MetricRow, NullTracker, RunTracker
from ltr_bench.tracking.search import (
    download_run_artifact,
    find_experiment,
    find_runs,
    runs_frame,
)
from ltr_bench.tracking.signals import RunTerminated, install_signal_handlers
from ltr_bench.tracking.tags import data_tags, git_commit, invocation_id, machine_tags
from ltr_bench.tracking.tracker import Tracker, is_rank_zero

__all__ = [
    "MODEL_NAME",
    "MetricRow",
    "NullTracker",
    "PyfuncModel",
    "RunTerminated",
    "RunTracker",
    "Tracker",
    "data_tags",
    "download_run_artifact",
    "filter_eq",
    "find_experiment",
    "find_runs",
    "flatten_config",
    "git_commit",
    "install_signal_handlers",
    "invocation_id",
    "is_rank_zero",
    "machine_tags",
    "run_params",
    "runs_frame",
]
