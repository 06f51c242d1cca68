"""ltr_bench.protocols and the runner's two modes (final protocol run, inner-CV sweep trial).

The runner tests run in-process on small synthetic data with a tiny stand-in ranker (least
squares on the labels) that records every QuerySet it is given, so the tests can prove that a
sweep trial never scores test data.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf, open_dict

from ltr_bench import tracking_keys as keys
from ltr_bench.cli.main import config_dir
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models.base import Ranker
from ltr_bench.protocols import HoldOut, LetorFolds, SingleSplit
from ltr_bench.runner import TrialFailed, check_compatibility, run

# ------------------------------------------------------------------------------ stand-in ranker
SEEN: list[tuple[str, np.ndarray, np.ndarray]] = []  # (fit/vali/score, qids, labels)


class RecordingRanker(Ranker):
    """Least squares on the labels; records the queries of every fit/score call."""

    def __init__(self, seed: int = 0, nan: bool = False, epochs: int = 2, **_: Any) -> None:
        super().__init__(seed)
        self.nan, self.epochs = nan, epochs

    def fit(
        self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None
    ) -> RecordingRanker:
        SEEN.append(("fit", np.unique(train.qid), np.unique(train.labels)))
        if vali is not None:
            SEEN.append(("vali", np.unique(vali.qid), np.unique(vali.labels)))
        x = np.c_[train.features, np.ones(train.n_docs)]
        self.w = np.linalg.lstsq(x, train.labels.astype(float), rcond=None)[0]
        self.history = [{"epoch": e, "train_loss": 1.0 / (e + 1)} for e in range(self.epochs)]
        return self

    def score(self, data: QuerySet) -> np.ndarray:
        SEEN.append(("score", np.unique(data.qid), np.unique(data.labels)))
        s = np.c_[data.features, np.ones(data.n_docs)] @ self.w
        return np.full_like(s, np.nan) if self.nan else s


STANDIN = {
    "_target_": f"{__name__}.RecordingRanker",
    "name": "standin",
    "seed": "${seed}",
}

SMALL = [
    "dataset.n_train=600",
    "dataset.n_vali=200",
    "dataset.n_test=300",
    "dataset.n_features=8",
    "dataset.docs_per_query=20",
]


def make_cfg(*overrides: str, tracking: Path | None = None, **model: Any) -> DictConfig:
    """The composed config with the stand-in ranker as model."""
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        cfg = compose("config", overrides=["model=lambdamart", *SMALL, *overrides])
    with open_dict(cfg):
        cfg.model = OmegaConf.create({**STANDIN, **model})
        if tracking is None:
            cfg.tracking.enabled = False
        else:
            cfg.tracking.tracking_uri = f"sqlite:///{tracking}/mlflow.db"
    return cfg


@pytest.fixture(autouse=True)
def _clear_seen() -> None:
    SEEN.clear()


# ------------------------------------------------------------------------------ fake datasets
def _queries(n_queries: int, docs: int = 4, start: int = 0, seed: int = 0) -> QuerySet:
    rng = np.random.default_rng(seed)
    n = n_queries * docs
    return QuerySet.from_arrays(
        rng.normal(size=(n, 3)),
        rng.integers(0, 3, n),
        np.repeat(np.arange(start, start + n_queries), docs),
    )


class FakeFolds:
    """A dataset with predefined folds numbered like LETOR's Fold2, Fold4."""

    relevance_threshold = 1
    name = "fake"
    fold_numbers = (2, 4)
    n_folds = 2

    def load_fold(self, i: int) -> Any:
        from ltr_bench.data.datasets import FoldData

        base = 100 * i
        return FoldData(
            _queries(10, start=base),
            _queries(3, start=base + 50),
            _queries(3, start=base + 80),
            name=f"fake/Fold{self.fold_numbers[i]}",
        )

    def load_all(self) -> QuerySet:
        return _queries(40)


# ------------------------------------------------------------------------------ protocol objects
@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"objective": "best"}, "protocol.objective"),
        ({"inner_cv": 1}, "protocol.inner_cv"),
        ({"inner_cv": "five"}, "protocol.inner_cv"),
        ({"train_labels": "ordinal"}, "protocol.train_labels"),
        ({"train_fraction": 1.0}, "protocol.train_fraction"),
        ({"vali_fraction": -0.1}, "protocol.vali_fraction"),
        ({"n_splits": 0}, "protocol.n_splits"),
        ({"split": 15}, "protocol.split"),
    ],
)
def test_bad_protocol_options_name_their_key(kwargs: dict, key: str) -> None:
    with pytest.raises(UserError, match=key.replace(".", r"\.")):
        HoldOut(**kwargs)


