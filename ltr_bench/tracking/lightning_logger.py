"""A Lightning logger that writes per-epoch metrics into a run the Tracker owns.

The class is made on first use, so importing the tracking package never imports Lightning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltr_bench.held_signals import signals_deferred
from ltr_bench.tracking.names import curve_key


def _make_run_logger_class() -> type:
    """The ``MLFlowLogger`` subclass (defined here so Lightning is imported only when needed)."""
    from lightning.pytorch.loggers import MLFlowLogger

    class RunLogger(MLFlowLogger):
        """MLFlowLogger bound to an existing run that the Tracker (not Lightning) ends.

        Per-epoch metric names go through :func:`curve_key` (``vali_ndcg@10`` ->
        ``curve/vali_ndcg_at_10``, the same keys as the ranker's ``history``), with the epoch as
        step; hyperparameters are not logged (see :meth:`log_hyperparams`).
        """

        def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
            if "epoch" in metrics:  # Lightning adds the epoch to epoch-level logs: use it as step
                step = int(metrics["epoch"])
            with signals_deferred():  # a Ctrl-C mid-write would leave the SQLite store locked
                super().log_metrics(
                    {curve_key(k): v for k, v in metrics.items() if k != "epoch"}, step
                )

        def log_hyperparams(self, params: Any) -> None:
            """Nothing: the run's params are its config's choices (:func:`run_params`), logged
            once by the runner; Lightning's hparams would repeat them under other names."""

        def finalize(self, status: str = "success") -> None:
            """Leave the run open: the Tracker ends it after test metrics and artifacts."""

    return RunLogger


class _LazyRunLogger:
    """Called like the logger class; makes the class (imports Lightning) on the first call."""

    cls: type | None = None

    def __call__(self, **kwargs: Any) -> Any:
        if _LazyRunLogger.cls is None:
            _LazyRunLogger.cls = _make_run_logger_class()
        return _LazyRunLogger.cls(**kwargs)


run_logger = _LazyRunLogger()
