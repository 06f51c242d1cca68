"""A fold run's saved model: the scoring pipeline (fitted preprocessing + ranker, no data) and
its logging as the run's MLflow model."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ltr_bench.runner.pipeline import Prepared, model_spec
from ltr_bench.runner.results import metric_options
from ltr_bench.tracking import RunTracker


def scoring_pipeline(
    cfg: DictConfig, data: Prepared, ranker: Any, relevance_threshold: int, info: Mapping[str, Any]
) -> Any:
    """What a fold run saves as its model: the fitted preprocessing and ranker, the model config
    that rebuilds the ranker, and the evaluation's metric options (no data)."""
    from ltr_bench.saved_model import ScoringPipeline

    return ScoringPipeline(
        data.preprocessing,
        ranker,
        data.train.n_features,
        int(relevance_threshold),
        model_spec(cfg),
        metric_options(cfg),
        {k: v for k, v in info.items() if v is not None},
    )


def log_model(tracker: RunTracker, run_id: str, pipeline: Any) -> bool:
    """Save ``pipeline`` and log it as the run's MLflow model (a ranker without
    ``save_params`` logs a warning instead); True when a model was logged."""
    import logging

    from ltr_bench.saved_model import LOADER_MODULE, PYFUNC_OUTPUTS, pyfunc_inputs, save_pipeline
    from ltr_bench.tracking import PyfuncModel

    if not tracker.log_model_enabled:
        return False
    with tempfile.TemporaryDirectory(prefix="ltr_bench_model_") as tmp:
        try:
            folder = save_pipeline(pipeline, Path(tmp) / "pipeline")
        except NotImplementedError as exc:
            logging.getLogger(__name__).warning("no model logged: %s", exc)
            return False
        model_id = tracker.log_model(
            run_id,
            PyfuncModel(
                folder,
                LOADER_MODULE,
                pyfunc_inputs(pipeline.n_features),
                PYFUNC_OUTPUTS,
                pipeline.info,
            ),
        )
    return model_id is not None