def test_auto_objective_is_inner_cv_for_sweep_trials_only() -> None:
    assert SingleSplit().mode(is_trial=True) == "inner_cv"
    assert SingleSplit().mode(is_trial=False) == "final"
    assert SingleSplit(objective="inner_cv").mode(is_trial=False) == "inner_cv"
    assert SingleSplit(objective="final").mode(is_trial=True) == "final"
    assert LetorFolds().inner_cv == 5 and HoldOut().inner_cv == 3  # the papers' Sect. 4.4


def test_letor_folds_cover_the_selected_folds_with_file_fold_ids() -> None:
    ds = FakeFolds()
    assert LetorFolds().positions(ds) == [0, 1]
    assert SingleSplit().positions(ds) == [0]
    splits = [LetorFolds().load(ds, p) for p in (0, 1)]
    assert [s.fold for s in splits] == [1, 3]  # Fold2, Fold4 -> 0-based file numbers
    assert splits[1].name == "fake/Fold4"
    assert LetorFolds().load(ds, 0, with_test=False).test is None


def test_holdout_splits_partition_every_query_by_query() -> None:
    ds = FakeFolds()
    proto = HoldOut(n_splits=4, train_fraction=0.75, vali_fraction=0.2, split_seed=7)
    all_q = set(ds.load_all().query_ids.tolist())
    seen_tests = []
    for p in proto.positions(ds):
        s = proto.load(ds, p)
        tr, va, te = (set(x.query_ids.tolist()) for x in (s.train, s.vali, s.test))
        assert tr | va | te == all_q
        assert not (tr & va or tr & te or va & te)
        assert len(te) == 10 and len(va) == 6 and len(tr) == 24  # 40 * 0.25; 30 * 0.2
        seen_tests.append(frozenset(te))
    assert len(set(seen_tests)) == 4  # different splits
    # The same split from a fresh object and from protocol.split=2 (a study per split).
    again = HoldOut(n_splits=4, train_fraction=0.75, vali_fraction=0.2, split_seed=7, split=2)
    assert again.positions(ds) == [2]
    assert frozenset(again.load(ds, 2).test.query_ids.tolist()) == seen_tests[2]


def test_inner_folds_partition_the_training_queries() -> None:
    train = _queries(23)
    proto = LetorFolds(inner_cv=5, split_seed=3)
    folds = list(proto.inner_folds(train))
    assert len(folds) == 5 and [(r, k) for r, k, _, _ in folds] == [(0, k) for k in range(5)]
    vali_q = [set(v.query_ids.tolist()) for _, _, _, v in folds]
    assert sorted(q for v in vali_q for q in v) == list(range(23))
    for (_, _, tr, va), vq in zip(folds, vali_q):
        assert set(tr.query_ids.tolist()).isdisjoint(vq)
        assert tr.n_queries + va.n_queries == 23
    again = [
        set(v.query_ids.tolist())
        for *_, v in LetorFolds(inner_cv=5, split_seed=3).inner_folds(train)
    ]
    assert again == vali_q  # the same folds for every trial
    with pytest.raises(UserError, match="protocol.inner_cv"):
        list(LetorFolds(inner_cv=5).inner_folds(_queries(4)))


def test_inner_repeats_reassign_queries_and_keep_the_first_repeat() -> None:
    train = _queries(23)
    plain = [
        frozenset(v.query_ids.tolist())
        for *_, v in LetorFolds(inner_cv=5, split_seed=3).inner_folds(train)
    ]
    folds = list(LetorFolds(inner_cv=5, split_seed=3, inner_repeats=3).inner_folds(train))
    assert [(r, k) for r, k, _, _ in folds] == [(r, k) for r in range(3) for k in range(5)]
    by_repeat = [
        [frozenset(v.query_ids.tolist()) for r, _, _, v in folds if r == rep] for rep in range(3)
    ]
    assert by_repeat[0] == plain  # repeat 0 is the papers' single k-fold
    for partition in by_repeat:  # each repeat is a partition of all training queries
        assert sorted(q for v in partition for q in v) == list(range(23))
    assert len({frozenset(p) for p in by_repeat}) == 3  # with different assignments
    with pytest.raises(UserError, match="protocol.inner_repeats"):
        LetorFolds(inner_repeats=0)


