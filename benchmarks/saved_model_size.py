"""Saved-model size per ranker on MQ2008 Fold1: the old artifact (a pickle of the fitted ranker,
what ``Tracker.log_model`` wrote before) against the scoring pipeline logged now (the MLflow model
folder: MLmodel, environment files, pipeline.json, knots, parameters).

    LTR_DATA=... OMP_NUM_THREADS=1 .venv/bin/python benchmarks/saved_model_size.py [model ...]

Each ranker is fitted once with its default config (``threads=1``); the pickle is measured in
memory, the pipeline by logging it to a throw-away SQLite store and summing the model's files.
"""

from __future__ import annotations

import pickle
import sys
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_module
from omegaconf import open_dict

from ltr_bench import runner
from ltr_bench.config.tree import CONFIG_MODULE
from ltr_bench.saved_model import folder_size
from ltr_bench.tracking import Tracker

MODELS = ["direct_ranker", "ranknet", "listnet", "lambdarank", "lambdamart", "adarank", "sortnet"]


def measure(model: str, tmp: Path) -> tuple[int, int, tuple[int, int], float]:
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(
            "config", overrides=[f"model={model}", "dataset=mq2008", "dataset.fold=1", "threads=1"]
        )
    with open_dict(cfg):
        if "trainer" in cfg.model:
            cfg.model.trainer.enable_progress_bar = False
    runner.configure_threads(cfg)
    runner.seed_everything(0)
    from hydra.utils import instantiate

    dataset = instantiate(cfg.dataset, _convert_="all")
    protocol = instantiate(cfg.protocol)
    split = protocol.load(dataset, 0)
    data = runner.prepare(
        cfg, protocol, dataset.relevance_threshold, split.train, split.vali, split.test
    )
    ranker = runner.build_ranker(cfg)
    t0 = time.perf_counter()
    ranker.fit(data.train, data.vali)
    fit_s = time.perf_counter() - t0
    before = len(pickle.dumps(ranker))
    tracker = Tracker(f"sqlite:///{tmp}/mlflow.db", "sizes")
    with tracker.run(model, {}) as run_id:
        runner.log_model(
            tracker,
            run_id,
            runner.scoring_pipeline(
                cfg, data, ranker, dataset.relevance_threshold, {"model": model}
            ),
        )
    (logged,) = tracker.client.search_logged_models(
        [tracker.experiment_id], filter_string=f"source_run_id = '{run_id}'"
    )
    root = Path(logged.artifact_location.replace("file://", ""))
    parts = (
        folder_size(root / "data" / "pipeline" / "ranker"),
        (root / "data" / "pipeline" / "preprocessing.npz").stat().st_size,
    )
    return before, folder_size(root), parts, fit_s


def main(models: list[str]) -> None:
    print(
        f"{'model':<14}{'pickle (before)':>17}{'saved model (after)':>21}{'of it: params':>15}"
        f"{'knots':>10}{'fit s':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            before, after, (params, knots), fit_s = measure(model, Path(tmp))
            print(
                f"{model:<14}{before:>15,} B{after:>19,} B{params:>13,} B{knots:>8,} B{fit_s:>8.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:] or MODELS)
