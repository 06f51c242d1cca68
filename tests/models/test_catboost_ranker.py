"""CatBoost ranker (model=catboost): learns, stops early, is seeded, passes threads and devices on,
leaves no files behind, saves its trees in the MLflow model, and says which extra to install when
CatBoost is missing."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ltr_bench.errors import UserError
from ltr_bench.models import CatBoostRanker  # imports its library lazily: the skip below decides
from tests.models import gbdt_checks as checks

cb = pytest.importorskip("catboost", reason="the gbdt extra is not installed")

FAST = dict(iterations=60, learning_rate=0.2, depth=4)


@pytest.fixture(scope="module")
def splits():
    return checks.toy_splits()


def test_learns_well_above_random_and_leaves_no_files(splits, tmp_path, monkeypatch):
    train, vali, test = splits
    monkeypatch.chdir(tmp_path)
    model = CatBoostRanker(**FAST).fit(train, vali)
    learned = checks.ndcg10(model.score(test), test)
    assert learned > checks.random_ndcg10(test) + 0.25 and learned > 0.8, learned
    assert os.listdir(tmp_path) == []  # no catboost_info/ in the working directory
    assert model.model_.get_all_params()["loss_function"] == "YetiRank"


def test_early_stopping_keeps_the_best_trees_and_the_seed_decides(splits):
    train, vali, test = splits
    kwargs = dict(iterations=300, learning_rate=0.5, depth=4, early_stopping_rounds=5)
    a = CatBoostRanker(**kwargs, seed=3).fit(train, vali)
    b = CatBoostRanker(**kwargs, seed=3).fit(train, vali)
    c = CatBoostRanker(**kwargs, seed=4).fit(train, vali)
    assert a.best_iteration_ is not None and a.n_trees_ == a.best_iteration_ < 300
    assert len(a.history) == a.best_iteration_ + 5  # 5 trees past the best, then dropped
    curve = [rec["vali_ndcg@10"] for rec in a.history]
    assert curve[a.best_iteration_ - 1] == max(curve)
    assert np.array_equal(a.score(test), b.score(test)) and a.history == b.history
    assert not np.array_equal(a.score(test), c.score(test))  # YetiRank's sampling follows the seed


def test_without_vali_grows_all_trees(splits):
    train, _, test = splits
    model = CatBoostRanker(iterations=7).fit(train)
    assert model.n_trees_ == 7 and model.history == []
    assert model.score(test).shape == (test.n_docs,)


@pytest.mark.parametrize("loss", ["PairLogit", "QueryRMSE", "LambdaMart:metric=NDCG"])
def test_other_losses_are_selectable_and_learn(splits, loss):
    train, vali, test = splits
    model = CatBoostRanker(loss_function=loss, **FAST).fit(train, vali)
    assert model.model_.get_all_params()["loss_function"] == loss
    assert checks.ndcg10(model.score(test), test) > checks.random_ndcg10(test) + 0.25
    if loss == "PairLogit":  # a loss CatBoost tracks on train shows as the training curve
        assert {"round", "train_loss", "vali_ndcg@10"} <= set(model.history[0])


def test_bad_settings_are_one_sentence(tmp_path: Path, splits):
    with pytest.raises(UserError, match="model.loss_function=Nope is not a CatBoost ranking loss"):
        CatBoostRanker(loss_function="Nope")
    with pytest.raises(UserError, match="iterations"):
        CatBoostRanker(iterations=0)
    train, _, _ = splits
    with pytest.raises(UserError, match=r"CatBoost cannot train model.loss_function=YetiRank:"):
        CatBoostRanker(loss_function="YetiRank:top=x", iterations=2).fit(train)
    proc = checks.run_ltr_bench("model=catboost", "model.loss_function=RMSE", cwd=tmp_path)
    checks.one_line_error(proc, "choose one of YetiRank, YetiRankPairwise")


def test_missing_catboost_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    checks.missing_extra_stops_the_cli("catboost", "catboost", tmp_path, monkeypatch)
    with pytest.raises(UserError, match=r"pip install 'ltr_bench\[gbdt\]'"):
        CatBoostRanker()


def test_seed_and_threads_reach_catboost(monkeypatch: pytest.MonkeyPatch, splits):
    from hydra.utils import instantiate

    seen: dict = {}
    real = cb.CatBoostRanker

    def spy(**kwargs):
        seen.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(cb, "CatBoostRanker", spy)
    cfg = checks.compose("model=catboost", "model.thread_count=2", "seed=7", "model.iterations=3")
    model = instantiate(cfg.model).fit(splits[0])
    assert (seen["thread_count"], seen["random_seed"], seen["task_type"]) == (2, 7, "CPU")
    params = model.model_.get_params()  # what the fitted CatBoost model was given
    assert (params["thread_count"], params["random_seed"]) == (2, 7)


def test_saved_model_scores_as_the_fitted_one(tmp_path: Path, splits):
    train, vali, test = splits
    model = CatBoostRanker(**FAST, early_stopping_rounds=5).fit(train, vali)
    info = model.save_params(tmp_path)
    assert info["n_trees"] == model.n_trees_ and [p.name for p in tmp_path.iterdir()] == [
        "model.cbm"
    ]
    loaded = CatBoostRanker()
    loaded.load_params(tmp_path, train.n_features)
    assert loaded.n_trees_ == model.n_trees_
    np.testing.assert_array_equal(loaded.score(test), model.score(test))
    with pytest.raises(UserError, match="has 8 features, the saved model says 9"):
        CatBoostRanker().load_params(tmp_path, 9)


def test_mlflow_model_scores_raw_features_as_the_run(tmp_path, monkeypatch):
    model = checks.pyfunc_scores_as_the_run(
        ["model=catboost", "model.iterations=15"], tmp_path, monkeypatch
    )
    assert model._model_impl.pipeline.ranker.n_trees_ <= 15


@pytest.mark.skipif(not checks.ON_CPU_ONLY, reason="refusals are tested on a machine without GPUs")
def test_gpu_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, splits):
    import catboost.utils

    checks.refused_without_a_gpu("catboost", tmp_path)
    capsys.readouterr()

    def build(found):
        count = None if found is None else (lambda: int(found))
        monkeypatch.setattr(catboost.utils, "get_gpu_device_count", count)

    on_gpu, on_cpu = checks.gpu_rule("catboost", monkeypatch, capsys, build)
    assert (on_gpu.task_type, on_cpu.task_type) == ("GPU", "CPU")
    # the request really reaches CatBoost, which finds no device here: one sentence
    with pytest.raises(UserError, match="CatBoost cannot train model.loss_function=YetiRank on "):
        on_gpu.fit(splits[0])


def test_fitting_imports_no_torch():
    checks.imports_no_torch("ltr_bench.models.catboost_ranker", "CatBoostRanker", "iterations=3")