def test_a_reevaluation_runs_the_repeats_after_the_search_ones() -> None:
    train = _queries(23)

    def folds(protocol: LetorFolds, reevaluation: bool) -> list[tuple[int, frozenset]]:
        return [
            (r, frozenset(v.query_ids.tolist()))
            for r, _, _, v in protocol.inner_folds(train, reevaluation)
        ]

    three = folds(LetorFolds(inner_cv=5, split_seed=3, inner_repeats=3), False)
    again = folds(LetorFolds(inner_cv=5, split_seed=3, reevaluation_repeats=2), True)
    assert again == three[5:]  # repeats 1 and 2: none of the search's repeat-0 folds
    later = folds(
        LetorFolds(inner_cv=5, split_seed=3, inner_repeats=2, reevaluation_repeats=1), True
    )
    assert [r for r, _ in later] == [2] * 5 and later == three[10:]
    with pytest.raises(UserError, match="protocol.reevaluation_repeats"):
        LetorFolds(reevaluation_repeats=0)


def test_inner_repeat_seeds() -> None:
    from ltr_bench.runner import seed_for_repeat

    assert seed_for_repeat(7, 0) == 7
    seeds = {seed_for_repeat(7, r) for r in range(5)}
    assert len(seeds) == 5 and all(0 <= s < 2**31 for s in seeds)
    assert seed_for_repeat(7, 2) == seed_for_repeat(7, 2)


# ------------------------------------------------------------------------------ compatibility
def test_incompatible_groups_are_rejected_with_one_sentence() -> None:
    cfg = OmegaConf.create(
        {
            "model": {"name": "lambdamart"},
            "loss": {"name": "listnet"},
            "optimizer": {"name": "none"},
            "activation": {"name": "tanh"},
        }
    )
    with pytest.raises(UserError) as err:
        check_compatibility(cfg)
    assert str(err.value) == (
        "model=lambdamart does not use loss=listnet; choose one of [none] or drop the override"
    )
    cfg.loss.name = "none"
    with pytest.raises(UserError, match=r"^model=lambdamart does not use activation=tanh;"):
        check_compatibility(cfg)  # a group the model's config does not pass on is none
    cfg.activation.name = "none"
    check_compatibility(cfg)
    cfg.model.activation = "${activation}"  # a model that passes the group on uses it
    cfg.activation.name = "tanh"
    check_compatibility(cfg)
    cfg.model.accepts = {"loss": ["none"]}  # the former name lists are refused in one sentence
    with pytest.raises(UserError, match=r"^model.accepts is not read \(model=lambdamart\)"):
        check_compatibility(cfg)


# ------------------------------------------------------------------------------ runner: trial
def test_sweep_trial_scores_inner_folds_only_and_logs_a_trial_run(tmp_path: Path) -> None:
    cfg = make_cfg(
        "sweep.trial_number=4", "sweep.study_name=s1", "protocol.inner_cv=3", tracking=tmp_path
    )
    ds_qids = _synthetic_qids(cfg)
    result = run(cfg, output_dir=tmp_path / "job")
    assert result.mode == "inner_cv" and len(result.folds) == 3
    per_fold = [f.metrics["vali"]["ndcg@10"] for f in result.folds]
    assert result.objective == pytest.approx(np.mean(per_fold))
    # Every scored query is a training query; vali only drives early stopping; test never seen.
    scored = np.concatenate([q for kind, q, _ in SEEN if kind == "score"])
    assert set(scored.tolist()) == ds_qids["train"]  # the inner folds partition train
    assert all(set(q.tolist()) <= ds_qids["vali"] for kind, q, _ in SEEN if kind == "vali")
    assert not any(set(q.tolist()) & ds_qids["test"] for _, q, _ in SEEN)
    # MLflow: a trial run under the study's sweep run, with the CV mean and per-fold values.
    client, runs = _runs(tmp_path)
    by_role = {r.data.tags[keys.TAG_ROLE]: r for r in runs}
    trial, sweep = by_role[keys.ROLE_TRIAL], by_role[keys.ROLE_SWEEP]
    assert trial.data.tags["mlflow.parentRunId"] == sweep.info.run_id
    assert trial.data.tags["ltr.trial_number"] == "4" and sweep.data.tags["ltr.study"] == "s1"
    assert trial.info.status == "FINISHED"
    assert trial.data.metrics["cv/ndcg_at_10"] == pytest.approx(result.objective)
    assert trial.data.metrics["objective"] == pytest.approx(result.objective)
    assert not any(k.startswith("test/") for k in trial.data.metrics)
    hist = client.get_metric_history(trial.info.run_id, "cv_fold/ndcg_at_10")
    assert sorted(m.step for m in hist) == [0, 1, 2]
    assert sorted(m.value for m in hist) == pytest.approx(sorted(per_fold))
    assert trial.data.params["protocol.inner_cv"] == "3"
    assert trial.data.metrics[keys.TIME_FIT] >= 0
    assert json.loads((tmp_path / "job" / "results.json").read_text())[
        "objective"
    ] == pytest.approx(result.objective)


