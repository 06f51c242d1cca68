"""XGBoost ranker (model=xgboost): learns, stops early, is seeded, passes threads and devices on,
saves its trees in the MLflow model, and says which extra to install when XGBoost is missing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ltr_bench.errors import UserError
from ltr_bench.models import XGBoostRanker  # imports its library lazily: the skip below decides
from tests.models import gbdt_checks as checks

xgb = pytest.importorskip("xgboost", reason="the gbdt extra is not installed")


@pytest.fixture(scope="module")
def splits():
    return checks.toy_splits()


def objective_of(model: XGBoostRanker) -> str:
    return str(json.loads(model.booster_.save_config())["learner"]["objective"]["name"])


def test_learns_well_above_random(splits):
    train, vali, test = splits
    model = XGBoostRanker(n_estimators=50, seed=0).fit(train, vali)
    learned = checks.ndcg10(model.score(test), test)
    assert learned > checks.random_ndcg10(test) + 0.25 and learned > 0.8, learned
    assert objective_of(model) == "rank:ndcg"


def test_early_stopping_keeps_the_best_trees_and_the_seed_decides(splits):
    train, vali, test = splits
    kwargs = dict(n_estimators=300, learning_rate=0.3, max_depth=6, subsample=0.7)
    a = XGBoostRanker(**kwargs, early_stopping_rounds=5, seed=3).fit(train, vali)
    b = XGBoostRanker(**kwargs, early_stopping_rounds=5, seed=3).fit(train, vali)
    c = XGBoostRanker(**kwargs, early_stopping_rounds=5, seed=4).fit(train, vali)
    assert a.best_iteration_ is not None and a.n_trees_ == a.best_iteration_ < 300
    # XGBoost grows `early_stopping_rounds` trees past the best one; only the best are kept.
    assert len(a.history) == a.best_iteration_ + 5
    curve = [rec["vali_ndcg@10"] for rec in a.history]
    assert curve[a.best_iteration_ - 1] == max(curve)
    assert set(a.history[0]) == {"round", "train_ndcg@10", "vali_ndcg@10"}
    assert np.array_equal(a.score(test), b.score(test)) and a.history == b.history
    assert not np.array_equal(a.score(test), c.score(test))  # subsampling follows the seed


def test_without_vali_grows_all_trees(splits):
    train, _, test = splits
    model = XGBoostRanker(n_estimators=7).fit(train)
    assert model.n_trees_ == 7 and model.best_iteration_ is None
    assert [rec["round"] for rec in model.history] == list(range(1, 8))
    assert model.score(test).shape == (test.n_docs,)


@pytest.mark.parametrize("objective", ["rank:pairwise", "rank:map"])
def test_other_objectives_are_selectable_and_learn(splits, objective):
    train, vali, test = splits
    model = XGBoostRanker(objective=objective, n_estimators=50).fit(train, vali)
    assert objective_of(model) == objective
    assert checks.ndcg10(model.score(test), test) > checks.random_ndcg10(test) + 0.25


def test_rank_map_binarises_at_the_relevance_threshold(splits):
    """XGBoost's MAP takes binary labels only: graded ones are cut at relevance_threshold."""
    train, _, _ = splits
    assert train.labels.max() == 2
    model = XGBoostRanker(objective="rank:map", relevance_threshold=2, n_estimators=3)
    assert model._labels(train, "train").tolist() == (train.labels >= 2).astype(int).tolist()
    with pytest.raises(xgb.core.XGBoostError, match="binary"):
        xgb.XGBRanker(objective="rank:map", n_estimators=1).fit(
            train.features, train.labels, qid=train.query_index()
        )


def test_bad_settings_are_one_sentence(tmp_path: Path, splits):
    with pytest.raises(UserError, match=r"model.objective=rank:foo is not an XGBoost ranking"):
        XGBoostRanker(objective="rank:foo")
    with pytest.raises(UserError, match="n_estimators"):
        XGBoostRanker(n_estimators=0)
    train, _, _ = splits
    with pytest.raises(UserError, match="train labels must be >= 0"):
        XGBoostRanker(n_estimators=2).fit(train.with_labels(train.labels - 1))
    proc = checks.run_ltr_bench("model=xgboost", "model.objective=rank:foo", cwd=tmp_path)
    checks.one_line_error(proc, "choose one of rank:ndcg, rank:pairwise, rank:map")


def test_missing_xgboost_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    checks.missing_extra_stops_the_cli("xgboost", "xgboost", tmp_path, monkeypatch)
    with pytest.raises(UserError, match=r"pip install 'ltr_bench\[gbdt\]'"):
        XGBoostRanker()


def test_seed_and_threads_reach_xgboost(monkeypatch: pytest.MonkeyPatch, splits):
    from hydra.utils import instantiate

    seen: dict = {}
    real = xgb.XGBRanker

    def spy(**kwargs):
        seen.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(xgb, "XGBRanker", spy)
    model = instantiate(checks.compose("model=xgboost", "model.n_jobs=2", "seed=7").model)
    model.fit(splits[0])
    assert (seen["n_jobs"], seen["random_state"], seen["device"]) == (2, 7, "cpu")
    generic = json.loads(model.booster_.save_config())["learner"]["generic_param"]
    assert (generic["nthread"], generic["seed"]) == ("2", "7")


def test_saved_model_scores_as_the_fitted_one(tmp_path: Path, splits):
    train, vali, test = splits
    model = XGBoostRanker(n_estimators=40, early_stopping_rounds=5).fit(train, vali)
    info = model.save_params(tmp_path)
    assert info["n_trees"] == model.n_trees_ and sorted(p.name for p in tmp_path.iterdir()) == [
        "model.json"
    ]
    loaded = XGBoostRanker()
    loaded.load_params(tmp_path, train.n_features)
    assert loaded.n_trees_ == model.n_trees_
    np.testing.assert_array_equal(loaded.score(test), model.score(test))
    with pytest.raises(UserError, match="has 8 features, the saved model says 9"):
        XGBoostRanker().load_params(tmp_path, 9)


def test_mlflow_model_scores_raw_features_as_the_run(tmp_path, monkeypatch):
    model = checks.pyfunc_scores_as_the_run(
        ["model=xgboost", "model.n_estimators=15"], tmp_path, monkeypatch
    )
    assert model._model_impl.pipeline.ranker.n_trees_ <= 15


@pytest.mark.skipif(not checks.ON_CPU_ONLY, reason="refusals are tested on a machine without GPUs")
def test_gpu_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    checks.refused_without_a_gpu("xgboost", tmp_path)
    capsys.readouterr()
    real = xgb.build_info
    assert isinstance(real()["USE_CUDA"], bool)  # the real probe answers without a GPU

    def build(cuda):
        info = None if cuda is None else {"USE_CUDA": cuda}
        monkeypatch.setattr(xgb, "build_info", (lambda: info) if info else None)

    on_gpu, on_cpu = checks.gpu_rule("xgboost", monkeypatch, capsys, build)
    assert (on_gpu.device, on_cpu.device) == ("cuda", "cpu")


def test_fitting_imports_no_torch():
    checks.imports_no_torch("ltr_bench.models.xgboost_ranker", "XGBoostRanker", "n_estimators=3")
