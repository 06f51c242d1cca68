"""A small, fully known experiment of fake-but-tracked fold runs for the report tests.

Every number here is chosen so that the report's outputs can be computed by hand (see the
expected values in test_report.py).
"""

from __future__ import annotations

import time

from mlflow.tracking import MlflowClient

from ltr_bench import tracking_keys as tk

EXPERIMENT = "fake_letor"
FOLDS = range(5)

# dataset -> model -> metric -> per-fold values (None = fold not tracked)
NDCG, MAP = "ndcg@10", "map"
VALUES = {
    "mq2008": {
        "direct_ranker": {
            NDCG: [0.70, 0.72, 0.74, 0.71, 0.73],
            MAP: [0.60, 0.62, 0.61, 0.63, 0.64],
        },
        "ranknet": {NDCG: [0.69, 0.70, 0.71, 0.67, 0.68], MAP: [0.61, 0.64, 0.62, 0.63, 0.65]},
        "lambdamart": {NDCG: [0.64, 0.64, 0.66, 0.61, 0.63], MAP: [0.58, 0.60, 0.59, 0.61, 0.57]},
        # only three folds tracked: a partial model
        "listnet": {NDCG: [0.75, 0.705, 0.72, None, None], MAP: [0.60, 0.61, 0.59, None, None]},
    },
    "synth": {
        "direct_ranker": {NDCG: [0.80, 0.82, 0.81, 0.83, 0.84], MAP: [0.5, 0.5, 0.5, 0.5, 0.5]},
        "ranknet": {NDCG: [0.78, 0.80, 0.79, 0.80, 0.83], MAP: [0.75, 0.25, 0.5, 0.5, 0.5]},
        "lambdamart": {NDCG: [0.70, 0.71, 0.72, 0.73, 0.74], MAP: [0.40, 0.42, 0.41, 0.43, 0.44]},
    },
}
N_QUERIES = {"mq2008": (471, 157), "synth": (600, 200)}  # (train, test): ratio 1/3
TIME_READ = {"mq2008": [2.0, 2.2, 2.1, 2.3, 2.4], "synth": [1.0, 1.0, 1.0, 1.0, 1.0]}
TIME_FIT = {
    "direct_ranker": [10.0, 11.0, 12.0, 13.0, 14.0],
    "ranknet": [5.0, 5.0, 5.0, 5.0, 5.0],
    "lambdamart": [100.0, 110.0, 120.0, 130.0, 140.0],
    "listnet": [20.0, 20.0, 23.0, None, None],
}
TIME_EVAL = 0.5


def _tags(role: str, model: str, dataset: str, fold: int | None) -> dict[str, str]:
    tags = {
        tk.TAG_ROLE: role,
        tk.TAG_MODEL: model,
        tk.TAG_DATASET: dataset,
        tk.TAG_PROTOCOL: "letor_folds",
        tk.TAG_EVAL: "paper",
    }
    if fold is not None:
        tags[tk.TAG_FOLD] = str(fold)
    return tags


def _fold_run(client, exp_id, model, dataset, fold, metrics, *, t0, status="FINISHED", parent=None):
    tags = _tags(tk.ROLE_FOLD, model, dataset, fold)
    if parent:
        tags["mlflow.parentRunId"] = parent
    run = client.create_run(
        exp_id, start_time=t0, tags=tags, run_name=f"{model}-{dataset}-fold{fold}"
    )
    rid = run.info.run_id
    n_train, n_test = N_QUERIES[dataset]
    client.log_param(rid, tk.PARAM_N_TRAIN_QUERIES, n_train)
    client.log_param(rid, tk.PARAM_N_TEST_QUERIES, n_test)
    for key, value in metrics.items():
        client.log_metric(rid, key, value, timestamp=t0)
    client.set_terminated(rid, status=status, end_time=t0 + 1000)
    return rid


def build_fake_experiment(tracking_uri: str, artifact_dir: str) -> str:
    """Create EXPERIMENT in the store with the fold runs above plus runs that must be ignored."""
    client = MlflowClient(tracking_uri)
    exp_id = client.create_experiment(EXPERIMENT, artifact_location=artifact_dir)
    now = int(time.time() * 1000)
    # An older duplicate of direct_ranker/mq2008/fold 0 with a different value: superseded.
    _fold_run(
        client,
        exp_id,
        "direct_ranker",
        "mq2008",
        0,
        {tk.metric_key("test", NDCG): 0.10, tk.metric_key("test", MAP): 0.10},
        t0=now - 86_400_000,
    )
    for dataset, models in VALUES.items():
        for model, metrics in models.items():
            tags = _tags(tk.ROLE_PROTOCOL, model, dataset, None)
            parent = client.create_run(exp_id, start_time=now, tags=tags)
            pid = parent.info.run_id
            client.log_metric(pid, tk.metric_key("test", NDCG), 0.99)  # a parent: ignored
            for fold in FOLDS:
                if metrics[NDCG][fold] is None:
                    continue
                values = {tk.metric_key("test", m): v[fold] for m, v in metrics.items()}
                values[tk.metric_key("vali", NDCG)] = 0.5
                values[tk.TIME_READ] = TIME_READ[dataset][fold]
                values[tk.TIME_FIT] = TIME_FIT[model][fold]
                values[tk.TIME_EVAL] = TIME_EVAL
                _fold_run(
                    client, exp_id, model, dataset, fold, values, t0=now + fold * 10, parent=pid
                )
            client.set_terminated(pid, status="FINISHED")
    # A newer FAILED run and a sweep trial: both ignored.
    _fold_run(
        client,
        exp_id,
        "direct_ranker",
        "mq2008",
        1,
        {tk.metric_key("test", NDCG): 0.01, tk.metric_key("test", MAP): 0.01},
        t0=now + 60_000,
        status="FAILED",
    )
    trial = client.create_run(exp_id, tags=_tags(tk.ROLE_TRIAL, "direct_ranker", "mq2008", 0))
    client.log_metric(trial.info.run_id, tk.metric_key("test", NDCG), 0.99)
    client.set_terminated(trial.info.run_id)
    return exp_id