def _runs(store: Path) -> tuple[Any, list]:
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{store}/mlflow.db")
    exp = client.get_experiment_by_name("ltr_bench")
    return client, client.search_runs([exp.experiment_id])


def _synthetic_qids(cfg: DictConfig) -> dict[str, set]:
    from hydra.utils import instantiate

    fold = instantiate(cfg.dataset).load_fold(0)
    return {s: set(getattr(fold, s).query_ids.tolist()) for s in ("train", "vali", "test")}


def test_nan_scores_fail_the_trial_and_its_mlflow_run(tmp_path: Path) -> None:
    cfg = make_cfg(
        "sweep.trial_number=0",
        "sweep.study_name=s2",
        "protocol.inner_cv=2",
        tracking=tmp_path,
        nan=True,
    )
    with pytest.raises(TrialFailed, match="non-finite scores"):
        run(cfg, verbose=False)
    _, runs = _runs(tmp_path)
    trial = [r for r in runs if r.data.tags[keys.TAG_ROLE] == keys.ROLE_TRIAL]
    assert [r.info.status for r in trial] == ["FAILED"]


class FailsOnSecondScore(RecordingRanker):
    """The stand-in ranker, failing its second score call (the second inner fold)."""

    calls = 0

    def score(self, data: QuerySet) -> np.ndarray:
        type(self).calls += 1
        if type(self).calls == 2:
            raise RuntimeError("the second fold fails")
        return super().score(data)


def _metric_calls(monkeypatch: Any) -> list[list[Any]]:
    """The rows of every metrics call the MLflow tracker makes (still passed on to the store)."""
    from ltr_bench.tracking.tracker import Tracker

    calls: list[list[Any]] = []
    log_rows = Tracker.log_metric_rows

    def spy(self: Tracker, run_id: str, rows: Any) -> None:
        calls.append(list(rows))
        log_rows(self, run_id, rows)

    monkeypatch.setattr(Tracker, "log_metric_rows", spy)
    return calls


FOLD_KEY = keys.metric_key(keys.SPLIT_CV_FOLD, "ndcg@10")


def test_fast_folds_reach_the_store_with_the_trial_summary_in_one_call(
    tmp_path: Path, monkeypatch: Any
) -> None:
    calls = _metric_calls(monkeypatch)
    cfg = make_cfg(
        "sweep.trial_number=0", "sweep.study_name=s", "protocol.inner_cv=3", tracking=tmp_path
    )
    result = run(cfg, verbose=False)
    (call,) = [rows for rows in calls if any(FOLD_KEY in r.metrics for r in rows)]
    folds, summary = call[:-1], call[-1]
    assert [r.step for r in folds] == [0, 1, 2] and summary.step == 0
    assert summary.metrics["objective"] == pytest.approx(result.objective)
    stamps = [r.timestamp_ms for r in call]
    assert stamps == sorted(stamps)  # each fold keeps the time it ended
    client, runs = _runs(tmp_path)
    (trial,) = [r for r in runs if r.data.tags[keys.TAG_ROLE] == keys.ROLE_TRIAL]
    hist = client.get_metric_history(trial.info.run_id, "cv_fold/ndcg_at_10")
    assert [(m.step, m.timestamp) for m in sorted(hist, key=lambda m: m.step)] == [
        (r.step, r.timestamp_ms) for r in folds
    ]


