"""The protocol's outer loop (``final``): a ``protocol`` MLflow run with one ``fold`` run per outer
split; each fold preprocesses (fitted on train), fits, scores vali and test, evaluates and logs
its metrics, per-query values, learning curve and model."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.data.protocol import Dataset
from ltr_bench.protocols import OuterSplit, Protocol
from ltr_bench.runner.context import JobContext, timer
from ltr_bench.runner.packaging import log_model, scoring_pipeline
from ltr_bench.runner.pipeline import RankerPrototype, evaluate_split, prepare
from ltr_bench.runner.plots import plot_learning_curve
from ltr_bench.runner.results import (
    FoldResult,
    RunResult,
    aggregate,
    format_results,
    results_json,
    short_summary,
    summary_metrics,
)
from ltr_bench.runner.tags import dataset_inputs, split_fingerprint
from ltr_bench.tracking import (
    MODEL_NAME,
    RunTracker,
    data_tags,
    filter_eq,
    invocation_id,
    run_params,
)


def run_final(
    cfg: DictConfig,
    protocol: Protocol,
    dataset: Dataset,
    ranker: RankerPrototype,
    tracker: RunTracker,
    tags: dict[str, Any],
    ctx: JobContext,
    verbose: bool,
) -> RunResult:
    """The protocol's outer loop: a ``protocol`` run with one ``fold`` run per outer split."""
    positions = protocol.positions(dataset)
    study = cfg.get("sweep", {}).get("study_name")
    parent_of_protocol = tracker.find_or_create_sweep_run(str(study), tags) if study else None
    run_tags = {**tags, keys.TAG_ROLE: keys.ROLE_PROTOCOL, **data_tags(dataset.describe())}
    refit = bool(cfg.get("refit_best"))
    if refit:
        run_tags[keys.TAG_REFIT] = "true"
    model, seed = str(tags[keys.TAG_MODEL]), int(cfg.seed)
    dataset_name, protocol_name = str(tags[keys.TAG_DATASET]), str(tags[keys.TAG_PROTOCOL])

    def name_for(scope: str) -> str:
        return (
            keys.refit_run_name(model, scope, seed)
            if refit
            else keys.protocol_run_name(model, scope, protocol_name)
        )

    params = run_params(cfg, ctx.choices)
    folds: list[FoldResult] = []
    with tracker.run(name_for(dataset_name), run_tags, parent_id=parent_of_protocol) as run_id:
        tracker.log_params(run_id, params)
        tracker.log_text(run_id, OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")
        fingerprints = []
        inputs: list[Mapping[str, Any]] = []
        for i, pos in enumerate(positions):
            if verbose and len(positions) > 1:
                print(
                    f"[{i + 1}/{len(positions)}] {protocol.name}: reading and training ...",
                    flush=True,
                )
            fold_tags = {**tags, keys.TAG_ROLE: keys.ROLE_FOLD}
            fr, fp, fold_inputs = run_fold(
                cfg,
                protocol,
                dataset,
                ranker,
                pos,
                tracker,
                fold_tags,
                run_id,
                params,
                seed if refit else None,
            )
            folds.append(fr)
            fingerprints.append(fp)
            inputs += fold_inputs
            if len(positions) == 1:  # one split: the run is named after it (mq2008/Fold1)
                tracker.rename(run_id, name_for(fr.name))
            if verbose and len(positions) > 1:
                print(
                    f"[{i + 1}/{len(positions)}] {fr.name}: {short_summary(fr.metrics, cfg)}"
                    f"  (fit {fr.times[keys.TIME_FIT]:.1f} s)",
                    flush=True,
                )
        tracker.log_inputs(run_id, inputs)
        result = aggregate("final", cfg, folds)
        result.mlflow_run_id = run_id or None
        tracker.set_tags(
            run_id,
            {keys.TAG_FINGERPRINT: hashlib.sha256("".join(fingerprints).encode()).hexdigest()[:16]},
        )
        tracker.log_metrics(run_id, summary_metrics(result))
        if verbose:
            print(format_results(cfg, result), flush=True)
            _print_where(tracker, run_id, folds)
        tracker.log_text(run_id, results_json(cfg, result, tracker), "results.json")
    return result


def _print_where(tracker: RunTracker, run_id: str, folds: list[FoldResult]) -> None:
    """Where the run is tracked: its MLflow run, the fold models and the links to the UI
    (nothing when tracking is off)."""
    lines = [tracker.describe_run(run_id)]
    # what ltr-bench-predict and mlflow.pyfunc.load_model take
    lines += [f"model of {fr.name}: {fr.model_uri}" for fr in folds if fr.model_uri]
    lines.append(
        tracker.experiment_link(
            filter_eq(keys.TAG_INVOCATION, invocation_id()), "runs of this command", run_id
        )
    )
    for line in lines:
        if line:
            print(line, flush=True)


def run_fold(
    cfg: DictConfig,
    protocol: Protocol,
    dataset: Dataset,
    prototype: RankerPrototype,
    position: int,
    tracker: RunTracker,
    tags: dict[str, Any],
    parent_id: str,
    params: Mapping[str, str],
    refit_seed: int | None = None,
) -> tuple[FoldResult, str, list[Mapping[str, Any]]]:
    """One outer split as a ``fold`` run; returns its result, fingerprint and dataset inputs."""
    times: dict[str, float] = {}
    with timer(times, keys.TIME_READ):
        split: OuterSplit = protocol.load(dataset, position)
        inputs = dataset_inputs(split)
        digests = {i["context"]: i["digest"] for i in inputs}
        fingerprint = split_fingerprint(*(digests.get(p) for p in ("train", "vali", "test")))
        data = prepare(
            cfg,
            protocol,
            dataset.relevance_threshold,
            split.train,
            split.vali,
            split.test,
            dataset=dataset,
        )
    assert data.test is not None
    fold_tags = {
        **tags,
        keys.TAG_FOLD: split.fold,
        keys.TAG_FINGERPRINT: fingerprint,
        keys.TAG_FOLD_NAME: split.name,
        keys.TAG_N_TRAIN_QUERIES: data.train.n_queries,
        keys.TAG_N_TEST_QUERIES: data.test.n_queries,
        keys.TAG_N_VALI_QUERIES: data.vali.n_queries if data.vali is not None else 0,
        keys.TAG_DATA_PREFIX + "n_train_docs": data.train.n_docs,
        keys.TAG_DATA_PREFIX + "n_test_docs": data.test.n_docs,
        keys.TAG_PREPROCESSING: json.dumps(data.preprocessing.describe(), default=str),
    }
    model = str(tags[keys.TAG_MODEL])
    with tracker.run(
        keys.fold_run_name(model, split.name, refit_seed), fold_tags, parent_id=parent_id
    ) as run_id:
        tracker.log_params(run_id, params)
        tracker.log_inputs(run_id, inputs)
        ranker = prototype.fresh()
        with timer(times, keys.TIME_FIT):
            lightning = getattr(ranker, "takes_lightning_logger", True)
            logger = tracker.lightning_logger(run_id) if lightning else None
            ranker.fit(data.train, data.vali, logger=logger)
        evals = {}
        with timer(times, keys.TIME_EVAL):
            for s, d in ((keys.SPLIT_VALI, data.vali), (keys.SPLIT_TEST, data.test)):
                if d is not None:
                    evals[s] = evaluate_split(cfg, ranker.score(d), d, s)
        metrics = {s: dict(e.means) for s, e in evals.items()}
        tracker.log_metrics(
            run_id, {keys.metric_key(s, n): v for s, d in metrics.items() for n, v in d.items()}
        )
        tracker.log_metrics(run_id, times)
        history = list(getattr(ranker, "history", []) or [])
        tracker.log_history(run_id, history)
        model_uri = None
        if tracker.log_artifacts_enabled:
            _log_fold_artifacts(tracker, run_id, evals, history)
            info = {
                "run_id": run_id,
                "fold": split.name,
                "model": tags.get(keys.TAG_MODEL),
                "dataset": tags.get(keys.TAG_DATASET),
                "eval": tags.get(keys.TAG_EVAL),
                "seed": tags.get(keys.TAG_SEED),
                "ltr_bench_version": tags.get(keys.TAG_VERSION),
            }
            if log_model(
                tracker,
                run_id,
                scoring_pipeline(cfg, data, ranker, dataset.relevance_threshold, info),
            ):
                model_uri = f"runs:/{run_id}/{MODEL_NAME}"
    fr = FoldResult(
        split.fold,
        split.name,
        metrics,
        times,
        data.train.n_queries,
        data.test.n_queries,
        run_id or None,
        model_uri,
    )
    return fr, fingerprint, inputs


def _log_fold_artifacts(
    tracker: RunTracker, run_id: str, evals: Mapping[str, Any], history: list[Mapping[str, Any]]
) -> None:
    """Per-query metrics CSV and the learning-curve PNG of one fold run."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        frames = []
        for s, e in evals.items():
            f = e.to_frame().reset_index()
            f.insert(0, "split", s)
            frames.append(f)
        csv = Path(tmp) / "per_query_metrics.csv"
        pd.concat(frames, ignore_index=True).to_csv(csv, index=False)
        tracker.log_artifact(run_id, csv)
        png = Path(tmp) / "learning_curve.png"
        if plot_learning_curve(history, png):
            tracker.log_artifact(run_id, png)