def test_slow_folds_are_logged_as_they_end(tmp_path: Path, monkeypatch: Any) -> None:
    from ltr_bench.runner import inner_cv

    monkeypatch.setattr(inner_cv, "FOLD_METRICS_EVERY_S", 0.0)  # every fold counts as slow
    calls = _metric_calls(monkeypatch)
    cfg = make_cfg(
        "sweep.trial_number=0", "sweep.study_name=s", "protocol.inner_cv=3", tracking=tmp_path
    )
    run(cfg, verbose=False)
    fold_steps = [[r.step for r in rows if FOLD_KEY in r.metrics] for rows in calls]
    assert [s for s in fold_steps if s] == [[0], [1], [2]]
    assert "objective" in calls[-1][-1].metrics and len(calls[-1]) == 1


def test_a_failed_trial_keeps_the_metrics_of_the_folds_it_scored(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(FailsOnSecondScore, "calls", 0)
    cfg = make_cfg(
        "sweep.trial_number=0",
        "sweep.study_name=s",
        "protocol.inner_cv=3",
        tracking=tmp_path,
        _target_=f"{__name__}.FailsOnSecondScore",
    )
    with pytest.raises(TrialFailed, match="the second fold fails"):
        run(cfg, verbose=False)
    client, runs = _runs(tmp_path)
    (trial,) = [r for r in runs if r.data.tags[keys.TAG_ROLE] == keys.ROLE_TRIAL]
    assert trial.info.status == "FAILED"
    hist = client.get_metric_history(trial.info.run_id, "cv_fold/ndcg_at_10")
    assert [m.step for m in hist] == [0]


def test_trials_may_not_select_on_test() -> None:
    cfg = make_cfg("sweep.trial_number=0", "objective.split=test")
    with pytest.raises(UserError, match="objective.split=test"):
        run(cfg, verbose=False)
    assert SEEN == []  # rejected before any data was read


# ------------------------------------------------------------------------------ runner: final
def test_holdout_protocol_runs_every_split_with_binary_training_labels(
    tmp_path: Path, capsys: Any
) -> None:
    cfg = make_cfg(
        "protocol=holdout",
        "protocol.n_splits=3",
        "protocol.vali_fraction=0.25",
        "protocol.train_labels=binary",
    )
    result = run(cfg, output_dir=tmp_path)
    assert result.mode == "final" and [f.fold for f in result.folds] == [0, 1, 2]
    fits = [labels for kind, _, labels in SEEN if kind == "fit"]
    assert len(fits) == 3 and all(set(l.tolist()) <= {0, 1} for l in fits)
    tests = [f.metrics["test"]["ndcg@10"] for f in result.folds]
    assert result.mean["test"]["ndcg@10"] == pytest.approx(np.mean(tests))
    assert result.se["test"]["ndcg@10"] == pytest.approx(np.std(tests, ddof=1) / math.sqrt(3))
    assert result.objective == pytest.approx(result.mean["vali"]["ndcg@10"])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [f["fold"] for f in saved["folds"]] == [0, 1, 2]
    assert saved["mean"]["test"]["map"] == pytest.approx(result.mean["test"]["map"])
    assert saved["mlflow"]["run_id"] is None  # tracking off
    out = capsys.readouterr().out
    assert "mean(SE) test" in out and "[3/3]" in out and str(tmp_path / "results.json") in out


def test_threads_null_becomes_the_core_count_for_interpolations() -> None:
    import os

    import torch

    cfg = make_cfg(threads_key="${threads}")
    try:
        run(cfg, verbose=False)
        assert cfg.threads == (os.cpu_count() or 1) == torch.get_num_threads()
        assert cfg.model.threads_key == cfg.threads
    finally:
        torch.set_num_threads(1)


def test_threads_are_shared_among_a_parallel_launchers_jobs() -> None:
    import os

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from ltr_bench.runner import parallel_jobs

    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=["model=lambdamart", "hydra/launcher=joblib", "hydra.launcher.n_jobs=-1"],
            return_hydra_config=True,
        )
    try:
        assert parallel_jobs() == 1  # no Hydra job
        with open_dict(cfg):
            cfg.hydra.mode = RunMode.MULTIRUN
        HydraConfig.instance().set_config(cfg)
        assert parallel_jobs() == (os.cpu_count() or 1)  # joblib's -1: a job per core
        from omegaconf import read_write

        with read_write(cfg.hydra):
            cfg.hydra.launcher.n_jobs = 1
        HydraConfig.instance().set_config(cfg)
        assert parallel_jobs() == 1
    finally:
        HydraConfig.instance().cfg = None
